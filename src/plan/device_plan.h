// GPU-resident scheduling metadata and split-KV workspace of one plan: the
// Schedule's arrays in device buffers, uploaded once and then read by every
// decode call. Buffers keep their capacity and grow only when a schedule needs
// more, so re-planning a batch of similar shape allocates nothing.
//
//   MLAJIT_ASSIGN_OR_RETURN(auto dp, DevicePlan::Create(backend, device));
//   MLAJIT_RETURN_IF_ERROR(dp->Upload(schedule, /*block_m=*/64));
//   params.work = dp->work(); ...
//
// A plan's workspace (partials, a8 amax) is used by the decode calls that read
// it; two decodes that use one plan concurrently must be on one stream.
//
// Device-built plans (mla_plan.cuh) instead get fixed-capacity buffers sized
// from declared limits, once (ReserveForDevicePlanner), which the plan kernel
// rewrites on every update: nothing is allocated or copied afterwards, so
// update + decode can be captured in a graph.
#ifndef MLAJIT_SRC_PLAN_DEVICE_PLAN_H_
#define MLAJIT_SRC_PLAN_DEVICE_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernel_templates/mla_params.h"
#include "kernel_templates/mla_schedule.h"
#include "src/gpu/backend.h"
#include "src/plan/scheduler.h"

namespace mlajit::plan {

class DevicePlan {
 public:
  static absl::StatusOr<std::unique_ptr<DevicePlan>> Create(gpu::Backend* backend, int device);
  ~DevicePlan();
  DevicePlan(const DevicePlan&) = delete;
  DevicePlan& operator=(const DevicePlan&) = delete;

  // Copies the schedule to the device and waits for the copy (plan time, not the
  // decode path). Partial buffers are sized for schedule.num_partials tiles of
  // block_m rows.
  absl::Status Upload(const Schedule& schedule, int block_m);

  // Fixed buffers for the device planner: at most `max_batch` sequences and
  // `max_tiles` row tiles on `num_ctas` CTAs of block_m rows. The schedule
  // starts empty (a decode before the first update writes nothing).
  absl::Status ReserveForDevicePlanner(int max_batch, int64_t max_tiles, int num_ctas,
                                       int block_m);
  // The planner's parameters for one update (layout pointers are the caller's).
  void FillPlannerParams(MlaPlanParams* p) const;
  // Reads the planner's counters back (synchronises `stream`).
  absl::Status ReadCounters(int32_t counters[MLA_PLAN_NUM_COUNTERS], gpu::StreamHandle stream) const;

  // Fills the metadata and workspace fields of the kernel parameters.
  void FillParams(MlaDecodeParams* p) const;
  int num_combine() const { return num_combine_; }
  size_t device_bytes() const;

 private:
  struct Buffer {
    gpu::DevicePtr ptr = 0;
    size_t capacity = 0;
  };
  DevicePlan(gpu::Backend* backend, int device) : backend_(backend), device_(device) {}
  absl::Status Reserve(Buffer* b, size_t bytes);
  absl::Status Copy(Buffer* b, const void* src, size_t bytes);

  gpu::Backend* backend_;
  int device_;
  Buffer work_, work_indptr_, seqs_, combine_, partial_o_, partial_lse_;
  // Device planner only: counters and scratch.
  Buffer counters_, tiles_, tile_start_, seq_tile_start_, cuts_, split_;
  int num_combine_ = 0;
  int num_ctas_ = 0;
};

}  // namespace mlajit::plan

#endif  // MLAJIT_SRC_PLAN_DEVICE_PLAN_H_
