// mlajit C++ layer: RAII handles and absl::StatusOr over the C ABI in mlajit.h.
// Header-only; nothing here is compiled into the library.
//
//   MLAJIT_ASSIGN_OR_RETURN(mlajit::Runtime rt, mlajit::Runtime::Create(/*device=*/0));
//   mlajit_plan_config_t cfg = MLAJIT_PLAN_CONFIG_INIT;
//   cfg.num_heads = 16;  cfg.sm_scale = 0.0721688f;
//   absl::StatusOr<mlajit::Plan> plan = rt.CreatePlan(cfg, qo_indptr, kv_indptr);
//   mlajit_decode_args_t args = MLAJIT_DECODE_ARGS_INIT;
//   args.q = q;  args.kv = kv;  args.kv_scale = scale;  args.out = out;
//   for (int layer = 0; layer < 61; ++layer) {
//     absl::Status s = plan->Decode(args, stream);   // no allocation, no sync
//   }
//
// Shapes and units are those of mlajit.h: q [total_q, H, 576] bf16, out
// [total_q, H, 512] bf16, lse [total_q, H] fp32, indptr arrays int32 on the host.
#ifndef MLAJIT_MLAJIT_HPP_
#define MLAJIT_MLAJIT_HPP_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "mlajit/mlajit.h"

namespace mlajit {

// The C status with the thread's last error message.
inline absl::Status StatusFromC(mlajit_status_t s) {
  if (s == MLAJIT_STATUS_OK) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s), mlajit_last_error());
}

// A JSON result of the C ABI as a std::string (the library's copy is freed).
inline absl::StatusOr<std::string> JsonFromC(mlajit_status_t s, char* json) {
  absl::Status st = StatusFromC(s);
  std::string out = json != nullptr ? json : "";
  mlajit_free(json);
  if (!st.ok()) return st;
  return out;
}

// A decode plan for one batch layout; reusable by every layer of a step.
class Plan {
 public:
  Plan() = default;
  explicit Plan(mlajit_plan_t p) : plan_(p) {}
  Plan(Plan&& o) noexcept : plan_(std::exchange(o.plan_, nullptr)) {}
  Plan& operator=(Plan&& o) noexcept {
    if (this != &o) {
      mlajit_plan_free(plan_);
      plan_ = std::exchange(o.plan_, nullptr);
    }
    return *this;
  }
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() { mlajit_plan_free(plan_); }

  // Enqueues the decode on `stream` (cudaStream_t / hipStream_t; nullptr: default).
  absl::Status Decode(const mlajit_decode_args_t& args, void* stream = nullptr) const {
    return StatusFromC(mlajit_decode(plan_, &args, stream));
  }
  // Device-built plans (Runtime::CreateDevicePlan): enqueues the rebuild of the
  // schedule from device arrays (qo_indptr / kv_indptr: batch_size + 1 entries;
  // kv_lens: paged only, or nullptr). Capture-safe.
  absl::Status UpdateAsync(int batch_size, const int32_t* qo_indptr, const int32_t* kv_indptr,
                           const int32_t* kv_lens, void* stream = nullptr) const {
    return StatusFromC(
        mlajit_plan_update_async(plan_, batch_size, qo_indptr, kv_indptr, kv_lens, stream));
  }
  // The last update's verdict; synchronises `stream` (not capture-safe).
  absl::Status CheckUpdate(void* stream = nullptr) const {
    return StatusFromC(mlajit_plan_check_update(plan_, stream));
  }
  // What the plan runs (kernel, tile shape, whether a tuning record chose it).
  absl::StatusOr<std::string> DescribeJson() const {
    char* json = nullptr;
    const mlajit_status_t s = mlajit_plan_describe_json(plan_, &json);
    return JsonFromC(s, json);
  }
  mlajit_plan_t get() const { return plan_; }

 private:
  mlajit_plan_t plan_ = nullptr;
};

// One device's runtime: kernel cache, JIT and loaded kernels.
class Runtime {
 public:
  // FAILED_PRECONDITION without a GPU or driver.
  static absl::StatusOr<Runtime> Create(int device_index = 0,
                                        const mlajit_cache_options_t* cache = nullptr) {
    mlajit_runtime_options_t o = MLAJIT_RUNTIME_OPTIONS_INIT;
    o.device_index = device_index;
    o.cache = cache;
    mlajit_runtime_t rt = nullptr;
    absl::Status s = StatusFromC(mlajit_runtime_create(&o, &rt));
    if (!s.ok()) return s;
    return Runtime(rt);
  }

  Runtime(Runtime&& o) noexcept : rt_(std::exchange(o.rt_, nullptr)) {}
  Runtime& operator=(Runtime&& o) noexcept {
    if (this != &o) {
      mlajit_runtime_free(rt_);
      rt_ = std::exchange(o.rt_, nullptr);
    }
    return *this;
  }
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;
  ~Runtime() { mlajit_runtime_free(rt_); }

  // qo_indptr / kv_indptr: batch_size + 1 entries; kv_lens: paged only (else empty).
  absl::StatusOr<Plan> CreatePlan(const mlajit_plan_config_t& config,
                                  absl::Span<const int32_t> qo_indptr,
                                  absl::Span<const int32_t> kv_indptr,
                                  absl::Span<const int32_t> kv_lens = {}) const {
    if (qo_indptr.empty() || qo_indptr.size() != kv_indptr.size()) {
      return absl::InvalidArgumentError(
          "qo_indptr and kv_indptr must both hold batch_size + 1 entries");
    }
    const int batch = static_cast<int>(qo_indptr.size()) - 1;
    if (!kv_lens.empty() && kv_lens.size() != static_cast<size_t>(batch)) {
      return absl::InvalidArgumentError("kv_lens must hold batch_size entries");
    }
    mlajit_plan_t p = nullptr;
    absl::Status s = StatusFromC(mlajit_plan_create(rt_, &config, batch, qo_indptr.data(),
                                                    kv_indptr.data(),
                                                    kv_lens.empty() ? nullptr : kv_lens.data(), &p));
    if (!s.ok()) return s;
    return Plan(p);
  }

  // A plan whose schedule the GPU rebuilds on Plan::UpdateAsync, for CUDA
  // graphs; buffers sized once from the limits. kv_len_hint: see
  // mlajit_plan_limits_t (0: none).
  absl::StatusOr<Plan> CreateDevicePlan(const mlajit_plan_config_t& config, int max_batch_size,
                                        int max_q_len = 1, int kv_len_hint = 0) const {
    mlajit_plan_limits_t limits = MLAJIT_PLAN_LIMITS_INIT;
    limits.max_batch_size = max_batch_size;
    limits.max_q_len = max_q_len;
    limits.kv_len_hint = kv_len_hint;
    mlajit_plan_t p = nullptr;
    absl::Status s = StatusFromC(mlajit_plan_create_device(rt_, &config, &limits, &p));
    if (!s.ok()) return s;
    return Plan(p);
  }

  // mlajit_tune: times the candidate shapes for this layout and records the
  // fastest for its class; returns the result JSON. Seconds, synchronous.
  absl::StatusOr<std::string> Tune(const mlajit_plan_config_t& config,
                                   absl::Span<const int32_t> qo_indptr,
                                   absl::Span<const int32_t> kv_indptr,
                                   absl::Span<const int32_t> kv_lens = {},
                                   const mlajit_tune_options_t* options = nullptr) const {
    if (qo_indptr.empty() || qo_indptr.size() != kv_indptr.size()) {
      return absl::InvalidArgumentError(
          "qo_indptr and kv_indptr must both hold batch_size + 1 entries");
    }
    const int batch = static_cast<int>(qo_indptr.size()) - 1;
    char* json = nullptr;
    const mlajit_status_t s =
        mlajit_tune(rt_, &config, batch, qo_indptr.data(), kv_indptr.data(),
                    kv_lens.empty() ? nullptr : kv_lens.data(), options, &json);
    return JsonFromC(s, json);
  }

  std::string arch() const { return mlajit_runtime_arch(rt_); }
  mlajit_runtime_t get() const { return rt_; }

 private:
  explicit Runtime(mlajit_runtime_t rt) : rt_(rt) {}
  mlajit_runtime_t rt_ = nullptr;
};

// The kernel cache, for deployment tooling (warm, verify, inspect).
class KernelCache {
 public:
  static absl::StatusOr<KernelCache> Open(const mlajit_cache_options_t* options = nullptr) {
    mlajit_cache_t c = nullptr;
    absl::Status s = StatusFromC(mlajit_cache_open(options, &c));
    if (!s.ok()) return s;
    return KernelCache(c);
  }
  KernelCache(KernelCache&& o) noexcept : c_(std::exchange(o.c_, nullptr)) {}
  KernelCache& operator=(KernelCache&& o) noexcept {
    if (this != &o) {
      mlajit_cache_close(c_);
      c_ = std::exchange(o.c_, nullptr);
    }
    return *this;
  }
  KernelCache(const KernelCache&) = delete;
  KernelCache& operator=(const KernelCache&) = delete;
  ~KernelCache() { mlajit_cache_close(c_); }

  // Compiles every spec of a manifest for `arch` (no GPU needed).
  absl::Status Warm(const std::string& manifest_path, const std::string& arch, int jobs = 0) {
    return StatusFromC(
        mlajit_cache_warm(c_, manifest_path.c_str(), arch.c_str(), jobs, nullptr, nullptr, nullptr));
  }
  absl::StatusOr<std::string> StatsJson() { return TakeJson(mlajit_cache_stats_json(c_, &json_)); }
  absl::StatusOr<std::string> ListJson() { return TakeJson(mlajit_cache_list_json(c_, &json_)); }
  absl::StatusOr<std::string> TuningJson() { return TakeJson(mlajit_cache_tuning_json(c_, &json_)); }
  mlajit_cache_t get() const { return c_; }

 private:
  explicit KernelCache(mlajit_cache_t c) : c_(c) {}
  absl::StatusOr<std::string> TakeJson(mlajit_status_t s) {
    absl::Status st = StatusFromC(s);
    if (!st.ok()) return st;
    std::string out = json_ != nullptr ? json_ : "";
    mlajit_free(json_);
    json_ = nullptr;
    return out;
  }
  mlajit_cache_t c_ = nullptr;
  char* json_ = nullptr;
};

}  // namespace mlajit

#endif  // MLAJIT_MLAJIT_HPP_
