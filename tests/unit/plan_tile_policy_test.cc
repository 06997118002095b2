// The tile policy, and the shipped manifests agreeing with it: a warmed cache is
// only useful if it holds exactly the specs the runtime will ask for.
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernel_templates/mla_params.h"
#include "src/jit/kernel_spec.h"
#include "src/plan/tile_policy.h"
#include "tests/unit/scoped_env.h"

namespace mlajit::plan {
namespace {

TEST(TilePolicy, FitsSharedMemoryOfEachArchitecture) {
  for (const char* arch : {"sm_80", "sm_86", "sm_89", "sm_90a", "sm_100a"}) {
    for (int rows : {1, 16, 17, 32, 64, 128, 1024}) {
      for (KvFormat f : {KvFormat::kBf16, KvFormat::kFp8E4m3, KvFormat::kMxfp4}) {
        TileShape t = ChooseTiles(arch, rows, f);
        EXPECT_TRUE(t.tensor_cores);
        EXPECT_LE(t.smem_bytes, MaxDynamicSharedMemory(arch)) << arch << " rows " << rows;
        EXPECT_GE(t.num_stages, 2);
        EXPECT_EQ(t.smem_bytes, DecodeSmemBytes(arch, f, t.block_m, t.block_n, t.num_warps,
                                                t.num_stages));
        const bool wgmma = RunsWgmmaPath(arch, f, t.block_m, t.block_n, t.num_warps);
        const bool wgmma_rows = RunsWgmmaRowsPath(arch, f, t.block_m, t.block_n, t.num_warps);
        const bool wgmma_rows_ws = RunsWgmmaRowsWsPath(arch, f, t.block_m, t.block_n, t.num_warps);
        if (std::string(arch) == "sm_90a" && f == KvFormat::kFp8E4m3 && rows > 32) {
          // Hopper's warp-specialised 64-row path: three warpgroups, one CTA
          // per SM, three stages.
          EXPECT_TRUE(wgmma_rows_ws) << rows;
          EXPECT_FALSE(wgmma_rows) << rows;
          EXPECT_FALSE(wgmma) << rows;
          EXPECT_EQ(t.block_m, 64);
          EXPECT_EQ(t.num_warps, 12);
          EXPECT_EQ(t.num_stages, 3);
          EXPECT_EQ(t.ctas_per_sm, 1);
          EXPECT_EQ(t.smem_bytes, MlaWgmmaRowsWsSmemBytes(t.num_stages));
          EXPECT_TRUE(CheckTileShape(arch, f, t).ok());
          continue;
        }
        EXPECT_FALSE(wgmma_rows_ws) << arch << " rows " << rows;
        if (std::string(arch) == "sm_90a" && f == KvFormat::kBf16 && rows > 32) {
          // Hopper's 64-row path: two warpgroups, one CTA per SM.
          EXPECT_TRUE(wgmma_rows) << rows;
          EXPECT_FALSE(wgmma) << rows;
          EXPECT_EQ(t.block_m, 64);
          EXPECT_EQ(t.num_warps, 8);
          EXPECT_EQ(t.ctas_per_sm, 1);
          EXPECT_EQ(t.smem_bytes, MlaWgmmaRowsSmemBytes(static_cast<int>(f), t.num_stages));
        } else if (std::string(arch) == "sm_90a") {
          // Hopper's swap-AB warpgroup-MMA path (MXFP4 at every row count):
          // 16 or 32 rows per tile, fp8 two CTAs per SM, MXFP4 one.
          EXPECT_TRUE(wgmma) << rows;
          EXPECT_FALSE(wgmma_rows) << rows;
          EXPECT_EQ(t.smem_bytes, MlaWgmmaSmemBytes(static_cast<int>(f), t.block_m,
                                                    t.num_stages));
          EXPECT_EQ(t.block_m, rows <= 16 ? 16 : 32) << rows;
          if (f == KvFormat::kFp8E4m3) {
            EXPECT_EQ(t.ctas_per_sm, 2);
          }
          // MXFP4: two converting warpgroups (12 warps) for 16-row tiles, one
          // (8 warps) for 32-row ones; bf16: 32-row tiles as two warpgroups
          // of 16 rows (8 warps).
          const int warps = f == KvFormat::kMxfp4                     ? (t.block_m == 16 ? 12 : 8)
                            : f == KvFormat::kBf16 && t.block_m == 32 ? 8
                                                                      : 4;
          EXPECT_EQ(t.num_warps, warps) << rows;
          EXPECT_EQ(MlaWgmmaRowGroups(static_cast<int>(f), t.block_m, t.num_warps),
                    f == KvFormat::kBf16 && t.block_m == 32 ? 2 : 1)
              << rows;
          if (f == KvFormat::kMxfp4) {
            EXPECT_EQ(t.ctas_per_sm, 1);
          }
        } else {
          EXPECT_FALSE(wgmma) << arch;
          EXPECT_FALSE(wgmma_rows) << arch;
          EXPECT_EQ(t.smem_bytes, MlaMmaSmemBytes(static_cast<int>(f), t.block_m, t.block_n,
                                                  t.num_stages));
        }
      }
    }
  }
  EXPECT_FALSE(ChooseTiles("gfx942", 16, KvFormat::kFp8E4m3).tensor_cores);
  EXPECT_FALSE(ChooseTiles("sm_75", 16, KvFormat::kFp8E4m3).tensor_cores);
}

bool SameTiles(const jit::KernelSpec& spec, const TileShape& t) {
  return spec.block_m == t.block_m && spec.block_n == t.block_n &&
         spec.num_warps == t.num_warps && spec.num_stages == t.num_stages;
}

// A batch between the policy's thresholds (4 wide units per SM), for shapes
// that a rule between them may pick.
constexpr BatchWork kMediumBatch{4 * 132, 132};

// Every spec is a shape the policy picks, for a large, a medium or (wgmma
// path) a small batch, and every shape the policy can pick for a row count is
// there.
void CheckManifest(const std::string& path) {
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot read " << path;
  std::string line;
  int specs = 0;
  std::set<std::string> seen;
  std::vector<jit::KernelSpec> all;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    auto spec = jit::SpecFromJson(line);
    ASSERT_TRUE(spec.ok()) << path << ": " << spec.status();
    const int rows = spec->num_heads * spec->max_q_len;
    const TileShape large =
        ChooseTiles(spec->arch, rows, spec->kv_format, nullptr, spec->page_size);
    const BatchWork tiny{/*wide_units=*/1, /*sm_count=*/132};
    const TileShape small =
        ChooseTiles(spec->arch, rows, spec->kv_format, &tiny, spec->page_size);
    const TileShape medium =
        ChooseTiles(spec->arch, rows, spec->kv_format, &kMediumBatch, spec->page_size);
    EXPECT_TRUE(SameTiles(*spec, large) || SameTiles(*spec, medium) || SameTiles(*spec, small))
        << line;
    seen.insert(jit::SpecToJson(*spec));
    all.push_back(*spec);
    ++specs;
  }
  EXPECT_GT(specs, 100) << path;
  for (const jit::KernelSpec& spec : all) {
    const int rows = spec.num_heads * spec.max_q_len;
    const BatchWork tiny{1, 132};
    for (const TileShape& t :
         {ChooseTiles(spec.arch, rows, spec.kv_format, nullptr, spec.page_size),
          ChooseTiles(spec.arch, rows, spec.kv_format, &kMediumBatch, spec.page_size),
          ChooseTiles(spec.arch, rows, spec.kv_format, &tiny, spec.page_size)}) {
      jit::KernelSpec want = spec;
      want.block_m = t.block_m;
      want.block_n = t.block_n;
      want.num_warps = t.num_warps;
      want.num_stages = t.num_stages;
      EXPECT_EQ(seen.count(jit::SpecToJson(want)), 1u) << "missing: " << jit::SpecToJson(want);
    }
  }
}

TEST(TilePolicy, Fp8TallRowsTakeTheWarpSpecialisedPathAtEveryPageSize) {
  // Page size 1 used to send large batches of more than 32 rows to 32-row
  // swap-AB tiles; the warp-specialised path beat both (RESULTS.md v22).
  // (Under 8 wide units per SM: the test below.)
  const BatchWork large{32 * 4 * 128, 132}, small{4 * 4 * 128, 132};
  for (int rows : {33, 64, 128}) {
    for (int page : {0, 1, 16, 64}) {
      for (const BatchWork* w : {&large, &small, static_cast<const BatchWork*>(nullptr)}) {
        const TileShape t = ChooseTiles("sm_90a", rows, KvFormat::kFp8E4m3, w, page);
        EXPECT_TRUE(RunsWgmmaRowsWsPath("sm_90a", KvFormat::kFp8E4m3, t.block_m, t.block_n,
                                        t.num_warps))
            << rows << " " << page;
      }
    }
    // bf16 keeps the two-warpgroup path.
    EXPECT_EQ(ChooseTiles("sm_90a", rows, KvFormat::kBf16, &large, 1).num_warps, 8) << rows;
  }
}

TEST(TilePolicy, SmallFp8BatchesOfTallRowsTakeSixteenRowSwapAbTiles) {
  // Under 8 wide units per SM, fp8 sequences of 33 to 128 rows take 16-row
  // swap-AB tiles, two CTAs an SM (RESULTS.md v72): (32,4,1024,16) has 1024
  // wide units, (16,4,1024,16) 512, (4,4,8192,32) 2048.
  const BatchWork suite{1024, 132}, tiny{1, 132}, edge_below{8 * 132 - 1, 132}, edge{8 * 132, 132},
      large{2048, 132};
  for (int rows : {33, 64, 96, 128}) {
    for (int page : {0, 1, 64}) {
      for (const BatchWork* w : {&suite, &tiny, &edge_below}) {
        const TileShape t = ChooseTiles("sm_90a", rows, KvFormat::kFp8E4m3, w, page);
        EXPECT_EQ(t.block_m, 16) << rows << " " << page << " " << w->wide_units;
        EXPECT_EQ(t.num_warps, 4) << rows;
        EXPECT_EQ(t.ctas_per_sm, 2) << rows;
        EXPECT_TRUE(RunsWgmmaPath("sm_90a", KvFormat::kFp8E4m3, t.block_m, t.block_n, t.num_warps));
      }
      for (const BatchWork* w : {&edge, &large, static_cast<const BatchWork*>(nullptr)}) {
        const TileShape t = ChooseTiles("sm_90a", rows, KvFormat::kFp8E4m3, w, page);
        EXPECT_EQ(t.block_m, 64) << rows << " " << page;
        EXPECT_EQ(t.num_warps, 12) << rows << " " << page;
      }
    }
  }
  // Taller rows, other formats and other targets keep their shapes.
  EXPECT_EQ(ChooseTiles("sm_90a", 129, KvFormat::kFp8E4m3, &tiny).block_m, 64);
  EXPECT_EQ(ChooseTiles("sm_90a", 64, KvFormat::kBf16, &tiny).block_m, 64);
  EXPECT_EQ(ChooseTiles("sm_90a", 64, KvFormat::kMxfp4, &tiny).block_m,
            ChooseTiles("sm_90a", 64, KvFormat::kMxfp4).block_m);
  EXPECT_EQ(ChooseTiles("sm_80", 64, KvFormat::kFp8E4m3, &tiny).block_m,
            ChooseTiles("sm_80", 64, KvFormat::kFp8E4m3).block_m);
}

TEST(TilePolicy, SmallBatchesTakeNarrowRowTilesOnTheWgmmaPath) {
  // (4,1,1024,32): 4 wide units for 264 resident CTAs; (4,4,8192,32): 2048.
  const BatchWork small{4 * 16, 132}, large{4 * 4 * 128, 132};
  for (KvFormat f : {KvFormat::kFp8E4m3, KvFormat::kBf16}) {
    EXPECT_EQ(ChooseTiles("sm_90a", 32, f, &small).block_m, 16);
    EXPECT_EQ(ChooseTiles("sm_90a", 32, f, &large).block_m, 32);
    EXPECT_EQ(ChooseTiles("sm_90a", 32, f).block_m, 32);  // unknown batch: the large-batch shape
    EXPECT_EQ(ChooseTiles("sm_90a", 16, f, &large).block_m, 16);
  }
  // The threshold: 12 wide units per SM for fp8 (2 CTAs per SM), 6 for bf16
  // (1); (32,1,1024,32) has 512, (8,1,8192,32) 1024.
  ASSERT_EQ(ChooseTiles("sm_90a", 32, KvFormat::kFp8E4m3).ctas_per_sm, 2);
  ASSERT_EQ(ChooseTiles("sm_90a", 32, KvFormat::kBf16).ctas_per_sm, 1);
  for (const auto& [f, per_sm] :
       {std::pair{KvFormat::kFp8E4m3, 12}, std::pair{KvFormat::kBf16, 6}}) {
    const BatchWork edge_below{per_sm * 132 - 1, 132}, edge{per_sm * 132, 132}, medium{512, 132};
    EXPECT_EQ(ChooseTiles("sm_90a", 32, f, &edge_below).block_m, 16);
    EXPECT_EQ(ChooseTiles("sm_90a", 32, f, &edge).block_m, 32);
    EXPECT_EQ(ChooseTiles("sm_90a", 32, f, &medium).block_m, 16);
  }
  const BatchWork eight_by_8k{8 * 128, 132};
  EXPECT_EQ(ChooseTiles("sm_90a", 32, KvFormat::kFp8E4m3, &eight_by_8k).block_m, 16);
  EXPECT_EQ(ChooseTiles("sm_90a", 32, KvFormat::kBf16, &eight_by_8k).block_m, 32);
  // Other paths keep their shapes.
  EXPECT_EQ(ChooseTiles("sm_80", 32, KvFormat::kFp8E4m3, &small).block_m,
            ChooseTiles("sm_80", 32, KvFormat::kFp8E4m3).block_m);
  EXPECT_EQ(ChooseTiles("sm_80", 32, KvFormat::kMxfp4, &small).block_m,
            ChooseTiles("sm_80", 32, KvFormat::kMxfp4).block_m);
}

TEST(TilePolicy, Mxfp4OnHopperTakesSwapAbTilesAtEveryRowCount) {
  // Every page size: the swap-AB path with converting warpgroups, one CTA per
  // SM: 16-row tiles with two (12 warps, a raw stage each), 32-row tiles with
  // one (8 warps, two raw stages); up to 32 rows, 16-row tiles below 2 wide
  // units per SM; more rows always take 32-row tiles.
  const BatchWork small{4 * 16, 132}, large{32 * 16, 132};  // (4|32,1,1024,32)
  const BatchWork edge_below{2 * 132 - 1, 132}, edge{2 * 132, 132};
  const BatchWork huge_below{16 * 132 - 1, 132}, huge{16 * 132, 132};
  for (int page : {0, 1, 16, 64, 128}) {
    for (int rows : {1, 16, 17, 32, 33, 64, 128}) {
      for (const BatchWork* w : {&small, &large, &edge_below, &edge, &huge_below, &huge,
                                 static_cast<const BatchWork*>(nullptr)}) {
        const TileShape t = ChooseTiles("sm_90a", rows, KvFormat::kMxfp4, w, page);
        EXPECT_TRUE(RunsWgmmaPath("sm_90a", KvFormat::kMxfp4, t.block_m, t.block_n, t.num_warps))
            << page << " " << rows;
        const bool small_batch = rows <= 32 && (w == &small || w == &edge_below);
        EXPECT_EQ(t.block_m, rows <= 16 || small_batch ? 16 : 32) << page << " " << rows;
        EXPECT_EQ(t.num_warps, t.block_m == 16 ? 12 : 8) << page << " " << rows;
        EXPECT_EQ(t.num_stages, 2);
        EXPECT_EQ(t.ctas_per_sm, 1);
        EXPECT_EQ(t.smem_bytes, MlaWgmmaSmemBytes(2, t.block_m, t.num_stages));
        EXPECT_TRUE(CheckTileShape("sm_90a", KvFormat::kMxfp4, t).ok());
      }
    }
  }
  // fp8 and bf16 keep one warpgroup; other architectures keep their paths.
  EXPECT_FALSE(MlaWgmmaEligible(2, 32, 64, 4));
  EXPECT_FALSE(MlaWgmmaEligible(1, 32, 64, 8));
  EXPECT_FALSE(MlaWgmmaEligible(1, 16, 64, 12));
  EXPECT_FALSE(MlaWgmmaEligible(2, 64, 64, 12));
  const TileShape tall = ChooseTiles("sm_80", 64, KvFormat::kMxfp4);
  EXPECT_FALSE(RunsWgmmaPath("sm_80", KvFormat::kMxfp4, tall.block_m, tall.block_n,
                             tall.num_warps));
  EXPECT_EQ(ChooseTiles("sm_80", 32, KvFormat::kMxfp4, &large).block_n, 32);
}

TEST(TilePolicy, TwelveWarpsOnlyForHopperMxfp4SwapAbOrFp8SixtyFourRowTiles) {
  // A product warpgroup and two converting ones: sm_90a MXFP4 tiles of 16 or
  // 32 rows, one CTA per SM, raw stages shared evenly.
  auto shape = [](int m, int stages, int ctas) {
    TileShape t;
    t.block_m = m;
    t.block_n = 64;
    t.num_warps = 12;
    t.num_stages = stages;
    t.ctas_per_sm = ctas;
    return t;
  };
  EXPECT_TRUE(CheckTileShape("sm_90a", KvFormat::kMxfp4, shape(16, 2, 1)).ok());
  EXPECT_TRUE(CheckTileShape("sm_90a", KvFormat::kMxfp4, shape(32, 2, 1)).ok());
  EXPECT_FALSE(CheckTileShape("sm_90a", KvFormat::kMxfp4, shape(16, 3, 1)).ok());  // odd
  // Converted tiles are e4m3 (36 KB), so two raw stages per converter fit too.
  EXPECT_TRUE(CheckTileShape("sm_90a", KvFormat::kMxfp4, shape(16, 4, 1)).ok());
  EXPECT_FALSE(CheckTileShape("sm_90a", KvFormat::kMxfp4, shape(16, 8, 1)).ok());  // too big
  EXPECT_FALSE(CheckTileShape("sm_90a", KvFormat::kMxfp4, shape(16, 2, 2)).ok());
  EXPECT_FALSE(CheckTileShape("sm_90a", KvFormat::kMxfp4, shape(64, 2, 1)).ok());
  EXPECT_FALSE(CheckTileShape("sm_90a", KvFormat::kFp8E4m3, shape(16, 2, 1)).ok());
  // ... or the warp-specialised fp8 64-row tiles: a scorer and two
  // accumulators, two or three stages, one CTA per SM.
  EXPECT_TRUE(CheckTileShape("sm_90a", KvFormat::kFp8E4m3, shape(64, 3, 1)).ok());
  EXPECT_TRUE(CheckTileShape("sm_90a", KvFormat::kFp8E4m3, shape(64, 2, 1)).ok());
  EXPECT_FALSE(CheckTileShape("sm_90a", KvFormat::kFp8E4m3, shape(64, 4, 1)).ok());
  EXPECT_FALSE(CheckTileShape("sm_90a", KvFormat::kFp8E4m3, shape(64, 3, 2)).ok());
  EXPECT_FALSE(CheckTileShape("sm_90a", KvFormat::kFp8E4m3, shape(32, 2, 1)).ok());
  EXPECT_FALSE(CheckTileShape("sm_90a", KvFormat::kBf16, shape(64, 2, 1)).ok());
  EXPECT_FALSE(CheckTileShape("sm_80", KvFormat::kFp8E4m3, shape(64, 3, 1)).ok());
  EXPECT_FALSE(CheckTileShape("sm_90a", KvFormat::kBf16, shape(16, 2, 1)).ok());
  EXPECT_FALSE(CheckTileShape("sm_80", KvFormat::kMxfp4, shape(16, 2, 1)).ok());
  EXPECT_FALSE(CheckTileShape("sm_100a", KvFormat::kMxfp4, shape(16, 2, 1)).ok());
}

TEST(TilePolicy, ShippedManifestsMatchThePolicy) {
  const char* src = std::getenv("MLAJIT_SOURCE_DIR");
  if (src == nullptr) GTEST_SKIP() << "MLAJIT_SOURCE_DIR not set (run through ctest)";
  CheckManifest(std::string(src) + "/cache/manifests/deepseek_v3.jsonl");
  CheckManifest(std::string(src) + "/cache/manifests/deepseek_v3_amd.jsonl");
}

using test_support::ScopedEnv;

TEST(TilePolicy, TileOverrideReplacesAShapeThatCanRun) {
  TileShape t = ChooseTiles("sm_90a", 16, KvFormat::kFp8E4m3);
  {
    ScopedEnv env("MLAJIT_TILES", "32,64,4,2,1");
    ASSERT_TRUE(ApplyTileOverride("sm_90a", KvFormat::kFp8E4m3, &t).ok());
  }
  EXPECT_EQ(t.block_m, 32);
  EXPECT_EQ(t.ctas_per_sm, 1);
  EXPECT_EQ(t.smem_bytes, DecodeSmemBytes("sm_90a", KvFormat::kFp8E4m3, 32, 64, 4, 2));
  for (const char* bad : {"32,64,4", "48,64,4,2,1", "32,64,4,2,9", "64,64,8,4,4"}) {
    ScopedEnv env("MLAJIT_TILES", bad);
    TileShape u = t;
    const absl::Status s = ApplyTileOverride("sm_90a", KvFormat::kFp8E4m3, &u);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find(bad), std::string::npos) << s.message();
    EXPECT_EQ(u.block_m, t.block_m) << bad;  // left alone
  }
}

TEST(TilePolicy, SplitOverrideTakesATokenCountInRange) {
  TileShape t;
  EXPECT_TRUE(ApplySplitOverride(&t).ok());  // unset: the default stays
  EXPECT_EQ(t.min_split_cost, 64);
  {
    ScopedEnv env("MLAJIT_SPLIT_MIN_COST", "128");
    ASSERT_TRUE(ApplySplitOverride(&t).ok());
  }
  EXPECT_EQ(t.min_split_cost, 128);
  for (const char* bad : {"0", "63", "65537", "12x", "", "abc"}) {
    ScopedEnv env("MLAJIT_SPLIT_MIN_COST", bad);
    TileShape u = t;
    const absl::Status s = ApplySplitOverride(&u);
    if (*bad == '\0') {
      EXPECT_TRUE(s.ok());  // empty means unset
    } else {
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
      EXPECT_NE(s.message().find("MLAJIT_SPLIT_MIN_COST"), std::string::npos) << s.message();
    }
    EXPECT_EQ(u.min_split_cost, 128) << bad;
  }
}

TEST(TilePolicy, PreferredShapeReplacesThePolicyBeforeTheKnobs) {
  TileShape tuned = ChooseTiles("sm_90a", 16, KvFormat::kFp8E4m3);
  tuned.num_stages = 4;
  tuned.ctas_per_sm = 1;
  tuned.min_split_cost = 256;
  absl::StatusOr<TileShape> t =
      ChooseTilesWithOverrides("sm_90a", 16, KvFormat::kFp8E4m3, nullptr, &tuned);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->num_stages, 4);
  EXPECT_EQ(t->min_split_cost, 256);
  ScopedEnv env("MLAJIT_SPLIT_MIN_COST", "128");  // the knobs still win
  t = ChooseTilesWithOverrides("sm_90a", 16, KvFormat::kFp8E4m3, nullptr, &tuned);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->num_stages, 4);
  EXPECT_EQ(t->min_split_cost, 128);
}

}  // namespace
}  // namespace mlajit::plan
