// The C ABI: converts between C structs and internal types, maps absl::Status to
// mlajit_status_t and keeps the message in a thread-local last-error buffer.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "mlajit/mlajit.h"
#include "src/api/c_api_internal.h"
#include "src/api/runtime.h"
#include "src/api/tuner.h"
#include "src/api/validation.h"
#include "src/base/log.h"
#include "src/gpu/backend.h"

struct mlajit_runtime {
  std::unique_ptr<mlajit::api_internal::Runtime> impl;
};
struct mlajit_plan {
  std::unique_ptr<mlajit::api_internal::Plan> impl;
};

namespace mlajit::api_internal {
namespace {
thread_local std::string last_error;
}  // namespace

absl::Status EmitString(const std::string& s, char** out) {
  if (out == nullptr) return absl::OkStatus();
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("out of memory for ", s.size(), " bytes"));
  }
  std::memcpy(p, s.data(), s.size() + 1);
  *out = p;
  return absl::OkStatus();
}

mlajit_status_t ToC(const absl::Status& s) {
  if (s.ok()) return MLAJIT_STATUS_OK;
  last_error = std::string(s.message());
  return static_cast<mlajit_status_t>(s.code());
}

}  // namespace mlajit::api_internal

using mlajit::api_internal::ToC;
using mlajit::api_internal::EmitString;

extern "C" {

const char* mlajit_version(void) { return MLAJIT_VERSION_STRING; }
const char* mlajit_last_error(void) { return mlajit::api_internal::last_error.c_str(); }
void mlajit_free(void* p) { std::free(p); }

void mlajit_set_log_sink(mlajit_log_sink_t sink, void* user) {
  if (sink == nullptr) {
    mlajit::SetLogSink(nullptr, nullptr);
    return;
  }
  // The C sink is stored in a static so that the C++ trampoline can reach it.
  struct Target {
    mlajit_log_sink_t fn;
    void* user;
  };
  auto* target = new Target{sink, user};  // lives as long as the process may log
  mlajit::SetLogSink(
      [](mlajit::LogLevel level, std::string_view line, void* u) {
        auto* t = static_cast<Target*>(u);
        std::string copy(line);
        t->fn(static_cast<mlajit_log_level_t>(level), copy.c_str(), t->user);
      },
      target);
}

mlajit_status_t mlajit_runtime_create(const mlajit_runtime_options_t* options,
                                      mlajit_runtime_t* runtime) {
  if (runtime == nullptr) return ToC(absl::InvalidArgumentError("runtime (output) is null"));
  *runtime = nullptr;
  auto backend = mlajit::gpu::DefaultBackend();
  mlajit::gpu::ScopedDeviceRestore restore(backend.ok() ? *backend : nullptr);
  auto rt = mlajit::api_internal::Runtime::Create(options);
  if (!rt.ok()) return ToC(rt.status());
  *runtime = new mlajit_runtime{std::move(rt).value()};
  return MLAJIT_STATUS_OK;
}

void mlajit_runtime_free(mlajit_runtime_t runtime) {
  if (runtime == nullptr) return;
  mlajit::gpu::ScopedDeviceRestore restore(runtime->impl->backend());
  delete runtime;
}

const char* mlajit_runtime_arch(mlajit_runtime_t runtime) {
  return runtime == nullptr ? "" : runtime->impl->properties().arch.c_str();
}

mlajit_status_t mlajit_plan_create(mlajit_runtime_t runtime, const mlajit_plan_config_t* config,
                                   int batch_size, const int32_t* qo_indptr,
                                   const int32_t* kv_indptr, const int32_t* kv_lens,
                                   mlajit_plan_t* plan) {
  if (plan == nullptr) return ToC(absl::InvalidArgumentError("plan (output) is null"));
  *plan = nullptr;
  if (runtime == nullptr) return ToC(absl::InvalidArgumentError("runtime is null"));
  mlajit::gpu::ScopedDeviceRestore restore(runtime->impl->backend());
  auto p = mlajit::api_internal::Plan::Create(runtime->impl.get(), config, batch_size, qo_indptr,
                                              kv_indptr, kv_lens);
  if (!p.ok()) return ToC(p.status());
  *plan = new mlajit_plan{std::move(p).value()};
  return MLAJIT_STATUS_OK;
}

void mlajit_plan_free(mlajit_plan_t plan) {
  if (plan == nullptr) return;
  mlajit::gpu::ScopedDeviceRestore restore(plan->impl->runtime()->backend());
  delete plan;
}

mlajit_status_t mlajit_plan_describe_json(mlajit_plan_t plan, char** json) {
  if (json == nullptr) return ToC(absl::InvalidArgumentError("json (output) is null"));
  *json = nullptr;
  if (plan == nullptr) return ToC(absl::InvalidArgumentError("plan is null"));
  return ToC(EmitString(plan->impl->DescribeJson(), json));
}

mlajit_status_t mlajit_tune(mlajit_runtime_t runtime, const mlajit_plan_config_t* config,
                            int batch_size, const int32_t* qo_indptr, const int32_t* kv_indptr,
                            const int32_t* kv_lens, const mlajit_tune_options_t* options,
                            char** result_json) {
  if (result_json != nullptr) *result_json = nullptr;
  if (runtime == nullptr) return ToC(absl::InvalidArgumentError("runtime is null"));
  if (absl::Status s = mlajit::api_internal::ValidateTuneOptions(options); !s.ok()) return ToC(s);
  mlajit::api_internal::TuneOptions o;
  if (options != nullptr) {
    o.warmup_calls = options->warmup_calls;
    o.timed_calls = options->timed_calls;
    o.persist = options->persist != 0;
    o.device_plans = options->device_plans != 0;
  }
  mlajit::gpu::ScopedDeviceRestore restore(runtime->impl->backend());
  auto r = mlajit::api_internal::Tune(runtime->impl.get(), config, batch_size, qo_indptr,
                                      kv_indptr, kv_lens, o);
  if (!r.ok()) return ToC(r.status());
  if (result_json == nullptr) return MLAJIT_STATUS_OK;
  return ToC(EmitString(mlajit::api_internal::TuneResultJson(*r), result_json));
}

mlajit_status_t mlajit_plan_create_device(mlajit_runtime_t runtime,
                                          const mlajit_plan_config_t* config,
                                          const mlajit_plan_limits_t* limits,
                                          mlajit_plan_t* plan) {
  if (plan == nullptr) return ToC(absl::InvalidArgumentError("plan (output) is null"));
  *plan = nullptr;
  if (runtime == nullptr) return ToC(absl::InvalidArgumentError("runtime is null"));
  mlajit::gpu::ScopedDeviceRestore restore(runtime->impl->backend());
  auto p = mlajit::api_internal::Plan::CreateDevicePlanned(runtime->impl.get(), config, limits);
  if (!p.ok()) return ToC(p.status());
  *plan = new mlajit_plan{std::move(p).value()};
  return MLAJIT_STATUS_OK;
}

mlajit_status_t mlajit_plan_update_async(mlajit_plan_t plan, int batch_size,
                                         const int32_t* qo_indptr, const int32_t* kv_indptr,
                                         const int32_t* kv_lens, void* stream) {
  if (plan == nullptr) return ToC(absl::InvalidArgumentError("plan is null"));
  mlajit::gpu::ScopedDeviceRestore restore(plan->impl->runtime()->backend());
  return ToC(plan->impl->Update(batch_size, qo_indptr, kv_indptr, kv_lens, stream));
}

mlajit_status_t mlajit_plan_check_update(mlajit_plan_t plan, void* stream) {
  if (plan == nullptr) return ToC(absl::InvalidArgumentError("plan is null"));
  mlajit::gpu::ScopedDeviceRestore restore(plan->impl->runtime()->backend());
  return ToC(plan->impl->CheckUpdate(stream));
}

mlajit_status_t mlajit_decode(mlajit_plan_t plan, const mlajit_decode_args_t* args,
                              void* stream) {
  if (plan == nullptr) return ToC(absl::InvalidArgumentError("plan is null"));
  mlajit::gpu::ScopedDeviceRestore restore(plan->impl->runtime()->backend());
  return ToC(plan->impl->Decode(args, stream));
}

}  // extern "C"
