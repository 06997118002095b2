// The GPU's clock and power state while the benchmark times a case, read
// through NVML (libnvidia-ml.so.1, loaded at run time: the bench runs without
// it, and then reports no clocks).
//
// Why the bench needs it: long compute-bound cases lower the SM clock as they
// run (tools/bench/RESULTS.md v23), so the same kernel's median differs from
// one run to the next by up to 15 %. A median printed next to the clock it ran
// at, and to the share of the window the driver capped clocks for power or
// temperature, says which mode a figure comes from.
//
//   auto monitor = ClockMonitor::Open(props.pci_bus_id);   // StatusOr
//   if (monitor.ok()) (*monitor)->Start();
//   ... timed calls, stream synchronised ...
//   ClockSummary s = (*monitor)->Stop();
#ifndef MLAJIT_TOOLS_BENCH_GPU_CLOCKS_H_
#define MLAJIT_TOOLS_BENCH_GPU_CLOCKS_H_

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

// "sw_power_cap+hw_thermal" for the slowing reasons set in `reasons`, "none"
// when none is; other bits (idle, application clocks, ...) are not named.
std::string ClockReasonNames(uint64_t reasons);

struct ClockSample {
  unsigned sm_mhz = 0;
  uint64_t reasons = 0;
};

struct ClockSummary {
  bool available = false;  // false: NVML absent or the window had no sample
  int samples = 0;
  unsigned sm_mhz_median = 0, sm_mhz_min = 0, sm_mhz_max = 0;
  uint64_t reasons = 0;  // every reason bit seen in any sample
  // Share of the window's wall time during which the driver held clocks down
  // for power / temperature (NVML violation counters); negative: not reported.
  double power_capped = -1, thermal_capped = -1;
};

// Median / min / max of the samples' clocks and the union of their reasons;
// the capped shares are left as given. (No power figure: NVML's reading is
// averaged by the driver and lags windows this short.)
ClockSummary Summarize(const std::vector<ClockSample>& samples, double power_capped,
                       double thermal_capped);

class ClockMonitor {
 public:
  // NVML for the device at `pci_bus_id` ("0000:41:00.0", as the CUDA backend
  // reports it). kFailedPrecondition when NVML or the device cannot be
  // opened, saying why.
  static absl::StatusOr<std::unique_ptr<ClockMonitor>> Open(const std::string& pci_bus_id);
  ~ClockMonitor();
  ClockMonitor(const ClockMonitor&) = delete;
  ClockMonitor& operator=(const ClockMonitor&) = delete;

  // "NVIDIA H200, power limit 700 W, 1980 MHz now" (for the log).
  std::string Describe();
  // Samples the SM clock and the reasons every millisecond on a thread of its
  // own until Stop(); reads the violation counters at both ends.
  void Start();
  ClockSummary Stop();

 private:
  struct Api;
  explicit ClockMonitor(std::unique_ptr<Api> api);
  ClockSample Sample();
  // Cumulative ns of power and thermal violation; -1 where not reported.
  void ReadViolations(int64_t* power_ns, int64_t* thermal_ns);

  std::unique_ptr<Api> api_;
  std::thread thread_;
  std::unique_ptr<absl::Notification> stop_;
  absl::Mutex mu_;
  std::vector<ClockSample> samples_ ABSL_GUARDED_BY(mu_);
  int64_t power_ns0_ = -1, thermal_ns0_ = -1, wall_ns0_ = 0;
};

}  // namespace mlajit::bench

#endif  // MLAJIT_TOOLS_BENCH_GPU_CLOCKS_H_
