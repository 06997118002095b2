// MXFP4 on the sm_90a swap-AB path (mla_decode_wgmma.cuh): converting
// warpgroups turn tiles as stored into e4m3 tiles, in fp8's stage layout,
// that the first warpgroup's products read exactly as they read fp8 KV.
//
// A tile's 18 x 64 block scales are brought to one power of two first: with
// s_max the tile's largest scale code, a block's elements become e4m3 codes
// of e2m1 x 2^(s - s_max + 6), and the tile's values are its codes times
// 2^(s_max - 133) (Smem::mx_shift), which the scores take in their scale and
// O in its frame. Blocks within 14 powers of two of s_max convert exactly,
// those below round to e4m3's subnormals (mla_mxfp4_lut.h has the bound).
// The products then read one byte per element, as fp8's do: the S product is
// one e4m3 wgmma on the tile, and V^T is converted to f16 in registers.
// (Until RESULTS.md v30 the tiles were bf16, twice the bytes to store and to
// read, and the products were the bf16 path's.)
//
// Hopper has no 4-bit MMA, and MXFP4 costs about two instructions per element
// to decode, four times fp8's conversion. Converting in the product warpgroup,
// once per tile, took (128,1,8192,16) from 487 us (the mma.sync path) to 570:
// with one CTA per SM (a bf16 tile is 72 KB) nothing overlapped the
// conversion (tools/bench/RESULTS.md v18). Here the conversion of tile t + 1
// runs beside the products of tile t, in other warpgroups: one (8 warps,
// 32-row tiles) or two (12 warps, 16-row tiles; one warpgroup converting
// at one instruction per six cycles per warp was the bound, v18, v19).
//
// A converting warpgroup (threads 128 (c + 1) .. 128 (c + 2) - 1) runs the
// CTA's work items in the same order as the product warpgroup and serves the
// e4m3 tile uses g (counted over the CTA) with MxBuffer(g) == c, every use
// when it is alone. Per tile it reads its share of the raw stage into
// registers, copies a later tile into that stage (mla_mma::IssueMxTile: one
// cp.async run per tile where tiles are runs of records, token by token
// otherwise; never a byte outside the records), and converts the share into
// e4m3 tile g % 2. Two mbarriers per e4m3 tile hand it over: `full` when
// converted, `empty` when its products are done. Each item also takes one use
// without a tile: its epilogue stages the output rows in that tile, while the
// next item's first tile is converted into the other.
#ifndef MLAJIT_KERNEL_TEMPLATES_MLA_WGMMA_MXFP4_CUH_
#define MLAJIT_KERNEL_TEMPLATES_MLA_WGMMA_MXFP4_CUH_

#include "mla_wgmma_common.cuh"

namespace mla_wgmma {

// A converting warpgroup's own barrier (named barrier 2 + c).
MLA_INLINE void SyncConverter(int c) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(2 + c) : "memory");
}

// One converting thread's share of a tile as stored: half tid / 64 of token
// tid % 64, i.e. its 32-element scale blocks 9 half .. 9 half + 8, whose 144
// packed bytes (record bytes 144 half ..) are contiguous, realigned into
// words (x[4 k + i]: bytes 4 i .. 4 i + 3 of block 9 half + k), and their
// nine scale bytes (bytes 0..8 of `scale`).
struct MxShare {
  u32 x[4 * MX_SHARE_BLOCKS];
  u32 scale[3];
  bool live;
};

// 4-byte words a share's packed bytes are read with: the 144 bytes start at
// an even offset, so 37 words from the 4-byte boundary at or below always
// hold them.
constexpr int MX_SHARE_WORDS = 4 * MX_SHARE_BLOCKS + 1;
// Every read stays inside the stage, without a bound check. A share's reads
// end at most 308 bytes after its record's start: the words 148 bytes from
// the 4-byte boundary at or below record byte 144, the scale words 12 bytes
// from the 4-byte boundary below record byte 297, i.e. byte 308 for a record
// starting at 0 mod 4 and 306 for one at 2 mod 4. In a run of records the
// last token's record starts at most 14 + 63 x 306 bytes into the stage (the
// copy starts up to 14 bytes before the first). Token by token, a record
// starts at its address mod 16 (even) in its 320-byte slot, so its reads end
// by byte 12 + 308 or 14 + 306 of the slot: inside it. Tokens at or past
// `valid` read at offset 0. The bytes read besides a share's own
// (neighbours' records, tokens not copied this time) are dropped.
static_assert(!MX || (14 + (TILE - 1) * MXFP4_TOKEN_BYTES + 308 <= MX_STAGE_BYTES &&
                      TILE * MlaRawTokenStride(KV_FORMAT) <= MX_STAGE_BYTES &&
                      12 + 308 <= MlaRawTokenStride(KV_FORMAT)),
              "a share's reads stay inside its stage");

// Reads this thread's share of stage `stage` (the tile at j0, `valid`
// tokens) into registers. All nine blocks' bytes are loaded before any is
// converted (StoreMxShare), so that the loads overlap each other and the
// conversions have independent work to interleave: converting block by block
// (each one's loads after the previous one's stores, which the compiler
// cannot reorder) ran at about one instruction per six cycles per warp
// (RESULTS.md v18). The packed bytes are read as 37 words from the 4-byte
// boundary at or below them and shifted down by 2 bytes where they start at
// 2 mod 4, one byte permute per word; the scale bytes as three words. Since
// the tiles became e4m3 (v30) the SM's integer pipe is what bounds MXFP4
// (ncu: 67 % busy, math-pipe stalls), and this costs 74 fewer of its
// instructions per thread and tile than ten 16-byte loads realigned with
// selects (v24, when shared-memory traffic was the bound and the wide loads
// were 7 % faster): (128,1,8192,16) 230 -> 220 us. Tokens at or past `valid`
// are read as well (stale bytes, never converted).
MLA_INLINE void LoadMxShare(const MlaDecodeParams& p, const MlaSeqInfo& s, int j0, int valid,
                            const u8* stage, int tid, MxShare& sh) {
  static_assert(NUM_THREADS == 2 * TILE && HEAD_DIM_QK / 32 == 2 * MX_SHARE_BLOCKS,
                "two threads per token");
  static_assert(MX_SHARE_BLOCKS * 16 + 2 <= MX_SHARE_WORDS * 4, "the words hold the share");
  const mla_mma::MxTileLayout mx = mla_mma::MxLayoutOf(p, s, j0);
  const int tok = tid % TILE, half = tid / TILE;
  sh.live = tok < valid;
  const u8* record = stage + (sh.live ? mla_mma::MxRecordOffset(p, s, j0, mx, tok) : 0);
  const u8* bytes = record + half * (MX_SHARE_BLOCKS * 16);
  const u32 q = static_cast<u32>(reinterpret_cast<unsigned long long>(bytes) & 3);  // 0 or 2
  const u32* words = reinterpret_cast<const u32*>(bytes - q);
  u32 w[MX_SHARE_WORDS];
#pragma unroll
  for (int i = 0; i < MX_SHARE_WORDS; ++i) w[i] = words[i];
  const u32 sel = q ? 0x5432u : 0x3210u;
#pragma unroll
  for (int i = 0; i < MX_SHARE_WORDS - 1; ++i) sh.x[i] = MlaPrmt(w[i], w[i + 1], sel);
  // The scale bytes (record bytes 288 + 9 half ..) start at any offset a in a
  // 4-byte word: three words hold them, shifted down by a with byte permutes.
  const u8* scales = record + MXFP4_PACKED_BYTES + half * MX_SHARE_BLOCKS;
  const u32 a = static_cast<u32>(reinterpret_cast<unsigned long long>(scales) & 3);
  const u32* sw = reinterpret_cast<const u32*>(scales - a);
  const u32 s0 = sw[0], s1 = sw[1], s2 = sw[2];
  const u32 ssel = 0x3210u + a * 0x1111u;
  sh.scale[0] = MlaPrmt(s0, s1, ssel);
  sh.scale[1] = MlaPrmt(s1, s2, ssel);
  sh.scale[2] = MlaPrmt(s2, s2, ssel);  // byte 0: scale 8
}

// The largest scale code of a share (0 for a token past the tile's end).
MLA_INLINE u32 MxShareMaxScale(const MxShare& sh) {
  const u32 m = __vmaxu4(__vmaxu4(sh.scale[0], sh.scale[1]), sh.scale[2] & 0xffu);
  const u32 top = max(max(m & 0xffu, (m >> 8) & 0xffu), max((m >> 16) & 0xffu, m >> 24));
  return sh.live ? top : 0u;
}

// Converts a share into the e4m3 tile at `dst`, in fp8's stage layout
// (MlaWgmmaFp8Offset), with the tile's largest scale code `tile_max`; tokens
// at or past the tile's valid count become zeros. A block (32 elements) is
// two 16-byte chunks; a quarter warp's 8 stores (8 consecutive tokens, one
// chunk each) reach 8 different bank groups in both swizzles.
MLA_INLINE void StoreMxShare(const MxShare& sh, u8* dst, int tid, u32 tile_max) {
  const int tok = tid % TILE, half = tid / TILE;
#pragma unroll
  for (int k = 0; k < MX_SHARE_BLOCKS; ++k) {
    const int blk = MX_SHARE_BLOCKS * half + k;
    uint4 w[2] = {};  // chunks 2 blk and 2 blk + 1
    if (sh.live) {
      const u32 scale = (sh.scale[k / 4] >> (8 * (k % 4))) & 0xffu;
      // 2^e for e in [-40, 6]: a normal float's exponent field.
      const int e = MlaMxShiftedExponent(static_cast<int>(scale), static_cast<int>(tile_max));
      const float f = scale == 0xffu ? __uint_as_float(0x7fc00000u)
                                     : __uint_as_float(static_cast<u32>(e + 127) << 23);
      const MlaMxE4m3Table table = MlaMxE4m3TableFromPairs(
          E4m3x2(0.0f * f, 0.5f * f), E4m3x2(f, 1.5f * f), E4m3x2(2.0f * f, 3.0f * f),
          E4m3x2(4.0f * f, 6.0f * f));
      u32 c[8];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const MlaMxE4m3Words m = MlaMxToE4m3x8(sh.x[4 * k + i], table);
        c[2 * i] = m.lo;
        c[2 * i + 1] = m.hi;
      }
      w[0] = make_uint4(c[0], c[1], c[2], c[3]);
      w[1] = make_uint4(c[4], c[5], c[6], c[7]);
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      *reinterpret_cast<uint4*>(dst + MlaWgmmaFp8Offset(tok, 2 * blk + i)) = w[i];
    }
  }
}

// Converting warpgroup c's whole run (threads 128 (c + 1) .. 128 (c + 2) - 1).
// It serves the e4m3 tile uses g with MxBuffer(g) == c (every use when there
// is one converter): per work item, the tiles t with MxBuffer(g0 + t) == c,
// g0 the item's first use. Its MX_STAGES_EACH raw stages hold its next tiles
// in flight; a stage is copied into again as soon as every thread has read
// its share into registers, before converting it.
MLA_INLINE void CopyAndConvertTiles(const MlaDecodeParams& p, const Smem& sm, int c) {
  const int tid = threadIdx.x - NUM_THREADS * (c + 1);
  u8* const stages = sm.mx + c * MX_STAGES_EACH * MX_STAGE_BYTES;
  int g = 0;
  ForEachWorkItem(p, [&](const MlaWorkItem& item, const MlaSeqInfo& s, const MlaWorkItem& next,
                         MlaSeqInfo& next_seq) {
    next_seq = LoadSeq(p, next);
    const ItemRange r = RangeOf(item, s);
    // This converter's k-th tile of the item and where its raw copy goes.
    const int t0 = MX_CONVERTERS == 1 ? 0 : (c - g) & 1;
    auto tile = [&](int k) { return t0 + k * MX_CONVERTERS; };
    // The 2-byte pieces of each stage in flight, oldest first (IssueMxTile):
    // stored just before their stage is read.
    mla_mma::MxPieces pieces[MX_STAGES_EACH];
    auto issue = [&](int k, mla_mma::MxPieces& into) {
      const int j0 = r.kv_lo + tile(k) * TILE;
      mla_mma::IssueMxTile(p, s, j0, min(TILE, r.kv_hi - j0),
                           stages + (k % MX_STAGES_EACH) * MX_STAGE_BYTES, tid, NUM_THREADS, into);
    };
    SyncConverter(c);  // every thread has read its shares of the previous item's stages
#pragma unroll
    for (int k = 0; k < MX_STAGES_EACH; ++k) {
      pieces[k] = mla_mma::NoMxPieces();
      if (tile(k) < r.num_tiles) issue(k, pieces[k]);
      CpAsyncCommit();
    }
    for (int k = 0; tile(k) < r.num_tiles; ++k) {
      const int t = tile(k), j0 = r.kv_lo + t * TILE;
      CpAsyncWait<MX_STAGES_EACH - 1>();
      mla_mma::StoreMxPieces(pieces[0], stages + (k % MX_STAGES_EACH) * MX_STAGE_BYTES);
#pragma unroll
      for (int i = 0; i + 1 < MX_STAGES_EACH; ++i) pieces[i] = pieces[i + 1];
      pieces[MX_STAGES_EACH - 1] = mla_mma::NoMxPieces();
      SyncConverter(c);  // stage k landed everywhere
      MxShare sh;
      LoadMxShare(p, s, j0, r.kv_hi - j0, stages + (k % MX_STAGES_EACH) * MX_STAGE_BYTES, tid, sh);
      const u32 warp_max = __reduce_max_sync(0xffffffffu, MxShareMaxScale(sh));
      if ((tid & 31) == 0) sm.mx_max[4 * c + tid / 32] = warp_max;
      SyncConverter(c);  // every share of stage k is in registers, every warp's maximum written
      if (tile(k + MX_STAGES_EACH) < r.num_tiles) {
        issue(k + MX_STAGES_EACH, pieces[MX_STAGES_EACH - 1]);
      }
      CpAsyncCommit();
      const u32 tile_max = max(max(sm.mx_max[4 * c], sm.mx_max[4 * c + 1]),
                               max(sm.mx_max[4 * c + 2], sm.mx_max[4 * c + 3]));
      const int u = g + t, b = MxBuffer(u);  // b == c with two converters
      MbarWait(&sm.empty[b], MxParity(u) ^ 1u);  // the first round passes at once
      StoreMxShare(sh, sm.raw + b * STAGE_BYTES, tid, tile_max);
      if (tid == 0) sm.mx_shift[b] = MlaMxTileExponent(static_cast<int>(tile_max));
      FenceProxyAsync();  // the tile's generic stores -> the products' wgmma reads
      MbarArrive(&sm.full[b]);
    }
    // The epilogue's use: the tile is handed over as it is.
    const int u = g + r.num_tiles;
    if (MxBuffer(u) == c || MX_CONVERTERS == 1) {
      MbarWait(&sm.empty[MxBuffer(u)], MxParity(u) ^ 1u);
      MbarArrive(&sm.full[MxBuffer(u)]);
    }
    g = u + 1;
  });
}

}  // namespace mla_wgmma

#endif  // MLAJIT_KERNEL_TEMPLATES_MLA_WGMMA_MXFP4_CUH_
