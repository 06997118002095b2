#include "src/api/runtime.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "src/api/c_api_internal.h"
#include "src/api/validation.h"
#include "src/base/log.h"
#include "src/base/mla_types.h"
#include "src/base/status_macros.h"
#include "src/tune/candidates.h"
#include "xxhash.h"

namespace mlajit::api_internal {
namespace {

constexpr unsigned kPlannerThreads = 1024;  // mla_plan::PLAN_THREADS

absl::uint128 HashLayout(const plan::LayoutView& l, const plan::ScheduleConfig& c) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_128bits_reset(st);
  const int32_t header[] = {l.num_heads, l.page_size, l.causal ? 1 : 0, c.num_ctas, c.block_m,
                            c.block_n, c.min_cost_per_cta,
                            static_cast<int32_t>(l.qo_indptr.size()),
                            static_cast<int32_t>(l.kv_lens.size())};
  XXH3_128bits_update(st, header, sizeof(header));
  XXH3_128bits_update(st, l.qo_indptr.data(), l.qo_indptr.size() * sizeof(int32_t));
  XXH3_128bits_update(st, l.kv_indptr.data(), l.kv_indptr.size() * sizeof(int32_t));
  XXH3_128bits_update(st, l.kv_lens.data(), l.kv_lens.size() * sizeof(int32_t));
  const XXH128_hash_t h = XXH3_128bits_digest(st);
  XXH3_freeState(st);
  return absl::MakeUint128(h.high64, h.low64);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Runtime>> Runtime::Create(const mlajit_runtime_options_t* options) {
  mlajit_runtime_options_t defaults = MLAJIT_RUNTIME_OPTIONS_INIT;
  if (options == nullptr) options = &defaults;
  MLAJIT_RETURN_IF_ERROR(CheckStructSize(options->struct_size, sizeof(*options), "options"));
  std::unique_ptr<Runtime> rt(new Runtime());
  MLAJIT_ASSIGN_OR_RETURN(rt->backend_, gpu::DefaultBackend());
  MLAJIT_ASSIGN_OR_RETURN(int count, rt->backend_->DeviceCount());
  if (options->device_index < 0 || options->device_index >= count) {
    return absl::InvalidArgumentError(absl::StrCat("options.device_index=", options->device_index,
                                                   ": must be in 0..", count - 1, " (", count,
                                                   " devices visible)"));
  }
  rt->device_ = options->device_index;
  MLAJIT_ASSIGN_OR_RETURN(rt->props_, rt->backend_->GetDeviceProperties(rt->device_));
  {
    // griddepcontrol exists from sm_90 on; every kernel of the template waits
    // for its predecessor before touching memory, so this is safe to enable.
    const char* env = std::getenv("MLAJIT_PDL");
    const bool off = env != nullptr && std::string(env) == "0";
    // "sm_90a" -> 90, "sm_100a" -> 100.
    absl::string_view digits = absl::string_view(rt->props_.arch).substr(3);
    digits = digits.substr(0, digits.find_first_not_of("0123456789"));
    int sm = 0;
    rt->pdl_ = !off && rt->props_.vendor == gpu::Vendor::kNvidia &&
               absl::StartsWith(rt->props_.arch, "sm_") && absl::SimpleAtoi(digits, &sm) &&
               sm >= 90;
  }
  {
    // Tensor-map copies of whole KV tiles (fp8 on the sm_90a paths that stage
    // tiles as stored, bf16 on the swap-AB and 64-row paths;
    // MlaKvTensorMapsEligible);
    // MLAJIT_KV_TMA=0 keeps every copy on cp.async, for comparison.
    const char* env = std::getenv("MLAJIT_KV_TMA");
    const bool off = env != nullptr && std::string(env) == "0";
    if (!off && rt->props_.vendor == gpu::Vendor::kNvidia) {
      gpu::Backend* backend = rt->backend_;
      rt->kv_tensor_maps_ = std::make_unique<plan::KvTensorMaps>(
          [backend](const gpu::TensorMap2D& m, void* out) {
            return backend->EncodeTensorMap2D(m, out);
          });
    }
  }
  MLAJIT_ASSIGN_OR_RETURN(cache::CacheOptions cache_options, ResolveCacheOptions(options->cache, "mlajit_runtime_create"));
  MLAJIT_ASSIGN_OR_RETURN(rt->compiler_, jit::KernelCompiler::Shared(cache_options));
  {
    const char* env = std::getenv("MLAJIT_TUNED");
    rt->use_tuning_ = env == nullptr || std::string(env) != "0";
    rt->tuning_ = std::make_unique<tune::TuningTable>(cache_options.library_version);
    if (!cache_options.memory_only) rt->tuning_dir_ = cache_options.cache_dir;
    // The prebuilt layer first, so that this machine's own records win.
    for (const std::string& dir : {cache_options.prebuilt_dir, rt->tuning_dir_}) {
      if (dir.empty()) continue;
      absl::StatusOr<int> n = rt->tuning_->Load(dir);
      if (!n.ok()) {
        MLAJIT_LOG_WARN("tuning records in ", dir, " not read: ", n.status().message());
      } else if (*n > 0) {
        MLAJIT_LOG_INFO(*n, " tuning records from ", dir);
      }
    }
  }
  MLAJIT_LOG_INFO("runtime on device ", rt->device_, ": ", rt->props_.name, " (", rt->props_.arch,
                  ", ", rt->props_.sm_count, " SMs)");
  return rt;
}

Runtime::~Runtime() {
  absl::MutexLock lock(&kernels_mu_);
  for (auto& [spec, k] : kernels_) {
    absl::Status s = backend_->UnloadModule(device_, k->module);
    if (!s.ok()) MLAJIT_LOG_WARN("unloading ", jit::SpecName(spec), ": ", s.message());
  }
}

absl::Status Runtime::CheckDevicePointer(const void* p, const char* name) const {
  const int owner = backend_->PointerDevice(p);
  if (owner < 0 || owner == device_) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      name, "=0x", absl::Hex(reinterpret_cast<uintptr_t>(p)), ": memory of device ", owner,
      ", but this plan runs on device ", device_, ": pass buffers allocated on device ", device_));
}

absl::StatusOr<const LoadedKernel*> Runtime::GetKernel(const jit::KernelSpec& spec,
                                                       int smem_bytes) {
  absl::MutexLock lock(&kernels_mu_);
  if (auto it = kernels_.find(spec); it != kernels_.end()) return it->second.get();
  MLAJIT_ASSIGN_OR_RETURN(std::shared_ptr<const cache::CacheEntry> entry,
                          compiler_->GetBinary(spec));
  auto k = std::make_unique<LoadedKernel>();
  k->spec = spec;
  k->threads = spec.num_warps * 32;
  k->smem_bytes = smem_bytes;
  k->kv_tensor_maps = kv_tensor_maps_ != nullptr &&
                      plan::CopiesKvByTensorMaps(spec.arch, spec.kv_format, spec.block_m,
                                                 spec.block_n, spec.num_warps, spec.page_size);
  k->timeline = jit::KernelCompiler::StampsTimelines();
  const auto* bytes = reinterpret_cast<const uint8_t*>(entry->payload.data());
  MLAJIT_ASSIGN_OR_RETURN(k->module,
                          backend_->LoadModule(device_, {bytes, entry->payload.size()}));
  auto fail = [&](absl::Status s) {
    (void)backend_->UnloadModule(device_, k->module);
    return s;
  };
  // Every kernel of the module, in KernelCompiler::ModuleEntryPoints' order.
  gpu::FunctionHandle* const handles[] = {&k->decode,     &k->combine,     &k->combine_w4,
                                          &k->combine_w8, &k->combine_w16, &k->planner};
  const auto names = jit::KernelCompiler::ModuleEntryPoints(spec);
  static_assert(std::tuple_size_v<decltype(names)> == std::size(handles));
  for (size_t i = 0; i < names.size(); ++i) {
    auto f = backend_->GetFunction(k->module, names[i]);
    if (!f.ok()) return fail(f.status());
    *handles[i] = *f;
  }
  if (smem_bytes > props_.max_shared_memory_per_block_optin) {
    return fail(absl::UnimplementedError(absl::StrCat(
        jit::SpecName(spec), " needs ", smem_bytes, " bytes of shared memory; ", props_.name,
        " allows ", props_.max_shared_memory_per_block_optin)));
  }
  if (smem_bytes > 48 * 1024) {
    if (auto s = backend_->SetMaxDynamicSharedMemory(k->decode, smem_bytes); !s.ok()) return fail(s);
  }
  const LoadedKernel* result = k.get();
  kernels_.emplace(spec, std::move(k));
  return result;
}

tune::TuningKey Runtime::TuningKeyFor(const mlajit_plan_config_t& config, int max_q_len,
                                      const plan::BatchWork* work) const {
  tune::TuningKey k;
  k.device = props_.name;
  k.arch = props_.arch;
  k.sm_count = props_.sm_count;
  k.kv_format = static_cast<int>(config.kv_format);
  k.q_mode = static_cast<int>(config.q_mode);
  k.page_size = config.page_size;
  k.rows = max_q_len * config.num_heads;
  k.work_bucket = tune::WorkBucket(work);
  return k;
}

absl::StatusOr<plan::TileShape> Runtime::ChooseTiles(const mlajit_plan_config_t& config,
                                                     int max_q_len, const plan::BatchWork* work,
                                                     bool* tuned) const {
  const KvFormat format = static_cast<KvFormat>(config.kv_format);
  std::optional<plan::TileShape> record;
  if (use_tuning_) {
    if (std::optional<tune::TuningRecord> r = tuning_->Find(TuningKeyFor(config, max_q_len, work))) {
      absl::StatusOr<plan::TileShape> shape = plan::CompleteTileShape(props_.arch, format, r->shape);
      if (shape.ok()) {
        record = *shape;
      } else {
        MLAJIT_LOG_WARN("tuning record for ", tune::KeyName(r->key), " ignored: ",
                        shape.status().message());
      }
    }
  }
  MLAJIT_ASSIGN_OR_RETURN(
      plan::TileShape t,
      plan::ChooseTilesWithOverrides(props_.arch, max_q_len * config.num_heads, format, work,
                                     record.has_value() ? &*record : nullptr, config.page_size));
  // Tuned: the plan runs the record's shape (the knobs may have replaced it).
  if (tuned != nullptr) *tuned = record.has_value() && tune::SameShape(t, *record);
  return t;
}

std::vector<absl::Status> Runtime::Precompile(const std::vector<jit::KernelSpec>& specs) {
  std::vector<absl::Status> results(specs.size());
  std::vector<std::thread> threads;
  const size_t workers = std::max<size_t>(
      1, std::min<size_t>(specs.size(), std::max(1u, std::thread::hardware_concurrency())));
  std::atomic<size_t> next{0};
  for (size_t w = 0; w < workers; ++w) {
    threads.emplace_back([&] {
      for (size_t i = next++; i < specs.size(); i = next++) {
        results[i] = compiler_->GetBinary(specs[i]).status();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

absl::StatusOr<std::shared_ptr<const plan::Schedule>> Runtime::GetSchedule(
    const plan::LayoutView& layout, const plan::ScheduleConfig& config) {
  const absl::uint128 key = HashLayout(layout, config);
  {
    absl::MutexLock lock(&schedules_mu_);
    if (auto it = schedules_.find(key); it != schedules_.end()) return it->second;
  }
  MLAJIT_ASSIGN_OR_RETURN(plan::Schedule s, plan::BuildSchedule(layout, config));
  auto shared = std::make_shared<const plan::Schedule>(std::move(s));
  absl::MutexLock lock(&schedules_mu_);
  // Bounded: a serving engine sees a new layout every step; keep the recent ones.
  if (schedules_.size() >= 256) schedules_.clear();
  schedules_.emplace(key, shared);
  return shared;
}

jit::KernelSpec SpecFor(const mlajit_plan_config_t& config, int max_q_len,
                        const plan::TileShape& tiles, const std::string& arch) {
  jit::KernelSpec spec;
  spec.num_heads = config.num_heads;
  spec.max_q_len = max_q_len;
  spec.kv_format = static_cast<KvFormat>(config.kv_format);
  spec.q_mode = static_cast<QMode>(config.q_mode);
  spec.page_size = config.page_size;
  spec.causal = config.causal != 0;
  spec.write_lse = config.write_lse != 0;
  spec.block_m = tiles.block_m;
  spec.block_n = tiles.block_n;
  spec.num_warps = tiles.num_warps;
  spec.num_stages = tiles.num_stages;
  spec.arch = arch;
  return spec;
}

absl::Status Plan::Prepare(Runtime* runtime, const mlajit_plan_config_t& config,
                          int max_q_len, const plan::BatchWork* work,
                          const plan::TileShape* forced) {
  runtime_ = runtime;
  config_ = config;
  const gpu::DeviceProperties& props = runtime->properties();
  bool tuned = false;
  plan::TileShape tiles;
  if (forced != nullptr) {
    tiles = *forced;
  } else {
    MLAJIT_ASSIGN_OR_RETURN(tiles, runtime->ChooseTiles(config, max_q_len, work, &tuned));
  }
  absl::StatusOr<const LoadedKernel*> kernel =
      runtime->GetKernel(SpecFor(config, max_q_len, tiles, props.arch), tiles.smem_bytes);
  if (!kernel.ok() && tuned) {
    // A tuned shape whose kernel this process cannot get (a cache shipped
    // without it, with JIT disabled): the policy's shape still serves.
    MLAJIT_LOG_WARN("tuned tiles ", tune::ShapeName(tiles), " unavailable (",
                    kernel.status().message(), "); using the tile policy's");
    tiles = plan::ChooseTiles(props.arch, max_q_len * config.num_heads,
                              static_cast<KvFormat>(config.kv_format), work, config.page_size);
    tuned = false;
    kernel = runtime->GetKernel(SpecFor(config, max_q_len, tiles, props.arch), tiles.smem_bytes);
  }
  MLAJIT_RETURN_IF_ERROR(kernel.status());
  kernel_ = *kernel;
  tuned_ = tuned;
  schedule_config_ = plan::ScheduleConfigFor(tiles, props.sm_count);
  MLAJIT_ASSIGN_OR_RETURN(device_plan_,
                          plan::DevicePlan::Create(runtime->backend(), runtime->device()));
  return absl::OkStatus();
}

std::string Plan::DescribeJson() const {
  const jit::KernelSpec& s = kernel_->spec;
  return absl::StrCat("{\"kernel\":\"", jit::SpecName(s), "\",\"block_m\":", s.block_m,
                      ",\"block_n\":", s.block_n, ",\"num_warps\":", s.num_warps,
                      ",\"num_stages\":", s.num_stages,
                      ",\"num_ctas\":", schedule_config_.num_ctas,
                      ",\"min_split_cost\":", schedule_config_.min_cost_per_cta,
                      ",\"tuned\":", tuned_ ? "true" : "false",
                      ",\"kv_tensor_maps\":",
                      kernel_->kv_tensor_maps && runtime_->kv_tensor_maps()->enabled() ? "true"
                                                                                       : "false",
                      "}");
}

absl::StatusOr<HostLayout> CheckHostLayout(const mlajit_plan_config_t* config, int batch_size,
                                           const int32_t* qo_indptr, const int32_t* kv_indptr,
                                           const int32_t* kv_lens) {
  MLAJIT_RETURN_IF_ERROR(ValidatePlanConfig(config));
  MLAJIT_RETURN_IF_ERROR(ValidatePlanInputs(*config, batch_size, qo_indptr, kv_indptr, kv_lens));
  HostLayout h;
  h.view.num_heads = config->num_heads;
  h.view.page_size = config->page_size;
  h.view.causal = config->causal != 0;
  h.view.qo_indptr = {qo_indptr, static_cast<size_t>(batch_size) + 1};
  h.view.kv_indptr = {kv_indptr, static_cast<size_t>(batch_size) + 1};
  if (kv_lens != nullptr) h.view.kv_lens = {kv_lens, static_cast<size_t>(batch_size)};
  MLAJIT_RETURN_IF_ERROR(plan::ValidateLayout(h.view));
  for (int b = 0; b < batch_size; ++b) {
    h.max_q_len = std::max(h.max_q_len, qo_indptr[b + 1] - qo_indptr[b]);
  }
  return h;
}

absl::StatusOr<std::unique_ptr<Plan>> Plan::Create(Runtime* runtime,
                                                   const mlajit_plan_config_t* config,
                                                   int batch_size, const int32_t* qo_indptr,
                                                   const int32_t* kv_indptr,
                                                   const int32_t* kv_lens,
                                                   const plan::TileShape* forced) {
  if (runtime == nullptr) return absl::InvalidArgumentError("runtime is null");
  MLAJIT_ASSIGN_OR_RETURN(HostLayout layout,
                          CheckHostLayout(config, batch_size, qo_indptr, kv_indptr, kv_lens));
  std::unique_ptr<Plan> p(new Plan());
  const plan::BatchWork work = plan::MeasureBatch(layout.view, runtime->properties().sm_count);
  MLAJIT_RETURN_IF_ERROR(p->Prepare(runtime, *config, layout.max_q_len, &work, forced));
  MLAJIT_ASSIGN_OR_RETURN(p->schedule_, runtime->GetSchedule(layout.view, p->schedule_config_));
  MLAJIT_RETURN_IF_ERROR(p->device_plan_->Upload(*p->schedule_, p->schedule_config_.block_m));
  p->kv_extent_ = kv_indptr[batch_size];
  return p;
}

absl::StatusOr<std::unique_ptr<Plan>> Plan::CreateDevicePlanned(
    Runtime* runtime, const mlajit_plan_config_t* config, const mlajit_plan_limits_t* limits) {
  if (runtime == nullptr) return absl::InvalidArgumentError("runtime is null");
  MLAJIT_RETURN_IF_ERROR(ValidatePlanConfig(config));
  std::unique_ptr<Plan> p(new Plan());
  MLAJIT_ASSIGN_OR_RETURN(p->limits_, ReadPlanLimits(limits));
  const mlajit_plan_limits_t& lim = p->limits_;
  // With a length hint the tiles are chosen as a host plan would choose them
  // for the largest batch the limits allow; without one, as for a large batch.
  std::optional<plan::BatchWork> bound;
  if (lim.kv_len_hint > 0) {
    bound = plan::BoundBatch(lim.max_batch_size, lim.max_q_len, config->num_heads, lim.kv_len_hint,
                             runtime->properties().sm_count);
  }
  MLAJIT_RETURN_IF_ERROR(
      p->Prepare(runtime, *config, lim.max_q_len, bound.has_value() ? &*bound : nullptr, nullptr));
  MlaScheduleShape shape{};
  shape.num_heads = config->num_heads;
  shape.block_m = p->schedule_config_.block_m;
  const int64_t max_tiles = int64_t{lim.max_batch_size} * MlaTilesOfSequence(lim.max_q_len, shape);
  MLAJIT_RETURN_IF_ERROR(p->device_plan_->ReserveForDevicePlanner(
      lim.max_batch_size, max_tiles, p->schedule_config_.num_ctas, p->schedule_config_.block_m));
  MLAJIT_LOG_INFO("device-planned plan: up to ", lim.max_batch_size,
                  " sequences of q_len <= ", lim.max_q_len,
                  lim.kv_len_hint > 0 ? absl::StrCat(", tiles for kv_len ", lim.kv_len_hint) : "",
                  ", ", p->device_plan_->device_bytes(), " bytes of metadata");
  return p;
}

absl::Status Plan::Update(int batch_size, const int32_t* qo_indptr, const int32_t* kv_indptr,
                          const int32_t* kv_lens, void* stream) const {
  if (!device_planned()) {
    return absl::FailedPreconditionError(
        "mlajit_plan_update_async: the plan was built from host arrays (mlajit_plan_create); "
        "build it with mlajit_plan_create_device to update it on the device");
  }
  MLAJIT_RETURN_IF_ERROR(
      ValidatePlanUpdate(config_, limits_, batch_size, qo_indptr, kv_indptr, kv_lens));
  MLAJIT_RETURN_IF_ERROR(runtime_->CheckDevicePointer(qo_indptr, "qo_indptr"));
  MLAJIT_RETURN_IF_ERROR(runtime_->CheckDevicePointer(kv_indptr, "kv_indptr"));
  MLAJIT_RETURN_IF_ERROR(runtime_->CheckDevicePointer(kv_lens, "kv_lens"));
  MLAJIT_RETURN_IF_ERROR(runtime_->backend()->CheckStream(runtime_->device(), stream));
  MlaPlanParams pp{};
  device_plan_->FillPlannerParams(&pp);
  pp.qo_indptr = qo_indptr;
  pp.kv_indptr = kv_indptr;
  pp.kv_lens = kv_lens;
  pp.batch_size = batch_size;
  pp.max_q_len = limits_.max_q_len;
  pp.min_cost_per_cta = schedule_config_.min_cost_per_cta;
  void* params[] = {&pp};
  gpu::LaunchConfig launch;
  launch.block_x = kPlannerThreads;
  launch.programmatic_dependent = runtime_->programmatic_dependent_launch();
  return runtime_->backend()->Launch(runtime_->device(), kernel_->planner, launch, params, stream);
}

absl::Status Plan::CheckUpdate(void* stream) const {
  if (!device_planned()) {
    return absl::FailedPreconditionError(
        "mlajit_plan_check_update: the plan was built from host arrays; nothing to check");
  }
  int32_t c[MLA_PLAN_NUM_COUNTERS] = {};
  MLAJIT_RETURN_IF_ERROR(device_plan_->ReadCounters(c, stream));
  const int b = c[MLA_PLAN_ERROR_INDEX], v = c[MLA_PLAN_ERROR_VALUE];
  switch (c[MLA_PLAN_ERROR]) {
    case MLA_PLAN_OK:
      return absl::OkStatus();
    case MLA_PLAN_BAD_INDPTR_START:
      return absl::InvalidArgumentError(absl::StrCat(
          "device layout: qo_indptr[0] or kv_indptr[0] = ", v, ": must be 0 (schedule left empty)"));
    case MLA_PLAN_BAD_Q_LEN:
      return absl::InvalidArgumentError(absl::StrCat(
          "device layout: q_len of sequence ", b, " = ", v, ": must be in 0..",
          limits_.max_q_len, " (limits.max_q_len; schedule left empty)"));
    case MLA_PLAN_BAD_KV_SPAN:
      return absl::InvalidArgumentError(absl::StrCat(
          "device layout: kv_indptr[", b + 1, "] - kv_indptr[", b, "] = ", v,
          ": must be >= 0 (schedule left empty)"));
    case MLA_PLAN_BAD_KV_LEN:
      return absl::InvalidArgumentError(absl::StrCat(
          "device layout: kv_lens[", b, "] = ", v, ": must be in 0..(pages of sequence ", b,
          ") * page_size ", config_.page_size, " (schedule left empty)"));
    default:
      return absl::InternalError(absl::StrCat("device planner reported unknown error ",
                                              c[MLA_PLAN_ERROR]));
  }
}

absl::Status Plan::ValidateArgs(const mlajit_decode_args_t* a) const {
  // A device-planned plan's layout is on the device: its rows are checked as
  // non-empty and its KV extent not at all.
  const int64_t kv_tokens = device_planned() || config_.page_size != 0 ? 0 : kv_extent_;
  MLAJIT_RETURN_IF_ERROR(ValidateDecodeArgs(a, config_, query_rows(), kv_tokens));
  // Which device each buffer lives on: one driver query per pointer (well under
  // a microsecond each), worth it because a fault would poison the context.
  MLAJIT_RETURN_IF_ERROR(runtime_->CheckDevicePointer(a->q, "args.q"));
  MLAJIT_RETURN_IF_ERROR(runtime_->CheckDevicePointer(a->kv, "args.kv"));
  MLAJIT_RETURN_IF_ERROR(runtime_->CheckDevicePointer(a->kv_indices, "args.kv_indices"));
  MLAJIT_RETURN_IF_ERROR(runtime_->CheckDevicePointer(a->out, "args.out"));
  return runtime_->CheckDevicePointer(a->lse, "args.lse");
}

absl::Status Plan::Decode(const mlajit_decode_args_t* a, void* stream) const {
  MLAJIT_RETURN_IF_ERROR(ValidateArgs(a));
  MLAJIT_RETURN_IF_ERROR(runtime_->backend()->CheckStream(runtime_->device(), stream));
  const int64_t total_q = query_rows();
  if (total_q == 0) return absl::OkStatus();
  gpu::Backend* b = runtime_->backend();
  const int device = runtime_->device();
  MlaDecodeParams p{};
  p.q = a->q;
  p.kv = a->kv;
  p.kv_indices = a->kv_indices;
  p.out = a->out;
  p.lse = a->lse;
  device_plan_->FillParams(&p);
  p.sm_scale = config_.sm_scale;
  p.kv_scale = config_.kv_format == MLAJIT_KV_FORMAT_FP8_E4M3 ? a->kv_scale : 1.0f;
  p.kv_bytes = a->kv_bytes;
  if (kernel_->kv_tensor_maps) {
    runtime_->kv_tensor_maps()->Fill(
        a->kv, MlaWgmmaTokenStride(static_cast<int>(config_.kv_format)), &p);
  }
  void* params[] = {&p};
  const unsigned threads = static_cast<unsigned>(kernel_->threads);
  gpu::LaunchConfig decode;
  decode.grid_x = static_cast<unsigned>(p.num_ctas);
  decode.block_x = threads;
  decode.shared_memory_bytes = static_cast<unsigned>(kernel_->smem_bytes);
  decode.programmatic_dependent = runtime_->programmatic_dependent_launch();
  MLAJIT_RETURN_IF_ERROR(b->Launch(device, kernel_->decode, decode, params, stream));
  // (Timeline builds print their stamps from the merge kernel, so they run it
  // even when it has nothing to merge.)
  if (p.num_combine > 0 || kernel_->timeline) {
    gpu::LaunchConfig combine;
    // One 32-lane group per (combine item, row slot, column quarter).
    const long long groups = static_cast<long long>(p.num_combine) * kernel_->spec.block_m *
                             MLA_COMBINE_GROUPS_PER_ROW;
    const long long per_block = threads / 32;
    combine.grid_x = static_cast<unsigned>(std::clamp<long long>(
        (groups + per_block - 1) / per_block, 1,
        runtime_->properties().sm_count * static_cast<long long>(MlaCombineBlocksPerSm(threads))));
    combine.block_x = threads;
    combine.programmatic_dependent = runtime_->programmatic_dependent_launch();
    // A host-built plan's count is the real one, so the host picks the merge
    // of the width the kernel would pick (MlaCombineLaneColumns); a
    // device-planned one's is a capacity, so that merge picks it itself.
    const gpu::FunctionHandle merge =
        device_planned() ? kernel_->combine
                         : kernel_->MergeOfWidth(MlaCombineLaneColumns(
                               static_cast<long long>(p.num_combine) * kernel_->spec.block_m,
                               static_cast<long long>(combine.grid_x) * per_block));
    MLAJIT_RETURN_IF_ERROR(b->Launch(device, merge, combine, params, stream));
  }
  return absl::OkStatus();
}

}  // namespace mlajit::api_internal
