// The objects behind the C ABI handles: a Runtime per device (backend, kernel
// cache, JIT, loaded kernels, schedule cache) and a Plan per batch layout
// (KernelSpec, loaded kernel, device metadata). Decode validates its arguments
// and launches; with a plan in hand it allocates nothing, does no file I/O and
// never synchronises.
//
//   MLAJIT_ASSIGN_OR_RETURN(auto rt, Runtime::Create(options));
//   MLAJIT_ASSIGN_OR_RETURN(auto plan, Plan::Create(rt.get(), config, b, qo, kv, nullptr));
//   MLAJIT_RETURN_IF_ERROR(plan->Decode(args, stream));
#ifndef MLAJIT_SRC_API_RUNTIME_H_
#define MLAJIT_SRC_API_RUNTIME_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/numeric/int128.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "mlajit/mlajit.h"
#include "src/cache/kernel_cache.h"
#include "src/gpu/backend.h"
#include "src/jit/kernel_compiler.h"
#include "src/jit/kernel_spec.h"
#include "src/plan/device_plan.h"
#include "src/plan/kv_tensor_maps.h"
#include "src/plan/scheduler.h"
#include "src/plan/tile_policy.h"
#include "src/tune/tuning_table.h"

namespace mlajit::api_internal {

struct LoadedKernel {
  jit::KernelSpec spec;
  gpu::ModuleHandle module = 0;
  gpu::FunctionHandle decode = 0, combine = 0, planner = 0;
  // The merge at one lane width each (4, 8, 16 columns), for host-built plans;
  // `combine` picks the width itself (device-planned calls).
  gpu::FunctionHandle combine_w4 = 0, combine_w8 = 0, combine_w16 = 0;
  gpu::FunctionHandle MergeOfWidth(int lane_columns) const {
    return lane_columns == 4 ? combine_w4 : lane_columns == 16 ? combine_w16 : combine_w8;
  }
  int threads = 256;
  int smem_bytes = 0;
  // The decode kernel copies fp8 tiles with tensor maps the host encodes per
  // call (plan::CopiesKvByTensorMaps), and this runtime encodes them.
  bool kv_tensor_maps = false;
  // Built with MLAJIT_TIMELINE: every call runs the merge kernel, which prints the stamps.
  bool timeline = false;
};

// A host-built plan's batch layout, checked as mlajit_plan_create checks it
// (config, arrays, contents), with its longest q_len (at least 1).
struct HostLayout {
  plan::LayoutView view;
  int max_q_len = 1;
};
absl::StatusOr<HostLayout> CheckHostLayout(const mlajit_plan_config_t* config, int batch_size,
                                           const int32_t* qo_indptr, const int32_t* kv_indptr,
                                           const int32_t* kv_lens);

// The kernel of a plan config whose rows reach max_q_len, with `tiles`, for `arch`.
jit::KernelSpec SpecFor(const mlajit_plan_config_t& config, int max_q_len,
                        const plan::TileShape& tiles, const std::string& arch);

class Runtime {
 public:
  static absl::StatusOr<std::unique_ptr<Runtime>> Create(const mlajit_runtime_options_t* options);
  ~Runtime();

  // Compiles (or finds in the cache) and loads the kernel for `spec`, once.
  absl::StatusOr<const LoadedKernel*> GetKernel(const jit::KernelSpec& spec, int smem_bytes);

  // Schedules are cached by a hash of the layout contents and the tile shape.
  absl::StatusOr<std::shared_ptr<const plan::Schedule>> GetSchedule(
      const plan::LayoutView& layout, const plan::ScheduleConfig& config);

  // kInvalidArgument when `p` (named `name` in the message) is memory of a
  // device other than this runtime's: the kernel would fault on it, and a fault
  // poisons the whole CUDA context of the process. Unclassifiable pointers
  // (host, managed, other allocators) pass.
  absl::Status CheckDevicePointer(const void* p, const char* name) const;

  gpu::Backend* backend() const { return backend_; }
  int device() const { return device_; }
  const gpu::DeviceProperties& properties() const { return props_; }
  const jit::KernelCompiler& compiler() const { return *compiler_; }
  // The tuned shapes this runtime's plans use (loaded from the cache
  // directories at creation; mlajit_tune adds to it), and the directory a
  // tuning run persists to ("" for a memory-only cache).
  tune::TuningTable& tuning() const { return *tuning_; }
  const std::string& tuning_dir() const { return tuning_dir_; }
  // The class of batch a plan config and size belong to on this device.
  tune::TuningKey TuningKeyFor(const mlajit_plan_config_t& config, int max_q_len,
                               const plan::BatchWork* work) const;
  // The tiles a plan runs with: the tile policy's choice, replaced by a tuned
  // record for the batch's class when there is one (unless MLAJIT_TUNED=0),
  // then the MLAJIT_TILES / MLAJIT_SPLIT_MIN_COST knobs. *tuned (may be null)
  // says whether a record was used.
  absl::StatusOr<plan::TileShape> ChooseTiles(const mlajit_plan_config_t& config, int max_q_len,
                                              const plan::BatchWork* work, bool* tuned) const;
  // Compiles (or finds in the cache) the kernels of `specs` on parallel
  // threads; one status per spec.
  std::vector<absl::Status> Precompile(const std::vector<jit::KernelSpec>& specs);

  // Launch our kernels as programmatic dependents (sm_90+; MLAJIT_PDL=0 turns
  // it off): each may be scheduled while its predecessor on the stream drains.
  bool programmatic_dependent_launch() const { return pdl_; }
  // The KV tensor maps of a call (LoadedKernel::kv_tensor_maps), cached per
  // buffer; null when this runtime does not encode them (not CUDA, or
  // MLAJIT_KV_TMA=0, which makes every tile copy by cp.async).
  plan::KvTensorMaps* kv_tensor_maps() const { return kv_tensor_maps_.get(); }

 private:
  Runtime() = default;

  gpu::Backend* backend_ = nullptr;
  int device_ = 0;
  gpu::DeviceProperties props_;
  bool pdl_ = false;
  std::unique_ptr<plan::KvTensorMaps> kv_tensor_maps_;
  bool use_tuning_ = true;
  std::unique_ptr<tune::TuningTable> tuning_;
  std::string tuning_dir_;
  // Shared by every runtime of the process with the same cache configuration
  // (one per device in a tensor-parallel engine): one memory tier, one
  // single-flight, so a spec compiles once however many devices load it. The
  // loaded modules (kernels_) stay per runtime: a module belongs to a device.
  std::shared_ptr<jit::KernelCompiler> compiler_;

  absl::Mutex kernels_mu_;
  absl::flat_hash_map<jit::KernelSpec, std::unique_ptr<LoadedKernel>> kernels_
      ABSL_GUARDED_BY(kernels_mu_);
  absl::Mutex schedules_mu_;
  absl::flat_hash_map<absl::uint128, std::shared_ptr<const plan::Schedule>> schedules_
      ABSL_GUARDED_BY(schedules_mu_);
};

class Plan {
 public:
  // forced: run these tiles (complete, see plan::CompleteTileShape) instead
  // of choosing; the autotuner times candidates this way.
  static absl::StatusOr<std::unique_ptr<Plan>> Create(Runtime* runtime,
                                                      const mlajit_plan_config_t* config,
                                                      int batch_size, const int32_t* qo_indptr,
                                                      const int32_t* kv_indptr,
                                                      const int32_t* kv_lens,
                                                      const plan::TileShape* forced = nullptr);

  // A plan whose schedule the device planner rebuilds on every Update
  // (capture-safe), in buffers sized from `limits`.
  static absl::StatusOr<std::unique_ptr<Plan>> CreateDevicePlanned(
      Runtime* runtime, const mlajit_plan_config_t* config, const mlajit_plan_limits_t* limits);
  // Device-planned plans only: enqueues the planner on `stream`.
  absl::Status Update(int batch_size, const int32_t* qo_indptr, const int32_t* kv_indptr,
                      const int32_t* kv_lens, void* stream) const;
  // The planner's verdict on the last update (synchronises `stream`).
  absl::Status CheckUpdate(void* stream) const;

  absl::Status ValidateArgs(const mlajit_decode_args_t* args) const;
  absl::Status Decode(const mlajit_decode_args_t* args, void* stream) const;

  Runtime* runtime() const { return runtime_; }
  const jit::KernelSpec& spec() const { return kernel_->spec; }
  // The JSON of mlajit_plan_describe_json.
  std::string DescribeJson() const;
  bool device_planned() const { return schedule_ == nullptr; }
  // Query rows of a call: the batch's, or for a device-planned plan the limit
  // (its layout lives on the device).
  int64_t query_rows() const {
    return device_planned() ? int64_t{limits_.max_batch_size} * limits_.max_q_len
                            : schedule_->total_q;
  }

 private:
  Plan() = default;
  // Kernel spec, loaded kernel and schedule config for rows of up to max_q_len.
  // work: the batch's size when the plan is built for one batch, else null.
  // forced: as for Create.
  absl::Status Prepare(Runtime* runtime, const mlajit_plan_config_t& config, int max_q_len,
                       const plan::BatchWork* work, const plan::TileShape* forced);

  Runtime* runtime_ = nullptr;
  mlajit_plan_config_t config_{};
  const LoadedKernel* kernel_ = nullptr;
  plan::ScheduleConfig schedule_config_;
  bool tuned_ = false;  // the tiles came from a tuning record
  std::shared_ptr<const plan::Schedule> schedule_;  // null: device-planned
  mlajit_plan_limits_t limits_{};                    // device-planned only
  std::unique_ptr<plan::DevicePlan> device_plan_;
  int64_t kv_extent_ = 0;  // flat: tokens addressed; paged: page-table entries
};

}  // namespace mlajit::api_internal

#endif  // MLAJIT_SRC_API_RUNTIME_H_
