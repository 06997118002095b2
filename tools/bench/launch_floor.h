// What a call's launch structure costs on this device with none of the
// decode's work: empty kernels launched and timed the way the benchmark times
// a case (held: median_us; host-paced: paced_us). It bounds from below what a decode call can take:
// a call is at least one launch between two events (two with a split merge, the second a
// programmatic dependent of the first on sm_90+; three chained kernels were a8's
// calls while its Q amax was a kernel of its own, RESULTS.md v74).
//
//   MLAJIT_ASSIGN_OR_RETURN(LaunchFloor f, MeasureLaunchFloor(backend, 0, 200.0, 300));
//   std::printf("%s\n", FormatLaunchFloor(f).c_str());
#ifndef MLAJIT_TOOLS_BENCH_LAUNCH_FLOOR_H_
#define MLAJIT_TOOLS_BENCH_LAUNCH_FLOOR_H_

#include <string>

#include "absl/status/statusor.h"
#include "src/gpu/backend.h"

namespace mlajit::bench {

struct LaunchFloor {
  int grid = 0;                   // CTAs of the full-grid kernels (2 per SM, as the decode)
  double one_cta_us = 0;          // median, one empty kernel of one CTA between events
  double full_grid_us = 0;        // median, one empty kernel of `grid` CTAs
  double two_chained_us = 0;      // median, two full-grid kernels, the second a dependent
  double three_chained_us = 0;    // median, three (a8's calls before v74)
  double two_burst_us = 0;        // per pair, many pairs back to back between two events
  // The same three in plain stream order (no programmatic dependents): what
  // the chained figures gain or lose from the dependent launches.
  double two_plain_us = 0;
  double three_plain_us = 0;
  double two_burst_plain_us = 0;
  // The first four again with the stream held before each start event
  // (stream_hold.h): the host has enqueued the kernels when the window
  // opens, so these are the device's own launch costs, as the bench's
  // median_us times a case.
  double held_one_cta_us = 0;
  double held_full_grid_us = 0;
  double held_two_chained_us = 0;
  double held_three_chained_us = 0;
  bool dependent_launch = false;  // the chained kernels were programmatic dependents
};

// The empty kernel: on sm_90+ it waits for its predecessor and releases its
// dependents as the decode kernels do (MlaGridDependencySync); its first
// thread counts the launch, so that the host can check that every launch ran.
const char* LaunchFloorKernelSource();

// Each figure after `warmup_ms` of device time, the median of `runs` calls.
absl::StatusOr<LaunchFloor> MeasureLaunchFloor(gpu::Backend* backend, int device, double warmup_ms,
                                               int runs);

// One line for the bench's report.
std::string FormatLaunchFloor(const LaunchFloor& f);

}  // namespace mlajit::bench

#endif  // MLAJIT_TOOLS_BENCH_LAUNCH_FLOOR_H_
