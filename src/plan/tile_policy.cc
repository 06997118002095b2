#include "src/plan/tile_policy.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "kernel_templates/mla_params.h"
#include "src/base/status_macros.h"

namespace mlajit::plan {

int MaxDynamicSharedMemory(const std::string& arch) {
  const int sm = arch.rfind("sm_", 0) == 0 ? std::atoi(arch.c_str() + 3) : 0;
  if (sm == 80 || sm == 87) return 166912;   // A100-class: 163 KB
  if (sm >= 90) return 232448;               // Hopper and later: 227 KB
  if (sm >= 80) return 101376;               // sm_86 / sm_89: 99 KB
  return 48 * 1024;
}

namespace {

// Resident CTAs per SM: kernels are built for up to 255 registers per thread,
// so 256-thread CTAs run one per SM and 128-thread CTAs two; shared memory
// (with the 1 KB the hardware reserves per CTA) may allow fewer.
int CtasPerSm(const std::string& arch, const TileShape& t) {
  const int by_regs = 65536 / (t.num_warps * 32 * 256);
  const int per_sm = MaxDynamicSharedMemory(arch) + 1024;
  const int by_smem = per_sm / (t.smem_bytes + 1024);
  return std::max(1, std::min(by_regs, by_smem));
}

// A batch with fewer wide units than units_per_sm per SM (tile_policy.h):
// then narrower row tiles, with more CTAs, win.
bool SmallBatchPerSm(const BatchWork* work, int units_per_sm) {
  return work != nullptr && work->wide_units < int64_t{units_per_sm} * work->sm_count;
}

}  // namespace

bool HasTensorCorePath(const std::string& arch) {
  if (arch.rfind("sm_", 0) != 0) return false;
  return std::atoi(arch.c_str() + 3) >= 80;
}

bool Fp8RowsMayTakeNarrowTiles(const std::string& arch, KvFormat kv_format, int rows_per_sequence) {
  return arch == "sm_90a" && kv_format == KvFormat::kFp8E4m3 && rows_per_sequence > 32 &&
         rows_per_sequence <= 128;
}

bool RunsWgmmaPath(const std::string& arch, KvFormat kv_format, int block_m, int block_n,
                   int num_warps) {
  return arch == "sm_90a" &&
         MlaWgmmaEligible(static_cast<int>(kv_format), block_m, block_n, num_warps);
}

bool CopiesKvByTensorMaps(const std::string& arch, KvFormat kv_format, int block_m, int block_n,
                          int num_warps, int page_size) {
  return arch == "sm_90a" && MlaKvTensorMapsEligible(static_cast<int>(kv_format), block_m,
                                                     block_n, num_warps, page_size);
}

bool RunsWgmmaRowsPath(const std::string& arch, KvFormat kv_format, int block_m, int block_n,
                       int num_warps) {
  return arch == "sm_90a" &&
         MlaWgmmaRowsEligible(static_cast<int>(kv_format), block_m, block_n, num_warps);
}

bool RunsWgmmaRowsWsPath(const std::string& arch, KvFormat kv_format, int block_m, int block_n,
                         int num_warps) {
  return arch == "sm_90a" &&
         MlaWgmmaRowsWsEligible(static_cast<int>(kv_format), block_m, block_n, num_warps);
}

int DecodeSmemBytes(const std::string& arch, KvFormat kv_format, int block_m, int block_n,
                    int num_warps, int stages) {
  if (!HasTensorCorePath(arch)) return MlaPortableSmemBytes(num_warps * 32);
  const int f = static_cast<int>(kv_format);
  if (RunsWgmmaPath(arch, kv_format, block_m, block_n, num_warps)) {
    return MlaWgmmaSmemBytes(f, block_m, stages);
  }
  if (RunsWgmmaRowsPath(arch, kv_format, block_m, block_n, num_warps)) {
    return MlaWgmmaRowsSmemBytes(f, stages);
  }
  if (RunsWgmmaRowsWsPath(arch, kv_format, block_m, block_n, num_warps)) {
    return MlaWgmmaRowsWsSmemBytes(stages);
  }
  return MlaMmaSmemBytes(f, block_m, block_n, stages);
}

TileShape ChooseTiles(const std::string& arch, int rows_per_sequence, KvFormat kv_format,
                      const BatchWork* work, int page_size) {
  static_cast<void>(page_size);  // no rule depends on it (tile_policy.h)
  TileShape t;
  if (!HasTensorCorePath(arch)) {
    t.block_m = 16;
    t.block_n = 16;
    t.smem_bytes = MlaPortableSmemBytes(t.num_warps * 32);
    return t;
  }
  t.tensor_cores = true;
  // A small fp8 batch of 33 to 128 rows a sequence takes the swap-AB path's
  // 16-row tiles instead of 64-row ones (below): every 16-row tile reads its
  // sequence's KV again, but four times the row tiles, two CTAs an SM, share
  // a batch too small to fill the SMs otherwise. H100, RESULTS.md v72, against the
  // warp-specialised path: 14-17 % faster at 3.9 wide units per SM
  // ((16,4,1024,16), (4,4,2048,32), (8,4,1024,32)); at 7.8, 14.5 % on
  // (32,4,1024,16), 13.9 % on (32,2,1024,32), 1.3-5.9 % on 128 rows; 3.5 %
  // slower at 5.8 ((24,4,1024,16)); 7.7-12.6 % slower at 9.7-11.6 and up to
  // 22 % slower at 15.5 ((4,4,8192,32)).
  const bool fp8_tall_rows =
      arch == "sm_90a" && kv_format == KvFormat::kFp8E4m3 && rows_per_sequence > 32;
  const bool fp8_narrow_rows =
      Fp8RowsMayTakeNarrowTiles(arch, kv_format, rows_per_sequence) && SmallBatchPerSm(work, 8);
  if (fp8_tall_rows && !fp8_narrow_rows) {
    // fp8 with tiles of 64 query rows (mla_decode_wgmma_rows_ws.cuh): a
    // scorer warpgroup and two accumulating ones, one CTA per SM, three
    // stages of tiles as stored. H200, tools/bench/RESULTS.md v22, against
    // the two-warpgroup 64-row path: (128,4,8192,16) 316 -> 278-294 us,
    // (32,4,8192,32) 168 -> 152; standing runs: page size 64 196 -> 155,
    // page size 1 217 (then on 32-row swap-AB tiles) -> 172.
    t.block_m = 64;
    t.block_n = 64;
    t.num_warps = 12;
    t.num_stages = 3;
    t.smem_bytes = MlaWgmmaRowsWsSmemBytes(t.num_stages);
    t.ctas_per_sm = 1;
    return t;
  }
  if (arch == "sm_90a" && kv_format == KvFormat::kBf16 && rows_per_sequence > 32) {
    // Warpgroup MMA with the rows as M (mla_decode_wgmma_rows.cuh): two
    // warpgroups per tile of 64 query rows, one CTA per SM; each KV tile
    // becomes a 16-bit operand in shared memory once per 64 rows.
    t.block_m = 64;
    t.block_n = 64;
    t.num_warps = 8;
    t.num_stages = 2;
    t.smem_bytes = MlaWgmmaRowsSmemBytes(static_cast<int>(kv_format), t.num_stages);
    t.ctas_per_sm = CtasPerSm(arch, t);
    return t;
  }
  if (arch == "sm_90a") {
    // Warpgroup MMA with the KV tile as M (mla_decode_wgmma.cuh): one 4-warp
    // CTA per tile of 16 or 32 query rows (bf16's 32: 8 warps, below). Two
    // stages: fp8 then fits two CTAs per SM. MXFP4 adds warpgroups that
    // convert tiles (to e4m3 since v30; two converted tiles, one CTA per
    // SM): two, one per converted tile with a raw stage each, for 16-row
    // tiles (H200, RESULTS.md v19: (128,1,8192,16) 414 -> 316 us; v30: two
    // raw stages each measured the same); one, with
    // two raw stages, for 32-row tiles, whose product code spills at the
    // registers two converting warpgroups leave it (v30, the q_len 4 cases:
    // 8 warps 12-18 % faster than 12 at 31 to 248 units per SM; with bf16
    // tiles v20 had found 12 warps 3.4 % faster from 16 units per SM).
    // MXFP4 with more than 32 rows per sequence takes 32-row tiles too (v30:
    // 18-27 % faster than the mma.sync path's 64-row tiles on the q_len 4
    // cases, although each KV tile is converted once per row tile).
    // bf16 tiles of 32 rows run as two warpgroups of 16 rows that share the
    // KV stages (8 warps): no spills, the 16-row softmax, each KV tile copied
    // once for 32 rows (H100, RESULTS.md v67: 1-5 % faster than one
    // warpgroup of 32 rows).
    const bool mxfp4 = kv_format == KvFormat::kMxfp4;
    const bool bf16 = kv_format == KvFormat::kBf16;
    auto shape = [&](int block_m) {
      t.block_m = block_m;
      t.block_n = 64;
      t.num_warps = mxfp4 ? (block_m == 16 ? 12 : 8) : bf16 && block_m == 32 ? 8 : 4;
      t.num_stages = 2;
      t.smem_bytes = MlaWgmmaSmemBytes(static_cast<int>(kv_format), t.block_m, t.num_stages);
      t.ctas_per_sm = CtasPerSm(arch, t);
    };
    shape(rows_per_sequence <= 16 ? 16 : 32);
    // A small batch: more CTAs beat more rows per KV byte. The threshold is
    // 12 wide units per SM for fp8 (6 for each of its two CTAs; H200,
    // RESULTS.md v21, after S became one e4m3 product: 32-row tiles lost by
    // 9 % at 7.8 units per SM, (8,1,8192,32) 31.8 against 28.9 us, tied at
    // 15.5 and won by 6 % at 31; at 3.9 and 0.5 units per SM they lost by 15
    // and 28 %) and 6 for bf16, one CTA per SM (v17: bf16
    // (32,1,1024,32), 3.9 units per SM, 16-row tiles 28.2 against 29.3 us in
    // three alternating rounds). MXFP4 converts each KV tile once per row
    // tile, which halves 16-row tiles' worth: 2 wide units per SM (v19:
    // 32-row tiles 29.3 against 33.3 us at 3.9 units per SM, 20.4 against 16.9
    // at 0.5 units per SM).
    const int small_below = mxfp4 ? 2 : kv_format == KvFormat::kFp8E4m3 ? 12 : 6;
    if (t.block_m == 32 && rows_per_sequence <= 32 && SmallBatchPerSm(work, small_below)) {
      shape(16);
    }
    if (fp8_narrow_rows) shape(16);
    return t;
  }
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
  // 64 x 64 fits only MXFP4 in Hopper-class shared memory (two stages, 208
  // KB); on the H200 it beats 64 x 32 by 15-19 % on the MXFP4 q_len-4 cases
  // (tools/bench/RESULTS.md).
  static constexpr Candidate kLarge[] = {{64, 64, 8}, {64, 32, 8}, {32, 32, 8}, {32, 16, 4}};
  const int limit = MaxDynamicSharedMemory(arch);
  const int f = static_cast<int>(kv_format);
  // The first candidate whose two-stage footprint fits (else the last), with
  // as many stages as fit.
  auto pick = [&](const Candidate* begin, const Candidate* end) {
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
    t.ctas_per_sm = CtasPerSm(arch, t);
  };
  if (rows_per_sequence <= 16) {
    pick(std::begin(kSmall), std::end(kSmall));
  } else if (rows_per_sequence <= 32) {
    pick(std::begin(kMedium), std::end(kMedium));
  } else {
    pick(std::begin(kLarge), std::end(kLarge));
  }
  return t;
}

absl::Status CheckTileShape(const std::string& arch, KvFormat kv_format, const TileShape& t) {
  const int m = t.block_m, n = t.block_n, warps = t.num_warps, stages = t.num_stages,
            ctas = t.ctas_per_sm;
  // Twelve warps: the swap-AB path's MXFP4 tiles (a product warpgroup and
  // two converting ones, with an even number of raw stages to share) or the
  // warp-specialised fp8 64-row tiles (a scorer and two accumulators, two or
  // three stages); one CTA per SM at 168 registers per thread.
  const bool twelve =
      warps == 12 && ctas == 1 &&
      ((RunsWgmmaPath(arch, kv_format, m, n, warps) && stages % 2 == 0 && stages <= 4) ||
       (RunsWgmmaRowsWsPath(arch, kv_format, m, n, warps) && stages >= 2 && stages <= 3));
  const bool layout_ok =
      twelve || ((m == 16 || m == 32 || m == 64) && (warps == 4 || warps == 8) &&
                 n % (warps * 4) == 0 &&  // whole copy passes of 8 lanes per token
                 warps % (m / 16) == 0 && n % 16 == 0 && n > 0 &&
                 (n / (warps / (m / 16))) % 8 == 0 && (512 / (warps / (m / 16))) % 16 == 0 &&
                 stages >= 2 && stages <= 4 && ctas >= 1 && ctas <= 4);
  const int smem = layout_ok ? DecodeSmemBytes(arch, kv_format, m, n, warps, stages) : 0;
  if (!HasTensorCorePath(arch) || !layout_ok ||
      ctas * (smem + 1024) > MaxDynamicSharedMemory(arch) + 1024 ||
      (!twelve && ctas * warps * 32 * 255 > 65536)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tiles ", m, "x", n, ", ", warps, " warps, ", stages, " stages, ", ctas,
        " CTAs per SM: not a runnable shape on ", arch, " (", smem,
        " bytes of shared memory per CTA)"));
  }
  if (t.min_split_cost < 64 || t.min_split_cost > kMaxSplitCost) {
    return absl::InvalidArgumentError(absl::StrCat("min_split_cost ", t.min_split_cost,
                                                   ": expected a token count in [64, ",
                                                   kMaxSplitCost, "]"));
  }
  return absl::OkStatus();
}

absl::StatusOr<TileShape> CompleteTileShape(const std::string& arch, KvFormat kv_format,
                                            TileShape t) {
  MLAJIT_RETURN_IF_ERROR(CheckTileShape(arch, kv_format, t));
  t.smem_bytes = DecodeSmemBytes(arch, kv_format, t.block_m, t.block_n, t.num_warps, t.num_stages);
  t.tensor_cores = true;
  return t;
}

absl::Status ApplyTileOverride(const std::string& arch, KvFormat kv_format, TileShape* t) {
  const char* env = std::getenv("MLAJIT_TILES");
  if (env == nullptr || *env == '\0') return absl::OkStatus();
  TileShape o = *t;
  if (std::sscanf(env, "%d,%d,%d,%d,%d", &o.block_m, &o.block_n, &o.num_warps, &o.num_stages,
                  &o.ctas_per_sm) != 5) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MLAJIT_TILES=\"", env, "\": expected block_m,block_n,warps,stages,ctas_per_sm"));
  }
  absl::StatusOr<TileShape> done = CompleteTileShape(arch, kv_format, o);
  if (!done.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("MLAJIT_TILES=\"", env, "\": ", done.status().message()));
  }
  *t = *done;
  return absl::OkStatus();
}

absl::Status ApplySplitOverride(TileShape* t) {
  const char* env = std::getenv("MLAJIT_SPLIT_MIN_COST");
  if (env == nullptr || *env == '\0') return absl::OkStatus();
  int cost = 0;
  char rest = 0;
  if (std::sscanf(env, "%d%c", &cost, &rest) != 1 || cost < 64 || cost > kMaxSplitCost) {
    return absl::InvalidArgumentError(absl::StrCat("MLAJIT_SPLIT_MIN_COST=\"", env,
                                                   "\": expected a token count in [64, ",
                                                   kMaxSplitCost, "]"));
  }
  t->min_split_cost = cost;
  return absl::OkStatus();
}

absl::StatusOr<TileShape> ChooseTilesWithOverrides(const std::string& arch, int rows_per_sequence,
                                                   KvFormat kv_format, const BatchWork* work,
                                                   const TileShape* preferred, int page_size) {
  TileShape t = preferred != nullptr
                    ? *preferred
                    : ChooseTiles(arch, rows_per_sequence, kv_format, work, page_size);
  MLAJIT_RETURN_IF_ERROR(ApplyTileOverride(arch, kv_format, &t));
  MLAJIT_RETURN_IF_ERROR(ApplySplitOverride(&t));
  return t;
}

}  // namespace mlajit::plan
