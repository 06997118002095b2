// The index maps of the sm_90a warpgroup-MMA decode path
// (kernel_templates/mla_wgmma_layout.h): every map is a bijection, the fp8
// stage is the hardware's swizzles where S's descriptors read it, the closed
// forms the kernel uses agree with the maps, and every 16-byte shared access
// of a warp reaches 8 different bank groups in each quarter warp (the
// measured cause of a 4x slowdown of the V loads before the swizzle).
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernel_templates/mla_params.h"
#include "kernel_templates/mla_wgmma_layout.h"

namespace mlajit::plan {
namespace {

constexpr int kTile = 64;  // tokens per tile
constexpr int kWarps = 4;

// 128-bit shared accesses are served per quarter warp: the 8 lanes of each
// quarter must reach 8 different 16-byte bank groups (or share a chunk).
void ExpectConflictFree(const std::vector<int>& lane_bytes, const std::string& what) {
  ASSERT_EQ(lane_bytes.size(), 32u);
  for (int q = 0; q < 4; ++q) {
    std::set<int> groups, chunks;
    for (int l = 8 * q; l < 8 * q + 8; ++l) {
      if (lane_bytes[l] < 0) continue;  // lane not taking part
      EXPECT_EQ(lane_bytes[l] % 16, 0) << what;
      chunks.insert(lane_bytes[l] / 16);
      groups.insert((lane_bytes[l] / 16) % 8);
    }
    EXPECT_EQ(groups.size(), chunks.size()) << what << ", quarter " << q;
  }
}

// ---- fp8: the tile as stored, read by S through descriptors ------------------

// What the hardware reads for a swizzled K-major operand at byte address a
// (relative to a 1024-byte aligned stage): the 16-byte unit index, bits 4..6
// (128-byte swizzle) or 4..5 (64-byte), XORed with bits 7..9 or 7..8.
int Swizzle128(int a) { return a ^ (((a >> 7) & 7) << 4); }
int Swizzle64(int a) { return a ^ (((a >> 7) & 3) << 4); }

TEST(WgmmaLayout, Fp8StageIsTheHardwareSwizzlesAndABijection) {
  EXPECT_EQ(MlaWgmmaStageBytes(1), kTile * 576);
  EXPECT_EQ(kMlaWgmmaFp8RopeBlock % 1024, 0);
  std::set<int> slots;
  for (int t = 0; t < kTile; ++t) {
    for (int c = 0; c < 36; ++c) {
      const int offset = MlaWgmmaFp8Offset(t, c);
      // Unswizzled: blocks of 128 codes with 128-byte rows, then the rope
      // block with 64-byte rows.
      const int linear = c < 32 ? (c / 8) * 8192 + t * 128 + (c % 8) * 16
                                : kMlaWgmmaFp8RopeBlock + t * 64 + (c - 32) * 16;
      EXPECT_EQ(offset, c < 32 ? Swizzle128(linear) : Swizzle64(linear))
          << "token " << t << " chunk " << c;
      EXPECT_GE(offset, 0);
      EXPECT_LT(offset, MlaWgmmaStageBytes(1));
      slots.insert(offset / 16);
    }
  }
  EXPECT_EQ(slots.size(), static_cast<size_t>(kTile * 36));
}

// S^T = K Q^T: k32 step k covers codes 32k .. 32k + 31. For token row t and
// K chunk j (0, 1) the hardware reads start + 8-row group stride (1024 in the
// 128-byte blocks, 512 in the 64-byte one) + row * row bytes + 16 j, swizzled.
TEST(WgmmaLayout, Fp8KStepsReadTheirCodes) {
  for (int k = 0; k < 18; ++k) {
    const bool rope = k >= 16;
    for (int t = 0; t < kTile; ++t) {
      for (int j = 0; j < 2; ++j) {
        const int linear =
            rope ? MlaWgmmaFp8KStepOffset(k) + (t / 8) * 512 + (t % 8) * 64 + 16 * j
                 : MlaWgmmaFp8KStepOffset(k) + (t / 8) * 1024 + (t % 8) * 128 + 16 * j;
        EXPECT_EQ(rope ? Swizzle64(linear) : Swizzle128(linear), MlaWgmmaFp8Offset(t, 2 * k + j))
            << "k-step " << k << " token " << t;
      }
    }
  }
}

// The copy: thread tid takes chunks tid % 8 + 8 i of tokens tid / 8 + 16 pass;
// every chunk is written once, where MlaWgmmaFp8Offset says, and the writes
// of a quarter warp (one token) reach different bank groups.
TEST(WgmmaLayout, Fp8TileCopyWritesEveryChunkOnceWithoutBankConflicts) {
  std::set<int> written;
  for (int pass = 0; pass < kTile / 16; ++pass) {
    for (int i = 0; i < 5; ++i) {
      for (int warp = 0; warp < kWarps; ++warp) {
        std::vector<int> bytes;
        for (int lane = 0; lane < 32; ++lane) {
          const int tid = 32 * warp + lane, tok0 = tid / 8, first = tid % 8;
          const int c = first + 8 * i;
          if (c >= 36) {
            bytes.push_back(-1);
            continue;
          }
          const int at = MlaWgmmaFp8CopyOffset(tok0, first, pass, i);
          EXPECT_EQ(at, MlaWgmmaFp8Offset(tok0 + 16 * pass, c)) << "tid " << tid << " i " << i;
          written.insert(at);
          bytes.push_back(at);
        }
        ExpectConflictFree(bytes,
                           "fp8 copy pass " + std::to_string(pass) + " i " + std::to_string(i));
      }
    }
  }
  EXPECT_EQ(written.size(), static_cast<size_t>(kTile * 36));
}

// Q^T codes: the no-swizzle K-major core-matrix layout the descriptor reads
// (8 rows x 16 codes, 128 bytes apart along K and 256 along N), every code
// once, and LoadQ's split into a per-thread base plus constants.
TEST(WgmmaLayout, Fp8QOffsetIsTheCoreMatrixLayout) {
  for (int rows : {16, 32, 64}) {
    std::set<int> bytes;
    for (int n = 0; n < rows; ++n) {
      for (int d = 0; d < 576; ++d) {
        const int k = d / 32, kk = d % 32;
        const int want = k * rows * 32 + (n / 8) * 256 + (kk / 16) * 128 + (n % 8) * 16 + kk % 16;
        ASSERT_EQ(MlaWgmmaQ8Offset(rows, n, d), want) << "rows " << rows << " n " << n;
        bytes.insert(want);
      }
    }
    EXPECT_EQ(bytes.size(), static_cast<size_t>(rows * 576));
    for (int n = 0; n < rows / 2; ++n) {
      for (int c8 = 0; c8 < 8; ++c8) {
        for (int i = 0; i < 9; ++i) {
          for (int j = 0; j < 8; ++j) {
            const int base = MlaWgmmaQ8Offset(rows, n, 8 * c8);
            ASSERT_EQ(MlaWgmmaQ8Offset(rows, n, 8 * c8 + 64 * i + j),
                      base + MlaWgmmaQ8Offset(rows, 0, 64 * i) + j);
            // The low terms: row n + rows / 2 of the product.
            ASSERT_EQ(
                MlaWgmmaQ8Offset(rows, n + rows / 2, 8 * c8 + 64 * i + j),
                base + MlaWgmmaQ8Offset(rows, 0, 64 * i) + MlaWgmmaQ8Offset(rows, rows / 2, 0) + j);
          }
        }
      }
    }
  }
}

// ---- bf16: the 64-row path's stage, read by S through descriptors ----------

TEST(WgmmaLayout, Bf16StageIsTheHardwareSwizzleAndABijection) {
  EXPECT_EQ(MlaWgmmaTokenStride(0), 1152);
  EXPECT_EQ(MlaWgmmaStageBytes(0), kTile * 1152);
  EXPECT_EQ(MlaWgmmaStageBytes(0) % 1024, 0);
  std::set<int> slots;
  for (int t = 0; t < kTile; ++t) {
    for (int c = 0; c < 72; ++c) {
      const int offset = MlaRowsKvOffset(t, c);
      EXPECT_EQ(offset, Swizzle128((c / 8) * 8192 + t * 128 + (c % 8) * 16))
          << "token " << t << " chunk " << c;
      EXPECT_LT(offset, MlaWgmmaStageBytes(0));
      slots.insert(offset / 16);
    }
  }
  EXPECT_EQ(slots.size(), static_cast<size_t>(kTile * 72));
}

// S^T = K Q^T on bf16 tiles: k16 step k covers dims 16k .. 16k + 15, two
// 16-byte chunks of each token row, which the hardware reads at start +
// (t / 8) * 1024 + (t % 8) * 128 + 16 j, swizzled; Q^T's rows alike, with
// its blocks rows * 128 bytes apart.
TEST(WgmmaLayout, Bf16KAndQStepsReadTheirDims) {
  for (int k = 0; k < 36; ++k) {
    for (int t = 0; t < kTile; ++t) {
      for (int j = 0; j < 2; ++j) {
        const int linear = MlaRowsKStepOffset(k) + (t / 8) * 1024 + (t % 8) * 128 + 16 * j;
        EXPECT_EQ(Swizzle128(linear), MlaRowsKvOffset(t, 2 * k + j)) << "k " << k << " t " << t;
      }
    }
  }
  for (int rows : {16, 32}) {
    std::set<int> bytes;
    for (int n = 0; n < rows; ++n) {
      for (int d = 0; d < 576; d += 8) {
        const int k = d / 16, j = (d % 16) / 8;
        const int linear =
            MlaWgmmaQ16KStepOffset(rows, k) + (n / 8) * 1024 + (n % 8) * 128 + 16 * j;
        ASSERT_EQ(Swizzle128(linear), MlaWgmmaQ16Offset(rows, n, d))
            << "rows " << rows << " n " << n;
        for (int e = 0; e < 8; ++e) {
          EXPECT_EQ(MlaWgmmaQ16Offset(rows, n, d + e), MlaWgmmaQ16Offset(rows, n, d) + 2 * e);
          bytes.insert(MlaWgmmaQ16Offset(rows, n, d + e));
        }
      }
    }
    EXPECT_EQ(bytes.size(), static_cast<size_t>(rows * 576)) << "every element once";
    EXPECT_LE(*bytes.rbegin(), rows * 576 * 2 - 2);
  }
}

// StoreQ: thread (n0 = tid / 8, c8 = tid % 8) stores dims 8 c8 + 64 i of rows
// n0 + 16 h at a per-thread base plus a constant, 8 positions per row.
TEST(WgmmaLayout, Bf16QStoresSplitIntoThreadBaseAndConstantWithoutBankConflicts) {
  for (int rows : {16, 32}) {
    for (int h = 0; h < rows / 16; ++h) {
      for (int i = 0; i < 9; ++i) {
        for (int warp = 0; warp < kWarps; ++warp) {
          std::vector<int> bytes;
          for (int lane = 0; lane < 32; ++lane) {
            const int tid = 32 * warp + lane, n = tid / 8 + 16 * h, c8 = tid % 8;
            const int at = MlaWgmmaQ16Offset(rows, n, 8 * c8 + 64 * i);
            EXPECT_EQ(at, MlaWgmmaQ16Offset(rows, n, 8 * c8) + MlaWgmmaQ16Offset(rows, 0, 64 * i));
            bytes.push_back(at);
          }
          ExpectConflictFree(bytes, "Q store rows " + std::to_string(rows));
        }
      }
    }
  }
}

TEST(WgmmaLayout, Bf16TileCopyWritesEveryChunkOnceWithoutBankConflicts) {
  std::set<int> written;
  for (int pass = 0; pass < kTile / 16; ++pass) {
    for (int i = 0; i < 9; ++i) {
      for (int warp = 0; warp < kWarps; ++warp) {
        std::vector<int> bytes;
        for (int lane = 0; lane < 32; ++lane) {
          const int tid = 32 * warp + lane, tok0 = tid / 8, first = tid % 8;
          const int at = MlaWgmmaBlockCopyOffset(tok0, first, pass, i);
          EXPECT_EQ(at, MlaRowsKvOffset(tok0 + 16 * pass, first + 8 * i)) << "tid " << tid;
          written.insert(at);
          bytes.push_back(at);
        }
        ExpectConflictFree(bytes, "bf16 copy pass " + std::to_string(pass));
      }
    }
  }
  EXPECT_EQ(written.size(), static_cast<size_t>(kTile * 72));
}

// ---- the V loads (every format) ---------------------------------------------

// Each lane's loads hold exactly the dims its accumulator rows stand for
// (MlaWgmmaOutDim), where the stage keeps them, 8 bank groups a quarter warp.
TEST(WgmmaLayout, VLoadsReadTheirOutputDimsWithoutBankConflicts) {
  for (int kv : {0, 1, 2}) {  // MXFP4 tiles are e4m3 once converted
    const int elem_bytes = kv == 0 ? 2 : 1;
    for (int warp = 0; warp < kWarps; ++warp) {
      for (int lane = 0; lane < 32; ++lane) {
        const int r = lane >> 2;
        for (int b = 0; b < 8; ++b) {
          for (int hh = 0; hh < 2; ++hh) {
            const int dim = MlaWgmmaOutDim(kv, b, 16 * warp + r + 8 * hh);
            // bf16: word b % 4 of chunk b / 4; fp8: bytes 2b, 2b + 1 of its chunk.
            const int want = kv == 0 ? 8 * MlaWgmmaVChunk(kv, warp, r, b / 4) + 2 * (b % 4) + hh
                                     : 16 * MlaWgmmaVChunk(kv, warp, r, 0) + 2 * b + hh;
            EXPECT_EQ(dim, want) << "kv " << kv << " warp " << warp << " lane " << lane;
          }
        }
      }
      for (int step = 0; step < kTile / 16; ++step) {
        for (int t = 0; t < 4; ++t) {
          for (int h = 0; h < elem_bytes; ++h) {
            std::vector<int> bytes;
            for (int lane = 0; lane < 32; ++lane) {
              const int r = lane >> 2, quad = lane & 3;
              const int token = MlaWgmmaVToken(step, lane, t);
              const int chunk = MlaWgmmaVChunk(kv, warp, r, h);
              const int at =
                  token * kMlaWgmmaVTokenPitch + MlaWgmmaVChunkOffset(kv, warp, r, quad, t % 2, h);
              const int want =
                  kv != 0 ? MlaWgmmaFp8Offset(token, chunk) : MlaRowsKvOffset(token, chunk);
              EXPECT_EQ(at, want) << "kv " << kv << " warp " << warp << " step " << step << " lane "
                                  << lane;
              bytes.push_back(at);
            }
            ExpectConflictFree(bytes, "V load kv " + std::to_string(kv) + " step " +
                                          std::to_string(step) + " t " + std::to_string(t));
          }
        }
      }
    }
  }
}

TEST(WgmmaLayout, Mxfp4TilesAreE4m3TilesThatAlsoHoldTheStagedOutput) {
  EXPECT_EQ(MlaWgmmaStageBytes(2), MlaWgmmaStageBytes(1));
  for (int rows : {16, 32}) {
    const int bytes = MlaWgmmaMxTileBytes(rows);
    EXPECT_GE(bytes, MlaWgmmaStageBytes(2));
    EXPECT_GE(bytes, rows * (512 + 4) * 4) << rows;  // the epilogue's staged rows
    EXPECT_EQ(bytes % 1024, 0) << rows;               // the swizzles' alignment
  }
  EXPECT_EQ(MlaWgmmaMxTileBytes(16), MlaWgmmaStageBytes(1));
}

// The epilogue's staging: every chunk of a row has its own place, and each
// phase of 8 lanes of a 16-byte store or load touches 8 different groups of 4
// banks (rows kMlaWgmmaEpilogueStride words apart; 16 or 32 rows).
TEST(WgmmaLayout, StagedChunksArePlacedOnceAndWithoutBankConflicts) {
  for (int kv : {0, 1}) {
    std::set<int> places;
    for (int q = 0; q < 128; ++q) {
      const int w = MlaWgmmaStagedChunk(kv, q);
      EXPECT_EQ(w % 4, 0);
      EXPECT_GE(w, 0);
      EXPECT_LT(w, 512);
      places.insert(w);
    }
    EXPECT_EQ(places.size(), 128u);
    auto group = [kv](int row, int chunk) {
      return ((row * kMlaWgmmaEpilogueStride + MlaWgmmaStagedChunk(kv, chunk)) / 4) % 8;
    };
    // Stores: warp w, lane 4 r + quad writes chunk MlaWgmmaOutChunk(b) of row
    // 8 j + 2 quad + e, one instruction per (j, e, b).
    for (int rows : {16, 32}) {
      for (int warp = 0; warp < kWarps; ++warp) {
        for (int j = 0; j < rows / 8; ++j) {
          for (int e = 0; e < 2; ++e) {
            for (int b = 0; b < 8; b += 2) {
              for (int phase = 0; phase < 4; ++phase) {
                std::set<int> groups;
                for (int lane = 8 * phase; lane < 8 * phase + 8; ++lane) {
                  const int n = 8 * j + 2 * (lane & 3) + e;
                  groups.insert(group(n, MlaWgmmaOutChunk(kv, warp, lane, b)));
                }
                EXPECT_EQ(groups.size(), 8u) << "kv " << kv << " rows " << rows << " warp " << warp
                                             << " j " << j << " b " << b;
              }
            }
          }
        }
      }
    }
    // Loads: thread t reads chunk t (partials), or chunks 2 (t % 64) and one
    // more (the output rows), of one row.
    for (int first = 0; first < 128; first += 8) {
      std::set<int> partial, out_a, out_b;
      for (int t = first; t < first + 8; ++t) {
        partial.insert(group(5, t));
        out_a.insert(group(5, 2 * (t % 64)));
        out_b.insert(group(5, 2 * (t % 64) + 1));
      }
      EXPECT_EQ(partial.size(), 8u) << first;
      EXPECT_EQ(out_a.size(), 4u) << first;  // 8 lanes, 2 chunks apart: 4 groups twice,
      EXPECT_EQ(out_b.size(), 4u) << first;  // as without the swap (two wavefronts of 8)
    }
  }
}

// Every output dim is one accumulator row of one block, and the chunks a
// thread stages (MlaWgmmaOutChunk) are those of its accumulators b, b + 1.
TEST(WgmmaLayout, OutputDimsAreAPermutationInWholeChunksPerThread) {
  for (int kv : {0, 1, 2}) {
    std::set<int> dims;
    for (int b = 0; b < 8; ++b) {
      for (int m = 0; m < 64; ++m) dims.insert(MlaWgmmaOutDim(kv, b, m));
    }
    EXPECT_EQ(dims.size(), 512u);
    EXPECT_EQ(*dims.rbegin(), 511);
    for (int warp = 0; warp < kWarps; ++warp) {
      for (int lane = 0; lane < 32; ++lane) {
        for (int b = 0; b < 8; b += 2) {
          const int m = 16 * warp + (lane >> 2), q = MlaWgmmaOutChunk(kv, warp, lane, b);
          EXPECT_EQ(MlaWgmmaOutDim(kv, b, m), 4 * q);
          EXPECT_EQ(MlaWgmmaOutDim(kv, b, m + 8), 4 * q + 1);
          EXPECT_EQ(MlaWgmmaOutDim(kv, b + 1, m), 4 * q + 2);
          EXPECT_EQ(MlaWgmmaOutDim(kv, b + 1, m + 8), 4 * q + 3);
        }
      }
    }
  }
}

// ---- the warp-specialised 64-row path's V^T loads (fp8 stages) ---------------

TEST(WgmmaLayout, RowsWsOutputDimsAreAPermutationWithConsecutiveDimsPerThread) {
  std::set<int> dims;
  for (int a = 0; a < 2; ++a) {
    for (int b = 0; b < 4; ++b) {
      for (int m = 0; m < 64; ++m) dims.insert(MlaRowsWsOutDim(a, b, m));
    }
  }
  EXPECT_EQ(dims.size(), 512u);
  EXPECT_EQ(*dims.rbegin(), 511);
  for (int a = 0; a < 2; ++a) {
    for (int warp = 0; warp < kWarps; ++warp) {
      for (int r = 0; r < 8; ++r) {
        for (int b = 0; b < 4; ++b) {
          for (int h = 0; h < 2; ++h) {
            EXPECT_EQ(MlaRowsWsDimBase(a, warp, r) + 2 * b + h,
                      MlaRowsWsOutDim(a, b, 16 * warp + r + 8 * h));
          }
        }
      }
    }
  }
}

TEST(WgmmaLayout, RowsWsVLoadsReadTheirCodesWithoutBankConflicts) {
  // Each lane reads 8 bytes: its 8 dims of one token. A half warp's 16 loads
  // (128 bytes) must fall in 16 different 8-byte bank pairs.
  for (int a = 0; a < 2; ++a) {
    for (int warp = 0; warp < kWarps; ++warp) {
      for (int step = 0; step < kTile / 16; ++step) {
        for (int t = 0; t < 4; ++t) {
          for (int half = 0; half < 2; ++half) {
            std::set<int> pairs;
            for (int lane = 16 * half; lane < 16 * half + 16; ++lane) {
              const int r = lane >> 2, quad = lane & 3;
              const int token = MlaWgmmaVToken(step, lane, t);
              const int base = MlaRowsWsDimBase(a, warp, r);
              const int at = MlaRowsWsVOffset(a, warp, r, token);
              // The kernel adds whole token rows to the offset of the lane's
              // first token (same swizzle key: tokens 8 apart).
              EXPECT_EQ(at, MlaRowsWsVOffset(a, warp, r, 2 * quad + (t % 2)) +
                                (token - 2 * quad - (t % 2)) * 128);
              for (int d = 0; d < 8; ++d) {
                const int dim = base + d;
                EXPECT_EQ(at + d, MlaWgmmaFp8Offset(token, dim / 16) + dim % 16)
                    << "a " << a << " warp " << warp << " lane " << lane;
              }
              pairs.insert((at / 8) % 16);
            }
            EXPECT_EQ(pairs.size(), 16u) << "a " << a << " warp " << warp << " step " << step
                                         << " t " << t << " half " << half;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace mlajit::plan
