// The benchmark's device timing (tools/bench/device_timing.h) against a
// simulated device clock: every call the test enqueues advances the clock by
// its cost, and an event records the clock when it is recorded (a stream that
// never runs ahead of the host). That is enough to check what the helpers
// decide from the times they read: how long WarmUp keeps calling, which time
// MedianDeviceMs returns, and that errors come back with every event freed.
#include "tools/bench/device_timing.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "absl/status/status.h"

namespace mlajit::bench {
namespace {

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

TEST(WarmUp, CallsUntilTheDeviceTimeIsSpent) {
  SimulatedClockBackend b;
  int calls = 0;
  auto enqueue = [&](int i) {
    EXPECT_EQ(i, calls);  // call numbers run on across batches
    ++calls;
    b.AdvanceBy(0.25);
    return absl::OkStatus();
  };
  absl::StatusOr<int> made = WarmUp(&b, 0, nullptr, enqueue, 20, 200.0);
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(*made, calls);
  // 200 ms at 0.25 ms a call: 800 calls, and no batch that overshoots by more
  // than the rounding of the last estimate.
  EXPECT_GE(calls, 800);
  EXPECT_LE(calls, 802);
  EXPECT_EQ(b.live_events(), 0);
}

TEST(WarmUp, AtLeastTheMinimumCalls) {
  SimulatedClockBackend b;
  int calls = 0;
  auto enqueue = [&](int) {
    ++calls;
    b.AdvanceBy(50.0);  // one call outlasts the time asked for
    return absl::OkStatus();
  };
  absl::StatusOr<int> made = WarmUp(&b, 0, nullptr, enqueue, 3, 10.0);
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(*made, 3);
  EXPECT_EQ(calls, 3);
}

TEST(WarmUp, ZeroTimeMeansTheMinimumCalls) {
  SimulatedClockBackend b;
  int calls = 0;
  auto enqueue = [&](int) {
    ++calls;
    b.AdvanceBy(0.1);
    return absl::OkStatus();
  };
  absl::StatusOr<int> made = WarmUp(&b, 0, nullptr, enqueue, 20, 0.0);
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(*made, 20);
}

TEST(WarmUp, AFailedCallIsReturnedAndTheEventsFreed) {
  SimulatedClockBackend b;
  int calls = 0;
  auto enqueue = [&](int) {
    b.AdvanceBy(1.0);
    return ++calls == 30 ? absl::InternalError("launch failed") : absl::OkStatus();
  };
  absl::StatusOr<int> made = WarmUp(&b, 0, nullptr, enqueue, 20, 100.0);
  EXPECT_EQ(made.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(made.status().message(), "launch failed");
  EXPECT_EQ(calls, 30);
  EXPECT_EQ(b.live_events(), 0);
}

TEST(MedianDeviceMs, TheMiddleOfEachCallsOwnTime) {
  SimulatedClockBackend b;
  const std::vector<double> costs = {5.0, 1.0, 4.0, 2.0, 3.0};
  auto enqueue = [&](int i) {
    b.AdvanceBy(costs[i]);
    return absl::OkStatus();
  };
  absl::StatusOr<double> ms = MedianDeviceMs(&b, 0, nullptr, enqueue, 5);
  ASSERT_TRUE(ms.ok()) << ms.status();
  EXPECT_DOUBLE_EQ(*ms, 3.0);
  EXPECT_EQ(b.created_events(), 10);  // a pair per call
  EXPECT_EQ(b.live_events(), 0);
}

TEST(MedianDeviceMs, WhatRunsBeforeEachCallStaysOutsideItsWindow) {
  SimulatedClockBackend b;
  const std::vector<double> costs = {5.0, 1.0, 4.0, 2.0, 3.0};
  std::vector<int> order;  // before(i) as -1 - i, call i as i
  auto before = [&](int i) {
    order.push_back(-1 - i);
    b.AdvanceBy(100.0);  // a hold: device time before the start event
    return absl::OkStatus();
  };
  auto enqueue = [&](int i) {
    order.push_back(i);
    b.AdvanceBy(costs[i]);
    return absl::OkStatus();
  };
  absl::StatusOr<double> ms = MedianDeviceMs(&b, 0, nullptr, enqueue, 5, before);
  ASSERT_TRUE(ms.ok()) << ms.status();
  EXPECT_DOUBLE_EQ(*ms, 3.0);
  EXPECT_EQ(order, (std::vector<int>{-1, 0, -2, 1, -3, 2, -4, 3, -5, 4}));
  EXPECT_EQ(b.live_events(), 0);
}

TEST(MedianDeviceMs, AFailingBeforeStopsTheCalls) {
  SimulatedClockBackend b;
  int calls = 0;
  auto before = [&](int i) {
    return i == 2 ? absl::InternalError("hold failed") : absl::OkStatus();
  };
  auto enqueue = [&](int) {
    ++calls;
    b.AdvanceBy(1.0);
    return absl::OkStatus();
  };
  absl::StatusOr<double> ms = MedianDeviceMs(&b, 0, nullptr, enqueue, 5, before);
  EXPECT_EQ(ms.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(b.live_events(), 0);
}

TEST(MedianDeviceMs, ErrorsComeBackWithEveryEventFreed) {
  SimulatedClockBackend b;
  b.fail_elapsed = absl::UnavailableError("device lost");
  auto enqueue = [&](int) {
    b.AdvanceBy(1.0);
    return absl::OkStatus();
  };
  absl::StatusOr<double> ms = MedianDeviceMs(&b, 0, nullptr, enqueue, 4);
  EXPECT_EQ(ms.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(b.live_events(), 0);
  EXPECT_EQ(MedianDeviceMs(&b, 0, nullptr, enqueue, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mlajit::bench
