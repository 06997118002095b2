// Launch parameters and scheduling metadata of the MLA decode kernels, shared
// by the host (src/plan, src/api) and the device code. Plain C++ with no
// includes, so that NVRTC, hiprtc and the host compiler all accept it; every
// field is 4 or 8 bytes, or (tensor maps) 128 bytes aligned to 128, so host and
// device agree on the layout.
//
// Host side:  MlaDecodeParams p{}; p.q = q; ...; void* args[] = {&p}; Launch(...)
// Device:     extern "C" __global__ void mla_decode_kernel(const MlaDecodeParams p)
#ifndef MLAJIT_KERNEL_TEMPLATES_MLA_PARAMS_H_
#define MLAJIT_KERNEL_TEMPLATES_MLA_PARAMS_H_

// Per-sequence layout, resolved by the planner from the indptr arrays.
struct MlaSeqInfo {
  int qo_start;  // first query row (token) of the sequence in q / out
  int q_len;
  int kv_len;
  int kv_base;  // flat: first KV slot; paged: first entry in kv_indices
};

// One unit of work: query rows [row_start, row_start + BLOCK_M) of sequence
// `seq` (rows are ordered q position major, head minor, as in q's memory) against
// KV positions [kv_start, kv_end) of that sequence. 48 bytes, loaded as three
// 16-byte words.
struct alignas(16) MlaWorkItem {
  int seq;
  int row_start;
  int kv_start;
  int kv_end;
  int partial;  // -1: the item covers the whole sequence; write out / lse directly.
                // else: slot in partial_o / partial_lse, merged by the combine kernel.
  int reserved[3];
  // seqs[seq], copied in by the planner: a CTA's first item then costs one
  // dependent round trip before its Q and KV loads, not two (the item, then
  // its sequence's record; tools/bench/RESULTS.md v39).
  MlaSeqInfo seq_info;
};

// A (sequence, row tile) whose KV range was split over several work items.
struct MlaCombineItem {
  int seq;
  int row_start;
  int partial_start;  // the splits own consecutive partial slots
  int num_splits;
};

// A CUDA tensor map (CUtensorMap's size and alignment): encoded by the host
// (gpu::Backend::EncodeTensorMap2D), read by the kernel's tensor copies
// straight from its parameters.
struct alignas(128) MlaTensorMap {
  unsigned long long opaque[16];
};

struct MlaDecodeParams {
  const void* q;             // [total_q, H, 576] bf16
  const void* kv;            // [slots, token_bytes]
  const int* kv_indices;     // paged: page ids
  void* out;                 // [total_q, H, 512] bf16
  float* lse;                // [total_q, H] fp32 or null
  const MlaWorkItem* work;   // all work items, grouped by CTA
  const int* work_indptr;    // [num_ctas + 1]: CTA c runs work[work_indptr[c] .. [c+1])
  const MlaSeqInfo* seqs;    // [batch]
  float* partial_o;          // [num_partials, BLOCK_M, 512] normalised, MLA_PARTIAL_BYTES each
                             // (f16 for fp8 KV, else bf16: MLA_F16_PARTIALS)
  float* partial_lse;        // [num_partials, BLOCK_M] fp32, natural log
  // [num_combine]. The merge kernel reads it (and plan_counters) before it
  // waits for the decode (mla_combine.cuh), so the decode must never write
  // either: only the host or the plan kernel before the decode does.
  const MlaCombineItem* combine;
  float sm_scale;            // softmax scale
  float kv_scale;            // fp8 KV: real value = code * kv_scale; else 1
  int num_ctas;
  int num_combine;
  // The caller's size of kv in bytes (mlajit_decode_args_t::kv_bytes), or 0
  // when not given. MXFP4 copies whole 16-byte chunks across record edges
  // only inside [kv, kv + kv_bytes) (mla_mma::IssueMxTile); without it they
  // read no byte outside the addressed records.
  unsigned long long kv_bytes;
  // Device-built plans (mla_plan.cuh): the planner's counters, MlaPlanCounter
  // order; the merge reads its item count from here (num_combine is then a
  // capacity). Null for host plans.
  const int* plan_counters;
  // The sm_90a paths of MlaKvTensorMapsEligible: kv as a matrix of
  // kv_map_rows rows (slots) of a token's bytes (576 fp8, 1152 bf16), in two
  // maps with boxes of 64 rows: [0] 128 bytes with the 128-byte swizzle
  // (fp8: the four blocks of 128 latent codes; bf16: each of the nine blocks
  // of 64 dims), [1] 64 bytes with the 64-byte swizzle (fp8: the rope codes;
  // bf16 does not use it). kv_map_rows = 0: no maps, every tile is copied by
  // cp.async.
  int kv_map_rows;
  MlaTensorMap kv_maps[2];
};

// Slots of MlaDecodeParams::plan_counters / MlaPlanParams::counters.
enum MlaPlanCounter {
  MLA_PLAN_NUM_COMBINE = 0,
  MLA_PLAN_NUM_PARTIALS = 1,
  MLA_PLAN_TOTAL_Q = 2,
  MLA_PLAN_ERROR = 3,        // 0, or an MlaPlanError of the last update
  MLA_PLAN_ERROR_INDEX = 4,  // the sequence it concerns
  MLA_PLAN_ERROR_VALUE = 5,  // the offending value
  MLA_PLAN_NUM_COUNTERS = 8
};

// Layout errors a device planner reports (the schedule is then empty).
enum MlaPlanError {
  MLA_PLAN_OK = 0,
  MLA_PLAN_BAD_INDPTR_START = 1,  // qo_indptr[0] or kv_indptr[0] != 0 (value: the nonzero one)
  MLA_PLAN_BAD_Q_LEN = 2,         // q_len < 0 or > max_q_len
  MLA_PLAN_BAD_KV_SPAN = 3,       // kv_indptr decreases
  MLA_PLAN_BAD_KV_LEN = 4         // paged kv_lens[b] outside 0..pages * page_size
};

#if defined(__CUDACC__) || defined(__HIPCC__) || defined(__HIPCC_RTC__)
#define MLA_HOST_DEVICE __host__ __device__
#else
#define MLA_HOST_DEVICE
#endif

// Bytes of a split partial's value on every path (f16 or bf16,
// mla_common.cuh): what the decode stores, the merge reads and the host
// reserves.
#define MLA_PARTIAL_BYTES 2

// The merge kernel runs one 32-lane group per (combine item, row, quarter of
// the 512 output columns), or per half or whole row where that would leave
// each group several quarters (mla_combine.cuh); the host sizes its grid for
// quarters, at most one wave.
#define MLA_COMBINE_GROUPS_PER_ROW 4

// Columns a lane of the merge takes, for `rows` rows to merge (combine items
// times block_m) over `groups` 32-lane groups: the narrowest unit that leaves
// each group one unit at most, a quarter (4), a half (8) or the whole row
// (16); past a row a group, halves. A group's units run one after another,
// each a memory round trip, while a wider unit puts more loads in flight in
// the same trip; past a row a group, whole rows measured slower than halves
// (tools/bench/RESULTS.md v20, v56). The host picks the merge kernel of this
// width; the device-planned merge, whose count only the device knows, picks
// it in the kernel.
MLA_HOST_DEVICE constexpr int MlaCombineLaneColumns(long long rows, long long groups) {
  return rows * 4 <= groups ? 4 : (rows * 2 > groups && rows <= groups) ? 16 : 8;
}

// CTAs of `threads` threads per SM of the merge kernel: its launch bounds hold
// it to the registers of 512 resident threads per SM (128 each, room for a
// batch of 16 splits' loads in flight without spilling), and the host
// launches at most one wave of them, whose groups then stride over the work.
MLA_HOST_DEVICE constexpr int MlaCombineBlocksPerSm(int threads) {
  return threads >= 512 ? 1 : 512 / threads;
}

// Padded bf16 row (576 + 8 elements, 1168 bytes): consecutive rows start 4 banks
// apart, so ldmatrix's eight 16-byte row reads are conflict-free.
#define MLA_SMEM_ROW_ELEMS 584

// Bytes per token in the raw staging buffer (fp8 576; MXFP4 306 rounded up to 16).
MLA_HOST_DEVICE constexpr int MlaRawTokenStride(int kv_format) {
  return kv_format == 1 ? 576 : kv_format == 2 ? 320 : 0;
}

// Dynamic shared memory of the tensor-core path (mla_decode_mma.cuh): Q tile,
// bf16 KV tile(s) (one per stage for bf16 KV, else one converted tile), raw
// staging per stage (fp8 / MXFP4) and the score tile.
MLA_HOST_DEVICE constexpr int MlaMmaSmemBytes(int kv_format, int block_m, int block_n,
                                              int stages) {
  return block_m * MLA_SMEM_ROW_ELEMS * 2 +
         (kv_format == 0 ? stages : 1) * block_n * MLA_SMEM_ROW_ELEMS * 2 +
         stages * block_n * MlaRawTokenStride(kv_format) + block_m * (block_n + 4) * 4;
}

// The Hopper warpgroup-MMA path (mla_decode_wgmma.cuh) serves sm_90a with
// 64-token tiles and 16 or 32 query rows per tile: one 4-warp warpgroup per
// CTA for fp8 and bf16 KV; for MXFP4 two or three (8 or 12 warps: one or two
// convert tiles for the first); bf16 tiles of 32 rows also as two warpgroups
// of 16 rows each that share the KV stages (8 warps, MlaWgmmaRowGroups).
// Host and device decide with this one predicate.
MLA_HOST_DEVICE constexpr bool MlaWgmmaEligible(int kv_format, int block_m, int block_n,
                                                int num_warps) {
  return (block_m == 16 || block_m == 32) && block_n == 64 &&
         (kv_format == 1   ? num_warps == 4
          : kv_format == 0 ? num_warps == 4 || (num_warps == 8 && block_m == 32)
                           : kv_format == 2 && (num_warps == 8 || num_warps == 12));
}
// How many warpgroups of that path split a tile's rows between them: 2 for
// bf16 tiles of 32 rows on 8 warps (each warpgroup computes its 16 rows from
// the same KV tile in shared memory), else 1.
MLA_HOST_DEVICE constexpr int MlaWgmmaRowGroups(int kv_format, int block_m, int num_warps) {
  return kv_format == 0 && block_m == 32 && num_warps == 8 ? 2 : 1;
}

// The 64-row Hopper path (mla_decode_wgmma_rows.cuh) serves sm_90a with fp8 or
// bf16 KV for tiles of 64 query rows and 64 tokens, two warpgroups per CTA
// (the policy's for bf16; fp8 takes the warp-specialised path below).
MLA_HOST_DEVICE constexpr bool MlaWgmmaRowsEligible(int kv_format, int block_m, int block_n,
                                                    int num_warps) {
  return kv_format != 2 && block_m == 64 && block_n == 64 && num_warps == 8;
}

// The warp-specialised 64-row path (mla_decode_wgmma_rows_ws.cuh): fp8 KV,
// tiles of 64 query rows and 64 tokens, three warpgroups per CTA.
MLA_HOST_DEVICE constexpr bool MlaWgmmaRowsWsEligible(int kv_format, int block_m, int block_n,
                                                      int num_warps) {
  return kv_format == 1 && block_m == 64 && block_n == 64 && num_warps == 12;
}
// Its dynamic shared memory: `stages` fp8 tiles as stored (36 KB each), Q as
// two e4m3 operands (64 x 576 each; a8 uses one), two P buffers (64 x 64
// f16), three rows of 64 floats (two of rescale factors, one of sums), two
// times four flags and stages + 4 mbarriers.
MLA_HOST_DEVICE constexpr int MlaWgmmaRowsWsSmemBytes(int stages) {
  return stages * 64 * 576 + 2 * 64 * 576 + 2 * 64 * 64 * 2 + 3 * 64 * 4 + 2 * 4 * 4 +
         (stages + 4) * 8;
}

// Whether the kernel copies whole tiles with tensor maps (TMA, completing on
// an mbarrier) instead of cp.async of 16 bytes a thread: the swap-AB and
// warp-specialised paths with fp8 KV (five copies into the fp8 stage layout
// of mla_wgmma_layout.h), and the swap-AB and 64-row paths with bf16 KV (nine
// blocks of 64 dims, mla_wgmma_rows_layout.h), flat or in pages of a
// multiple of 64 tokens, so that a tile of 64 tokens starting on a multiple
// of 64 is 64 consecutive slots. The host encodes MlaDecodeParams::kv_maps
// for such kernels; the kernel checks each tile (whole, consecutive slots,
// inside kv_map_rows) and copies the others, such as an item's last part
// tile, by cp.async.
MLA_HOST_DEVICE constexpr bool MlaKvTensorMapsEligible(int kv_format, int block_m, int block_n,
                                                       int num_warps, int page_size) {
  return ((kv_format == 1 && (MlaWgmmaEligible(kv_format, block_m, block_n, num_warps) ||
                              MlaWgmmaRowsWsEligible(kv_format, block_m, block_n, num_warps))) ||
          (kv_format == 0 && (MlaWgmmaEligible(kv_format, block_m, block_n, num_warps) ||
                              MlaWgmmaRowsEligible(kv_format, block_m, block_n, num_warps)))) &&
         (page_size == 0 || page_size % 64 == 0);
}

// Dynamic shared memory of the 64-row path: Q and `stages` 16-bit KV operand
// tiles (64 x 576 x 2 bytes each), P (64 x 64 x 2) and three rows of 64
// floats (rescale factors, row sums, a8's row scales). The same for fp8
// (converted on the way in) and bf16.
MLA_HOST_DEVICE constexpr int MlaWgmmaRowsSmemBytes(int kv_format, int stages) {
  return (kv_format == 2 ? 0 : (1 + stages) * 64 * 576 * 2) + 64 * 64 * 2 + 3 * 64 * 4;
}

// Bytes per token of the wgmma path's staging tile: the token as stored (the
// kernel swizzles 16-byte chunks within a token to keep its loads free of bank
// conflicts, see mla_decode_wgmma.cuh); MXFP4 tokens after their conversion
// to e4m3 (one byte per element, as fp8's).
MLA_HOST_DEVICE constexpr int MlaWgmmaTokenStride(int kv_format) {
  return kv_format == 0 ? 1152 : 576;
}

// MXFP4 on the wgmma path: bytes of each of the two converted e4m3 tiles.
// A tile also stages an item's output rows in its epilogue (block_m rows of
// 512 + 4 floats), which for 32 rows is more than the tile's 36 KB; a
// multiple of 1024 bytes, as the tiles' swizzles need.
MLA_HOST_DEVICE constexpr int MlaWgmmaMxTileBytes(int block_m) {
  return 64 * 576 > block_m * 516 * 4 ? 64 * 576 : (block_m * 516 * 4 + 1023) / 1024 * 1024;
}

// Dynamic shared memory of the wgmma path: Q^T (block_m x 576 16-bit), the KV
// stages (MXFP4: two e4m3 tiles and the stages as stored), P^T (block_m x 64
// 16-bit), 4 x block_m floats of row statistics, block_m floats of a8's row
// scales, and for MXFP4 four mbarriers, the two tiles' shifts and the
// converters' per-warp maxima (72 bytes), for fp8 and bf16 one mbarrier per
// stage (tensor-map copies).
MLA_HOST_DEVICE constexpr int MlaWgmmaSmemBytes(int kv_format, int block_m, int stages) {
  return block_m * 576 * 2 +
         (kv_format == 2
              ? 2 * MlaWgmmaMxTileBytes(block_m) + stages * 64 * MlaRawTokenStride(2) + 72
              : stages * 64 * MlaWgmmaTokenStride(kv_format)) +
         block_m * 64 * 2 + 5 * block_m * 4 + (kv_format != 2 ? stages * 8 : 0);
}

// Dynamic shared memory of the portable path (mla_decode_portable.cuh).
MLA_HOST_DEVICE constexpr int MlaPortableSmemBytes(int num_threads) {
  return (576 + 16 + num_threads) * 4;
}

#endif  // MLAJIT_KERNEL_TEMPLATES_MLA_PARAMS_H_
