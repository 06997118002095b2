#include "src/plan/device_plan.h"

#include <algorithm>

#include "src/base/log.h"
#include "src/base/mla_types.h"
#include "src/base/status_macros.h"

namespace mlajit::plan {

absl::StatusOr<std::unique_ptr<DevicePlan>> DevicePlan::Create(gpu::Backend* backend,
                                                               int device) {
  if (backend == nullptr) return absl::InvalidArgumentError("DevicePlan: backend is null");
  return std::unique_ptr<DevicePlan>(new DevicePlan(backend, device));
}

DevicePlan::~DevicePlan() {
  for (Buffer* b : {&work_, &work_indptr_, &seqs_, &combine_, &partial_o_, &partial_lse_,
                    &counters_, &tiles_, &tile_start_, &seq_tile_start_, &cuts_, &split_}) {
    if (b->ptr != 0) {
      absl::Status s = backend_->Free(device_, b->ptr);
      if (!s.ok()) MLAJIT_LOG_WARN("freeing plan metadata: ", s.message());
    }
  }
}

absl::Status DevicePlan::Reserve(Buffer* b, size_t bytes) {
  bytes = std::max<size_t>(bytes, 16);
  if (b->capacity >= bytes) return absl::OkStatus();
  // Grow geometrically so that a slowly growing batch re-allocates rarely.
  const size_t capacity = std::max(bytes, b->capacity * 3 / 2);
  MLAJIT_ASSIGN_OR_RETURN(gpu::DevicePtr p, backend_->Malloc(device_, capacity));
  if (b->ptr != 0) MLAJIT_RETURN_IF_ERROR(backend_->Free(device_, b->ptr));
  b->ptr = p;
  b->capacity = capacity;
  return absl::OkStatus();
}

absl::Status DevicePlan::Copy(Buffer* b, const void* src, size_t bytes) {
  MLAJIT_RETURN_IF_ERROR(Reserve(b, bytes));
  if (bytes == 0) return absl::OkStatus();
  return backend_->MemcpyHtoD(device_, b->ptr, src, bytes, nullptr);
}

absl::Status DevicePlan::Upload(const Schedule& s, int block_m) {
  MLAJIT_RETURN_IF_ERROR(Copy(&work_, s.work.data(), s.work.size() * sizeof(MlaWorkItem)));
  MLAJIT_RETURN_IF_ERROR(
      Copy(&work_indptr_, s.work_indptr.data(), s.work_indptr.size() * sizeof(int32_t)));
  MLAJIT_RETURN_IF_ERROR(Copy(&seqs_, s.seqs.data(), s.seqs.size() * sizeof(MlaSeqInfo)));
  MLAJIT_RETURN_IF_ERROR(
      Copy(&combine_, s.combine.data(), s.combine.size() * sizeof(MlaCombineItem)));
  const size_t partial_rows = static_cast<size_t>(s.num_partials) * block_m;
  MLAJIT_RETURN_IF_ERROR(
      Reserve(&partial_o_, partial_rows * kHeadDimV * size_t{MLA_PARTIAL_BYTES}));
  MLAJIT_RETURN_IF_ERROR(Reserve(&partial_lse_, partial_rows * sizeof(float)));
  // The host vectors are the copies' sources: wait before they can go away.
  MLAJIT_RETURN_IF_ERROR(backend_->StreamSynchronize(device_, nullptr));
  num_combine_ = static_cast<int>(s.combine.size());
  num_ctas_ = static_cast<int>(s.work_indptr.size()) - 1;
  return absl::OkStatus();
}

absl::Status DevicePlan::ReserveForDevicePlanner(int max_batch, int64_t max_tiles, int num_ctas,
                                                 int block_m) {
  // Every cut adds at most one piece: items <= tiles + cuts; a split tile with
  // s interior cuts has s + 1 pieces, so partials <= 2 * cuts; merges <= cuts.
  const int64_t cuts = std::max(num_ctas - 1, 0);
  const auto reserve = [&](Buffer* b, int64_t count, size_t size) {
    return Reserve(b, static_cast<size_t>(std::max<int64_t>(count, 1)) * size);
  };
  MLAJIT_RETURN_IF_ERROR(reserve(&work_, max_tiles + cuts, sizeof(MlaWorkItem)));
  MLAJIT_RETURN_IF_ERROR(reserve(&work_indptr_, num_ctas + 1, sizeof(int32_t)));
  MLAJIT_RETURN_IF_ERROR(reserve(&seqs_, max_batch, sizeof(MlaSeqInfo)));
  MLAJIT_RETURN_IF_ERROR(reserve(&combine_, num_ctas, sizeof(MlaCombineItem)));
  MLAJIT_RETURN_IF_ERROR(
      reserve(&partial_o_, 2 * cuts * block_m * kHeadDimV, size_t{MLA_PARTIAL_BYTES}));
  MLAJIT_RETURN_IF_ERROR(reserve(&partial_lse_, 2 * cuts * block_m, sizeof(float)));
  MLAJIT_RETURN_IF_ERROR(reserve(&counters_, MLA_PLAN_NUM_COUNTERS, sizeof(int32_t)));
  MLAJIT_RETURN_IF_ERROR(reserve(&tiles_, max_tiles, sizeof(MlaTile)));
  MLAJIT_RETURN_IF_ERROR(reserve(&tile_start_, max_tiles + 1, sizeof(long long)));
  MLAJIT_RETURN_IF_ERROR(reserve(&seq_tile_start_, max_batch, sizeof(int32_t)));
  MLAJIT_RETURN_IF_ERROR(reserve(&cuts_, num_ctas + 1, sizeof(MlaCut)));
  MLAJIT_RETURN_IF_ERROR(reserve(&split_, num_ctas + 1, sizeof(MlaCutSplit)));
  // An empty schedule until the first update.
  MLAJIT_RETURN_IF_ERROR(backend_->MemsetD8(device_, work_indptr_.ptr, 0, work_indptr_.capacity, nullptr));
  MLAJIT_RETURN_IF_ERROR(backend_->MemsetD8(device_, counters_.ptr, 0, counters_.capacity, nullptr));
  MLAJIT_RETURN_IF_ERROR(backend_->StreamSynchronize(device_, nullptr));
  num_ctas_ = num_ctas;
  num_combine_ = num_ctas;  // the merge's launch capacity; the count is on the device
  return absl::OkStatus();
}

void DevicePlan::FillPlannerParams(MlaPlanParams* p) const {
  p->work = reinterpret_cast<MlaWorkItem*>(work_.ptr);
  p->work_indptr = reinterpret_cast<int*>(work_indptr_.ptr);
  p->seqs = reinterpret_cast<MlaSeqInfo*>(seqs_.ptr);
  p->combine = reinterpret_cast<MlaCombineItem*>(combine_.ptr);
  p->counters = reinterpret_cast<int*>(counters_.ptr);
  p->tiles = reinterpret_cast<MlaTile*>(tiles_.ptr);
  p->tile_start = reinterpret_cast<long long*>(tile_start_.ptr);
  p->seq_tile_start = reinterpret_cast<int*>(seq_tile_start_.ptr);
  p->cuts = reinterpret_cast<MlaCut*>(cuts_.ptr);
  p->split = reinterpret_cast<MlaCutSplit*>(split_.ptr);
  p->num_ctas = num_ctas_;
}

absl::Status DevicePlan::ReadCounters(int32_t counters[MLA_PLAN_NUM_COUNTERS],
                                      gpu::StreamHandle stream) const {
  if (counters_.ptr == 0) {
    return absl::FailedPreconditionError("the plan was built on the host: it has no device planner");
  }
  MLAJIT_RETURN_IF_ERROR(backend_->MemcpyDtoH(device_, counters, counters_.ptr,
                                              MLA_PLAN_NUM_COUNTERS * sizeof(int32_t), stream));
  return backend_->StreamSynchronize(device_, stream);
}

void DevicePlan::FillParams(MlaDecodeParams* p) const {
  p->work = reinterpret_cast<const MlaWorkItem*>(work_.ptr);
  p->work_indptr = reinterpret_cast<const int*>(work_indptr_.ptr);
  p->seqs = reinterpret_cast<const MlaSeqInfo*>(seqs_.ptr);
  p->combine = reinterpret_cast<const MlaCombineItem*>(combine_.ptr);
  p->partial_o = reinterpret_cast<float*>(partial_o_.ptr);
  p->partial_lse = reinterpret_cast<float*>(partial_lse_.ptr);
  p->num_ctas = num_ctas_;
  p->num_combine = num_combine_;
  p->plan_counters = reinterpret_cast<const int*>(counters_.ptr);  // null for host plans
}

size_t DevicePlan::device_bytes() const {
  size_t n = 0;
  for (const Buffer* b : {&work_, &work_indptr_, &seqs_, &combine_, &partial_o_, &partial_lse_,
                          &counters_, &tiles_, &tile_start_, &seq_tile_start_, &cuts_, &split_})
    n += b->capacity;
  return n;
}

}  // namespace mlajit::plan
