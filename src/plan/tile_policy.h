// Chooses the kernel's tile shape for a batch: which path the target has
// (tensor cores on sm_80+, else the portable path) and how many query rows and
// KV tokens one CTA tile holds.
//
//   TileShape t = ChooseTiles("sm_90a", /*rows_per_sequence=*/16, KvFormat::kFp8E4m3);
//   spec.block_m = t.block_m; ...; launch with t.smem_bytes of dynamic shared memory.
#ifndef MLAJIT_SRC_PLAN_TILE_POLICY_H_
#define MLAJIT_SRC_PLAN_TILE_POLICY_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "src/base/mla_types.h"

namespace mlajit::plan {

// The largest min_split_cost (TileShape): with it no sequence of up to this
// many KV tokens is split.
inline constexpr int kMaxSplitCost = 65536;

// Whether sequences of this many rows may take the swap-AB path's 16-row
// tiles although they are taller than 32 rows: fp8 on sm_90a, 33 to 128 rows.
// ChooseTiles takes them for small batches; the tuner keeps them as candidates.
bool Fp8RowsMayTakeNarrowTiles(const std::string& arch, KvFormat kv_format, int rows_per_sequence);

struct TileShape {
  int block_m = 16;
  int block_n = 64;
  int num_warps = 8;
  int num_stages = 2;
  int smem_bytes = 0;    // dynamic shared memory of the decode kernel
  int ctas_per_sm = 1;   // resident CTAs per SM: the persistent grid is sm_count * this
  // The scheduler's min_cost_per_cta (ScheduleConfig): the least work, in KV
  // tokens, worth splitting a tile for. At 64 the scheduler's own floor of
  // 2 * block_n tokens per piece is what binds: on an H200, (4,1,1024,32) ran
  // in 15.2 us with 8 pieces per tile against 16.2 us with the 6 that 256
  // allowed; no other suite case's schedule depends on it.
  int min_split_cost = 64;
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

// True when it runs the sm_90a 64-row warpgroup-MMA path
// (kernel_templates/mla_decode_wgmma_rows.cuh).
bool RunsWgmmaRowsPath(const std::string& arch, KvFormat kv_format, int block_m, int block_n,
                       int num_warps);

// True when it runs the warp-specialised fp8 64-row path, 12 warps
// (kernel_templates/mla_decode_wgmma_rows_ws.cuh).
bool RunsWgmmaRowsWsPath(const std::string& arch, KvFormat kv_format, int block_m, int block_n,
                         int num_warps);

// True when the decode kernel of this shape copies whole tiles with tensor
// maps that the host encodes per call (MlaDecodeParams::kv_maps,
// MlaKvTensorMapsEligible): the swap-AB and warp-specialised fp8 paths and
// the bf16 swap-AB and 64-row paths, flat or pages of a multiple of 64 tokens.
bool CopiesKvByTensorMaps(const std::string& arch, KvFormat kv_format, int block_m, int block_n,
                          int num_warps, int page_size);

// Dynamic shared memory the decode kernel of this shape needs on `arch`.
int DecodeSmemBytes(const std::string& arch, KvFormat kv_format, int block_m, int block_n,
                    int num_warps, int stages);

// What a plan built from a known batch tells the policy about its size.
struct BatchWork {
  // Work in units of 32 query rows x 64 KV tokens, summed over the sequences
  // (WorkUnits(layout, 32, 64) in scheduler.h).
  int64_t wide_units = 0;
  int sm_count = 0;
};

// rows_per_sequence: the largest q_len * num_heads of the batch. On sm_90a
// more than 32 rows take tiles of 64 rows: fp8 the warp-specialised path
// (three warpgroups), bf16 the two-warpgroup one; fp8 batches of up to 128
// rows a sequence and under 8 wide units per SM take the swap-AB path's
// 16-row tiles instead, two CTAs per SM (RESULTS.md v72). `work` (null
// for plans sized by limits rather than one batch) lets the sm_90a wgmma path
// trade its 32-row tiles, which do more per KV byte, for 16-row tiles, which
// give twice the CTAs something to do, when the batch is too small to keep
// the GPU busy otherwise: below 6 wide units per SM (3 per resident fp8
// CTA; bf16 runs one per SM and takes the same threshold). Measured on
// the H200 (fp8 KV, tools/bench/RESULTS.md v9j): 16-row tiles took
// (4,1,1024,32) from 19.7 to 15.7 us and (32,1,1024,32) from 31.4 to 28.3 us
// (0.2 and 1.9 units per CTA); they tied at 3.9 ((32,4,1024,16)) and lost
// at 7.8 ((4,4,8192,32): 51.9 -> 56.2 us). MXFP4 with up to 32 rows on
// sm_90a takes the same path, with warpgroups that convert its tiles to bf16
// (two for 16-row tiles; for 32-row tiles two from 16 wide units per SM, else
// one: RESULTS.md v18-v20), and the same trade below 2 wide units per SM.
// `page_size` (0: flat) changes no choice today: until the warp-specialised
// path (RESULTS.md v22), fp8 with page size 1 and more than 32 rows took
// the swap-AB path's 32-row tiles in large batches.
TileShape ChooseTiles(const std::string& arch, int rows_per_sequence, KvFormat kv_format,
                      const BatchWork* work = nullptr, int page_size = 0);

// OK when kernels of shape `t` (block_m, block_n, num_warps, num_stages,
// ctas_per_sm, min_split_cost; smem_bytes is derived) build and run on `arch`:
// the kernels' static layout rules, shared memory and registers per SM. Else
// kInvalidArgument naming the shape.
absl::Status CheckTileShape(const std::string& arch, KvFormat kv_format, const TileShape& t);

// CheckTileShape, then `t` with smem_bytes and tensor_cores filled in.
absl::StatusOr<TileShape> CompleteTileShape(const std::string& arch, KvFormat kv_format,
                                            TileShape t);

// Kernel-development knob: MLAJIT_TILES="block_m,block_n,warps,stages,ctas_per_sm"
// replaces the policy's choice (tensor-core targets only). kInvalidArgument when
// the string is malformed or the shape cannot run (the kernel's static layout
// rules, shared memory); the unset variable leaves `t` alone.
absl::Status ApplyTileOverride(const std::string& arch, KvFormat kv_format, TileShape* t);

// Kernel-development knob: MLAJIT_SPLIT_MIN_COST=<tokens> (64..65536) replaces
// t->min_split_cost. kInvalidArgument when malformed or out of range.
absl::Status ApplySplitOverride(TileShape* t);

// ChooseTiles, replaced by `preferred` (a complete shape, e.g. a tuning
// record's) when given, then both knobs above: the tiles a plan runs with.
// The runtime and the benchmark's schedule report use it, so that they agree.
absl::StatusOr<TileShape> ChooseTilesWithOverrides(const std::string& arch, int rows_per_sequence,
                                                   KvFormat kv_format,
                                                   const BatchWork* work = nullptr,
                                                   const TileShape* preferred = nullptr,
                                                   int page_size = 0);

}  // namespace mlajit::plan

#endif  // MLAJIT_SRC_PLAN_TILE_POLICY_H_
