#include "src/plan/kv_tensor_maps.h"

#include <utility>

#include "src/base/log.h"

namespace mlajit::plan {

static_assert(sizeof(MlaTensorMap) == gpu::kTensorMapBytes, "MlaTensorMap is a CUtensorMap");

std::array<gpu::TensorMap2D, 2> KvTensorMapDescs(const void* kv) {
  constexpr int kTokenBytes = 576;  // fp8: 512 latent + 64 rope codes
  gpu::TensorMap2D latent;
  latent.base = kv;
  latent.cols = kTokenBytes;
  latent.rows = kKvMapRows;
  latent.row_stride = kTokenBytes;
  latent.box_cols = 128;
  latent.box_rows = 64;
  latent.swizzle = 128;
  gpu::TensorMap2D rope = latent;
  rope.box_cols = 64;
  rope.swizzle = 64;
  return {latent, rope};
}

KvTensorMaps::KvTensorMaps(Encode encode)
    : encode_(std::move(encode)), maps_(new Maps[kMaxBuffers]) {}

void KvTensorMaps::Fill(const void* kv, MlaDecodeParams* p) {
  p->kv_map_rows = 0;
  absl::MutexLock lock(&mu_);
  if (disabled_) return;
  int slot = 0;
  while (slot < used_ && keys_[slot] != kv) ++slot;
  if (slot == used_) {
    if (used_ < kMaxBuffers) {
      ++used_;
    } else {
      slot = oldest_;
      oldest_ = (oldest_ + 1) % kMaxBuffers;
    }
    keys_[slot] = nullptr;  // until both maps are in
    const std::array<gpu::TensorMap2D, 2> descs = KvTensorMapDescs(kv);
    for (int i = 0; i < 2; ++i) {
      ++encodes_;
      if (absl::Status s = encode_(descs[i], &maps_[slot].map[i]); !s.ok()) {
        // Not the caller's error: kv passed validation (16-byte aligned). The
        // tiles still copy, by cp.async.
        MLAJIT_LOG_WARN("fp8 KV tiles copy without tensor maps: ", s.message());
        disabled_ = true;
        return;
      }
    }
    keys_[slot] = kv;
  }
  p->kv_maps[0] = maps_[slot].map[0];
  p->kv_maps[1] = maps_[slot].map[1];
  p->kv_map_rows = kKvMapRows;
}

bool KvTensorMaps::enabled() const {
  absl::MutexLock lock(&mu_);
  return !disabled_;
}

int KvTensorMaps::encodes() const {
  absl::MutexLock lock(&mu_);
  return encodes_;
}

}  // namespace mlajit::plan
