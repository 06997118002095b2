#include "src/api/validation.h"

#include <cmath>
#include <cstddef>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "src/base/mla_types.h"
#include "src/base/status_macros.h"

namespace mlajit::api_internal {
namespace {

// Device-built plans size their buffers from the limits; beyond this the
// scratch alone would exceed any GPU's memory.
constexpr int kMaxDevicePlanBatch = 1 << 20;

absl::Status CheckAligned(const void* p, size_t alignment, const char* name,
                          const char* prefix = "args.") {
  if (reinterpret_cast<uintptr_t>(p) % alignment != 0) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, name, "=0x", absl::Hex(reinterpret_cast<uintptr_t>(p)),
                                                   ": must be ", alignment, "-byte aligned"));
  }
  return absl::OkStatus();
}

template <typename Enum>
int32_t RawEnum(const Enum& e) {
  static_assert(sizeof(Enum) == sizeof(int32_t), "C enums are int-sized on our targets");
  int32_t v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

}  // namespace

absl::Status CheckStructSize(uint32_t got, size_t want, const char* name) {
  if (got < want) {
    return absl::InvalidArgumentError(absl::StrCat(name, "->struct_size=", got, ": expected >= ",
                                                   want, " (initialise with the _INIT macro)"));
  }
  return absl::OkStatus();
}

absl::Status ValidatePlanConfig(const mlajit_plan_config_t* c) {
  if (c == nullptr) return absl::InvalidArgumentError("config is null");
  MLAJIT_RETURN_IF_ERROR(CheckStructSize(c->struct_size, sizeof(*c), "config"));
  if (c->num_heads < 1 || c->num_heads > kMaxHeads) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.num_heads=", c->num_heads, ": must be in 1..", kMaxHeads));
  }
  // A C caller may store any int in an enum field, and loading an out-of-range
  // value through the C++ enum type is undefined: read the raw integers.
  const int32_t kv_format = RawEnum(c->kv_format);
  const int32_t q_mode = RawEnum(c->q_mode);
  if (!IsValidKvFormat(kv_format)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config.kv_format=", kv_format, ": must be 0 (bf16), 1 (fp8_e4m3) or 2 (mxfp4)"));
  }
  if (!IsValidQMode(q_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.q_mode=", q_mode, ": must be 0 (bf16) or 1 (fp8)"));
  }
  if (c->causal != 0 && c->causal != 1) {
    return absl::InvalidArgumentError(absl::StrCat("config.causal=", c->causal, ": must be 0 or 1"));
  }
  if (c->write_lse != 0 && c->write_lse != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.write_lse=", c->write_lse, ": must be 0 or 1"));
  }
  if (!(c->sm_scale > 0.0f) || !std::isfinite(c->sm_scale)) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.sm_scale=", c->sm_scale, ": must be finite and > 0"));
  }
  if (!IsValidPageSize(c->page_size)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config.page_size=", c->page_size, ": must be 0 (flat), 1, 16, 32, 64 or 128"));
  }
  return absl::OkStatus();
}

absl::Status ValidatePlanInputs(const mlajit_plan_config_t& config, int batch_size,
                                const int32_t* qo_indptr, const int32_t* kv_indptr,
                                const int32_t* kv_lens) {
  if (batch_size < 0) {
    return absl::InvalidArgumentError(absl::StrCat("batch_size=", batch_size, ": must be >= 0"));
  }
  if (qo_indptr == nullptr) return absl::InvalidArgumentError("qo_indptr is null");
  if (kv_indptr == nullptr) return absl::InvalidArgumentError("kv_indptr is null");
  if (kv_lens != nullptr && config.page_size == 0) {
    return absl::InvalidArgumentError(
        "kv_lens given with config.page_size=0: a flat layout takes lengths from kv_indptr");
  }
  return absl::OkStatus();
}

absl::StatusOr<mlajit_plan_limits_t> ReadPlanLimits(const mlajit_plan_limits_t* l) {
  if (l == nullptr) return absl::InvalidArgumentError("limits is null");
  // Callers built before kv_len_hint existed pass the shorter struct.
  MLAJIT_RETURN_IF_ERROR(
      CheckStructSize(l->struct_size, offsetof(mlajit_plan_limits_t, kv_len_hint), "limits"));
  mlajit_plan_limits_t r = MLAJIT_PLAN_LIMITS_INIT;
  r.max_batch_size = l->max_batch_size;
  r.max_q_len = l->max_q_len;
  if (l->struct_size >= offsetof(mlajit_plan_limits_t, kv_len_hint) + sizeof(l->kv_len_hint)) {
    r.kv_len_hint = l->kv_len_hint;
  }
  if (r.max_batch_size < 1 || r.max_batch_size > kMaxDevicePlanBatch) {
    return absl::InvalidArgumentError(absl::StrCat("limits.max_batch_size=", r.max_batch_size,
                                                   ": must be in 1..", kMaxDevicePlanBatch));
  }
  if (r.max_q_len < 1 || r.max_q_len > kMaxQLen) {
    return absl::InvalidArgumentError(
        absl::StrCat("limits.max_q_len=", r.max_q_len, ": must be in 1..", kMaxQLen));
  }
  if (r.kv_len_hint < 0) {
    return absl::InvalidArgumentError(absl::StrCat("limits.kv_len_hint=", r.kv_len_hint,
                                                   ": must be 0 (no hint) or a length in tokens"));
  }
  return r;
}

absl::Status ValidatePlanLimits(const mlajit_plan_limits_t* l) {
  return ReadPlanLimits(l).status();
}

absl::Status ValidateTuneOptions(const mlajit_tune_options_t* o) {
  if (o == nullptr) return absl::OkStatus();  // the defaults
  MLAJIT_RETURN_IF_ERROR(CheckStructSize(o->struct_size, sizeof(*o), "options"));
  if (o->warmup_calls < 0 || o->warmup_calls > 1000) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.warmup_calls=", o->warmup_calls, ": must be in 0..1000"));
  }
  if (o->timed_calls < 1 || o->timed_calls > 10000) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.timed_calls=", o->timed_calls, ": must be in 1..10000"));
  }
  if (o->persist != 0 && o->persist != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.persist=", o->persist, ": must be 0 or 1"));
  }
  if (o->device_plans != 0 && o->device_plans != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.device_plans=", o->device_plans, ": must be 0 or 1"));
  }
  return absl::OkStatus();
}

absl::Status ValidatePlanUpdate(const mlajit_plan_config_t& config,
                                const mlajit_plan_limits_t& limits, int batch_size,
                                const int32_t* qo_indptr, const int32_t* kv_indptr,
                                const int32_t* kv_lens) {
  if (batch_size < 0 || batch_size > limits.max_batch_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch_size=", batch_size, ": must be in 0..", limits.max_batch_size,
                     " (the plan's limits.max_batch_size)"));
  }
  if (qo_indptr == nullptr) return absl::InvalidArgumentError("qo_indptr is null: expected a device array of batch_size + 1 int32");
  if (kv_indptr == nullptr) return absl::InvalidArgumentError("kv_indptr is null: expected a device array of batch_size + 1 int32");
  if (kv_lens != nullptr && config.page_size == 0) {
    return absl::InvalidArgumentError(
        "kv_lens given with config.page_size=0: a flat layout takes lengths from kv_indptr");
  }
  MLAJIT_RETURN_IF_ERROR(CheckAligned(qo_indptr, 4, "qo_indptr", ""));
  MLAJIT_RETURN_IF_ERROR(CheckAligned(kv_indptr, 4, "kv_indptr", ""));
  if (kv_lens != nullptr) MLAJIT_RETURN_IF_ERROR(CheckAligned(kv_lens, 4, "kv_lens", ""));
  return absl::OkStatus();
}

absl::Status ValidateDecodeArgs(const mlajit_decode_args_t* a, const mlajit_plan_config_t& config,
                                int64_t total_q, int64_t kv_tokens) {
  if (a == nullptr) return absl::InvalidArgumentError("args is null");
  MLAJIT_RETURN_IF_ERROR(CheckStructSize(a->struct_size, sizeof(*a), "args"));
  const bool empty = total_q == 0;
  if (!empty) {
    if (a->q == nullptr) return absl::InvalidArgumentError("args.q is null: expected a device pointer to [total_q, num_heads, 576] bf16");
    if (a->out == nullptr) return absl::InvalidArgumentError("args.out is null: expected a device pointer to [total_q, num_heads, 512] bf16");
    if (a->kv == nullptr) return absl::InvalidArgumentError("args.kv is null: expected a device pointer to the KV cache");
    MLAJIT_RETURN_IF_ERROR(CheckAligned(a->q, 16, "q"));
    MLAJIT_RETURN_IF_ERROR(CheckAligned(a->out, 16, "out"));
    MLAJIT_RETURN_IF_ERROR(CheckAligned(a->kv, config.kv_format == MLAJIT_KV_FORMAT_MXFP4 ? 2 : 16, "kv"));
  }
  if (config.write_lse && !empty && a->lse == nullptr) {
    return absl::InvalidArgumentError("args.lse is null but the plan was built with config.write_lse=1");
  }
  if (!config.write_lse && a->lse != nullptr) {
    return absl::InvalidArgumentError("args.lse is set but the plan was built with config.write_lse=0");
  }
  if (a->lse != nullptr) MLAJIT_RETURN_IF_ERROR(CheckAligned(a->lse, 4, "lse"));
  if (config.page_size > 0 && !empty && a->kv_indices == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "args.kv_indices is null but the plan is paged (page_size=", config.page_size, ")"));
  }
  if (config.page_size == 0 && a->kv_indices != nullptr) {
    return absl::InvalidArgumentError("args.kv_indices is set but the plan is flat (page_size=0)");
  }
  if (config.kv_format == MLAJIT_KV_FORMAT_FP8_E4M3 &&
      (!(a->kv_scale > 0.0f) || !std::isfinite(a->kv_scale))) {
    return absl::InvalidArgumentError(
        absl::StrCat("args.kv_scale=", a->kv_scale, ": must be finite and > 0 for fp8 KV"));
  }
  if (a->kv_bytes != 0) {
    const uint64_t token_bytes = KvBytesPerToken(static_cast<KvFormat>(config.kv_format));
    const uint64_t slots = static_cast<uint64_t>(kv_tokens);  // paged: 0, ids live on the device
    if (slots * token_bytes > a->kv_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "args.kv_bytes=", a->kv_bytes, ": the plan addresses ", slots, " tokens of ",
          token_bytes, " bytes (", slots * token_bytes, " bytes)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace mlajit::api_internal
