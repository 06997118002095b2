// The tile policy, and the shipped manifests agreeing with it: a warmed cache is
// only useful if it holds exactly the specs the runtime will ask for.
#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "kernel_templates/mla_params.h"
#include "src/jit/kernel_spec.h"
#include "src/plan/tile_policy.h"

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
        if (std::string(arch) == "sm_90a" && f != KvFormat::kMxfp4) {
          // Hopper's warpgroup-MMA path: 16 or 32 rows per tile, fp8 two CTAs per SM.
          EXPECT_TRUE(wgmma) << rows;
          EXPECT_EQ(t.smem_bytes, MlaWgmmaSmemBytes(static_cast<int>(f), t.block_m,
                                                    t.num_stages));
          EXPECT_EQ(t.block_m, rows <= 16 ? 16 : 32) << rows;
          if (f == KvFormat::kFp8E4m3) {
            EXPECT_EQ(t.ctas_per_sm, 2);
          }
        } else {
          EXPECT_FALSE(wgmma) << arch;
          EXPECT_EQ(t.smem_bytes, MlaMmaSmemBytes(static_cast<int>(f), t.block_m, t.block_n,
                                                  t.num_stages));
        }
        if (std::string(arch) == "sm_90a" && f == KvFormat::kMxfp4) {
          // Hopper fits the largest mma.sync tiles: up to 64 rows of a sequence in one tile.
          EXPECT_GE(t.block_m, rows < 64 ? rows : 64) << rows;
        }
      }
    }
  }
  EXPECT_FALSE(ChooseTiles("gfx942", 16, KvFormat::kFp8E4m3).tensor_cores);
  EXPECT_FALSE(ChooseTiles("sm_75", 16, KvFormat::kFp8E4m3).tensor_cores);
}

void CheckManifest(const std::string& path) {
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot read " << path;
  std::string line;
  int specs = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    auto spec = jit::SpecFromJson(line);
    ASSERT_TRUE(spec.ok()) << path << ": " << spec.status();
    TileShape t = ChooseTiles(spec->arch, spec->num_heads * spec->max_q_len, spec->kv_format);
    EXPECT_EQ(spec->block_m, t.block_m) << line;
    EXPECT_EQ(spec->block_n, t.block_n) << line;
    EXPECT_EQ(spec->num_warps, t.num_warps) << line;
    EXPECT_EQ(spec->num_stages, t.num_stages) << line;
    ++specs;
  }
  EXPECT_GT(specs, 100) << path;
}

TEST(TilePolicy, ShippedManifestsMatchThePolicy) {
  const char* src = std::getenv("MLAJIT_SOURCE_DIR");
  if (src == nullptr) GTEST_SKIP() << "MLAJIT_SOURCE_DIR not set (run through ctest)";
  CheckManifest(std::string(src) + "/cache/manifests/deepseek_v3.jsonl");
  CheckManifest(std::string(src) + "/cache/manifests/deepseek_v3_amd.jsonl");
}

// Sets an environment variable for one scope and restores "unset" after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char* name_;
};

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
  EXPECT_EQ(t.min_split_cost, 256);
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

}  // namespace
}  // namespace mlajit::plan
