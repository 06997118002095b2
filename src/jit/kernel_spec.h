// KernelSpec: everything that selects one compiled decode kernel. Rendering
// (template placeholders), validation and the cache key all derive from it.
//
//   KernelSpec s;
//   s.num_heads = 16; s.kv_format = KvFormat::kFp8E4m3; s.arch = "sm_90a";
//   MLAJIT_RETURN_IF_ERROR(ValidateSpec(s));
//   std::string json = SpecToJson(s);   // one line, stable field order
#ifndef MLAJIT_SRC_JIT_KERNEL_SPEC_H_
#define MLAJIT_SRC_JIT_KERNEL_SPEC_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/base/mla_types.h"

namespace mlajit::jit {

struct KernelSpec {
  std::string template_name = "mla_decode";  // kernel_templates/<name>.cu.in
  int num_heads = 16;       // 1..128
  int max_q_len = 1;        // 1..8: longest q_len of a sequence this kernel serves
  KvFormat kv_format = KvFormat::kFp8E4m3;
  QMode q_mode = QMode::kBf16;
  int page_size = 0;        // 0 flat; 1, 16, 32, 64, 128 paged
  bool causal = true;
  bool write_lse = false;
  // Tile shape: query rows (heads x q positions) per CTA tile, KV tokens per tile,
  // warps per CTA, pipeline stages. Chosen by the planner per shape.
  int block_m = 64;
  int block_n = 64;
  int num_warps = 8;
  int num_stages = 2;
  std::string arch = "sm_90a";  // full target: sm_80, sm_90a, gfx90a, gfx942...

  friend bool operator==(const KernelSpec& a, const KernelSpec& b) {
    return a.template_name == b.template_name && a.num_heads == b.num_heads &&
           a.max_q_len == b.max_q_len && a.kv_format == b.kv_format && a.q_mode == b.q_mode &&
           a.page_size == b.page_size && a.causal == b.causal && a.write_lse == b.write_lse &&
           a.block_m == b.block_m && a.block_n == b.block_n && a.num_warps == b.num_warps &&
           a.num_stages == b.num_stages && a.arch == b.arch;
  }
  template <typename H>
  friend H AbslHashValue(H h, const KernelSpec& s) {
    return H::combine(std::move(h), s.template_name, s.num_heads, s.max_q_len, s.kv_format,
                      s.q_mode, s.page_size, s.causal, s.write_lse, s.block_m, s.block_n,
                      s.num_warps, s.num_stages, s.arch);
  }
};

// kInvalidArgument naming the field, value and allowed values; kUnimplemented for
// a valid combination this build cannot serve (e.g. an unknown arch).
absl::Status ValidateSpec(const KernelSpec& spec);

// One-line JSON with a stable field order (cache metadata, manifests, logs).
std::string SpecToJson(const KernelSpec& spec);
absl::StatusOr<KernelSpec> SpecFromJson(absl::string_view json);

// Placeholder bindings for the template: {"num_heads", "16"}, ...
std::vector<std::pair<std::string, std::string>> SpecBindings(const KernelSpec& spec);

// The targets ValidateSpec accepts: sm_80, sm_86, sm_89, sm_90, sm_90a, sm_100a,
// gfx90a, gfx908, gfx942, gfx950. Whether this machine's compiler can build one
// is a separate question (Compiler::SupportsArch).
const std::vector<std::string>& KnownArchs();

// A readable module identity, e.g. "mla_decode_h16_q1_fp8_e4m3_a16_flat_causal_m64n64w8s2_sm_90a".
std::string SpecName(const KernelSpec& spec);

}  // namespace mlajit::jit

#endif  // MLAJIT_SRC_JIT_KERNEL_SPEC_H_
