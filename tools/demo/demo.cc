// The main job (tools/dev demo): a sample DeepSeek-R1 decode step (TP8: 16 heads,
// fp8 KV) run through the CPU reference, then, where a GPU is present, through
// the JIT-compiled GPU kernel, checked against the reference and timed.
// (tools/dev demo then warms the kernel cache from the default manifest.)
//
//   mlajit_demo --batch 32 --kv-len 4096 --heads 16 --q-len 1 --kv-format fp8
//   (--kv-len and --kv_len are the same flag)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/base/mla_types.h"
#include "src/reference/batch_generator.h"
#include "src/reference/mla_reference.h"
#include "tools/harness/decode_harness.h"

ABSL_FLAG(int, batch, 32, "sequences in the batch");
ABSL_FLAG(int, kv_len, 4096, "max kv tokens per sequence (lengths uniform in [1, kv_len])");
ABSL_FLAG(bool, fixed_len, false, "all sequences exactly kv_len tokens");
ABSL_FLAG(int, heads, 16, "query heads (DeepSeek-R1: 128 / TP)");
ABSL_FLAG(int, q_len, 1, "query rows per sequence (1 = plain decode, >1 = MTP)");
ABSL_FLAG(std::string, kv_format, "fp8", "kv cache format: bf16, fp8 or mxfp4");
ABSL_FLAG(int, page_size, 64, "0 = flat layout, else 1, 16, 32, 64 or 128");
ABSL_FLAG(int, threads, 0, "reference threads (0 = all cores)");
ABSL_FLAG(uint64_t, seed, 20250101, "batch seed");

namespace mlajit {
namespace {

absl::StatusOr<reference::BatchConfig> ConfigFromFlags() {
  reference::BatchConfig c;
  c.batch_size = absl::GetFlag(FLAGS_batch);
  c.kv_len = absl::GetFlag(FLAGS_kv_len);
  c.num_heads = absl::GetFlag(FLAGS_heads);
  c.q_len = absl::GetFlag(FLAGS_q_len);
  c.page_size = absl::GetFlag(FLAGS_page_size);
  c.seed = absl::GetFlag(FLAGS_seed);
  c.lengths = absl::GetFlag(FLAGS_fixed_len) ? reference::LengthDistribution::kFixed
                                             : reference::LengthDistribution::kUniform;
  const std::string f = absl::GetFlag(FLAGS_kv_format);
  if (f == "bf16") c.kv_format = KvFormat::kBf16;
  else if (f == "fp8") c.kv_format = KvFormat::kFp8E4m3;
  else if (f == "mxfp4") c.kv_format = KvFormat::kMxfp4;
  else return absl::InvalidArgumentError(absl::StrCat("--kv_format=", f, ": must be bf16, fp8 or mxfp4"));
  if (c.batch_size < 1 || c.kv_len < 0 || c.num_heads < 1 || c.num_heads > kMaxHeads ||
      c.q_len < 1 || c.q_len > kMaxQLen || !IsValidPageSize(c.page_size)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--batch=%d --kv_len=%d --heads=%d --q_len=%d --page_size=%d: need batch >= 1, "
        "kv_len >= 0, heads in [1, 128], q_len in [1, 8], page_size 0/1/16/32/64/128",
        c.batch_size, c.kv_len, c.num_heads, c.q_len, c.page_size));
  }
  return c;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// The reference step: generate, decode on the CPU, summarise.
int RunReference(const reference::BatchConfig& cfg) {
  auto t0 = std::chrono::steady_clock::now();
  const reference::Batch batch = reference::GenerateBatch(cfg);
  const double gen_s = Seconds(t0);
  const int64_t rows = static_cast<int64_t>(batch.total_q()) * cfg.num_heads;
  int64_t tokens = 0;
  for (int b = 0; b < cfg.batch_size; ++b) tokens += batch.kv_len(b);
  std::printf("batch: %d sequences, %d query rows x %d heads, %lld kv tokens (%s, page_size %d)\n",
              cfg.batch_size, batch.total_q(), cfg.num_heads, static_cast<long long>(tokens),
              std::string(KvFormatName(cfg.kv_format)).c_str(), cfg.page_size);
  std::printf("bytes: q %.1f MB, kv cache %.1f MB (%d B/token), out %.1f MB bf16; generated in %.2f s\n",
              batch.q.size() * 2 / 1e6, batch.kv.size() / 1e6, KvBytesPerToken(cfg.kv_format),
              rows * kHeadDimV * 2 / 1e6, gen_s);

  std::vector<float> out(rows * kHeadDimV), lse(rows);
  t0 = std::chrono::steady_clock::now();
  const absl::Status st = reference::ReferenceDecode(batch.problem(), absl::MakeSpan(out),
                                                     absl::MakeSpan(lse), absl::GetFlag(FLAGS_threads));
  const double ref_s = Seconds(t0);
  if (!st.ok()) {
    std::fprintf(stderr, "reference failed: %s\n", st.ToString().c_str());
    return 1;
  }
  double sum = 0, sq = 0;
  for (float v : out) {
    sum += v;
    sq += static_cast<double>(v) * v;
  }
  float lo = INFINITY, hi = -INFINITY;
  for (float v : lse) {
    if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  }
  const double flops = 2.0 * tokens * cfg.num_heads * cfg.q_len * (kHeadDimQk + kHeadDimV);
  std::printf("reference: %.3f s (%.2f GFLOP/s in double), out sum %.6e, ||out|| %.6e, lse [%.4f, %.4f]\n",
              ref_s, flops / ref_s / 1e9, sum, std::sqrt(sq), lo, hi);
  return 0;
}

// The GPU step: the same batch through the public API, compared with the
// reference and timed with device events (median of 100 warm calls).
int RunGpu(const reference::BatchConfig& cfg) {
  auto h = harness::DecodeHarness::Create(0);
  if (!h.ok()) {
    std::printf("gpu: skipped (%s)\n", std::string(h.status().message()).c_str());
    return 0;
  }
  auto t0 = std::chrono::steady_clock::now();
  auto db = (*h)->Upload(cfg, /*write_lse=*/true);
  if (!db.ok()) {
    std::fprintf(stderr, "gpu: %s\n", db.status().ToString().c_str());
    return 1;
  }
  const double plan_s = Seconds(t0);
  auto r = (*h)->Check(**db, {});
  if (!r.ok()) {
    std::fprintf(stderr, "gpu: %s\n", r.status().ToString().c_str());
    return 1;
  }
  gpu::Backend* b = (*h)->backend();
  const int dev = (*h)->device();
  std::vector<double> us;
  for (int i = 0; i < 110; ++i) {
    auto e0 = b->CreateEvent(dev), e1 = b->CreateEvent(dev);
    if (!e0.ok() || !e1.ok()) break;
    (void)b->RecordEvent(dev, *e0, nullptr);
    mlajit_decode((*db)->plan, &(*db)->args, nullptr);
    (void)b->RecordEvent(dev, *e1, nullptr);
    (void)b->EventSynchronize(dev, *e1);
    auto ms = b->ElapsedMs(*e0, *e1);
    if (i >= 10 && ms.ok()) us.push_back(*ms * 1e3);
    (void)b->DestroyEvent(dev, *e0);
    (void)b->DestroyEvent(dev, *e1);
  }
  std::sort(us.begin(), us.end());
  const double tol = cfg.kv_format == KvFormat::kBf16 ? 5e-3 : 1e-2;
  std::printf("gpu: %s on %s; plan (incl. first compile/load) %.2f s; decode %.1f us (median)\n",
              r->out.Passes(tol) && r->lse.Passes(1e-3) ? "matches the reference" : "MISMATCH",
              mlajit_runtime_arch((*h)->runtime()), plan_s, us.empty() ? 0.0 : us[us.size() / 2]);
  std::printf("gpu: out %s\ngpu: lse %s\n", r->out.ToString().c_str(), r->lse.ToString().c_str());
  return r->out.Passes(tol) && r->lse.Passes(1e-3) ? 0 : 1;
}

}  // namespace
}  // namespace mlajit

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("mlajit demo: a DeepSeek-R1 MLA decode step on the CPU reference");
  // Accept --kv-len as well as --kv_len: absl flag names cannot hold dashes.
  std::vector<std::string> args(argv, argv + argc);
  std::vector<char*> argp;
  for (auto& a : args) {
    if (a.size() > 2 && a.compare(0, 2, "--") == 0) {
      for (size_t i = 2; i < a.size() && a[i] != '='; ++i) a[i] = a[i] == '-' ? '_' : a[i];
    }
    argp.push_back(a.data());
  }
  absl::ParseCommandLine(static_cast<int>(argp.size()), argp.data());
  const auto cfg = mlajit::ConfigFromFlags();
  if (!cfg.ok()) {
    std::fprintf(stderr, "%s\n", cfg.status().ToString().c_str());
    return 2;
  }
  const int ref = mlajit::RunReference(*cfg);
  if (ref != 0) return ref;
  return mlajit::RunGpu(*cfg);
}
