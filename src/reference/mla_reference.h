// CPU reference MLA decode (DESIGN.md section 1): the oracle of every kernel
// test. Accumulates in double, decodes each KV token once per (sequence, head
// group), and spreads (sequence, head group) tasks over std::threads; the result
// does not depend on the thread count.
//
//   DecodeProblem p;
//   p.num_heads = 16; p.kv_format = KvFormat::kFp8E4m3; p.sm_scale = 1 / std::sqrt(192.f);
//   p.qo_indptr = qo; p.kv_indptr = kvp; p.q = q_bf16; p.kv = kv_bytes; p.kv_scale = s;
//   std::vector<float> out(total_q * 16 * 512), lse(total_q * 16);
//   absl::Status st = ReferenceDecode(p, absl::MakeSpan(out), absl::MakeSpan(lse));
#ifndef MLAJIT_SRC_REFERENCE_MLA_REFERENCE_H_
#define MLAJIT_SRC_REFERENCE_MLA_REFERENCE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "src/base/mla_types.h"

namespace mlajit {
namespace reference {

struct DecodeProblem {
  int num_heads = 0;                 // 1..128
  KvFormat kv_format = KvFormat::kFp8E4m3;
  QMode q_mode = QMode::kBf16;       // kFp8: Q quantised to fp8 per row (token and head: scale =
                                     // the smallest 2^e with amax <= 448 * 2^e) and dequantised
  bool causal = true;                // row t of a sequence (0-based within the sequence) sees kv tokens j <= kv_len - q_len + t
  float sm_scale = 0;                // > 0, finite
  int page_size = 0;                 // 0: flat; 1,16,32,64,128: paged
  absl::Span<const int32_t> qo_indptr;   // B+1, query rows of seq b: [qo_indptr[b], qo_indptr[b+1])
  absl::Span<const int32_t> kv_indptr;   // B+1; flat: token range of seq b in kv; paged: range of seq b in kv_indices (pages)
  absl::Span<const int32_t> kv_lens;     // paged only: B token counts (empty: all pages full); must be empty for flat
  absl::Span<const int32_t> kv_indices;  // paged only: page ids; token i of seq b lives in slot kv_indices[kv_indptr[b] + i/page_size]*page_size + i%page_size
  absl::Span<const uint16_t> q;          // bf16 bits, [total_q, num_heads, 576]
  absl::Span<const uint8_t> kv;          // [num_slots, KvBytesPerToken(kv_format)] bytes
  float kv_scale = 1;                    // fp8 KV only: real = decode(code) * kv_scale
};

// Number of sequences B (qo_indptr.size() - 1, or 0 when empty).
int NumSequences(const DecodeProblem& p);
// Tokens of sequence b (after validation): flat kv_indptr[b+1]-kv_indptr[b];
// paged kv_lens[b], or pages * page_size when kv_lens is empty.
int64_t KvLen(const DecodeProblem& p, int b);

// Checks every argument; kInvalidArgument with a message naming the argument,
// the value and the expectation, e.g.
// "kv_indptr[3]=17 < kv_indptr[2]=40: must be non-decreasing".
// out_size / lse_size: the sizes of the output spans (lse_size 0 = no lse);
// pass -1 to skip those checks.
absl::Status ValidateProblem(const DecodeProblem& p, int64_t out_size = -1,
                             int64_t lse_size = -1);

// out: [total_q, num_heads, 512] float (accumulated in double);
// lse: empty or [total_q, num_heads], natural log of sum_j exp(s_j), -inf for rows
// that see no token (out = 0 there). num_threads 0 = hardware concurrency.
absl::Status ReferenceDecode(const DecodeProblem& p, absl::Span<float> out, absl::Span<float> lse,
                             int num_threads = 0);

}  // namespace reference
}  // namespace mlajit

#endif  // MLAJIT_SRC_REFERENCE_MLA_REFERENCE_H_
