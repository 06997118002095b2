#include "tools/bench/gpu_clocks.h"

#include <dlfcn.h>

#include <algorithm>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"

namespace mlajit::bench {
namespace {

// The NVML entry points used here, with their C prototypes as nvml.h declares
// them (the header is not needed to build: the bench also builds without the
// CUDA toolkit). nvmlReturn_t is an int enum, 0 = NVML_SUCCESS.
using NvmlDevice = struct NvmlDeviceOpaque*;
constexpr int kNvmlClockSm = 1;

}  // namespace

struct ClockMonitor::Api {
  void* handle = nullptr;
  NvmlDevice device = nullptr;
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  const char* (*error_string)(int) = nullptr;
  int (*by_pci_bus_id)(const char*, NvmlDevice*) = nullptr;
  int (*name)(NvmlDevice, char*, unsigned) = nullptr;
  int (*clock)(NvmlDevice, int, unsigned*) = nullptr;
  int (*power_limit)(NvmlDevice, unsigned*) = nullptr;
  int (*reasons)(NvmlDevice, unsigned long long*) = nullptr;
  int (*energy)(NvmlDevice, unsigned long long*) = nullptr;  // optional (Volta and later)
  bool initialised = false;

  ~Api() {
    if (initialised) shutdown();
    if (handle != nullptr) dlclose(handle);
  }
  std::string Error(int r) const {
    return error_string != nullptr ? error_string(r) : absl::StrCat("NVML error ", r);
  }
};

std::string ClockReasonNames(uint64_t reasons) {
  static constexpr std::pair<uint64_t, const char*> kNames[] = {
      {kReasonSwPowerCap, "sw_power_cap"},
      {kReasonHwSlowdown, "hw_slowdown"},
      {kReasonSwThermal, "sw_thermal"},
      {kReasonHwThermal, "hw_thermal"},
      {kReasonHwPowerBrake, "hw_power_brake"}};
  std::vector<std::string> set;
  for (const auto& [bit, name] : kNames) {
    if (reasons & bit) set.push_back(name);
  }
  return set.empty() ? "none" : absl::StrJoin(set, "+");
}

ClockSummary Summarize(const std::vector<ClockSample>& samples) {
  ClockSummary s;
  s.samples = static_cast<int>(samples.size());
  if (samples.empty()) return s;
  s.available = true;
  std::vector<unsigned> mhz;
  int slowed = 0;
  for (const ClockSample& c : samples) {
    mhz.push_back(c.sm_mhz);
    s.reasons |= c.reasons;
    slowed += (c.reasons & kSlowingReasons) != 0;
  }
  s.slowed = static_cast<double>(slowed) / samples.size();
  std::sort(mhz.begin(), mhz.end());
  s.sm_mhz_min = mhz.front();
  s.sm_mhz_max = mhz.back();
  s.sm_mhz_median = mhz[mhz.size() / 2];
  // The counter's changes: the first sample of each new value dates a step.
  const ClockSample* first = nullptr;
  const ClockSample* last = nullptr;
  const ClockSample* previous = nullptr;
  for (const ClockSample& c : samples) {
    if (!c.has_energy) continue;
    if (previous != nullptr && c.energy_mj != previous->energy_mj) {
      if (first == nullptr) first = &c;
      last = &c;
      ++s.energy_steps;
    }
    previous = &c;
  }
  if (s.energy_steps >= 2 && last->t_ms > first->t_ms && last->energy_mj > first->energy_mj) {
    s.watts = static_cast<double>(last->energy_mj - first->energy_mj) / (last->t_ms - first->t_ms);
  }
  return s;
}

absl::StatusOr<std::unique_ptr<ClockMonitor>> ClockMonitor::Open(const std::string& pci_bus_id) {
  if (pci_bus_id.empty()) {
    return absl::FailedPreconditionError("the GPU backend reports no PCI bus id for the device");
  }
  auto api = std::make_unique<Api>();
  api->handle = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (api->handle == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("libnvidia-ml.so.1: ", dlerror()));
  }
  auto bind = [&](auto& fn, const char* symbol) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(api->handle, symbol));
    return fn != nullptr;
  };
  // Drivers before 535 only export the older name of the reasons query.
  if (!bind(api->reasons, "nvmlDeviceGetCurrentClocksEventReasons")) {
    bind(api->reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
  }
  bind(api->energy, "nvmlDeviceGetTotalEnergyConsumption");
  for (auto [ok, symbol] : {std::pair{bind(api->init, "nvmlInit_v2"), "nvmlInit_v2"},
                            {bind(api->shutdown, "nvmlShutdown"), "nvmlShutdown"},
                            {bind(api->error_string, "nvmlErrorString"), "nvmlErrorString"},
                            {bind(api->by_pci_bus_id, "nvmlDeviceGetHandleByPciBusId_v2"),
                             "nvmlDeviceGetHandleByPciBusId_v2"},
                            {bind(api->name, "nvmlDeviceGetName"), "nvmlDeviceGetName"},
                            {bind(api->clock, "nvmlDeviceGetClockInfo"), "nvmlDeviceGetClockInfo"},
                            {bind(api->power_limit, "nvmlDeviceGetEnforcedPowerLimit"),
                             "nvmlDeviceGetEnforcedPowerLimit"},
                            {api->reasons != nullptr, "nvmlDeviceGetCurrentClocksEventReasons"}}) {
    if (!ok) return absl::FailedPreconditionError(absl::StrCat("libnvidia-ml.so.1 lacks ", symbol));
  }
  if (int r = api->init(); r != 0) {
    return absl::FailedPreconditionError(absl::StrCat("nvmlInit: ", api->Error(r)));
  }
  api->initialised = true;
  if (int r = api->by_pci_bus_id(pci_bus_id.c_str(), &api->device); r != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("nvmlDeviceGetHandleByPciBusId(", pci_bus_id, "): ", api->Error(r)));
  }
  return std::unique_ptr<ClockMonitor>(new ClockMonitor(std::move(api)));
}

ClockMonitor::ClockMonitor(std::unique_ptr<Api> api) : api_(std::move(api)) {}

ClockMonitor::~ClockMonitor() {
  if (thread_.joinable()) Stop();
}

std::string ClockMonitor::Describe() {
  char name[96] = {};
  if (api_->name(api_->device, name, sizeof(name) - 1) != 0) name[0] = '\0';
  unsigned limit_mw = 0;
  const std::string limit = api_->power_limit(api_->device, &limit_mw) == 0
                                ? absl::StrFormat("power limit %.0f W", limit_mw * 1e-3)
                                : "power limit unknown";
  const ClockSample now = Sample();
  return absl::StrFormat("%s, %s, SM clock %u MHz now, clock reasons %s", name, limit, now.sm_mhz,
                         ClockReasonNames(now.reasons));
}

ClockSample ClockMonitor::Sample() {
  ClockSample s;
  if (api_->clock(api_->device, kNvmlClockSm, &s.sm_mhz) != 0) s.sm_mhz = 0;
  unsigned long long reasons = 0;
  if (api_->reasons(api_->device, &reasons) == 0) s.reasons = reasons;
  unsigned long long mj = 0;
  if (api_->energy != nullptr && api_->energy(api_->device, &mj) == 0) {
    s.has_energy = true;
    s.energy_mj = mj;
  }
  s.t_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - origin_).count();
  return s;
}

void ClockMonitor::Start() {
  if (thread_.joinable()) Stop();
  {
    absl::MutexLock lock(&mu_);
    samples_.clear();
  }
  origin_ = std::chrono::steady_clock::now();
  stop_ = std::make_unique<absl::Notification>();
  thread_ = std::thread([this] {
    do {
      const ClockSample s = Sample();
      if (s.sm_mhz == 0) continue;  // the query failed: no sample
      absl::MutexLock lock(&mu_);
      samples_.push_back(s);
    } while (!stop_->WaitForNotificationWithTimeout(absl::Milliseconds(1)));
  });
}

ClockSummary ClockMonitor::Stop() {
  if (!thread_.joinable()) return ClockSummary{};
  stop_->Notify();
  thread_.join();
  absl::MutexLock lock(&mu_);
  return Summarize(samples_);
}

}  // namespace mlajit::bench
