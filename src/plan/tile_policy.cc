#include "src/plan/tile_policy.h"

#include <cstdlib>
#include <iterator>

#include "kernel_templates/mla_params.h"

namespace mlajit::plan {

int MaxDynamicSharedMemory(const std::string& arch) {
  const int sm = arch.rfind("sm_", 0) == 0 ? std::atoi(arch.c_str() + 3) : 0;
  if (sm == 80 || sm == 87) return 166912;   // A100-class: 163 KB
  if (sm >= 90) return 232448;               // Hopper and later: 227 KB
  if (sm >= 80) return 101376;               // sm_86 / sm_89: 99 KB
  return 48 * 1024;
}

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
  // Candidates (block_m, block_n, warps), best first. Warps split a tile's rows
  // into 16-row groups and each group's work over columns; every warp scores
  // >= 8 tokens. The first candidate whose double-buffered footprint fits the
  // architecture's shared memory (a table, not the device query, so that a build
  // machine warming a cache picks exactly what GPU servers will ask for) wins,
  // then takes as many stages (up to 4) as still fit.
  struct Candidate {
    int m, n, warps;
  };
  static constexpr Candidate kSmall[] = {{16, 64, 8}, {16, 32, 4}};
  static constexpr Candidate kMedium[] = {{32, 32, 8}, {32, 16, 4}};
  static constexpr Candidate kLarge[] = {{64, 32, 8}, {32, 32, 8}, {32, 16, 4}};
  const Candidate* begin = rows_per_sequence <= 16 ? kSmall : rows_per_sequence <= 32 ? kMedium : kLarge;
  const Candidate* end = rows_per_sequence <= 16 ? std::end(kSmall)
                         : rows_per_sequence <= 32 ? std::end(kMedium)
                                                   : std::end(kLarge);
  const int limit = MaxDynamicSharedMemory(arch);
  const int f = static_cast<int>(kv_format);
  for (const Candidate* c = begin; c != end; ++c) {
    if (MlaMmaSmemBytes(f, c->m, c->n, 2) > limit && c + 1 != end) continue;
    t.block_m = c->m;
    t.block_n = c->n;
    t.num_warps = c->warps;
    break;
  }
  for (t.num_stages = 4; t.num_stages > 2; --t.num_stages) {
    if (MlaMmaSmemBytes(f, t.block_m, t.block_n, t.num_stages) <= limit) break;
  }
  t.smem_bytes = MlaMmaSmemBytes(f, t.block_m, t.block_n, t.num_stages);
  return t;
}

}  // namespace mlajit::plan
