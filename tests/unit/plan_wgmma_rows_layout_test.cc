// The index maps of the sm_90a 64-row decode path
// (kernel_templates/mla_wgmma_rows_layout.h): the KV operand offsets are the
// hardware's 128-byte swizzle, the descriptor steps of both products reach the
// chunks they must, every copy and conversion writes each tile position once,
// and each quarter warp's 16-byte shared accesses reach 8 different bank groups
// (a copy that broke this cost 8x the wavefronts, see tools/bench/RESULTS.md v10a).
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernel_templates/mla_params.h"
#include "kernel_templates/mla_wgmma_rows_layout.h"

namespace mlajit::plan {
namespace {

constexpr int kTokens = 64;
constexpr int kChunks = 72;  // 16-byte chunks of a token's 576 16-bit dims
constexpr int kTileBytes = kTokens * kChunks * 16;

// What the hardware reads for a 128-byte-swizzled operand at byte address a
// (relative to a 1024-byte aligned tile): the 16-byte unit index, bits 4..6,
// XORed with the 128-byte row index within the 1024-byte atom, bits 7..9.
int Swizzle128(int a) { return a ^ (((a >> 7) & 7) << 4); }

// The 8 lanes of each quarter warp that take part reach different 16-byte
// bank groups, or the same chunk.
void ExpectQuartersConflictFree(const std::vector<std::pair<int, int>>& lane_offsets,
                                const std::string& what) {
  for (int q = 0; q < 4; ++q) {
    std::set<int> groups, chunks;
    for (const auto& [lane, offset] : lane_offsets) {
      if (lane / 8 != q) continue;
      EXPECT_EQ(offset % 16, 0) << what;
      chunks.insert(offset / 16);
      groups.insert((offset / 16) % 8);
    }
    EXPECT_EQ(groups.size(), chunks.size()) << what << ", quarter " << q;
  }
}

TEST(WgmmaRowsLayout, KvOffsetIsTheHardwareSwizzleAndABijection) {
  std::set<int> slots;
  for (int t = 0; t < kTokens; ++t) {
    for (int c = 0; c < kChunks; ++c) {
      const int offset = MlaRowsKvOffset(t, c);
      const int linear = (c / 8) * 8192 + t * 128 + (c % 8) * 16;
      EXPECT_EQ(offset, Swizzle128(linear)) << "token " << t << " chunk " << c;
      EXPECT_GE(offset, 0);
      EXPECT_LT(offset, kTileBytes);
      slots.insert(offset / 16);
    }
  }
  EXPECT_EQ(slots.size(), static_cast<size_t>(kTokens * kChunks));
}

// S = Q K^T reads K as a K-major operand: for k-step k (dims 16k .. 16k + 15),
// token row t and K chunk j (0, 1), the hardware reads the swizzled address
// start + t * 128 + 16 j (stride 1024 between groups of 8 rows).
TEST(WgmmaRowsLayout, KStepsReadTheirDims) {
  for (int k = 0; k < 36; ++k) {
    for (int t = 0; t < kTokens; ++t) {
      for (int j = 0; j < 2; ++j) {
        const int linear = MlaRowsKStepOffset(k) + (t / 8) * 1024 + (t % 8) * 128 + 16 * j;
        EXPECT_EQ(Swizzle128(linear), MlaRowsKvOffset(t, 2 * k + j)) << "k-step " << k;
      }
    }
  }
}

// P V reads V as an MN-major operand through the transpose bit: for k-step k
// (tokens 16k .. 16k + 15), token kk of the step and 8-dim group n of the
// warpgroup's 256 dims, the hardware reads start + (n / 8) * 8192 (leading
// offset, along N) + (kk / 8) * 1024 (stride, along K) + (kk % 8) * 128 +
// (n % 8) * 16, swizzled.
TEST(WgmmaRowsLayout, VStepsReadTheirTokensAndDims) {
  for (int wg = 0; wg < 2; ++wg) {
    for (int k = 0; k < kTokens / 16; ++k) {
      for (int kk = 0; kk < 16; ++kk) {
        for (int n = 0; n < 32; ++n) {
          const int linear = MlaRowsVBase(wg) + MlaRowsVStepOffset(k) + (n / 8) * 8192 +
                             (kk / 8) * 1024 + (kk % 8) * 128 + (n % 8) * 16;
          EXPECT_EQ(Swizzle128(linear), MlaRowsKvOffset(16 * k + kk, 32 * wg + n))
              << "warpgroup " << wg << " k-step " << k;
        }
      }
    }
  }
}

// bf16 tiles: cp.async of chunk lane % 8 + 8 b of token MlaRowsCopyToken to
// MlaRowsKvRowOffset(token, lane % 8) + 8192 b.
TEST(WgmmaRowsLayout, Bf16CopyWritesEveryChunkOnceCoalescedAndConflictFree) {
  std::set<std::pair<int, int>> written;
  for (int warp = 0; warp < 8; ++warp) {
    for (int pass = 0; pass < 2; ++pass) {
      for (int b = 0; b < kChunks / 8; ++b) {
        std::vector<std::pair<int, int>> smem;
        std::vector<std::set<int>> global(4);  // per quarter: bytes of the token record
        std::set<int> quarter_tokens[4];
        for (int lane = 0; lane < 32; ++lane) {
          const int t = MlaRowsCopyToken(warp, lane, pass), c = lane % 8 + 8 * b;
          const int offset = MlaRowsKvRowOffset(t, lane % 8) + 8192 * b;
          EXPECT_EQ(offset, MlaRowsKvOffset(t, c));
          written.insert({t, c});
          smem.push_back({lane, offset});
          quarter_tokens[lane / 8].insert(t);
          global[lane / 8].insert(c * 16);
        }
        for (int q = 0; q < 4; ++q) {
          // One token's 128 contiguous bytes per quarter: one 4-sector request.
          EXPECT_EQ(quarter_tokens[q].size(), 1u);
          EXPECT_EQ(*global[q].rbegin() - *global[q].begin(), 112);
          EXPECT_EQ(*global[q].begin() % 128, 0);
        }
        ExpectQuartersConflictFree(smem, "bf16 copy");
      }
    }
  }
  EXPECT_EQ(written.size(), static_cast<size_t>(kTokens * kChunks));
}

// bf16 tiles on the seesaw schedule: for each buffer, the two warpgroups'
// blocks cover the tile once, and each warpgroup's 128 threads write every
// chunk of its blocks once, a token's 128 bytes per quarter warp.
TEST(WgmmaRowsLayout, SeesawCopiesCoverEachBufferOnceCoalescedAndConflictFree) {
  for (int buf = 0; buf < 2; ++buf) {
    std::set<std::pair<int, int>> written;
    for (int b = 0; b < kChunks / 8; ++b) {
      const int owners = (MlaRowsSeesawCopiesBlock(0, buf, b) ? 1 : 0) +
                         (MlaRowsSeesawCopiesBlock(1, buf, b) ? 1 : 0);
      EXPECT_EQ(owners, 1) << "buffer " << buf << " block " << b;
    }
    // The rope block (P's place) belongs to the warpgroup that reads P there last.
    EXPECT_TRUE(MlaRowsSeesawCopiesBlock(1 - buf, buf, 8));
    for (int wg = 0; wg < 2; ++wg) {
      for (int b = 0; b < kChunks / 8; ++b) {
        if (!MlaRowsSeesawCopiesBlock(wg, buf, b)) continue;
        for (int w = 0; w < 4; ++w) {
          for (int pass = 0; pass < 4; ++pass) {
            std::vector<std::pair<int, int>> smem;
            std::set<int> quarter_tokens[4];
            for (int lane = 0; lane < 32; ++lane) {
              const int t = MlaRowsSeesawCopyToken(w, lane, pass), c = lane % 8 + 8 * b;
              ASSERT_LT(t, kTokens);
              const int offset = MlaRowsKvRowOffset(t, lane % 8) + 8192 * b;
              EXPECT_EQ(offset, MlaRowsKvOffset(t, c));
              EXPECT_TRUE(written.insert({t, c}).second) << "token " << t << " chunk " << c;
              smem.push_back({lane, offset});
              quarter_tokens[lane / 8].insert(t);
            }
            for (int q = 0; q < 4; ++q) EXPECT_EQ(quarter_tokens[q].size(), 1u);
            ExpectQuartersConflictFree(smem, "seesaw copy");
          }
        }
      }
    }
    EXPECT_EQ(written.size(), static_cast<size_t>(kTokens * kChunks)) << "buffer " << buf;
  }
}

// fp8 tiles (warpgroup 1): chunk i of lane c0 in pair `pair` is raw chunk
// MlaRowsFp8Chunk (16 codes) of token MlaRowsFp8Token(.., pair, MlaRowsFp8Half);
// it becomes f16 chunks MlaRowsFp8StoreChunk(c0, i, 0 and 1), stored at
// MlaRowsFp8StoreOffset. A quarter's loads read contiguous bytes of one token,
// or (the chunk that straddles the pair) the end of one and the start of the
// other; every lane has nine chunks to load.
TEST(WgmmaRowsLayout, Fp8ConversionWritesEveryChunkOnceConflictFree) {
  constexpr int kRawChunks = 36, kPairLoads = 2 * kRawChunks / 8;
  std::set<std::pair<int, int>> written;
  for (int w = 0; w < 4; ++w) {
    for (int pair = 0; pair < kTokens / 32; ++pair) {
      for (int i = 0; i < kPairLoads; ++i) {
        std::vector<std::map<int, std::set<int>>> raw(4);  // quarter -> token -> byte offsets
        for (int which = 0; which < 2; ++which) {
          std::vector<std::pair<int, int>> smem;
          for (int lane = 0; lane < 32; ++lane) {
            const int c0 = lane % 8, t0 = MlaRowsFp8Token(w, lane, 0, 0);
            const int half = MlaRowsFp8Half(c0, i), c = MlaRowsFp8Chunk(c0, i);
            ASSERT_GE(c, 0);
            ASSERT_LT(c, kRawChunks);
            EXPECT_EQ(36 * half + c, c0 + 8 * i);  // the pair's chunks, flattened
            const int t = MlaRowsFp8Token(w, lane, pair, half);
            const int chunk = MlaRowsFp8StoreChunk(c0, i, which);
            EXPECT_EQ(chunk / 2, c);  // the two halves of raw chunk c
            const int offset = MlaRowsFp8StoreOffset(c0, t0, pair, i, which);
            EXPECT_EQ(offset, MlaRowsKvOffset(t, chunk)) << "lane " << lane << " which " << which;
            written.insert({t, chunk});
            smem.push_back({lane, offset});
            raw[lane / 8][t].insert(c * 16);
          }
          ExpectQuartersConflictFree(smem, "fp8 conversion store " + std::to_string(which));
        }
        for (int q = 0; q < 4; ++q) {  // the loads: contiguous runs, one per token
          ASSERT_LE(raw[q].size(), i == 4 ? 2u : 1u);
          for (const auto& [token, bytes] : raw[q]) {
            EXPECT_EQ(*bytes.rbegin() - *bytes.begin(), 16 * (static_cast<int>(bytes.size()) - 1));
          }
        }
      }
    }
  }
  EXPECT_EQ(written.size(), static_cast<size_t>(kTokens * kChunks));
}

// a8 with S in fp8: thread tid's load i holds Q values of row tid / 4, dims
// 8 (tid % 4 + 4 i) .. + 7; their codes land where the fp8 K-major operand
// (16-code chunks of 64 rows x 16 bytes) keeps (row, dim), each byte once.
TEST(WgmmaRowsLayout, Q8StoresPlaceEachCodeOnce) {
  std::set<int> bytes;
  for (int tid = 0; tid < 256; ++tid) {
    const int row = tid / 4, sub = tid % 4;
    for (int i = 0; i < 576 / 8 / 4; ++i) {
      EXPECT_EQ(MlaRowsQ8Offset(row, sub, i),
                MlaRowsQ8Offset(row, sub, 0) + MlaRowsQ8Offset(0, 0, i));
      for (int e = 0; e < 8; ++e) {
        const int dim = 8 * (sub + 4 * i) + e;
        const int expected = (dim / 16) * 1024 + row * 16 + dim % 16;
        EXPECT_EQ(MlaRowsQ8Offset(row, sub, i) + e, expected) << "tid " << tid << " i " << i;
        bytes.insert(expected);
      }
    }
  }
  EXPECT_EQ(bytes.size(), 64u * 576u);
  EXPECT_EQ(*bytes.rbegin(), 64 * 576 - 1);
}

// Q: thread tid stores chunk tid % 4 + 4 i of row tid / 4 at
// MlaRowsChunkedOffset(row, tid % 4) + 4096 i. A quarter warp reads two rows'
// 64 contiguous bytes each from global memory (4 sectors, no waste), and its
// stores then reach only 2 bank groups: 4 wavefronts instead of 1, for 18
// stores per thread once per work item. The test pins that trade-off, so a
// change to either side is a decision, not an accident.
TEST(WgmmaRowsLayout, QStoresCoverTheTileOnce) {
  std::set<int> slots;
  for (int warp = 0; warp < 8; ++warp) {
    for (int i = 0; i < kChunks / 4; ++i) {
      for (int q = 0; q < 4; ++q) {
        std::set<int> groups, global_sectors;
        for (int lane = 8 * q; lane < 8 * q + 8; ++lane) {
          const int tid = 32 * warp + lane, row = tid / 4, c = tid % 4 + 4 * i;
          const int offset = MlaRowsChunkedOffset(row, tid % 4) + 4096 * i;
          EXPECT_EQ(offset, MlaRowsChunkedOffset(row, c));
          slots.insert(offset / 16);
          groups.insert((offset / 16) % 8);
          global_sectors.insert((row * kChunks + c) * 16 / 32);
        }
        EXPECT_EQ(global_sectors.size(), 4u);
        EXPECT_EQ(groups.size(), 2u);
      }
    }
  }
  EXPECT_EQ(slots.size(), static_cast<size_t>(kTokens * kChunks));
  EXPECT_EQ(*slots.rbegin(), kTokens * kChunks - 1);
}

}  // namespace
}  // namespace mlajit::plan
