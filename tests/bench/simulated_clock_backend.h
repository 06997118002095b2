// A gpu::Backend with a simulated device clock, for the bench's CPU tests
// of its timing helpers (device_timing_test.cc, power_test.cc): every call a
// test enqueues advances the clock by its cost (AdvanceBy), and an event
// records the clock when it is recorded, as a stream that never runs ahead
// of the host would. Anything else a backend does is refused.
#ifndef MLAJIT_TESTS_BENCH_SIMULATED_CLOCK_BACKEND_H_
#define MLAJIT_TESTS_BENCH_SIMULATED_CLOCK_BACKEND_H_

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/gpu/backend.h"

namespace mlajit::bench::test_support {

class SimulatedClockBackend : public gpu::Backend {
 public:
  // The device time the next enqueued call takes.
  void AdvanceBy(double ms) { clock_ms_ += ms; }
  int live_events() const { return static_cast<int>(events_.size()); }
  int created_events() const { return next_event_ - 1; }
  absl::Status fail_elapsed = absl::OkStatus();  // ElapsedMs returns this when set

  gpu::Vendor vendor() const override { return gpu::Vendor::kNvidia; }
  absl::StatusOr<int> DeviceCount() override { return 1; }
  absl::StatusOr<gpu::DeviceProperties> GetDeviceProperties(int) override {
    return gpu::DeviceProperties{};
  }
  absl::Status SetCurrentDevice(int) override { return absl::OkStatus(); }
  uintptr_t SaveCurrent() override { return 0; }
  void RestoreCurrent(uintptr_t) override {}
  absl::Status CheckStream(int, gpu::StreamHandle) override { return absl::OkStatus(); }
  int PointerDevice(const void*) override { return -1; }
  absl::StatusOr<gpu::ModuleHandle> LoadModule(int, absl::Span<const uint8_t>) override {
    return Unused();
  }
  absl::Status UnloadModule(int, gpu::ModuleHandle) override { return Unused(); }
  absl::StatusOr<gpu::FunctionHandle> GetFunction(gpu::ModuleHandle, const std::string&) override {
    return Unused();
  }
  absl::Status SetMaxDynamicSharedMemory(gpu::FunctionHandle, int) override { return Unused(); }
  absl::Status Launch(int, gpu::FunctionHandle, const gpu::LaunchConfig&, void**,
                      gpu::StreamHandle) override {
    return Unused();
  }
  absl::StatusOr<gpu::DevicePtr> Malloc(int, size_t) override { return Unused(); }
  absl::Status Free(int, gpu::DevicePtr) override { return Unused(); }
  absl::Status MemcpyHtoD(int, gpu::DevicePtr, const void*, size_t, gpu::StreamHandle) override {
    return Unused();
  }
  absl::Status MemcpyDtoH(int, void*, gpu::DevicePtr, size_t, gpu::StreamHandle) override {
    return Unused();
  }
  absl::Status MemsetD8(int, gpu::DevicePtr, uint8_t, size_t, gpu::StreamHandle) override {
    return Unused();
  }
  absl::StatusOr<gpu::StreamHandle> CreateStream(int) override { return Unused(); }
  absl::Status DestroyStream(int, gpu::StreamHandle) override { return Unused(); }
  absl::Status StreamSynchronize(int, gpu::StreamHandle) override { return absl::OkStatus(); }
  absl::StatusOr<gpu::EventHandle> CreateEvent(int) override {
    const gpu::EventHandle e = next_event_++;
    events_[e] = -1;
    return e;
  }
  absl::Status DestroyEvent(int, gpu::EventHandle e) override {
    return events_.erase(e) == 1 ? absl::OkStatus() : absl::InvalidArgumentError("unknown event");
  }
  absl::Status RecordEvent(int, gpu::EventHandle e, gpu::StreamHandle) override {
    if (events_.count(e) == 0) return absl::InvalidArgumentError("unknown event");
    events_[e] = clock_ms_;
    return absl::OkStatus();
  }
  absl::Status EventSynchronize(int, gpu::EventHandle) override { return absl::OkStatus(); }
  absl::StatusOr<float> ElapsedMs(gpu::EventHandle start, gpu::EventHandle end) override {
    if (!fail_elapsed.ok()) return fail_elapsed;
    if (events_.count(start) == 0 || events_.count(end) == 0 || events_[start] < 0 ||
        events_[end] < 0) {
      return absl::InvalidArgumentError("event not recorded");
    }
    return static_cast<float>(events_[end] - events_[start]);
  }
  absl::Status BeginCapture(int, gpu::StreamHandle) override { return Unused(); }
  absl::StatusOr<gpu::GraphHandle> EndCapture(int, gpu::StreamHandle) override { return Unused(); }
  absl::Status LaunchGraph(int, gpu::GraphHandle, gpu::StreamHandle) override { return Unused(); }
  absl::Status DestroyGraph(int, gpu::GraphHandle) override { return Unused(); }

 private:
  static absl::Status Unused() { return absl::UnimplementedError("not simulated"); }
  double clock_ms_ = 0;
  gpu::EventHandle next_event_ = 1;
  std::map<gpu::EventHandle, double> events_;  // recorded clock, -1 before recording
};

}  // namespace mlajit::bench::test_support

#endif  // MLAJIT_TESTS_BENCH_SIMULATED_CLOCK_BACKEND_H_
