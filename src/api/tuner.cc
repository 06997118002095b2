#include "src/api/tuner.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/base/log.h"
#include "src/base/mla_types.h"
#include "src/base/status_macros.h"
#include "src/cache/kernel_cache.h"
#include "src/jit/json_util.h"
#include "src/plan/scheduler.h"
#include "src/reference/formats.h"
#include "src/tune/candidates.h"

namespace mlajit::api_internal {
namespace {

constexpr double kMargin = 0.02;       // a candidate must win by 2 % (mlajit.h)
constexpr double kMaxRelDiff = 1e-2;   // the tests' bar against the CPU reference
constexpr size_t kRotateBytes = size_t{256} << 20;  // KV read per rotation: > 4 x L2
constexpr int kMaxCopies = 64;
constexpr int kPatternTokens = 256;    // distinct synthetic tokens, repeated
constexpr int kTimingRounds = 5;       // the candidates are timed in turn, this often
constexpr float kFp8Range = 8.0f;      // fp8 codes span +-8; kv_scale brings them to +-1

// A device allocation freed on scope exit.
class DeviceBuffer {
 public:
  DeviceBuffer(gpu::Backend* b, int device) : backend_(b), device_(device) {}
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr_ != 0) (void)backend_->Free(device_, ptr_);
  }
  absl::Status Allocate(size_t bytes, const char* what) {
    absl::StatusOr<gpu::DevicePtr> p = backend_->Malloc(device_, std::max<size_t>(bytes, 16));
    if (!p.ok()) {
      return absl::ResourceExhaustedError(absl::StrCat("mlajit_tune: allocating ", bytes,
                                                       " bytes for the synthetic ", what, ": ",
                                                       p.status().message()));
    }
    ptr_ = *p;
    bytes_ = bytes;
    return absl::OkStatus();
  }
  gpu::DevicePtr ptr() const { return ptr_; }
  void* get() const { return reinterpret_cast<void*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  gpu::Backend* backend_;
  int device_;
  gpu::DevicePtr ptr_ = 0;
  size_t bytes_ = 0;
};

// Device events freed on scope exit.
class Events {
 public:
  Events(gpu::Backend* b, int device) : backend_(b), device_(device) {}
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  ~Events() {
    for (gpu::EventHandle e : events_) (void)backend_->DestroyEvent(device_, e);
  }
  absl::Status Create(int n) {
    for (int i = 0; i < n; ++i) {
      MLAJIT_ASSIGN_OR_RETURN(gpu::EventHandle e, backend_->CreateEvent(device_));
      events_.push_back(e);
    }
    return absl::OkStatus();
  }
  gpu::EventHandle operator[](int i) const { return events_[i]; }

 private:
  gpu::Backend* backend_;
  int device_;
  std::vector<gpu::EventHandle> events_;
};

// Random values in (-1, 1) encoded as the KV format stores them, one token
// after another.
std::vector<uint8_t> KvPattern(KvFormat f, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int bytes = KvBytesPerToken(f);
  std::vector<uint8_t> out(static_cast<size_t>(kPatternTokens) * bytes);
  float values[kHeadDimQk];
  for (int t = 0; t < kPatternTokens; ++t) {
    uint8_t* token = out.data() + static_cast<size_t>(t) * bytes;
    for (float& v : values) v = u(rng);
    switch (f) {
      case KvFormat::kBf16:
        for (int i = 0; i < kHeadDimQk; ++i) {
          const uint16_t b = reference::FloatToBf16(values[i]);
          token[2 * i] = static_cast<uint8_t>(b & 0xff);
          token[2 * i + 1] = static_cast<uint8_t>(b >> 8);
        }
        break;
      case KvFormat::kFp8E4m3:
        for (int i = 0; i < kHeadDimQk; ++i) {
          token[i] = reference::FloatToFp8E4m3(values[i] * kFp8Range);
        }
        break;
      case KvFormat::kMxfp4:
        reference::EncodeMxfp4Token(values, token);
        break;
    }
  }
  return out;
}

// Copies `pattern` over [dst, dst + bytes), repeated (the last copy cut short).
absl::Status FillRepeated(gpu::Backend* b, int device, gpu::StreamHandle stream,
                          gpu::DevicePtr dst, size_t bytes, const std::vector<uint8_t>& pattern) {
  constexpr size_t kChunk = size_t{8} << 20;
  std::vector<uint8_t> staging;
  staging.reserve(kChunk + pattern.size());
  while (staging.size() < std::min(kChunk, bytes)) {
    staging.insert(staging.end(), pattern.begin(), pattern.end());
  }
  // A chunk a whole number of patterns long, so that copies line up.
  const size_t chunk = std::min(bytes, staging.size() - staging.size() % pattern.size());
  for (size_t off = 0; off < bytes; off += chunk) {
    MLAJIT_RETURN_IF_ERROR(
        b->MemcpyHtoD(device, dst + off, staging.data(), std::min(chunk, bytes - off), stream));
  }
  return b->StreamSynchronize(device, stream);  // `staging` is freed on return
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? -1 : v[v.size() / 2];
}

// ||got - base|| / ||base|| over bf16 outputs; +inf when got has a
// non-finite value (the poison a missed row leaves, or a NaN).
double RelDiff(const std::vector<uint16_t>& got, const std::vector<uint16_t>& base) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = reference::Bf16ToFloat(got[i]), r = reference::Bf16ToFloat(base[i]);
    if (!std::isfinite(g)) return INFINITY;
    num += (g - r) * (g - r);
    den += r * r;
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// The synthetic inputs of one layout.
struct Inputs {
  Inputs(gpu::Backend* b, int d) : q(b, d), kv(b, d), indices(b, d), out(b, d), lse(b, d) {}
  DeviceBuffer q, kv, indices, out, lse;
  size_t kv_copy_bytes = 0;
  int copies = 1;
  float kv_scale = 1.0f;
};

absl::Status MakeInputs(Runtime* rt, const mlajit_plan_config_t& c, int batch_size,
                        const int32_t* qo_indptr, const int32_t* kv_indptr,
                        gpu::StreamHandle stream, Inputs* in) {
  gpu::Backend* b = rt->backend();
  const int dev = rt->device();
  const KvFormat f = static_cast<KvFormat>(c.kv_format);
  const size_t rows = static_cast<size_t>(qo_indptr[batch_size]) * c.num_heads;
  const size_t entries = static_cast<size_t>(kv_indptr[batch_size]);
  const size_t slots = c.page_size == 0 ? entries : entries * c.page_size;
  in->kv_copy_bytes = std::max<size_t>(slots * KvBytesPerToken(f), 16);
  const size_t budget = static_cast<size_t>(rt->properties().total_memory / 4);
  in->copies = static_cast<int>(std::clamp<size_t>(
      (kRotateBytes + in->kv_copy_bytes - 1) / in->kv_copy_bytes, 1,
      std::max<size_t>(1, std::min<size_t>(kMaxCopies, budget / in->kv_copy_bytes))));
  in->kv_scale = f == KvFormat::kFp8E4m3 ? 1.0f / kFp8Range : 1.0f;
  std::mt19937 rng(0x6d6c616a);
  MLAJIT_RETURN_IF_ERROR(in->kv.Allocate(in->kv_copy_bytes * in->copies, "KV"));
  MLAJIT_RETURN_IF_ERROR(
      FillRepeated(b, dev, stream, in->kv.ptr(), in->kv.bytes(), KvPattern(f, rng)));
  MLAJIT_RETURN_IF_ERROR(in->q.Allocate(rows * kHeadDimQk * 2, "Q"));
  MLAJIT_RETURN_IF_ERROR(
      FillRepeated(b, dev, stream, in->q.ptr(), in->q.bytes(), KvPattern(KvFormat::kBf16, rng)));
  MLAJIT_RETURN_IF_ERROR(in->out.Allocate(rows * kHeadDimV * 2, "output"));
  if (c.write_lse) MLAJIT_RETURN_IF_ERROR(in->lse.Allocate(rows * sizeof(float), "lse"));
  if (c.page_size != 0) {
    std::vector<int32_t> ids(std::max<size_t>(entries, 1));
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
    MLAJIT_RETURN_IF_ERROR(in->indices.Allocate(ids.size() * sizeof(int32_t), "page table"));
    MLAJIT_RETURN_IF_ERROR(
        b->MemcpyHtoD(dev, in->indices.ptr(), ids.data(), in->indices.bytes(), stream));
    MLAJIT_RETURN_IF_ERROR(b->StreamSynchronize(dev, stream));
  }
  return absl::OkStatus();
}

mlajit_decode_args_t ArgsFor(const Inputs& in, int copy) {
  mlajit_decode_args_t a = MLAJIT_DECODE_ARGS_INIT;
  a.q = in.q.get();
  a.kv = reinterpret_cast<const void*>(in.kv.ptr() + in.kv_copy_bytes * copy);
  a.kv_bytes = in.kv_copy_bytes;
  a.kv_scale = in.kv_scale;
  a.kv_indices = static_cast<const int32_t*>(in.indices.get());
  a.out = in.out.get();
  a.lse = static_cast<float*>(in.lse.get());
  return a;
}

// A candidate's plan and one poisoned call whose output is read back.
absl::StatusOr<std::unique_ptr<Plan>> CheckCandidate(
    Runtime* rt, const mlajit_plan_config_t& c, int batch_size, const int32_t* qo,
    const int32_t* kv, const int32_t* kv_lens, const Inputs& in, gpu::StreamHandle stream,
    const plan::TileShape& shape, std::vector<uint16_t>* out) {
  gpu::Backend* b = rt->backend();
  const int dev = rt->device();
  MLAJIT_ASSIGN_OR_RETURN(std::unique_ptr<Plan> plan,
                          Plan::Create(rt, &c, batch_size, qo, kv, kv_lens, &shape));
  MLAJIT_RETURN_IF_ERROR(b->MemsetD8(dev, in.out.ptr(), 0xff, in.out.bytes(), stream));  // NaN
  const mlajit_decode_args_t first = ArgsFor(in, 0);
  MLAJIT_RETURN_IF_ERROR(plan->Decode(&first, stream));
  out->resize(in.out.bytes() / 2);
  MLAJIT_RETURN_IF_ERROR(b->MemcpyDtoH(dev, out->data(), in.out.ptr(), in.out.bytes(), stream));
  MLAJIT_RETURN_IF_ERROR(b->StreamSynchronize(dev, stream));
  return plan;
}

// `calls` timed calls of one plan, appended to *us. Timed like the
// benchmark: calls back to back, an event pair around each, one
// synchronisation at the end, so that a call's time is the device's and not
// the host's launch latency into an idle GPU.
absl::Status TimeCalls(Runtime* rt, const Plan& plan, const Inputs& in, gpu::StreamHandle stream,
                       int warmup, int calls, std::vector<double>* us) {
  gpu::Backend* b = rt->backend();
  const int dev = rt->device();
  for (int i = 0; i < warmup; ++i) {
    const mlajit_decode_args_t a = ArgsFor(in, i % in.copies);
    MLAJIT_RETURN_IF_ERROR(plan.Decode(&a, stream));
  }
  Events ev(b, dev);
  MLAJIT_RETURN_IF_ERROR(ev.Create(2 * calls));
  for (int i = 0; i < calls; ++i) {
    const mlajit_decode_args_t a = ArgsFor(in, (warmup + i) % in.copies);
    MLAJIT_RETURN_IF_ERROR(b->RecordEvent(dev, ev[2 * i], stream));
    MLAJIT_RETURN_IF_ERROR(plan.Decode(&a, stream));
    MLAJIT_RETURN_IF_ERROR(b->RecordEvent(dev, ev[2 * i + 1], stream));
  }
  MLAJIT_RETURN_IF_ERROR(b->StreamSynchronize(dev, stream));
  for (int i = 0; i < calls; ++i) {
    MLAJIT_ASSIGN_OR_RETURN(float ms, b->ElapsedMs(ev[2 * i], ev[2 * i + 1]));
    us->push_back(ms * 1000.0);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TuneResult> Tune(Runtime* rt, const mlajit_plan_config_t* config, int batch_size,
                                const int32_t* qo_indptr, const int32_t* kv_indptr,
                                const int32_t* kv_lens, const TuneOptions& options) {
  if (rt == nullptr) return absl::InvalidArgumentError("runtime is null");
  MLAJIT_ASSIGN_OR_RETURN(HostLayout layout,
                          CheckHostLayout(config, batch_size, qo_indptr, kv_indptr, kv_lens));
  const mlajit_plan_config_t& c = *config;
  const int max_q_len = layout.max_q_len;
  if (qo_indptr[batch_size] == 0) {
    return absl::InvalidArgumentError(
        "mlajit_tune: the layout has no query rows (qo_indptr[batch_size] = 0): nothing to time");
  }
  const gpu::DeviceProperties& props = rt->properties();
  const plan::BatchWork work = plan::MeasureBatch(layout.view, props.sm_count);
  const KvFormat format = static_cast<KvFormat>(c.kv_format);

  TuneResult result;
  result.key = rt->TuningKeyFor(c, max_q_len, &work);
  // Shapes that differ only in a split floor that does not change this
  // batch's schedule would time the same calls twice.
  for (const plan::TileShape& t : tune::DropRepeatedSchedules(
           tune::Candidates(props.arch, max_q_len * c.num_heads, format, &work, c.page_size),
           layout.view, props.sm_count)) {
    result.candidates.push_back({t, absl::OkStatus(), -1, 0});
  }
  MLAJIT_LOG_INFO("tuning ", tune::KeyName(result.key), ": ", result.candidates.size(),
                  " candidate shapes");
  std::vector<jit::KernelSpec> specs;
  for (const CandidateOutcome& o : result.candidates) {
    specs.push_back(SpecFor(c, max_q_len, o.shape, props.arch));
  }
  const std::vector<absl::Status> compiled = rt->Precompile(specs);
  if (!compiled[0].ok()) return compiled[0];

  gpu::ScopedDeviceRestore restore(rt->backend());
  gpu::ScopedStream stream(rt->backend(), rt->device());
  MLAJIT_RETURN_IF_ERROR(stream.Create());
  Inputs in(rt->backend(), rt->device());
  MLAJIT_RETURN_IF_ERROR(MakeInputs(rt, c, batch_size, qo_indptr, kv_indptr, stream.get(), &in));

  // First every candidate's output against the default shape's, then the
  // timing in rounds that visit the candidates in turn, so that a drift of
  // clocks or temperature during the run spreads over all of them.
  std::vector<uint16_t> base, out;
  std::vector<std::unique_ptr<Plan>> plans(result.candidates.size());
  for (size_t i = 0; i < result.candidates.size(); ++i) {
    CandidateOutcome& o = result.candidates[i];
    o.status = compiled[i];
    if (o.status.ok()) {
      absl::StatusOr<std::unique_ptr<Plan>> p =
          CheckCandidate(rt, c, batch_size, qo_indptr, kv_indptr, kv_lens, in, stream.get(),
                         o.shape, i == 0 ? &base : &out);
      o.status = p.status();
      if (p.ok()) plans[i] = *std::move(p);
    }
    if (i == 0) {
      if (!o.status.ok()) return o.status;
      o.rel_diff = RelDiff(base, base);
      if (!std::isfinite(o.rel_diff)) {
        return absl::InternalError(absl::StrCat(
            "mlajit_tune: the default shape ", tune::ShapeName(o.shape),
            " wrote a non-finite output on synthetic inputs; nothing to compare with"));
      }
    } else if (o.status.ok()) {
      o.rel_diff = RelDiff(out, base);
      if (!(o.rel_diff <= kMaxRelDiff)) {
        o.status = absl::InternalError(absl::StrCat("output differs from the default shape's by ",
                                                    o.rel_diff, " (relative L2; bar ",
                                                    kMaxRelDiff, ")"));
      }
    }
    if (!o.status.ok()) plans[i].reset();
  }
  const int rounds = std::min(kTimingRounds, options.timed_calls);
  std::vector<std::vector<double>> samples(result.candidates.size());
  for (int round = 0; round < rounds; ++round) {
    // Round r times calls [r * n / rounds, (r + 1) * n / rounds).
    const int calls = (round + 1) * options.timed_calls / rounds -
                      round * options.timed_calls / rounds;
    for (size_t i = 0; i < result.candidates.size(); ++i) {
      CandidateOutcome& o = result.candidates[i];
      if (plans[i] == nullptr) continue;
      o.status = TimeCalls(rt, *plans[i], in, stream.get(), round == 0 ? options.warmup_calls : 1,
                           calls, &samples[i]);
      if (!o.status.ok()) {
        if (i == 0) return o.status;
        plans[i].reset();
      }
    }
  }
  std::vector<double> medians;
  for (size_t i = 0; i < result.candidates.size(); ++i) {
    CandidateOutcome& o = result.candidates[i];
    if (o.status.ok()) {
      o.median_us = Median(samples[i]);
    } else {
      MLAJIT_LOG_WARN("tuning ", tune::KeyName(result.key), ": ", tune::ShapeName(o.shape),
                      " skipped: ", o.status.message());
      o.median_us = -1;
    }
    medians.push_back(o.median_us);
  }
  result.chosen = tune::PickFastest(medians, kMargin);
  const CandidateOutcome& best = result.candidates[result.chosen];

  tune::TuningRecord record;
  record.key = result.key;
  record.shape = best.shape;
  record.median_ns = std::llround(best.median_us * 1000.0);
  record.default_ns = std::llround(result.candidates[0].median_us * 1000.0);
  record.candidates = static_cast<int>(std::count_if(
      result.candidates.begin(), result.candidates.end(),
      [](const CandidateOutcome& o) { return o.status.ok(); }));
  record.unix_s = static_cast<int64_t>(std::time(nullptr));
  record.library_version = cache::CacheOptions::LibraryVersion();
  rt->tuning().Put(record);
  if (options.device_plans) {
    record.key.work_bucket = tune::WorkBucket(nullptr);  // the key of plans sized by limits
    rt->tuning().Put(record);
  }
  MLAJIT_LOG_INFO("tuned ", tune::KeyName(result.key), ": ", tune::ShapeName(best.shape), " ",
                  best.median_us, " us (default ", result.candidates[0].median_us, " us)");
  if (options.persist && !rt->tuning_dir().empty()) {
    absl::Status s = rt->tuning().Save(rt->tuning_dir());
    if (s.ok()) {
      result.persisted = true;
    } else {
      MLAJIT_LOG_WARN("tuning record kept in memory only: ", s.message());
    }
  }
  return result;
}

std::string TuneResultJson(const TuneResult& r) {
  using jit::jit_internal::JsonQuote;
  std::string json = absl::StrCat("{\"class\":", JsonQuote(tune::KeyName(r.key)),
                                  ",\"chosen\":", r.chosen,
                                  ",\"persisted\":", r.persisted ? "true" : "false",
                                  ",\"candidates\":[");
  for (size_t i = 0; i < r.candidates.size(); ++i) {
    const CandidateOutcome& o = r.candidates[i];
    const plan::TileShape& t = o.shape;
    absl::StrAppend(&json, i ? "," : "", "{\"shape\":", JsonQuote(tune::ShapeName(t)),
                    ",\"block_m\":", t.block_m, ",\"block_n\":", t.block_n,
                    ",\"num_warps\":", t.num_warps, ",\"num_stages\":", t.num_stages,
                    ",\"ctas_per_sm\":", t.ctas_per_sm, ",\"min_split_cost\":", t.min_split_cost,
                    ",\"median_us\":", o.median_us, ",\"rel_diff\":", o.rel_diff,
                    ",\"status\":", JsonQuote(o.status.ok() ? "ok" : o.status.message()), "}");
  }
  absl::StrAppend(&json, "]}");
  return json;
}

}  // namespace mlajit::api_internal
