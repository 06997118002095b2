// The bench's power windows (tools/bench/power.h) against a simulated device
// clock and a sampler that reports what a test tells it: how many calls a
// window makes and counts (the read ceiling's checksum depends on the count),
// the joules a call it derives, and that every error comes back with its
// count and every event freed.
#include "tools/bench/power.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "tests/bench/simulated_clock_backend.h"

namespace mlajit::bench {
namespace {

using test_support::SimulatedClockBackend;
using ::testing::HasSubstr;

class FixedSampler : public WindowSampler {
 public:
  explicit FixedSampler(double watts, int steps) {
    summary_.available = true;
    summary_.watts = watts;
    summary_.energy_steps = steps;
  }
  void Start() override { ++starts; }
  ClockSummary Stop() override {
    ++stops;
    return summary_;
  }
  int starts = 0, stops = 0;

 private:
  ClockSummary summary_;
};

constexpr double kCallMs = 0.25;  // each simulated call's device time

TEST(MeasurePower, CountsEveryCallAndDerivesJoulesAndMicroseconds) {
  SimulatedClockBackend b;
  FixedSampler sampler(700, 10);
  int made = 0;
  auto enqueue = [&](int) {
    ++made;
    b.AdvanceBy(kCallMs);
    // Host time passes too, so that the 100 ms window ends after thousands
    // of calls rather than millions.
    std::this_thread::sleep_for(std::chrono::microseconds(20));
    return absl::OkStatus();
  };
  PowerWindow w;
  ASSERT_TRUE(MeasurePower(&b, 0, nullptr, enqueue, &sampler, 100, &w).ok());
  EXPECT_EQ(w.enqueued, made);   // the chunk-sizing calls too
  EXPECT_EQ(w.calls, made - 4);  // the window's: four before it sized the chunks
  EXPECT_EQ(w.calls % 80, 0);    // chunks of 20 ms at 0.25 ms a call
  EXPECT_GT(w.calls, 0);
  EXPECT_DOUBLE_EQ(w.device_ms, w.calls * kCallMs);
  EXPECT_NEAR(w.UsPerCall(), 250, 1e-9);
  EXPECT_NEAR(w.JoulesPerCall(), 700 * 0.25e-3, 1e-12);  // 700 W for 0.25 ms
  EXPECT_EQ(sampler.starts, 1);
  EXPECT_EQ(sampler.stops, 1);
  EXPECT_EQ(b.live_events(), 0);
}

TEST(MeasurePower, AFailedCallIsReturnedWithTheCallsMadeAndTheEventsFreed) {
  SimulatedClockBackend b;
  FixedSampler sampler(700, 10);
  int made = 0;
  auto enqueue = [&](int) {
    if (made == 100) return absl::InternalError("launch failed");
    ++made;
    b.AdvanceBy(kCallMs);
    return absl::OkStatus();
  };
  PowerWindow w;
  const absl::Status s = MeasurePower(&b, 0, nullptr, enqueue, &sampler, 100, &w);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(w.enqueued, 100);   // what a checksum over the calls must count
  EXPECT_EQ(sampler.stops, 1);  // the sampler is never left running
  EXPECT_EQ(b.live_events(), 0);
}

TEST(MeasurePower, ACounterThatDidNotStepTwiceGivesNoFigure) {
  SimulatedClockBackend b;
  FixedSampler sampler(0, 1);
  int made = 0;
  auto enqueue = [&](int) {
    ++made;
    b.AdvanceBy(kCallMs);
    return absl::OkStatus();
  };
  PowerWindow w;
  const absl::Status s = MeasurePower(&b, 0, nullptr, enqueue, &sampler, 100, &w);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("changed 1 times in a 100 ms window"));
  EXPECT_EQ(w.enqueued, made);
  EXPECT_EQ(b.live_events(), 0);
}

TEST(MeasurePower, NoSamplerOrABadWindowIsRefusedBeforeAnyCall) {
  SimulatedClockBackend b;
  FixedSampler sampler(700, 10);
  int made = 0;
  auto enqueue = [&](int) {
    ++made;
    return absl::OkStatus();
  };
  PowerWindow w;
  EXPECT_EQ(MeasurePower(&b, 0, nullptr, enqueue, nullptr, 1000, &w).code(),
            absl::StatusCode::kFailedPrecondition);
  const absl::Status s = MeasurePower(&b, 0, nullptr, enqueue, &sampler, 50, &w);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("power window 50 ms: expected 100..60000"));
  EXPECT_EQ(made, 0);
  EXPECT_EQ(w.enqueued, 0);
  EXPECT_EQ(sampler.starts, 0);
}

}  // namespace
}  // namespace mlajit::bench
