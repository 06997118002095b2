// The per-call tensor maps of kernels that copy KV tiles by TMA
// (MlaKvTensorMapsEligible): two maps over the caller's KV buffer, encoded by
// the backend on the host and cached by buffer address, since an engine
// passes the same few buffers (one per layer) on every step.
//
//   KvTensorMaps maps([b](const gpu::TensorMap2D& m, void* out) {
//     return b->EncodeTensorMap2D(m, out);
//   });
//   maps.Fill(args->kv, 576, &params);  // kv_map_rows > 0: the kernel may use them
#ifndef MLAJIT_SRC_PLAN_KV_TENSOR_MAPS_H_
#define MLAJIT_SRC_PLAN_KV_TENSOR_MAPS_H_

#include <array>
#include <cstddef>
#include <functional>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "kernel_templates/mla_params.h"
#include "src/gpu/backend.h"

namespace mlajit::plan {

// The maps of MlaDecodeParams::kv_maps for a KV buffer at `kv` whose tokens
// take `token_bytes` (MlaWgmmaTokenStride: 576 fp8, 1152 bf16): [0]
// 128-byte boxes with the 128-byte swizzle (fp8: the four blocks of 128
// latent codes; bf16: the nine blocks of 64 dims), [1] 64-byte boxes with
// the 64-byte swizzle (fp8: the 64 rope codes), both over rows of
// token_bytes, 64 rows per box and kKvMapRows rows in all.
std::array<gpu::TensorMap2D, 2> KvTensorMapDescs(const void* kv, int token_bytes);

// Rows the maps span: every slot an int32 coordinate reaches. The kernel only
// copies whole tiles of a sequence through them, which lie inside the
// caller's buffer, so the bound never lets a copy read beyond it.
constexpr int kKvMapRows = 0x7fffffff;

class KvTensorMaps {
 public:
  using Encode = std::function<absl::Status(const gpu::TensorMap2D&, void*)>;
  // Buffers remembered at most (an engine has one per layer); past that each
  // new buffer replaces the one remembered longest.
  static constexpr int kMaxBuffers = 128;

  // Allocates the cache here: Fill, on the decode path, allocates nothing.
  explicit KvTensorMaps(Encode encode);

  // Sets p->kv_maps and p->kv_map_rows for `kv` (tokens of `token_bytes`),
  // or leaves kv_map_rows 0 (the kernel then copies by cp.async) when the
  // backend cannot encode maps: the first such failure is logged and turns
  // encoding off for good.
  void Fill(const void* kv, int token_bytes, MlaDecodeParams* p);

  // False once an encode failed (every copy is then a cp.async).
  bool enabled() const;

  // Encoder calls so far (tests).
  int encodes() const;

 private:
  struct Maps {
    MlaTensorMap map[2];
  };
  // A buffer as one format sees it (the same address read as fp8 and as
  // bf16 needs maps of each).
  struct Key {
    const void* kv = nullptr;
    int token_bytes = 0;
    bool operator!=(const Key& o) const { return kv != o.kv || token_bytes != o.token_bytes; }
  };
  Encode encode_;
  mutable absl::Mutex mu_;
  bool disabled_ ABSL_GUARDED_BY(mu_) = false;
  int encodes_ ABSL_GUARDED_BY(mu_) = 0;
  // Slot i holds the maps of buffer keys_[i] (i < used_); keys apart from
  // the maps so that a lookup reads one kilobyte.
  std::array<Key, kMaxBuffers> keys_ ABSL_GUARDED_BY(mu_) = {};
  std::unique_ptr<Maps[]> maps_ ABSL_GUARDED_BY(mu_);
  int used_ ABSL_GUARDED_BY(mu_) = 0;
  int oldest_ ABSL_GUARDED_BY(mu_) = 0;  // the slot a new buffer takes once all are used
};

}  // namespace mlajit::plan

#endif  // MLAJIT_SRC_PLAN_KV_TENSOR_MAPS_H_
