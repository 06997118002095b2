// Deterministic random decode batches for tests, the benchmark and the demo: the
// same BatchConfig gives the same bytes on every run, thread count and platform
// (own counter-based generator and Box-Muller; no std:: distributions, whose
// output is implementation-defined).
//
//   BatchConfig cfg;
//   cfg.batch_size = 32; cfg.kv_len = 8192; cfg.page_size = 64;
//   Batch batch = GenerateBatch(cfg);
//   std::vector<float> out(batch.total_q() * cfg.num_heads * kHeadDimV);
//   absl::Status st = ReferenceDecode(batch.problem(), absl::MakeSpan(out), {});
//
// Values: q and KV elements are normal(0, 1), then quantised: q to bf16 (RNE);
// KV to the format (fp8 with the per-tensor quantiser, kv_scale = amax / 448;
// MXFP4 with the block-32 quantiser; bf16 with RNE). The values of token i of
// sequence b depend only on (seed, the token's position in the concatenation of
// all sequences), not on page_size or page order, so a flat and a paged batch
// from otherwise equal configs hold the same logical tokens.
// Paged layouts fill the unused tail of each last page and the spare pages with
// NaN encodings (fp8 0x7F, bf16 0x7FC0, MXFP4 all bytes 0xFF, i.e. NaN scales),
// so a kernel that reads past kv_len shows up as NaN in its output.
#ifndef MLAJIT_SRC_REFERENCE_BATCH_GENERATOR_H_
#define MLAJIT_SRC_REFERENCE_BATCH_GENERATOR_H_

#include <cstdint>
#include <vector>

#include "src/base/mla_types.h"
#include "src/reference/mla_reference.h"

namespace mlajit {
namespace reference {

enum class LengthDistribution {
  kFixed,    // every sequence has kv_len tokens
  kUniform,  // uniform in [1, kv_len]
  kSkewed,   // one sequence (random position) of kv_len, the others uniform in [1, max(1, kv_len / 16)]
};

struct BatchConfig {
  int batch_size = 1;
  int num_heads = 16;
  int q_len = 1;                           // q_len per sequence (0..8)
  int kv_len = 1024;                       // fixed length, or max for kUniform, or the long one for kSkewed
  LengthDistribution lengths = LengthDistribution::kFixed;
  double zero_length_fraction = 0;         // fraction of sequences forced to kv_len 0
  KvFormat kv_format = KvFormat::kFp8E4m3;
  QMode q_mode = QMode::kBf16;
  bool causal = true;
  int page_size = 0;                       // 0: flat; 1, 16, 32, 64, 128: paged
  bool shuffle_pages = true;               // random page permutation (else pages in order)
  uint64_t seed = 1;
};

// Owns every buffer; problem() returns a view that lives as long as the Batch.
struct Batch {
  BatchConfig config;
  std::vector<int32_t> qo_indptr, kv_indptr, kv_lens, kv_indices;
  std::vector<uint16_t> q;   // bf16 bits [total_q, num_heads, 576]
  std::vector<uint8_t> kv;   // [num_kv_slots, KvBytesPerToken(kv_format)]
  float kv_scale = 1;
  float sm_scale = 0;        // 1 / sqrt(192), DeepSeek's (128 + 64)^-0.5

  int total_q() const { return qo_indptr.empty() ? 0 : qo_indptr.back(); }
  int64_t num_kv_slots() const;
  // Token count of sequence b.
  int64_t kv_len(int b) const;
  DecodeProblem problem() const;
};

// Config values out of range (batch_size < 0, q_len > 8, page_size not allowed,
// ...) are clamped to the nearest allowed value; the result is always valid.
Batch GenerateBatch(const BatchConfig& config);

// The layout GenerateBatch(config) produces (qo_indptr, kv_indptr and, paged,
// kv_lens), without the page table or any data: what a scheduler needs.
struct BatchLayout {
  std::vector<int32_t> qo_indptr, kv_indptr, kv_lens;
};
BatchLayout GenerateLayout(const BatchConfig& config);

namespace reference_internal {

// SplitMix64 finaliser: a bijective 64-bit mix.
uint64_t Mix64(uint64_t x);
// Draw `counter` of the stream `key`: a counter-based generator, so any element
// can be produced independently (parallel generation, thread-count invariant).
uint64_t Draw(uint64_t key, uint64_t counter);
// Box-Muller on one draw: radius sqrt(-2 ln u1) from the high 32 bits, angle
// 2 pi u2 from the low 32 bits (u = (bits + 0.5) / 2^32). Uses its own log and
// sin/cos polynomials (plain IEEE arithmetic), not libm, so that the result is
// the same on every platform.
void NormalPair(uint64_t bits, float* a, float* b);
// Element `index` of the normal(0, 1) stream `key` (Box-Muller on a
// counter-based draw; elements 2i and 2i+1 share one draw).
float NormalAt(uint64_t key, uint64_t index);

}  // namespace reference_internal

}  // namespace reference
}  // namespace mlajit

#endif  // MLAJIT_SRC_REFERENCE_BATCH_GENERATOR_H_
