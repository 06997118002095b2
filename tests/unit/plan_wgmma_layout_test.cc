// The index maps of the sm_90a warpgroup-MMA decode path
// (kernel_templates/mla_wgmma_layout.h): every map is a bijection, the
// closed forms the kernel uses agree with the maps, and every 16-byte shared
// load of a warp reaches 8 different bank groups in each quarter warp (the
// measured cause of a 4x slowdown of the V loads before the swizzle).
#include <set>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernel_templates/mla_params.h"
#include "kernel_templates/mla_wgmma_layout.h"

namespace mlajit::plan {
namespace {

constexpr int kFormats[] = {0, 1};  // bf16, fp8
constexpr int kTile = 64;           // tokens per tile
constexpr int kWarps = 4;

int TokenBytes(int kv) { return kv == 1 ? 576 : 1152; }
int Chunks(int kv) { return TokenBytes(kv) / 16; }
int ElemBytes(int kv) { return kv == 1 ? 1 : 2; }

// 128-bit shared accesses are served per quarter warp: the 8 lanes of each
// quarter must reach 8 different 16-byte bank groups (or share a chunk).
void ExpectConflictFree(const std::vector<int>& lane_bytes, const std::string& what) {
  ASSERT_EQ(lane_bytes.size(), 32u);
  for (int q = 0; q < 4; ++q) {
    std::set<int> groups, chunks;
    for (int l = 8 * q; l < 8 * q + 8; ++l) {
      EXPECT_EQ(lane_bytes[l] % 16, 0) << what;
      chunks.insert(lane_bytes[l] / 16);
      groups.insert((lane_bytes[l] / 16) % 8);
    }
    EXPECT_EQ(groups.size(), chunks.size()) << what << ", quarter " << q;
  }
}

TEST(WgmmaLayout, SwizzlePermutesTheChunksOfEveryToken) {
  for (int kv : kFormats) {
    EXPECT_EQ(MlaWgmmaTokenStride(kv), TokenBytes(kv));
    for (int t = 0; t < kTile; ++t) {
      std::set<int> slots;
      for (int c = 0; c < Chunks(kv); ++c) slots.insert(MlaWgmmaChunkSlot(kv, t, c));
      EXPECT_EQ(slots.size(), static_cast<size_t>(Chunks(kv))) << "kv " << kv << " token " << t;
      EXPECT_EQ(*slots.rbegin(), Chunks(kv) - 1);
    }
  }
}

TEST(WgmmaLayout, KLoadsFollowTheSwizzleWithoutBankConflicts) {
  for (int kv : kFormats) {
    const int k_blocks = TokenBytes(kv) / 64;
    for (int warp = 0; warp < kWarps; ++warp) {
      for (int kb = 0; kb < k_blocks; ++kb) {
        for (int plus8 : {0, 8}) {
          std::vector<int> bytes;
          for (int lane = 0; lane < 32; ++lane) {
            const int quad = lane & 3, t = MlaWgmmaKToken(warp, lane);
            const MlaWgmmaKOffsets o = MlaWgmmaKOffsetsOf(kv, t, quad);
            const int off = MlaWgmmaKChunkOffset(kv, o.even, o.odd, o.last, kb);
            // Token t + 8 shares t's offsets: the key reads bits 0..2 only.
            EXPECT_EQ(off, 16 * MlaWgmmaChunkSlot(kv, t + plus8, 4 * kb + quad))
                << "kv " << kv << " warp " << warp << " kb " << kb << " lane " << lane;
            bytes.push_back((t + plus8) * MlaWgmmaTokenStride(kv) + off);
          }
          ExpectConflictFree(bytes, "K load kv " + std::to_string(kv) + " kb " + std::to_string(kb));
        }
      }
    }
  }
}

TEST(WgmmaLayout, VLoadsFollowTheSwizzleWithoutBankConflicts) {
  for (int kv : kFormats) {
    for (int warp = 0; warp < kWarps; ++warp) {
      for (int step = 0; step < kTile / 16; ++step) {
        for (int t = 0; t < 4; ++t) {
          for (int h = 0; h < ElemBytes(kv); ++h) {
            std::vector<int> bytes;
            for (int lane = 0; lane < 32; ++lane) {
              const int r = lane >> 2, quad = lane & 3;
              const int token = MlaWgmmaVToken(step, lane, t);
              // The thread's 16 output dims, 16 bytes of fp8 or 2 x 16 of bf16.
              const int chunk = (MlaWgmmaOutDimBase(warp, lane) * ElemBytes(kv)) / 16 + h;
              const int off = MlaWgmmaVChunkOffset(kv, warp, r, quad, t % 2, h);
              EXPECT_EQ(off, 16 * MlaWgmmaChunkSlot(kv, token, chunk))
                  << "kv " << kv << " warp " << warp << " step " << step << " lane " << lane;
              bytes.push_back(token * MlaWgmmaTokenStride(kv) + off);
            }
            ExpectConflictFree(bytes, "V load kv " + std::to_string(kv) + " step " +
                                          std::to_string(step) + " t " + std::to_string(t));
          }
        }
      }
    }
  }
}

// The tile copy: thread tid copies chunks (tid % 8) + 8i of tokens tid / 8 +
// 16 pass to (first ^ key(tid / 8)) + 8i — the swizzle, with one key per thread.
TEST(WgmmaLayout, TileCopyWritesEveryChunkWhereTheSwizzleSays) {
  for (int kv : kFormats) {
    std::set<std::pair<int, int>> written;
    for (int tid = 0; tid < 128; ++tid) {
      const int tok0 = tid / 8, first = tid % 8;
      for (int pass = 0; pass < kTile / 16; ++pass) {
        const int tok = tok0 + 16 * pass;
        for (int i = 0; 8 * i < Chunks(kv); ++i) {
          const int c = first + 8 * i;
          if (c >= Chunks(kv)) continue;
          const int slot = c < MlaWgmmaSwizzledChunks(kv)
                               ? (first ^ MlaWgmmaSwizzleKey(kv, tok0)) + 8 * i
                               : c;
          EXPECT_EQ(slot, MlaWgmmaChunkSlot(kv, tok, c)) << "kv " << kv << " tid " << tid;
          written.insert({tok, slot});
        }
      }
    }
    EXPECT_EQ(written.size(), static_cast<size_t>(kTile * Chunks(kv))) << "kv " << kv;
  }
}

// Q^T: logical (k-step s, column k) of row n must hold the physical dim the
// K fragments put there, at the core-matrix position the descriptor reads
// (8 rows x 16 bytes per core matrix, 128 bytes apart along K, 256 along N).
TEST(WgmmaLayout, QOffsetIsTheInverseOfTheQkPermutation) {
  for (int kv : kFormats) {
    const int e = MlaWgmmaElemsPerLoad(kv), l = MlaWgmmaStepsPerLoad(kv);
    for (int rows : {16, 32}) {
      std::set<int> words;
      for (int n = 0; n < rows; ++n) {
        for (int s = 0; s < 576 / 16; ++s) {
          for (int k = 0; k < 16; ++k) {
            const int d = 4 * e * (s / l) + e * ((k % 8) / 2) + 4 * (s % l) + 2 * (k / 8) + k % 2;
            const int at = MlaWgmmaQOffset(kv, rows, n, d & ~1) + 2 * (d & 1);
            const int want = s * rows * 32 + ((n / 8) * 2 + k / 8) * 128 + (n % 8) * 16 + (k % 8) * 2;
            ASSERT_EQ(at, want) << "kv " << kv << " rows " << rows << " n " << n << " s " << s
                                << " k " << k;
            words.insert(at);
          }
        }
      }
      EXPECT_EQ(words.size(), static_cast<size_t>(rows * 576)) << "every element once";
    }
  }
}

// LoadQ stores chunk c8 + 8 i of row n at a per-thread base plus a constant:
// Offset(n, 8 c8 + 64 i + 2 j) = Offset(n, 8 c8) + Offset(0, 64 i + 2 j).
TEST(WgmmaLayout, QOffsetSplitsIntoThreadBaseAndConstant) {
  for (int kv : kFormats) {
    for (int rows : {16, 32}) {
      for (int n = 0; n < rows; ++n) {
        for (int c8 = 0; c8 < 8; ++c8) {
          for (int i = 0; i < 576 / 64; ++i) {
            for (int j = 0; j < 4; ++j) {
              ASSERT_EQ(MlaWgmmaQOffset(kv, rows, n, 8 * c8 + 64 * i + 2 * j),
                        MlaWgmmaQOffset(kv, rows, n, 8 * c8) +
                            MlaWgmmaQOffset(kv, rows, 0, 64 * i + 2 * j))
                  << "kv " << kv << " rows " << rows << " n " << n << " c8 " << c8 << " i " << i
                  << " j " << j;
            }
          }
        }
      }
    }
  }
}

TEST(WgmmaLayout, OutputDimsAreAPermutationWithConsecutiveDimsPerThread) {
  std::set<int> dims;
  for (int b = 0; b < 8; ++b) {
    for (int m = 0; m < 64; ++m) dims.insert(MlaWgmmaOutDim(b, m));
  }
  EXPECT_EQ(dims.size(), 512u);
  EXPECT_EQ(*dims.rbegin(), 511);
  for (int warp = 0; warp < kWarps; ++warp) {
    for (int lane = 0; lane < 32; ++lane) {
      for (int b = 0; b < 8; ++b) {
        for (int h = 0; h < 2; ++h) {
          EXPECT_EQ(MlaWgmmaOutDimBase(warp, lane) + 2 * b + h,
                    MlaWgmmaOutDim(b, 16 * warp + (lane >> 2) + 8 * h));
        }
      }
    }
  }
}

}  // namespace
}  // namespace mlajit::plan
