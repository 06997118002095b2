// GPU decode against the CPU reference on fresh random inputs, outputs poisoned
// first: every KV format x Q mode, head counts, q_len and causality, 64-row
// tiles, fp8 tiles by tensor maps and by cp.async, batch sizes, skewed and
// empty sequences, paged layouts, repeated calls, changing layouts, concurrent
// threads. Skips with a reason when no GPU is present.
#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "mlajit/mlajit.h"
#include "src/base/mla_types.h"
#include "src/reference/batch_generator.h"
#include "src/reference/compare.h"
#include "src/reference/formats.h"
#include "tests/gpu/harness_suite.h"
#include "tools/harness/decode_harness.h"

namespace mlajit {
namespace {

using harness::CaseOptions;
using harness::CaseResult;
using harness::DecodeHarness;
using harness::DeviceBatch;
using harness::FreshSeed;
using harness::OutputTolerance;
using reference::BatchConfig;
using reference::LengthDistribution;

class GpuDecodeTest : public HarnessSuite {
 protected:
  void ExpectMatches(BatchConfig c, CaseOptions o = {}) {
    c.seed = FreshSeed();
    auto r = harness_->RunCase(c, o);
    ASSERT_TRUE(r.ok()) << r.status();
    const double tol = OutputTolerance(c);
    EXPECT_TRUE(r->out.Passes(tol)) << r->spec << "\n  out: " << r->out.ToString();
    if (o.write_lse) {
      EXPECT_TRUE(r->lse.Passes(1e-3)) << r->spec << "\n  lse: " << r->lse.ToString();
    }
  }
  // The same for a batch the test built or edited itself (generated from `c`).
  void ExpectBatchMatches(reference::Batch b, const BatchConfig& c) {
    auto db = harness_->UploadBatch(std::move(b), /*write_lse=*/true);
    ASSERT_TRUE(db.ok()) << db.status();
    auto r = harness_->Check(**db, {});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->out.Passes(OutputTolerance(c))) << r->spec << "\n  out: " << r->out.ToString();
    EXPECT_TRUE(r->lse.Passes(1e-3)) << r->spec << "\n  lse: " << r->lse.ToString();
  }
};

// A batch shape: heads, q_len, kv_len (uniform lengths up to it), batch
// size, page size (0: flat).
struct Shape {
  int heads, q_len, kv_len, batch, page;
};

BatchConfig Base() {
  BatchConfig c;
  c.batch_size = 4;
  c.num_heads = 16;
  c.q_len = 1;
  c.kv_len = 1000;
  c.lengths = LengthDistribution::kUniform;
  return c;
}

BatchConfig WithShape(KvFormat f, QMode m, Shape sh) {
  BatchConfig c = Base();
  c.kv_format = f;
  c.q_mode = m;
  c.num_heads = sh.heads;
  c.q_len = sh.q_len;
  c.kv_len = sh.kv_len;
  c.batch_size = sh.batch;
  c.page_size = sh.page;
  return c;
}

bool OnHopper(DecodeHarness& h) {
  absl::StatusOr<gpu::DeviceProperties> props = h.backend()->GetDeviceProperties(0);
  return props.ok() && props->arch == "sm_90a";
}

TEST_F(GpuDecodeTest, EveryKvFormatAndQMode) {
  for (KvFormat f : {KvFormat::kBf16, KvFormat::kFp8E4m3, KvFormat::kMxfp4}) {
    for (QMode m : {QMode::kBf16, QMode::kFp8}) {
      BatchConfig c = Base();
      c.kv_format = f;
      c.q_mode = m;
      ExpectMatches(c);
    }
  }
}

TEST_F(GpuDecodeTest, HeadCounts) {
  for (int heads : {1, 16, 32, 64, 128, 7}) {
    for (KvFormat f : {KvFormat::kFp8E4m3, KvFormat::kBf16}) {
      BatchConfig c = Base();
      c.num_heads = heads;
      c.kv_format = f;
      ExpectMatches(c);
    }
  }
}

TEST_F(GpuDecodeTest, QLenCausalAndNonCausal) {
  for (int q_len : {1, 2, 3, 4, 8}) {
    for (bool causal : {true, false}) {
      BatchConfig c = Base();
      c.q_len = q_len;
      c.causal = causal;
      c.num_heads = q_len > 4 ? 16 : 32;
      ExpectMatches(c);
    }
  }
}

TEST_F(GpuDecodeTest, SixtyFourRowTiles) {
  // More than 32 rows per sequence take 64-row tiles on sm_90a (fp8 and bf16
  // KV): each with both Q modes, full and part-filled tiles (64, 48, 128 rows),
  // a sequence split over many CTAs (partials merged), and paged caches.
  // These batches are small enough for fp8's policy to take 16-row tiles,
  // several a sequence: fp8 runs them so and with 64-row tiles forced.
  for (KvFormat f : {KvFormat::kFp8E4m3, KvFormat::kBf16}) {
    for (const char* tiles : {"", "64,64,12,3,1"}) {
      if (*tiles != '\0' && (f != KvFormat::kFp8E4m3 || !OnHopper(*harness_))) continue;
      ScopedEnv env("MLAJIT_TILES", tiles);
      for (QMode m : {QMode::kBf16, QMode::kFp8}) {
        for (Shape sh : {Shape{16, 4, 3000, 4, 0}, Shape{16, 3, 700, 6, 16},
                         Shape{128, 1, 20000, 1, 0}, Shape{32, 4, 1500, 3, 64}}) {
          ExpectMatches(WithShape(f, m, sh));
        }
      }
    }
  }
}

TEST_F(GpuDecodeTest, MergeUnitsOfEveryWidth) {
  // The merge gives each 32-lane group a quarter, a half or a whole row of a
  // split sequence, the narrowest that fits one a group, and halves, several
  // a group, beyond that (mla_combine.cuh). 64-row items of 16 heads by 4
  // queries, most of them split: on 132 SMs batches of 4 sequences reach
  // quarters, 12 one half a group, 24 whole rows and 40 several halves; the
  // skewed batch's long sequence merges more splits a row than one batch of
  // loads holds (MergeBatch), batch by batch, beside many short ones. Both
  // the 8-warp (bf16 KV) and the 12-warp (fp8) merge. (fp8's smaller batches
  // would take 16-row tiles: the 64-row tiles are forced on Hopper.)
  for (KvFormat f : {KvFormat::kBf16, KvFormat::kFp8E4m3}) {
    const bool ws = f == KvFormat::kFp8E4m3 && OnHopper(*harness_);
    ScopedEnv env("MLAJIT_TILES", ws ? "64,64,12,3,1" : "");
    for (int batch : {4, 12, 24, 40}) {
      ExpectMatches(WithShape(f, QMode::kBf16, Shape{16, 4, 3000, batch, 0}));
    }
    BatchConfig skewed = WithShape(f, QMode::kBf16, Shape{16, 4, 60000, 40, 0});
    skewed.lengths = LengthDistribution::kSkewed;
    ExpectMatches(skewed);
  }
}

TEST_F(GpuDecodeTest, Bf16SeesawEveryTileCount) {
  // bf16 work items of 8 tiles or more take the seesaw schedule on sm_90a
  // (tiles in pairs, the last pair possibly one tile, the last tile partial).
  // Lengths uniform in [1, kv_len] (Base()): items of 1 to 17 or 18 tiles,
  // on both schedules, odd and even tile counts, full and partial last
  // tiles, flat and in pages of 16, both Q modes, 64 and 128 rows; and
  // causal 96-row sequences (the second row tile part-filled) of up to 33
  // tiles, split and merged.
  for (QMode m : {QMode::kBf16, QMode::kFp8}) {
    for (Shape sh : {Shape{128, 1, 1025, 66, 0}, Shape{128, 1, 1088, 66, 16},
                     Shape{16, 4, 1150, 132, 0}, Shape{32, 3, 2100, 33, 0}}) {
      ExpectMatches(WithShape(KvFormat::kBf16, m, sh));
    }
  }
  // Split pieces at the threshold: 128-row sequences (random lengths, then
  // every one 8100 or 8150 tokens long) cut into 16 pieces of 8 tiles on
  // the seesaw, the last one part-filled and 7 tiles long (two-stage) or 8
  // in pages of 16, merged.
  for (LengthDistribution lengths : {LengthDistribution::kUniform, LengthDistribution::kFixed}) {
    for (Shape sh : {Shape{32, 4, 8100, 4, 0}, Shape{32, 4, 8150, 4, 16}}) {
      BatchConfig c = WithShape(KvFormat::kBf16, QMode::kBf16, sh);
      c.lengths = lengths;
      ExpectMatches(c);
    }
  }
  // Skewed lengths: long items on the seesaw and short pieces on the
  // two-stage schedule in one launch, CTAs running up to five items of both
  // kinds (they share the shared memory where the seesaw keeps its mbarriers).
  BatchConfig c = WithShape(KvFormat::kBf16, QMode::kBf16, Shape{128, 1, 8192, 200, 0});
  c.lengths = LengthDistribution::kSkewed;
  c.zero_length_fraction = 0.25;
  ExpectMatches(c);
}

// Runs `c` through its plan against the CPU reference and returns the plan's
// description (mlajit_plan_describe_json), for tests of which tiles run.
// `declare_kv_bytes` false: the call gives no kv size (args.kv_bytes 0).
std::string ExpectMatchesAndDescribe(DecodeHarness& h, BatchConfig c,
                                     bool declare_kv_bytes = true) {
  c.seed = FreshSeed();
  absl::StatusOr<std::unique_ptr<DeviceBatch>> db = h.Upload(c, true);
  EXPECT_TRUE(db.ok()) << db.status();
  if (!db.ok()) return "";
  if (!declare_kv_bytes) (*db)->args.kv_bytes = 0;
  const std::string plan = DescribePlan(**db);
  absl::StatusOr<CaseResult> r = h.Check(**db, {});
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return plan;
  EXPECT_TRUE(r->out.Passes(OutputTolerance(c))) << r->spec << "\n  out: " << r->out.ToString();
  EXPECT_TRUE(r->lse.Passes(1e-3)) << r->spec << "\n  lse: " << r->lse.ToString();
  return plan;
}

TEST_F(GpuDecodeTest, Mxfp4LargeRowTiles) {
  // MXFP4 with more than 32 rows per sequence: on Hopper the policy's 32-row
  // swap-AB tiles (8 warps; several row tiles per sequence, the last one
  // part-filled at 48 rows), and the 64 x 64 mma.sync tiles that the tuner
  // may pick there (and that the policy picks elsewhere): full and
  // part-filled tiles, a split sequence, and paged caches whose pages hold
  // fewer tokens than a tile.
  const Shape shapes[] = {Shape{16, 4, 3000, 4, 0}, Shape{32, 3, 700, 6, 16},
                          Shape{128, 1, 20000, 1, 0}, Shape{16, 4, 1500, 3, 1},
                          Shape{64, 1, 900, 5, 64}};
  for (Shape sh : shapes) {
    const std::string plan =
        ExpectMatchesAndDescribe(*harness_, WithShape(KvFormat::kMxfp4, QMode::kBf16, sh));
    if (OnHopper(*harness_)) {
      EXPECT_EQ(IntField(plan, "block_m"), 32) << plan;
      EXPECT_EQ(IntField(plan, "num_warps"), 8) << plan;
    }
  }
  if (!OnHopper(*harness_)) return;  // 64 x 64 MXFP4 tiles need Hopper's shared memory
  ScopedEnv env("MLAJIT_TILES", "64,64,8,2,1");
  for (Shape sh : shapes) {
    const std::string plan =
        ExpectMatchesAndDescribe(*harness_, WithShape(KvFormat::kMxfp4, QMode::kBf16, sh));
    EXPECT_EQ(IntField(plan, "block_m"), 64) << plan;
  }
}

TEST_F(GpuDecodeTest, MmaSyncTilesEveryKvFormat) {
  // The mma.sync path, which sm_80 and sm_89 run for every format, forced on
  // any GPU: each KV format and Q mode, sequences split over CTAs (the split
  // partials: f16 for fp8 KV, fp32 otherwise), flat and paged.
  ScopedEnv env("MLAJIT_TILES", "32,32,8,2,1");
  for (KvFormat f : {KvFormat::kFp8E4m3, KvFormat::kBf16, KvFormat::kMxfp4}) {
    for (QMode m : {QMode::kBf16, QMode::kFp8}) {
      for (Shape sh : {Shape{16, 2, 3000, 4, 0}, Shape{16, 1, 5000, 3, 64}}) {
        const std::string plan = ExpectMatchesAndDescribe(*harness_, WithShape(f, m, sh));
        EXPECT_EQ(IntField(plan, "block_n"), 32) << plan;
        EXPECT_EQ(IntField(plan, "num_warps"), 8) << plan;
      }
    }
  }
}

TEST_F(GpuDecodeTest, Fp8QScalesEachRowOnItsOwn) {
  // a8 takes one scale per query row (token and head): rows whose magnitudes
  // differ by up to 2^31 each keep fp8's precision, on every path that runs
  // a8 (the policy's swap-AB tiles of 16 and 32 rows for fp8, bf16 and MXFP4
  // KV; the warp-specialised 64-row path; bf16's 64-row two-stage and seesaw
  // schedules; mma.sync tiles, which fold each scale into Q). Each row is
  // multiplied by its own power of two, exactly, before the reference sees it:
  // 2^-30 .. 2^1, as larger ones would sharpen the softmax until the
  // products' float rounding, not fp8, decides which token a row takes.
  struct Case {
    KvFormat kv;
    Shape shape;
    const char* tiles;  // "" = the policy
  };
  for (const Case& c : {Case{KvFormat::kFp8E4m3, Shape{16, 1, 3000, 8, 0}, ""},
                        Case{KvFormat::kFp8E4m3, Shape{32, 1, 1500, 6, 64}, ""},
                        Case{KvFormat::kFp8E4m3, Shape{16, 4, 2000, 40, 0}, ""},
                        Case{KvFormat::kFp8E4m3, Shape{16, 4, 2000, 3, 16}, "64,64,12,3,1"},
                        Case{KvFormat::kBf16, Shape{16, 1, 3000, 8, 0}, ""},
                        Case{KvFormat::kBf16, Shape{16, 4, 2000, 6, 64}, ""},
                        Case{KvFormat::kMxfp4, Shape{16, 1, 3000, 8, 0}, ""},
                        Case{KvFormat::kFp8E4m3, Shape{16, 2, 3000, 4, 0}, "32,32,8,2,1"},
                        Case{KvFormat::kBf16, Shape{16, 1, 2000, 3, 0}, "32,32,8,2,1"}}) {
    if (*c.tiles != '\0' && c.tiles[0] == '6' && !OnHopper(*harness_)) continue;
    ScopedEnv env("MLAJIT_TILES", c.tiles);
    BatchConfig cfg = WithShape(c.kv, QMode::kFp8, c.shape);
    cfg.seed = FreshSeed();
    reference::Batch b = reference::GenerateBatch(cfg);
    std::mt19937 rng(static_cast<uint32_t>(cfg.seed));
    for (size_t row = 0; row < b.q.size() / kHeadDimQk; ++row) {
      const float f = std::ldexp(1.0f, static_cast<int>(rng() % 32) - 30);
      for (int d = 0; d < kHeadDimQk; ++d) {
        uint16_t& bits = b.q[row * kHeadDimQk + d];
        bits = reference::FloatToBf16(reference::Bf16ToFloat(bits) * f);
      }
    }
    ExpectBatchMatches(std::move(b), cfg);
  }
}

TEST_F(GpuDecodeTest, Fp8RowTilesFollowTheBatch) {
  // fp8 with 32 rows per sequence on Hopper (tile_policy.cc): 16-row swap-AB
  // tiles below 12 wide units per SM, 32-row tiles from there (fixed lengths:
  // 8 x 8192 tokens are 1024 wide units, 16 x 8192 are 2048, against 1584 on
  // 132 SMs); both Q modes, S with Q in one or two e4m3 terms.
  struct Case {
    Shape shape;
    int hopper_rows;
  };
  for (QMode m : {QMode::kBf16, QMode::kFp8}) {
    for (const Case& k : {Case{{32, 1, 8192, 8, 0}, 16}, Case{{32, 1, 8192, 16, 64}, 32}}) {
      BatchConfig c = WithShape(KvFormat::kFp8E4m3, m, k.shape);
      c.lengths = LengthDistribution::kFixed;
      const std::string plan = ExpectMatchesAndDescribe(*harness_, c);
      if (OnHopper(*harness_)) {
        EXPECT_EQ(IntField(plan, "block_m"), k.hopper_rows) << plan;
        EXPECT_EQ(IntField(plan, "num_warps"), 4) << plan;
      }
    }
  }
}

TEST_F(GpuDecodeTest, Mxfp4TilesOfUpTo32Rows) {
  // MXFP4 with at most 32 rows per sequence on Hopper (tile_policy.cc): the
  // swap-AB path, 32-row tiles with one converting warpgroup (8 warps), or
  // 16-row tiles with two (12 warps) for up to 16 rows and below 2 wide
  // units per SM (fixed lengths: 2142, 1008, 504 and 252 wide units against
  // 264 on 132 SMs); every page size; 8011 tokens end in a part tile and
  // split. Elsewhere the mma.sync path's 32 x 32 tiles.
  struct Case {
    Shape shape;
    bool fixed;
    int hopper_rows;
    int hopper_warps;
  };
  for (const Case& k :
       {Case{{32, 1, 8011, 8, 0}, true, 32, 8}, Case{{32, 1, 8011, 4, 0}, true, 32, 8},
        Case{{32, 1, 8011, 2, 0}, true, 16, 12}, Case{{16, 2, 3000, 4, 64}, false, 16, 12},
        Case{{16, 2, 8011, 8, 1}, true, 32, 8}, Case{{16, 2, 8011, 17, 64}, true, 32, 8},
        Case{{32, 1, 700, 6, 16}, false, 16, 12}}) {
    BatchConfig c = WithShape(KvFormat::kMxfp4, QMode::kBf16, k.shape);
    if (k.fixed) c.lengths = LengthDistribution::kFixed;
    const std::string plan = ExpectMatchesAndDescribe(*harness_, c);
    if (OnHopper(*harness_)) {
      EXPECT_EQ(IntField(plan, "block_m"), k.hopper_rows) << plan;
      EXPECT_EQ(IntField(plan, "block_n"), 64) << plan;
      EXPECT_EQ(IntField(plan, "num_warps"), k.hopper_warps) << plan;
    }
  }
}

TEST_F(GpuDecodeTest, Mxfp4SwapAbTilesEveryPageSizeAndQMode) {
  // The converting warpgroups' every branch: pages of 1 and 16 tokens
  // (records copied one by one), 64 and flat (one run per tile); both Q
  // modes; 16- and 32-row tiles with one converting warpgroup (8 warps, 2 and
  // 3 raw stages) or two (12 warps, one raw stage each); part tiles,
  // empty sequences, and sequences split over CTAs. Pages of 1 token with
  // and without kv_bytes: records are copied in whole chunks inside the
  // declared buffer, with exact edges outside it. (Other architectures run
  // the 8-warp shapes on the mma.sync path and refuse the 12-warp ones.)
  struct Forced {
    const char* tiles;
    int warps;
  };
  for (const Forced& f : {Forced{"16,64,8,3,1", 8}, Forced{"32,64,8,2,1", 8},
                          Forced{"16,64,8,2,1", 8}, Forced{"16,64,12,2,1", 12},
                          Forced{"32,64,12,2,1", 12}}) {
    if (f.warps == 12 && !OnHopper(*harness_)) continue;
    ScopedEnv env("MLAJIT_TILES", f.tiles);
    for (int page : {1, 16, 64, 0}) {
      for (QMode m : {QMode::kBf16, QMode::kFp8}) {
        BatchConfig c = WithShape(KvFormat::kMxfp4, m, Shape{16, 2, 5000, 5, page});
        c.zero_length_fraction = 0.2;
        const std::string plan = ExpectMatchesAndDescribe(*harness_, c);
        EXPECT_EQ(IntField(plan, "num_warps"), f.warps) << plan;
        if (page == 1) ExpectMatchesAndDescribe(*harness_, c, /*declare_kv_bytes=*/false);
      }
    }
  }
}

TEST_F(GpuDecodeTest, Mxfp4BlocksAtEveryDistanceFromTheirTilesLargest) {
  // The converting warpgroups bring a tile's blocks to its largest scale
  // (mla_mxfp4_lut.h): blocks within 14 powers of two of it convert exactly,
  // those below round to e4m3's subnormals or to zero. Generated KV has
  // nearly equal scales, so no block goes below; here a quarter of the blocks
  // keep their scale and the rest move 1-11, 12-30 or 31-60 powers of two
  // down, exact, rounded and flushed blocks side by side in one warp, against
  // the reference (which decodes every scale exactly). 16- and 32-row tiles,
  // flat and paged (records copied one by one).
  for (const char* tiles : {"16,64,12,2,1", "32,64,8,2,1"}) {
    if (std::string(tiles) == "16,64,12,2,1" && !OnHopper(*harness_)) continue;
    ScopedEnv env("MLAJIT_TILES", tiles);
    for (int page : {0, 16}) {
      BatchConfig c = WithShape(KvFormat::kMxfp4, QMode::kBf16, Shape{16, 2, 3000, 5, page});
      c.seed = FreshSeed();
      reference::Batch b = reference::GenerateBatch(c);
      std::mt19937 rng(static_cast<uint32_t>(c.seed));
      const size_t slots = b.kv.size() / reference::kMxfp4TokenBytes;
      for (size_t t = 0; t < slots; ++t) {
        for (int blk = 0; blk < kMxfp4ScaleBytes; ++blk) {
          uint8_t& scale = b.kv[t * reference::kMxfp4TokenBytes + kMxfp4PackedBytes + blk];
          const int kind = static_cast<int>(rng() % 4);
          const int down = kind == 0   ? 0
                           : kind == 1 ? 1 + static_cast<int>(rng() % 11)
                           : kind == 2 ? 12 + static_cast<int>(rng() % 19)
                                       : 31 + static_cast<int>(rng() % 30);
          scale = static_cast<uint8_t>(std::max(0, scale - down));
        }
      }
      ExpectBatchMatches(std::move(b), c);
    }
  }
}

TEST_F(GpuDecodeTest, Fp8SixtyFourRowTilesEveryPageSizeAndQMode) {
  // fp8 with more than 32 rows per sequence: the warp-specialised path (the
  // policy on Hopper for all but small batches: a scorer and two
  // accumulating warpgroups, S from the tile as stored, V^T converted in
  // registers; forced here), the two-warpgroup one (forced; a tuner
  // candidate), and the policy, which gives these small batches the swap-AB
  // path's 16-row tiles, several a sequence. Pages of 1, 16 and 64 tokens
  // and flat; both Q modes (bf16 Q as two e4m3 terms, a8 codes); 48 rows (a
  // part row tile) and 128 (two row tiles); part KV tiles, empty sequences,
  // sequences split over CTAs. (Elsewhere the mma.sync path.)
  struct Forced {
    const char* tiles;  // "" = the policy
    int hopper_rows, hopper_warps;
  };
  for (const Forced& f :
       {Forced{"64,64,12,3,1", 64, 12}, Forced{"64,64,8,2,1", 64, 8}, Forced{"", 16, 4}}) {
    if (f.hopper_warps == 12 && !OnHopper(*harness_)) continue;
    ScopedEnv env("MLAJIT_TILES", f.tiles);
    for (int page : {0, 1, 16, 64}) {
      for (QMode m : {QMode::kBf16, QMode::kFp8}) {
        const Shape sh =
            m == QMode::kBf16 ? Shape{16, 3, 3000, 5, page} : Shape{32, 4, 2100, 3, page};
        BatchConfig c = WithShape(KvFormat::kFp8E4m3, m, sh);
        c.zero_length_fraction = 0.2;
        const std::string plan = ExpectMatchesAndDescribe(*harness_, c);
        if (OnHopper(*harness_)) {
          EXPECT_EQ(IntField(plan, "block_m"), f.hopper_rows) << plan;
          EXPECT_EQ(IntField(plan, "num_warps"), f.hopper_warps) << plan;
        }
      }
    }
  }
}

// A harness whose runtime copies every tile by cp.async: MLAJIT_KV_TMA=0 is
// read when a runtime is created.
absl::StatusOr<std::unique_ptr<DecodeHarness>> HarnessWithoutTensorMaps() {
  ScopedEnv env("MLAJIT_KV_TMA", "0");
  return DecodeHarness::Create(0);
}

TEST_F(GpuDecodeTest, SwapAbAndFp8TilesWithAndWithoutTensorMaps) {
  // fp8 and bf16 on Hopper copy whole tiles by tensor maps (the swap-AB path,
  // 16 and 32 rows, 16-row tiles of 64-row sequences in a small fp8 batch,
  // and fp8's warp-specialised one, 64 rows, in a batch of about 1700 wide
  // units, 5 standard deviations above the policy's 1056; flat, and pages
  // of 64 or 128 tokens) and the rest by cp.async: every item's last part
  // tile, pages of 16 tokens, and everything with MLAJIT_KV_TMA=0 (a runtime
  // of its own, since the knob is read when the runtime is created). Both Q
  // modes, empty sequences, sequences split over CTAs, sequences of a single
  // tile. Both copies write the same swizzled stage, which S reads through
  // descriptors and P V by 16-byte loads.
  absl::StatusOr<std::unique_ptr<DecodeHarness>> without = HarnessWithoutTensorMaps();
  ASSERT_TRUE(without.ok()) << without.status();
  struct Case {
    KvFormat format;
    Shape shape;
    int hopper_warps;  // 4: swap-AB, 12: warp-specialised
  };
  for (DecodeHarness* h : {harness_, without->get()}) {
    const bool maps = h == harness_ && OnHopper(*h);
    for (int page : {0, 64, 128, 16}) {
      for (QMode m : {QMode::kBf16, QMode::kFp8}) {
        for (const Case& k : {Case{KvFormat::kFp8E4m3, Shape{16, 1, 9000, 6, page}, 4},
                              Case{KvFormat::kFp8E4m3, Shape{16, 2, 3000, 5, page}, 4},
                              Case{KvFormat::kFp8E4m3, Shape{32, 1, 64, 3, page}, 4},
                              Case{KvFormat::kFp8E4m3, Shape{16, 4, 2500, 4, page}, 4},
                              Case{KvFormat::kFp8E4m3, Shape{16, 4, 1000, 132, page}, 12},
                              Case{KvFormat::kBf16, Shape{16, 1, 9000, 6, page}, 4},
                              Case{KvFormat::kBf16, Shape{16, 2, 3000, 5, page}, 4},
                              Case{KvFormat::kBf16, Shape{32, 1, 64, 3, page}, 4}}) {
          BatchConfig c = WithShape(k.format, m, k.shape);
          c.zero_length_fraction = 0.2;
          const std::string plan = ExpectMatchesAndDescribe(*h, c);
          if (!OnHopper(*h)) continue;
          EXPECT_EQ(IntField(plan, "num_warps"), k.hopper_warps) << plan;
          EXPECT_NE(plan.find(absl::StrCat("\"kv_tensor_maps\":",
                                           maps && page != 16 ? "true" : "false")),
                    std::string::npos)
              << plan;
        }
      }
    }
  }
}

TEST_F(GpuDecodeTest, Bf16RowPairTilesWithAndWithoutTensorMaps) {
  // bf16 tiles of 32 rows as two warpgroups of 16 rows sharing the KV stages
  // (8 warps on Hopper, forced; a tuner candidate): 32 rows of one q
  // position; two causal q positions of 16 heads (each warpgroup its own
  // position); 24 rows (the second warpgroup's half filled) and 8 (empty);
  // 48 rows (a second row tile with rows for the first warpgroup only).
  // Flat and pages of 64 tokens (tensor copies where maps exist), pages of
  // 16 and 1 (cp.async, copied by the first warpgroup alone); both Q modes;
  // part tiles, empty sequences, sequences split over CTAs. (Elsewhere the
  // mma.sync path.)
  absl::StatusOr<std::unique_ptr<DecodeHarness>> without = HarnessWithoutTensorMaps();
  ASSERT_TRUE(without.ok()) << without.status();
  ScopedEnv env("MLAJIT_TILES", "32,64,8,2,1");
  for (DecodeHarness* h : {harness_, without->get()}) {
    const bool maps = h == harness_ && OnHopper(*h);
    for (int page : {0, 64, 16, 1}) {
      for (const Shape& sh :
           {Shape{32, 1, 3000, 5, page}, Shape{16, 2, 2500, 4, page}, Shape{24, 1, 700, 3, page},
            Shape{8, 1, 900, 3, page}, Shape{16, 3, 1800, 3, page}}) {
        for (QMode m : {QMode::kBf16, QMode::kFp8}) {
          if (m == QMode::kFp8 && sh.heads != 32) continue;
          BatchConfig c = WithShape(KvFormat::kBf16, m, sh);
          c.zero_length_fraction = 0.2;
          const std::string plan = ExpectMatchesAndDescribe(*h, c);
          if (!OnHopper(*h)) continue;
          EXPECT_EQ(IntField(plan, "block_m"), 32) << plan;
          EXPECT_EQ(IntField(plan, "num_warps"), 8) << plan;
          EXPECT_NE(plan.find(absl::StrCat("\"kv_tensor_maps\":",
                                           maps && page % 64 == 0 ? "true" : "false")),
                    std::string::npos)
              << plan;
        }
      }
    }
  }
}

TEST_F(GpuDecodeTest, Bf16SeesawTilesWithAndWithoutTensorMaps) {
  // bf16 on Hopper's 64-row seesaw copies whole tiles by tensor maps (flat,
  // and pages of 64 or 128 tokens) and the rest by cp.async: every item's
  // last part tile, pages of 16 tokens, and everything with MLAJIT_KV_TMA=0
  // (a runtime of its own). Items of 17 to 18 tiles (one per sequence) and
  // of 16 to 17 (sequences split in two and merged), both Q modes, empty
  // sequences among them.
  absl::StatusOr<std::unique_ptr<DecodeHarness>> without = HarnessWithoutTensorMaps();
  ASSERT_TRUE(without.ok()) << without.status();
  for (DecodeHarness* h : {harness_, without->get()}) {
    const bool maps = h == harness_ && OnHopper(*h);
    for (int page : {0, 64, 128, 16}) {
      for (QMode m : {QMode::kBf16, QMode::kFp8}) {
        for (Shape sh : {Shape{128, 1, 1100, 66, page}, Shape{32, 3, 2100, 33, page}}) {
          BatchConfig c = WithShape(KvFormat::kBf16, m, sh);
          c.zero_length_fraction = 0.2;
          const std::string plan = ExpectMatchesAndDescribe(*h, c);
          if (!OnHopper(*h)) continue;
          EXPECT_EQ(IntField(plan, "block_m"), 64) << plan;
          EXPECT_NE(plan.find(absl::StrCat("\"kv_tensor_maps\":",
                                           maps && page != 16 ? "true" : "false")),
                    std::string::npos)
              << plan;
        }
      }
    }
  }
}

TEST_F(GpuDecodeTest, NanKvCodeReachesItsSequenceOnly) {
  // An fp8 NaN code (what the quantiser writes for a NaN) in one token's V
  // dims, or an MXFP4 NaN scale (0xff, the quantiser's for a block holding a
  // NaN) on one of its blocks: the scores of that token are NaN, so every
  // output row of its sequence is NaN, as in the reference, on the swap-AB
  // and 64-row paths (MXFP4: 16- and 32-row swap-AB tiles; fp8's 64 rows:
  // the policy's 16-row tiles for this small batch and, forced on Hopper,
  // the warp-specialised path) and with both Q modes (no conversion reads
  // the code as a finite number). The other sequences are unaffected.
  for (KvFormat f : {KvFormat::kFp8E4m3, KvFormat::kMxfp4}) {
    for (QMode m : {QMode::kBf16, QMode::kFp8}) {
      for (const auto& [q_len, tiles] :
           {std::pair<int, const char*>{1, ""}, {4, ""}, {4, "64,64,12,3,1"}}) {  // 16 and 64 rows
        if (*tiles != '\0' && (f != KvFormat::kFp8E4m3 || !OnHopper(*harness_))) continue;
        ScopedEnv env("MLAJIT_TILES", tiles);
        BatchConfig c = Base();
        c.kv_format = f;
        c.q_mode = m;
        c.q_len = q_len;
        c.lengths = LengthDistribution::kFixed;
        c.seed = FreshSeed();
        reference::Batch b = reference::GenerateBatch(c);
        constexpr int kSeq = 1, kToken = 5, kDim = 100, kBlock = 3;
        const size_t token = static_cast<size_t>(b.kv_indptr[kSeq] + kToken) * KvBytesPerToken(f);
        if (f == KvFormat::kMxfp4) {
          b.kv[token + kMxfp4PackedBytes + kBlock] = 0xff;
        } else {
          b.kv[token + kDim] = 0x7f;
        }
        auto db = harness_->UploadBatch(std::move(b), /*write_lse=*/true);
        ASSERT_TRUE(db.ok()) << db.status();
        auto r = harness_->Check(**db, {});
        ASSERT_TRUE(r.ok()) << r.status();
        const reference::Batch& got = (*db)->batch;
        std::vector<uint16_t> out((*db)->ref_out.size());
        ASSERT_TRUE(harness_->backend()
                        ->MemcpyDtoH(harness_->device(), out.data(), (*db)->out.ptr(),
                                     out.size() * 2, nullptr)
                        .ok());
        ASSERT_TRUE(harness_->backend()->StreamSynchronize(harness_->device(), nullptr).ok());
        const size_t row_elems = static_cast<size_t>(c.num_heads) * kHeadDimV;
        const size_t nan_lo = got.qo_indptr[kSeq] * row_elems;
        const size_t nan_hi = got.qo_indptr[kSeq + 1] * row_elems;
        int64_t finite_in_nan_rows = 0;
        for (size_t i = nan_lo; i < nan_hi; ++i) {
          finite_in_nan_rows += std::isnan(reference::Bf16ToFloat(out[i])) ? 0 : 1;
        }
        EXPECT_EQ(finite_in_nan_rows, 0) << r->spec;
        for (auto [lo, hi] : {std::pair<size_t, size_t>{0, nan_lo}, {nan_hi, out.size()}}) {
          const auto cmp =
              reference::CompareBf16(absl::MakeSpan(out).subspan(lo, hi - lo),
                                     absl::MakeSpan((*db)->ref_out).subspan(lo, hi - lo));
          EXPECT_TRUE(cmp.Passes(OutputTolerance(c))) << r->spec << "\n  " << cmp.ToString();
        }
      }
    }
  }
}

TEST_F(GpuDecodeTest, CausalRowsThatSeeNothing) {
  BatchConfig c = Base();
  c.q_len = 4;
  c.kv_len = 2;  // q_len > kv_len: the first rows see no token (out 0, lse -inf)
  c.lengths = LengthDistribution::kFixed;
  ExpectMatches(c);
}

TEST_F(GpuDecodeTest, BatchSizes) {
  for (int batch : {1, 2, 33, 256}) {
    BatchConfig c = Base();
    c.batch_size = batch;
    c.kv_len = batch > 100 ? 600 : 3000;
    ExpectMatches(c);
  }
}

TEST_F(GpuDecodeTest, LongSequenceSplitsAcrossCtas) {
  BatchConfig c = Base();
  c.batch_size = 1;
  c.kv_len = 131072;
  c.lengths = LengthDistribution::kFixed;
  ExpectMatches(c);
}

TEST_F(GpuDecodeTest, SkewedAndZeroLengthSequences) {
  BatchConfig c = Base();
  c.batch_size = 24;
  c.kv_len = 65536;
  c.lengths = LengthDistribution::kSkewed;
  c.zero_length_fraction = 0.25;
  for (KvFormat f : {KvFormat::kFp8E4m3, KvFormat::kMxfp4}) {
    c.kv_format = f;
    ExpectMatches(c);
  }
}

TEST_F(GpuDecodeTest, PagedLayouts) {
  for (int page : {1, 16, 64, 128}) {
    for (KvFormat f : {KvFormat::kFp8E4m3, KvFormat::kBf16, KvFormat::kMxfp4}) {
      BatchConfig c = Base();
      c.page_size = page;
      c.kv_format = f;
      c.zero_length_fraction = 0.2;
      ExpectMatches(c);
    }
  }
}

TEST_F(GpuDecodeTest, WithoutLse) {
  BatchConfig c = Base();
  CaseOptions o;
  o.write_lse = false;
  ExpectMatches(c, o);
}

TEST_F(GpuDecodeTest, RepeatedCallsWithOnePlan) {
  BatchConfig c = Base();
  c.seed = FreshSeed();
  auto db = harness_->Upload(c, true);
  ASSERT_TRUE(db.ok()) << db.status();
  for (int round = 0; round < 5; ++round) {
    CaseOptions o;
    o.calls = 3;
    auto r = harness_->Check(**db, o);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->out.Passes(OutputTolerance(c)))
        << "round " << round << ": " << r->out.ToString();
  }
}

TEST_F(GpuDecodeTest, PlansForChangingLayouts) {
  // Same shape (batch, heads, q_len), different lengths: a plan keyed by shape
  // alone would return wrong results here.
  for (int round = 0; round < 4; ++round) {
    BatchConfig c = Base();
    c.batch_size = 8;
    c.kv_len = 4096;
    ExpectMatches(c);
  }
}

TEST_F(GpuDecodeTest, FourThreadsDecodeConcurrently) {
  std::vector<std::thread> threads;
  std::vector<std::string> failures(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t]() {
      auto stream = harness_->backend()->CreateStream(harness_->device());
      if (!stream.ok()) {
        failures[t] = std::string(stream.status().message());
        return;
      }
      BatchConfig c = Base();
      c.num_heads = 16 << (t % 3);
      c.seed = FreshSeed();
      CaseOptions o;
      o.stream = *stream;
      o.calls = 4;
      auto r = harness_->RunCase(c, o);
      if (!r.ok()) {
        failures[t] = std::string(r.status().message());
      } else if (!r->out.Passes(OutputTolerance(c))) {
        failures[t] = r->spec + ": " + r->out.ToString();
      }
      (void)harness_->backend()->DestroyStream(harness_->device(), *stream);
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
}

TEST_F(GpuDecodeTest, TenThousandCallsStayCorrect) {
  BatchConfig c = Base();
  c.seed = FreshSeed();
  auto db = harness_->Upload(c, true);
  ASSERT_TRUE(db.ok()) << db.status();
  for (int i = 0; i < 10000; ++i) {
    ASSERT_EQ(mlajit_decode((*db)->plan, &(*db)->args, nullptr), MLAJIT_STATUS_OK)
        << mlajit_last_error();
  }
  auto r = harness_->Check(**db, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->out.Passes(OutputTolerance(c))) << r->out.ToString();
}

TEST_F(GpuDecodeTest, BadArgumentsAreRejectedBeforeLaunch) {
  BatchConfig c = Base();
  auto db = harness_->Upload(c, true);
  ASSERT_TRUE(db.ok()) << db.status();
  mlajit_decode_args_t a = (*db)->args;
  a.q = nullptr;
  EXPECT_EQ(mlajit_decode((*db)->plan, &a, nullptr), MLAJIT_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(mlajit_last_error()).find("args.q"), std::string::npos);
  a = (*db)->args;
  a.lse = nullptr;
  EXPECT_EQ(mlajit_decode((*db)->plan, &a, nullptr), MLAJIT_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(mlajit_last_error()).find("write_lse"), std::string::npos);
  a = (*db)->args;
  a.kv_scale = -1.0f;
  EXPECT_EQ(mlajit_decode((*db)->plan, &a, nullptr), MLAJIT_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(mlajit_last_error()).find("kv_scale=-1"), std::string::npos);
  a = (*db)->args;
  a.kv_bytes = 100;
  EXPECT_EQ(mlajit_decode((*db)->plan, &a, nullptr), MLAJIT_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(mlajit_last_error()).find("kv_bytes=100"), std::string::npos);
}

}  // namespace
}  // namespace mlajit
