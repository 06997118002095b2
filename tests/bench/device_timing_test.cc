// The benchmark's device timing (tools/bench/device_timing.h) against a
// simulated device clock: every call the test enqueues advances the clock by
// its cost, and an event records the clock when it is recorded (a stream that
// never runs ahead of the host). That is enough to check what the helpers
// decide from the times they read: how long WarmUp keeps calling, which time
// MedianDeviceMs returns, and that errors come back with every event freed.
#include "tools/bench/device_timing.h"

#include <gtest/gtest.h>

#include <vector>

#include "absl/status/status.h"
#include "tests/bench/simulated_clock_backend.h"

namespace mlajit::bench {
namespace {

using test_support::SimulatedClockBackend;

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
