#include "src/plan/tile_policy.h"

#include <cstdlib>

#include "kernel_templates/mla_params.h"

namespace mlajit::plan {

bool HasTensorCorePath(const std::string& arch) {
  if (arch.rfind("sm_", 0) != 0) return false;
  return std::atoi(arch.c_str() + 3) >= 80;
}

TileShape ChooseTiles(const std::string& arch, int rows_per_sequence, KvFormat kv_format) {
  TileShape t;
  if (!HasTensorCorePath(arch)) {
    t.block_m = 16;
    t.block_n = 16;
    t.smem_bytes = MlaPortableSmemBytes(t.num_warps * 32);
    return t;
  }
  t.tensor_cores = true;
  // Eight warps split a tile's rows into 16-row groups and the rest of each
  // group's work over columns; each warp must score >= 8 tokens, hence BLOCK_N.
  if (rows_per_sequence <= 16) {
    t.block_m = 16;
    t.block_n = 64;
  } else if (rows_per_sequence <= 32) {
    t.block_m = 32;
    t.block_n = 32;
  } else {
    t.block_m = 64;
    t.block_n = 32;
  }
  t.smem_bytes = MlaMmaSmemBytes(static_cast<int>(kv_format), t.block_m, t.block_n);
  return t;
}

}  // namespace mlajit::plan
