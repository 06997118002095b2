#include "src/plan/kv_tensor_maps.h"

#include <utility>

#include "src/base/log.h"

namespace mlajit::plan {

static_assert(sizeof(MlaTensorMap) == gpu::kTensorMapBytes, "MlaTensorMap is a CUtensorMap");

std::array<gpu::TensorMap2D, 2> KvTensorMapDescs(const void* kv, int token_bytes) {
  gpu::TensorMap2D blocks;
  blocks.base = kv;
  blocks.cols = static_cast<uint64_t>(token_bytes);
  blocks.rows = kKvMapRows;
  blocks.row_stride = static_cast<uint64_t>(token_bytes);
  blocks.box_cols = 128;
  blocks.box_rows = 64;
  blocks.swizzle = 128;
  gpu::TensorMap2D rope = blocks;
  rope.box_cols = 64;
  rope.swizzle = 64;
  return {blocks, rope};
}

KvTensorMaps::KvTensorMaps(Encode encode)
    : encode_(std::move(encode)), maps_(new Maps[kMaxBuffers]) {}

void KvTensorMaps::Fill(const void* kv, int token_bytes, MlaDecodeParams* p) {
  p->kv_map_rows = 0;
  const Key key{kv, token_bytes};
  absl::MutexLock lock(&mu_);
  if (disabled_) return;
  int slot = 0;
  while (slot < used_ && keys_[slot] != key) ++slot;
  if (slot == used_) {
    if (used_ < kMaxBuffers) {
      ++used_;
    } else {
      slot = oldest_;
      oldest_ = (oldest_ + 1) % kMaxBuffers;
    }
    keys_[slot] = Key{};  // until both maps are in
    const std::array<gpu::TensorMap2D, 2> descs = KvTensorMapDescs(kv, token_bytes);
    for (int i = 0; i < 2; ++i) {
      ++encodes_;
      if (absl::Status s = encode_(descs[i], &maps_[slot].map[i]); !s.ok()) {
        // Not the caller's error: kv passed validation (16-byte aligned). The
        // tiles still copy, by cp.async.
        MLAJIT_LOG_WARN("KV tiles copy without tensor maps: ", s.message());
        disabled_ = true;
        return;
      }
    }
    keys_[slot] = key;
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
