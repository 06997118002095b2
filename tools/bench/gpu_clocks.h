// The GPU's clock and power state while the benchmark times a case, read
// through NVML (libnvidia-ml.so.1, loaded at run time: the bench runs without
// it, and then reports no clocks).
//
// Why the bench needs it: long compute-bound cases lower the SM clock as they
// run (tools/bench/RESULTS.md v23), so the same kernel's median differs from
// one run to the next by up to 15 %. A median printed next to the clock it ran
// at, and to the share of the time the driver held the clock down for power
// or temperature, says which mode a figure comes from.
//
//   auto monitor = ClockMonitor::Open(props.pci_bus_id);   // StatusOr
//   if (monitor.ok()) (*monitor)->Start();
//   ... timed calls, stream synchronised ...
//   ClockSummary s = (*monitor)->Stop();
#ifndef MLAJIT_TOOLS_BENCH_GPU_CLOCKS_H_
#define MLAJIT_TOOLS_BENCH_GPU_CLOCKS_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace mlajit::bench {

// NVML's clocks-event reason bits (nvmlClocksEventReason*, formerly
// nvmlClocksThrottleReason*), the ones that slow a busy GPU down.
enum ClockReason : uint64_t {
  kReasonSwPowerCap = 0x4,
  kReasonHwSlowdown = 0x8,
  kReasonSwThermal = 0x20,
  kReasonHwThermal = 0x40,
  kReasonHwPowerBrake = 0x80,
};
constexpr uint64_t kSlowingReasons = kReasonSwPowerCap | kReasonHwSlowdown | kReasonSwThermal |
                                     kReasonHwThermal | kReasonHwPowerBrake;

// "sw_power_cap+hw_thermal" for the slowing reasons set in `reasons`, "none"
// when none is; other bits (idle, application clocks, ...) are not named.
std::string ClockReasonNames(uint64_t reasons);

struct ClockSample {
  unsigned sm_mhz = 0;
  uint64_t reasons = 0;
  // NVML's energy counter (mJ since the driver loaded), when the driver has
  // one, and when it was read (ms since the monitor's Start).
  bool has_energy = false;
  uint64_t energy_mj = 0;
  double t_ms = 0;
};

struct ClockSummary {
  bool available = false;  // false: NVML absent or the window had no sample
  int samples = 0;
  unsigned sm_mhz_median = 0, sm_mhz_min = 0, sm_mhz_max = 0;
  uint64_t reasons = 0;  // every reason bit seen in any sample
  // Share of the samples with a slowing reason set (kSlowingReasons). NVML's
  // cumulative violation counters would give the same as a time, but the
  // driver updates them too coarsely for windows of a few milliseconds: they
  // disagreed with the samples on the H200 (RESULTS.md v24).
  double slowed = 0;
  // Average power: the energy counter's rise between its first and last
  // change in the window over the time between them (the driver updates the
  // counter in steps, so only its changes are dated; a window needs a few
  // hundred ms to hold enough of them). 0 with fewer than two changes.
  double watts = 0;
  int energy_steps = 0;  // counter changes seen
};

// Median / min / max of the samples' clocks, the union of their reasons, the
// share slowed and the average power. (NVML's own power reading is averaged
// by the driver over about a second and lags; the energy counter does not.)
ClockSummary Summarize(const std::vector<ClockSample>& samples);

// What samples a window of work: Start before it, Stop after, the summary
// of what was seen between (ClockMonitor; tests substitute their own).
class WindowSampler {
 public:
  virtual ~WindowSampler() = default;
  virtual void Start() = 0;
  virtual ClockSummary Stop() = 0;
};

class ClockMonitor : public WindowSampler {
 public:
  // NVML for the device at `pci_bus_id` ("0000:41:00.0", as the CUDA backend
  // reports it). kFailedPrecondition when NVML or the device cannot be
  // opened, saying why.
  static absl::StatusOr<std::unique_ptr<ClockMonitor>> Open(const std::string& pci_bus_id);
  ~ClockMonitor() override;
  ClockMonitor(const ClockMonitor&) = delete;
  ClockMonitor& operator=(const ClockMonitor&) = delete;

  // "NVIDIA H200, power limit 700 W, SM clock 1980 MHz now, clock reasons
  // none" (for the log).
  std::string Describe();
  // Samples the SM clock, the reasons and the energy counter every
  // millisecond on a thread of its own until Stop().
  void Start() override;
  ClockSummary Stop() override;

 private:
  struct Api;
  explicit ClockMonitor(std::unique_ptr<Api> api);
  ClockSample Sample();

  std::unique_ptr<Api> api_;
  std::chrono::steady_clock::time_point origin_;
  std::thread thread_;
  std::unique_ptr<absl::Notification> stop_;
  absl::Mutex mu_;
  std::vector<ClockSample> samples_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mlajit::bench

#endif  // MLAJIT_TOOLS_BENCH_GPU_CLOCKS_H_
