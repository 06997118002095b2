// decode_cpp.cc: decode_c.c's flow with the C++ layer (mlajit.hpp): RAII
// handles, absl::Status / absl::StatusOr instead of status codes.
//
// Opens a private kernel cache and prints its stats, creates a runtime on device
// 0, plans a batch of two sequences (100 and 64 cached tokens, 16 heads, bf16
// KV), decodes and checks the read-back output (all cached tokens are equal, so
// every output row is that token's first 512 dims). Without a GPU it says so
// and exits 0 after the cache part.
//
//   find_package(mlajit REQUIRED COMPONENTS cpp)      # finds abseil too
//   target_link_libraries(app PRIVATE mlajit::cpp)
//
// or, without the component, link mlajit::mlajit plus absl::status and
// absl::statusor yourself (the C library itself needs no abseil).
#include <stdlib.h>  // mkdtemp

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mlajit/mlajit.hpp"

#include "cuda_memory.h"

namespace {

constexpr int kHeads = 16;
constexpr int kTotalQ = 2;
constexpr int kTokens = 164;
constexpr int kLatent = 576;
constexpr int kValue = 512;
const std::vector<int32_t> kQoIndptr = {0, 1, 2};
const std::vector<int32_t> kKvIndptr = {0, 100, 164};

uint16_t ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return static_cast<uint16_t>(u >> 16);
}
float FromBf16(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
float Latent(int d) { return static_cast<float>(d % 17 - 8) / 8.0f; }

// Removes the temporary cache directory on every return path.
struct TempDir {
  std::string path;
  ~TempDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
};

bool PrintCacheStats(const mlajit_cache_options_t& options) {
  absl::StatusOr<mlajit::KernelCache> cache = mlajit::KernelCache::Open(&options);
  absl::StatusOr<std::string> stats =
      cache.ok() ? cache->StatsJson() : absl::StatusOr<std::string>(cache.status());
  if (!stats.ok()) {
    std::fprintf(stderr, "cache stats: %s\n", stats.status().ToString().c_str());
    return false;
  }
  std::printf("cache stats: %s\n", stats->c_str());
  return true;
}

int Fail(const char* what, const absl::Status& s) {
  std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
  return 1;
}

}  // namespace

int main() {
  std::printf("mlajit %s\n", mlajit_version());
  char dir_template[] = "/tmp/mlajit-example-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  TempDir dir{dir_template};
  mlajit_cache_options_t co = MLAJIT_CACHE_OPTIONS_INIT;
  co.cache_dir = dir.path.c_str();  // private, so that the example leaves nothing behind
  std::printf("kernel cache: %s\n", co.cache_dir);
  if (!PrintCacheStats(co)) return 1;

  absl::StatusOr<mlajit::Runtime> rt = mlajit::Runtime::Create(/*device_index=*/0, &co);
  if (absl::IsFailedPrecondition(rt.status())) {  // no GPU or driver
    std::printf("no GPU: %s\nskipping plan, decode and read-back\n",
                std::string(rt.status().message()).c_str());
    return 0;
  }
  if (!rt.ok()) return Fail("Runtime::Create", rt.status());

  mlajit_plan_config_t cfg = MLAJIT_PLAN_CONFIG_INIT;
  cfg.num_heads = kHeads;
  cfg.kv_format = MLAJIT_KV_FORMAT_BF16;
  cfg.sm_scale = 0.0721688f;  // 1/sqrt(192)
  absl::StatusOr<mlajit::Plan> plan = rt->CreatePlan(cfg, kQoIndptr, kKvIndptr);
  if (!plan.ok()) return Fail("CreatePlan", plan.status());

  // The caller owns device memory; here it comes from the CUDA driver.
  std::vector<uint16_t> q(kTotalQ * kHeads * kLatent), kv(kTokens * kLatent),
      out(kTotalQ * kHeads * kValue);
  for (size_t i = 0; i < q.size(); ++i) q[i] = ToBf16(static_cast<float>(i % 13) / 16.0f - 0.375f);
  for (size_t i = 0; i < kv.size(); ++i) kv[i] = ToBf16(Latent(static_cast<int>(i % kLatent)));
  cuda_memory cuda;
  if (!cuda_memory_open(&cuda)) {
    std::printf("runtime on %s but %s: skipping the decode\n", rt->arch().c_str(), cuda.error);
    return 0;
  }
  const size_t q_bytes = q.size() * 2, kv_bytes = kv.size() * 2, out_bytes = out.size() * 2;
  cu_deviceptr dq = cuda_alloc_copy(&cuda, q.data(), q_bytes);
  cu_deviceptr dkv = cuda_alloc_copy(&cuda, kv.data(), kv_bytes);
  cu_deviceptr dout = cuda_alloc_copy(&cuda, nullptr, out_bytes);
  if (dq == 0 || dkv == 0 || dout == 0) {
    std::fprintf(stderr, "cuMemAlloc/cuMemcpyHtoD failed\n");
    return 1;
  }

  mlajit_decode_args_t args = MLAJIT_DECODE_ARGS_INIT;
  args.q = reinterpret_cast<const void*>(static_cast<uintptr_t>(dq));
  args.kv = reinterpret_cast<const void*>(static_cast<uintptr_t>(dkv));
  args.kv_bytes = kv_bytes;
  args.out = reinterpret_cast<void*>(static_cast<uintptr_t>(dout));
  for (int layer = 0; layer < 61; ++layer) {  // one plan serves every layer of a step
    absl::Status s = plan->Decode(args, /*stream=*/nullptr);
    if (!s.ok()) return Fail("Plan::Decode", s);
  }
  std::printf("plan for %zu sequences on %s; 61 decodes enqueued\n", kQoIndptr.size() - 1,
              rt->arch().c_str());

  if (!cuda_copy_back(&cuda, out.data(), dout, out_bytes)) {
    std::fprintf(stderr, "cuCtxSynchronize/cuMemcpyDtoH failed\n");
    return 1;
  }
  int bad = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const float got = FromBf16(out[i]), want = Latent(static_cast<int>(i % kValue));
    const float err = got > want ? got - want : want - got;
    if (!(err <= 1.0f / 64)) ++bad;  // bf16 rounding of values in [-1, 1]; NaN counts
  }
  std::printf("read back out [%d, %d, %d]: out[0][0][0..3] = %g %g %g %g, %d of %zu values off\n",
              kTotalQ, kHeads, kValue, FromBf16(out[0]), FromBf16(out[1]), FromBf16(out[2]),
              FromBf16(out[3]), bad, out.size());
  cuda.mem_free(dq);
  cuda.mem_free(dkv);
  cuda.mem_free(dout);
  if (!PrintCacheStats(co)) return 1;  // now holds the compiled kernel
  return bad == 0 ? 0 : 1;
}
