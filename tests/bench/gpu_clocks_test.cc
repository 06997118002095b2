// The benchmark's clock summary (tools/bench/gpu_clocks.h). NVML itself is
// only reachable on a GPU machine; what must hold everywhere is that a
// missing library or device is an error with a reason, never a crash.
#include "tools/bench/gpu_clocks.h"

#include <gtest/gtest.h>

#include <vector>

namespace mlajit::bench {
namespace {

TEST(ClockReasonNames, NamesTheSlowingReasonsOnly) {
  EXPECT_EQ(ClockReasonNames(0), "none");
  EXPECT_EQ(ClockReasonNames(0x1), "none");  // idle: not a slowdown
  EXPECT_EQ(ClockReasonNames(kReasonSwPowerCap), "sw_power_cap");
  EXPECT_EQ(ClockReasonNames(kReasonSwPowerCap | kReasonHwThermal | 0x2),
            "sw_power_cap+hw_thermal");
  EXPECT_EQ(ClockReasonNames(kReasonHwSlowdown | kReasonSwThermal | kReasonHwPowerBrake),
            "hw_slowdown+sw_thermal+hw_power_brake");
}

TEST(Summarize, MedianRangeAndReasons) {
  const std::vector<ClockSample> samples = {{1980, 0},
                                            {1605, kReasonSwPowerCap},
                                            {1875, kReasonSwPowerCap},
                                            {1230, kReasonHwThermal},
                                            {1965, 0}};
  const ClockSummary s = Summarize(samples);
  EXPECT_TRUE(s.available);
  EXPECT_EQ(s.samples, 5);
  EXPECT_EQ(s.sm_mhz_median, 1875u);
  EXPECT_EQ(s.sm_mhz_min, 1230u);
  EXPECT_EQ(s.sm_mhz_max, 1980u);
  EXPECT_EQ(s.reasons, kReasonSwPowerCap | kReasonHwThermal);
  EXPECT_DOUBLE_EQ(s.slowed, 0.6);  // three of five samples
}

// A sample at time t_ms with the energy counter at mj.
ClockSample EnergyAt(double t_ms, uint64_t mj) {
  ClockSample s{1980, 0};
  s.has_energy = true;
  s.energy_mj = mj;
  s.t_ms = t_ms;
  return s;
}

TEST(Summarize, PowerIsTheCountersRiseBetweenItsFirstAndLastSteps) {
  // The counter steps every 10 ms by 7 J (700 W); samples every ms. Before
  // its first step the counter's value is old, so the window starts there.
  std::vector<ClockSample> samples;
  uint64_t mj = 5'000'000;
  for (int t = 0; t <= 100; ++t) {
    if (t > 3 && (t - 3) % 10 == 0) mj += 7000;
    samples.push_back(EnergyAt(t, mj));
  }
  const ClockSummary s = Summarize(samples);
  EXPECT_EQ(s.energy_steps, 9);    // at 13, 23, ..., 93 ms
  EXPECT_DOUBLE_EQ(s.watts, 700);  // 8 x 7 J over 80 ms
}

TEST(Summarize, NoPowerWithoutTwoStepsOrWithoutACounter) {
  std::vector<ClockSample> one_step = {EnergyAt(0, 100), EnergyAt(1, 100), EnergyAt(2, 150),
                                       EnergyAt(3, 150)};
  EXPECT_EQ(Summarize(one_step).energy_steps, 1);
  EXPECT_EQ(Summarize(one_step).watts, 0);
  std::vector<ClockSample> no_counter = {{1980, 0}, {1980, 0}, {1965, 0}};
  EXPECT_EQ(Summarize(no_counter).energy_steps, 0);
  EXPECT_EQ(Summarize(no_counter).watts, 0);
  EXPECT_TRUE(Summarize(no_counter).available);  // the clocks still count
}

TEST(Summarize, NoSamplesIsUnavailable) {
  const ClockSummary s = Summarize({});
  EXPECT_FALSE(s.available);
  EXPECT_EQ(s.samples, 0);
}

TEST(ClockMonitor, NoBusIdIsAnErrorWithAReason) {
  auto m = ClockMonitor::Open("");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(m.status().message().find("PCI bus id"), absl::string_view::npos);
}

TEST(ClockMonitor, UnknownDeviceIsAnErrorNotACrash) {
  // Without NVML the library is missing; with it, no GPU sits on this bus.
  auto m = ClockMonitor::Open("ffff:ff:1f.7");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(m.status().message().empty());
}

}  // namespace
}  // namespace mlajit::bench
