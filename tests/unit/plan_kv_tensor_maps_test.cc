// The host side of the KV tensor maps: what is asked of the backend (the
// stage layouts' boxes and swizzles), caching by buffer, and falling back
// to cp.async copies when the backend cannot encode. The maps themselves are
// checked on a GPU (tests/gpu/kv_tensor_maps_test.cc).
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "kernel_templates/mla_params.h"
#include "kernel_templates/mla_wgmma_layout.h"
#include "kernel_templates/mla_wgmma_rows_layout.h"
#include "src/gpu/backend_internal.h"
#include "src/plan/kv_tensor_maps.h"
#include "src/plan/tile_policy.h"

namespace mlajit::plan {
namespace {

void* At(uintptr_t address) { return reinterpret_cast<void*>(address); }

TEST(KvTensorMapDescs, DescribeTheStageBlocks) {
  const std::array<gpu::TensorMap2D, 2> d = KvTensorMapDescs(At(0x7000'0000'0100), 576);
  for (const gpu::TensorMap2D& m : d) {
    EXPECT_EQ(m.base, At(0x7000'0000'0100));
    EXPECT_EQ(m.cols, 576u);
    EXPECT_EQ(m.row_stride, 576u);
    EXPECT_EQ(m.rows, static_cast<uint64_t>(kKvMapRows));
    EXPECT_EQ(m.box_rows, 64u);  // one tile
    EXPECT_TRUE(gpu::gpu_internal::ValidateTensorMap2D(m).ok());
  }
  // Four 128-code blocks 8192 bytes apart, 128-byte rows swizzled by token % 8;
  // then the rope block, 64-byte rows swizzled by (token / 2) % 4.
  EXPECT_EQ(d[0].box_cols, 128u);
  EXPECT_EQ(d[0].swizzle, 128);
  EXPECT_EQ(d[1].box_cols, 64u);
  EXPECT_EQ(d[1].swizzle, 64);
  EXPECT_EQ(kMlaWgmmaFp8RopeBlock, 4 * 128 * 64);            // the fifth copy's destination
  EXPECT_EQ(MlaWgmmaStageBytes(1), 4 * 128 * 64 + 64 * 64);  // what expect_tx counts
}

// The address of 16-byte chunk c of row r in a box of 128-byte rows that a
// tensor copy writes with the 128-byte swizzle (the destination 1024-byte
// aligned): the chunk index XOR the row's index within its 8-row atom.
int Swizzle128(int r, int c) { return r * 128 + ((c ^ (r % 8)) << 4); }

TEST(KvTensorMapDescs, Bf16BlocksLandInTheRowsLayout) {
  const std::array<gpu::TensorMap2D, 2> d = KvTensorMapDescs(At(0x7000'0000'0100), 1152);
  EXPECT_EQ(d[0].cols, 1152u);
  EXPECT_EQ(d[0].row_stride, 1152u);
  EXPECT_EQ(d[0].box_cols, 128u);  // 64 bf16 dims
  EXPECT_EQ(d[0].box_rows, 64u);   // one tile
  EXPECT_EQ(d[0].swizzle, 128);
  EXPECT_TRUE(gpu::gpu_internal::ValidateTensorMap2D(d[0]).ok());
  // Copy b of a tile (x = 128 b bytes) into tile + 8192 b puts token t's
  // chunk c where the 64-row path's operands expect dims 64 b + 8 c ..
  // (MlaRowsKvOffset: chunk 8 b + c), for all nine blocks.
  for (int b = 0; b < 9; ++b) {
    for (int t = 0; t < 64; ++t) {
      for (int c = 0; c < 8; ++c) {
        ASSERT_EQ(8192 * b + Swizzle128(t, c), MlaRowsKvOffset(t, 8 * b + c)) << b << " " << t;
      }
    }
  }
}

TEST(KvTensorMaps, EncodesOncePerBuffer) {
  std::vector<gpu::TensorMap2D> asked;
  KvTensorMaps maps([&](const gpu::TensorMap2D& m, void* out) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(out) % 128, 0u) << "CUtensorMap is 128-byte aligned";
    asked.push_back(m);
    std::memset(out, static_cast<int>(asked.size()), gpu::kTensorMapBytes);
    return absl::OkStatus();
  });
  MlaDecodeParams p{};
  maps.Fill(At(0x1000), 576, &p);
  EXPECT_EQ(p.kv_map_rows, kKvMapRows);
  EXPECT_EQ(reinterpret_cast<const unsigned char*>(&p.kv_maps[0])[0], 1);
  EXPECT_EQ(reinterpret_cast<const unsigned char*>(&p.kv_maps[1])[127], 2);
  MlaDecodeParams again{};
  maps.Fill(At(0x1000), 576, &again);
  EXPECT_EQ(maps.encodes(), 2);
  EXPECT_EQ(std::memcmp(&again.kv_maps, &p.kv_maps, sizeof p.kv_maps), 0);
  maps.Fill(At(0x2000), 576, &again);  // another layer's buffer
  EXPECT_EQ(maps.encodes(), 4);
  ASSERT_EQ(asked.size(), 4u);
  EXPECT_EQ(asked[2].base, At(0x2000));
  EXPECT_EQ(again.kv_map_rows, kKvMapRows);
}

TEST(KvTensorMaps, OneBufferReadInTwoFormatsHasMapsForEach) {
  std::vector<gpu::TensorMap2D> asked;
  KvTensorMaps maps([&](const gpu::TensorMap2D& m, void*) {
    asked.push_back(m);
    return absl::OkStatus();
  });
  MlaDecodeParams p{};
  maps.Fill(At(0x1000), 576, &p);
  maps.Fill(At(0x1000), 1152, &p);
  maps.Fill(At(0x1000), 576, &p);
  maps.Fill(At(0x1000), 1152, &p);
  EXPECT_EQ(maps.encodes(), 4);
  ASSERT_EQ(asked.size(), 4u);
  EXPECT_EQ(asked[0].row_stride, 576u);
  EXPECT_EQ(asked[2].row_stride, 1152u);
  EXPECT_EQ(p.kv_map_rows, kKvMapRows);
}

TEST(KvTensorMaps, ANewBufferReplacesTheOldestWhenFull) {
  KvTensorMaps maps([](const gpu::TensorMap2D&, void*) { return absl::OkStatus(); });
  MlaDecodeParams p{};
  constexpr int kMax = KvTensorMaps::kMaxBuffers;
  for (int i = 0; i < kMax; ++i) maps.Fill(At(0x1000 * (i + 1)), 576, &p);
  for (int i = 0; i < kMax; ++i) maps.Fill(At(0x1000 * (i + 1)), 576, &p);  // all remembered
  EXPECT_EQ(maps.encodes(), 2 * kMax);
  maps.Fill(At(0x1000 * (kMax + 1)), 576, &p);  // takes buffer 1's slot
  EXPECT_EQ(maps.encodes(), 2 * (kMax + 1));
  maps.Fill(At(0x1000), 576, &p);  // buffer 1 again: encoded again, into buffer 2's slot
  EXPECT_EQ(maps.encodes(), 2 * (kMax + 2));
  maps.Fill(At(0x3000), 576, &p);  // buffer 3 is still there
  maps.Fill(At(0x1000 * (kMax + 1)), 576, &p);
  EXPECT_EQ(maps.encodes(), 2 * (kMax + 2));
  EXPECT_EQ(p.kv_map_rows, kKvMapRows);
}

TEST(KvTensorMaps, ABackendWithoutMapsLeavesCpAsyncCopies) {
  int calls = 0;
  KvTensorMaps maps([&](const gpu::TensorMap2D&, void*) {
    ++calls;
    return absl::UnimplementedError("no tensor maps here");
  });
  MlaDecodeParams p{};
  p.kv_map_rows = 7;  // whatever was there before
  EXPECT_TRUE(maps.enabled());
  maps.Fill(At(0x1000), 576, &p);
  EXPECT_FALSE(maps.enabled());
  EXPECT_EQ(p.kv_map_rows, 0);
  maps.Fill(At(0x2000), 576, &p);
  EXPECT_EQ(p.kv_map_rows, 0);
  EXPECT_EQ(calls, 1) << "a failed encode should turn encoding off";
}

TEST(CopiesKvByTensorMaps, FollowsThePathsThatStageTilesAsStored) {
  EXPECT_TRUE(CopiesKvByTensorMaps("sm_90a", KvFormat::kFp8E4m3, 16, 64, 4, 0));
  EXPECT_TRUE(CopiesKvByTensorMaps("sm_90a", KvFormat::kFp8E4m3, 32, 64, 4, 64));
  EXPECT_TRUE(CopiesKvByTensorMaps("sm_90a", KvFormat::kFp8E4m3, 16, 64, 4, 128));
  // Pages shorter than a tile: a tile's slots are not one run.
  for (int page : {1, 16, 32}) {
    EXPECT_FALSE(CopiesKvByTensorMaps("sm_90a", KvFormat::kFp8E4m3, 16, 64, 4, page)) << page;
  }
  // bf16 on the swap-AB path (nine blocks of 64 dims), 16 or 32 rows.
  EXPECT_TRUE(CopiesKvByTensorMaps("sm_90a", KvFormat::kBf16, 16, 64, 4, 0));
  EXPECT_TRUE(CopiesKvByTensorMaps("sm_90a", KvFormat::kBf16, 32, 64, 4, 64));
  EXPECT_FALSE(CopiesKvByTensorMaps("sm_90a", KvFormat::kBf16, 16, 64, 4, 32));
  // bf16 on the 64-row path (the seesaw's copies), flat or pages of 64 k.
  EXPECT_TRUE(CopiesKvByTensorMaps("sm_90a", KvFormat::kBf16, 64, 64, 8, 0));
  EXPECT_TRUE(CopiesKvByTensorMaps("sm_90a", KvFormat::kBf16, 64, 64, 8, 128));
  EXPECT_FALSE(CopiesKvByTensorMaps("sm_90a", KvFormat::kBf16, 64, 64, 8, 16));
  EXPECT_FALSE(CopiesKvByTensorMaps("sm_90a", KvFormat::kMxfp4, 16, 64, 8, 0));
  EXPECT_TRUE(CopiesKvByTensorMaps("sm_90a", KvFormat::kFp8E4m3, 64, 64, 12, 0));  // 64 rows, WS
  EXPECT_TRUE(CopiesKvByTensorMaps("sm_90a", KvFormat::kFp8E4m3, 64, 64, 12, 64));
  EXPECT_FALSE(CopiesKvByTensorMaps("sm_90a", KvFormat::kFp8E4m3, 64, 64, 12, 16));
  // The two-warpgroup 64-row path converts tiles to f16 on the way in.
  EXPECT_FALSE(CopiesKvByTensorMaps("sm_90a", KvFormat::kFp8E4m3, 64, 64, 8, 0));
  EXPECT_FALSE(CopiesKvByTensorMaps("sm_89", KvFormat::kFp8E4m3, 16, 64, 4, 0));
  EXPECT_FALSE(CopiesKvByTensorMaps("sm_100a", KvFormat::kFp8E4m3, 16, 64, 4, 0));
}

}  // namespace
}  // namespace mlajit::plan
