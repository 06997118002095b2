// Argument validation of the C ABI, as pure functions: everything the library
// checks before it touches a device, testable without a GPU
// (tests/unit/api_validation_test.cc; docs/VALIDATION.md lists every check).
//
//   MLAJIT_RETURN_IF_ERROR(ValidatePlanConfig(config));
//   MLAJIT_RETURN_IF_ERROR(ValidatePlanInputs(*config, batch, qo, kv, kv_lens));
//   MLAJIT_RETURN_IF_ERROR(ValidateDecodeArgs(args, plan_config, total_q, kv_tokens));
#ifndef MLAJIT_SRC_API_VALIDATION_H_
#define MLAJIT_SRC_API_VALIDATION_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mlajit/mlajit.h"

namespace mlajit::api_internal {

// `<name>->struct_size=<got>: expected >= <want> ...` when the caller's struct is
// older (smaller) than this library's.
absl::Status CheckStructSize(uint32_t got, size_t want, const char* name);

// Every field of mlajit_plan_config_t (NULL, struct size, ranges, enums).
absl::Status ValidatePlanConfig(const mlajit_plan_config_t* config);

// The plan_create arguments other than the config (which must be valid):
// batch size, null arrays, kv_lens only for paged layouts. The array contents
// are checked by plan::ValidateLayout.
absl::Status ValidatePlanInputs(const mlajit_plan_config_t& config, int batch_size,
                                const int32_t* qo_indptr, const int32_t* kv_indptr,
                                const int32_t* kv_lens);

// Every field of mlajit_tune_options_t; NULL (the defaults) passes.
absl::Status ValidateTuneOptions(const mlajit_tune_options_t* options);

// Every field of mlajit_plan_limits_t. A struct_size that ends before
// kv_len_hint (a caller built against a header without it) is accepted.
absl::Status ValidatePlanLimits(const mlajit_plan_limits_t* limits);

// The limits as this library reads them: validated, and a whole struct with
// the fields that the caller's struct_size leaves out at their defaults.
absl::StatusOr<mlajit_plan_limits_t> ReadPlanLimits(const mlajit_plan_limits_t* limits);

// mlajit_plan_update_async's host-visible arguments against the plan's config
// and limits: batch size, null / misaligned arrays, kv_lens only when paged.
absl::Status ValidatePlanUpdate(const mlajit_plan_config_t& config,
                                const mlajit_plan_limits_t& limits, int batch_size,
                                const int32_t* qo_indptr, const int32_t* kv_indptr,
                                const int32_t* kv_lens);

// Decode arguments against the plan they are used with. total_q: query rows
// of the plan's batch; kv_tokens: flat plans' addressed token count (paged: 0,
// since page ids live on the device).
absl::Status ValidateDecodeArgs(const mlajit_decode_args_t* args,
                                const mlajit_plan_config_t& config, int64_t total_q,
                                int64_t kv_tokens);

}  // namespace mlajit::api_internal

#endif  // MLAJIT_SRC_API_VALIDATION_H_
