// Chooses the kernel's tile shape for a batch: which path the target has
// (tensor cores on sm_80+, else the portable path) and how many query rows and
// KV tokens one CTA tile holds.
//
//   TileShape t = ChooseTiles("sm_90a", /*rows_per_sequence=*/16, KvFormat::kFp8E4m3);
//   spec.block_m = t.block_m; ...; launch with t.smem_bytes of dynamic shared memory.
#ifndef MLAJIT_SRC_PLAN_TILE_POLICY_H_
#define MLAJIT_SRC_PLAN_TILE_POLICY_H_

#include <string>

#include "absl/status/status.h"

#include "src/base/mla_types.h"

namespace mlajit::plan {

struct TileShape {
  int block_m = 16;
  int block_n = 64;
  int num_warps = 8;
  int num_stages = 2;
  int smem_bytes = 0;    // dynamic shared memory of the decode kernel
  int ctas_per_sm = 1;   // resident CTAs per SM: the persistent grid is sm_count * this
  // The scheduler's min_cost_per_cta (ScheduleConfig): the least work, in KV
  // tokens, worth splitting a tile for.
  int min_split_cost = 256;
  bool tensor_cores = false;
};

// Opt-in dynamic shared memory per block of an architecture, in bytes.
int MaxDynamicSharedMemory(const std::string& arch);

// True for NVIDIA targets with mma.sync bf16 (sm_80 and later).
bool HasTensorCorePath(const std::string& arch);

// True when the kernel of this shape runs the sm_90a warpgroup-MMA path
// (kernel_templates/mla_decode_wgmma.cuh) rather than mma.sync.
bool RunsWgmmaPath(const std::string& arch, KvFormat kv_format, int block_m, int block_n,
                   int num_warps);

// Dynamic shared memory the decode kernel of this shape needs on `arch`.
int DecodeSmemBytes(const std::string& arch, KvFormat kv_format, int block_m, int block_n,
                    int num_warps, int stages);

// rows_per_sequence: the largest q_len * num_heads of the batch.
TileShape ChooseTiles(const std::string& arch, int rows_per_sequence, KvFormat kv_format);

// Kernel-development knob: MLAJIT_TILES="block_m,block_n,warps,stages,ctas_per_sm"
// replaces the policy's choice (tensor-core targets only). kInvalidArgument when
// the string is malformed or the shape cannot run (the kernel's static layout
// rules, shared memory); the unset variable leaves `t` alone.
absl::Status ApplyTileOverride(const std::string& arch, KvFormat kv_format, TileShape* t);

// Kernel-development knob: MLAJIT_SPLIT_MIN_COST=<tokens> (64..65536) replaces
// t->min_split_cost. kInvalidArgument when malformed or out of range.
absl::Status ApplySplitOverride(TileShape* t);

}  // namespace mlajit::plan

#endif  // MLAJIT_SRC_PLAN_TILE_POLICY_H_
