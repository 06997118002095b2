// The tile policy, and the shipped manifests agreeing with it: a warmed cache is
// only useful if it holds exactly the specs the runtime will ask for.
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

}  // namespace
}  // namespace mlajit::plan
