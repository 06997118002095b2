// Runs one generated batch through the public decode API on the GPU and checks
// it against the CPU reference: device buffers, poisoned outputs, comparison.
// Shared by the GPU tests, the demo and the benchmark.
//
//   MLAJIT_ASSIGN_OR_RETURN(auto h, DecodeHarness::Create(/*device=*/0));
//   reference::BatchConfig cfg; cfg.batch_size = 32; cfg.num_heads = 16;
//   MLAJIT_ASSIGN_OR_RETURN(CaseResult r, h->RunCase(cfg, {}));
//   if (!r.out.Passes(1e-2)) ...
#ifndef MLAJIT_TOOLS_HARNESS_DECODE_HARNESS_H_
#define MLAJIT_TOOLS_HARNESS_DECODE_HARNESS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mlajit/mlajit.h"
#include "src/gpu/backend.h"
#include "src/reference/batch_generator.h"
#include "src/reference/compare.h"

namespace mlajit::harness {

// A device allocation freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  static absl::StatusOr<DeviceBuffer> Allocate(gpu::Backend* b, int device, size_t bytes);
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  ~DeviceBuffer();
  gpu::DevicePtr ptr() const { return ptr_; }
  void* get() const { return reinterpret_cast<void*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  gpu::Backend* backend_ = nullptr;
  int device_ = 0;
  gpu::DevicePtr ptr_ = 0;
  size_t bytes_ = 0;
};

// A batch resident on the device, with its plan.
struct DeviceBatch {
  reference::Batch batch;
  DeviceBuffer q, kv, kv_indices, out, lse;
  mlajit_plan_t plan = nullptr;
  mlajit_decode_args_t args = MLAJIT_DECODE_ARGS_INIT;
  std::vector<float> ref_out, ref_lse;  // computed on the first Check
  double reference_ms = 0;
  ~DeviceBatch() { mlajit_plan_free(plan); }
};

struct CaseOptions {
  bool write_lse = true;
  int calls = 1;             // decode calls before the check (the output is re-poisoned first)
  gpu::StreamHandle stream = nullptr;
};

struct CaseResult {
  reference::Comparison out;
  reference::Comparison lse;  // count 0 when lse was not requested
  double reference_ms = 0;
  std::string spec;            // what ran, for messages
};

class DecodeHarness {
 public:
  // kFailedPrecondition when there is no GPU / driver. `cache`: the runtime's
  // cache options (NULL: defaults and environment).
  static absl::StatusOr<std::unique_ptr<DecodeHarness>> Create(
      int device = 0, const mlajit_cache_options_t* cache = nullptr);
  ~DecodeHarness();

  // Uploads a generated batch and builds its plan.
  absl::StatusOr<std::unique_ptr<DeviceBatch>> Upload(const reference::BatchConfig& config,
                                                       bool write_lse);
  // The same for a batch built by the caller (e.g. one head shard of a larger one).
  absl::StatusOr<std::unique_ptr<DeviceBatch>> UploadBatch(reference::Batch batch,
                                                           bool write_lse);
  // Poisons out / lse, runs `calls` decodes, copies back, compares with the reference.
  absl::StatusOr<CaseResult> Check(DeviceBatch& db, const CaseOptions& options);
  absl::StatusOr<CaseResult> RunCase(const reference::BatchConfig& config,
                                     const CaseOptions& options);

  gpu::Backend* backend() const { return backend_; }
  int device() const { return device_; }
  mlajit_runtime_t runtime() const { return runtime_; }

 private:
  gpu::Backend* backend_ = nullptr;
  int device_ = 0;
  mlajit_runtime_t runtime_ = nullptr;
};

// The C ABI's status as an absl::Status carrying mlajit_last_error().
absl::Status FromC(mlajit_status_t s);

// The plan config of a generated batch (its heads, formats, causality, paging).
mlajit_plan_config_t PlanConfigFor(const reference::BatchConfig& config, float sm_scale,
                                   bool write_lse);

// The accuracy bar of DESIGN.md for a generated batch's output (relative L2
// error against the reference): 5e-3 with bf16 KV and bf16 Q, else 1e-2 (fp8
// or MXFP4 KV, or Q quantised to fp8).
double OutputTolerance(const reference::BatchConfig& config);

// A seed for fresh inputs on every run (distinct per call, random per process),
// reproducible from the value printed on failure.
uint64_t FreshSeed();

}  // namespace mlajit::harness

#endif  // MLAJIT_TOOLS_HARNESS_DECODE_HARNESS_H_
