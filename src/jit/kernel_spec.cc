#include "src/jit/kernel_spec.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernel_templates/mla_params.h"  // MlaWgmmaEligible
#include "src/base/status_macros.h"
#include "src/jit/json_util.h"

namespace mlajit::jit {
namespace {

constexpr std::array<int, 4> kBlockSizes = {16, 32, 64, 128};
constexpr std::array<int, 4> kWarpCounts = {4, 8, 12, 16};
constexpr std::array<const char*, 10> kKnownArchs = {
    "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100a",
    "gfx90a", "gfx908", "gfx942", "gfx950"};
constexpr int kMaxTemplateNameLength = 64;

// Debian's abseil has its own string_view; mla_types.h speaks std::string_view.
absl::string_view AsAbsl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

template <size_t N>
bool Contains(const std::array<int, N>& set, int v) {
  return std::find(set.begin(), set.end(), v) != set.end();
}

template <size_t N>
std::string JoinInts(const std::array<int, N>& set) {
  return absl::StrJoin(set, ", ");
}

absl::Status RangeError(absl::string_view field, int value, int lo, int hi) {
  return absl::InvalidArgumentError(
      absl::StrCat("KernelSpec.", field, "=", value, ": must be in ", lo, "..", hi));
}

absl::Status SetError(absl::string_view field, int value, absl::string_view allowed) {
  return absl::InvalidArgumentError(
      absl::StrCat("KernelSpec.", field, "=", value, ": must be one of {", allowed, "}"));
}

bool IsTemplateNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

// Field order of SpecToJson; SpecFromJson requires exactly these fields.
constexpr std::array<const char*, 13> kFieldOrder = {
    "template_name", "num_heads", "max_q_len", "kv_format", "q_mode",   "page_size", "causal",
    "write_lse",     "block_m",   "block_n",   "num_warps", "num_stages", "arch"};

absl::StatusOr<KvFormat> KvFormatFromJsonName(absl::string_view name) {
  if (const auto f = KvFormatFromName(std::string_view(name.data(), name.size()))) return *f;
  return absl::InvalidArgumentError(absl::StrCat(
      "spec JSON: field \"kv_format\"=\"", name, "\": must be one of bf16, fp8_e4m3, mxfp4"));
}

absl::StatusOr<QMode> QModeFromName(absl::string_view name) {
  for (QMode m : {QMode::kBf16, QMode::kFp8}) {
    if (AsAbsl(QModeName(m)) == name) return m;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("spec JSON: field \"q_mode\"=\"", name, "\": must be one of bf16, fp8"));
}

}  // namespace

const std::vector<std::string>& KnownArchs() {
  static const auto* archs = new std::vector<std::string>(kKnownArchs.begin(), kKnownArchs.end());
  return *archs;
}

absl::Status ValidateSpec(const KernelSpec& spec) {
  const std::string& name = spec.template_name;
  if (name.empty() || name.size() > kMaxTemplateNameLength ||
      !std::all_of(name.begin(), name.end(), IsTemplateNameChar)) {
    return absl::InvalidArgumentError(
        absl::StrCat("KernelSpec.template_name=\"", absl::CEscape(name),
                     "\": must match [a-z0-9_]+ (at most ", kMaxTemplateNameLength, " chars)"));
  }
  if (spec.num_heads < 1 || spec.num_heads > kMaxHeads) {
    return RangeError("num_heads", spec.num_heads, 1, kMaxHeads);
  }
  if (spec.max_q_len < 1 || spec.max_q_len > kMaxQLen) {
    return RangeError("max_q_len", spec.max_q_len, 1, kMaxQLen);
  }
  if (!IsValidKvFormat(static_cast<int32_t>(spec.kv_format))) {
    return SetError("kv_format", static_cast<int>(spec.kv_format),
                    "0 (bf16), 1 (fp8_e4m3), 2 (mxfp4)");
  }
  if (!IsValidQMode(static_cast<int32_t>(spec.q_mode))) {
    return SetError("q_mode", static_cast<int>(spec.q_mode), "0 (bf16), 1 (fp8)");
  }
  if (!IsValidPageSize(spec.page_size)) {
    return SetError("page_size", spec.page_size, "0 (flat), 1, 16, 32, 64, 128");
  }
  if (!Contains(kBlockSizes, spec.block_m)) {
    return SetError("block_m", spec.block_m, JoinInts(kBlockSizes));
  }
  if (!Contains(kBlockSizes, spec.block_n)) {
    return SetError("block_n", spec.block_n, JoinInts(kBlockSizes));
  }
  if (!Contains(kWarpCounts, spec.num_warps)) {
    return SetError("num_warps", spec.num_warps, JoinInts(kWarpCounts));
  }
  if (spec.num_stages < 1 || spec.num_stages > 4) {
    return RangeError("num_stages", spec.num_stages, 1, 4);
  }
  if (spec.arch.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KernelSpec.arch=\"\": must name a target, one of ", absl::StrJoin(kKnownArchs, ", ")));
  }
  if (std::find(KnownArchs().begin(), KnownArchs().end(), spec.arch) == KnownArchs().end()) {
    return absl::UnimplementedError(
        absl::StrCat("KernelSpec.arch=\"", absl::CEscape(spec.arch),
                     "\": not a supported target; supported: ", absl::StrJoin(kKnownArchs, ", ")));
  }
  // Twelve warps are three warpgroups: on sm_90a, MXFP4 swap-AB tiles (a
  // product warpgroup and two converting ones) or fp8 tiles of 64 rows (a
  // scorer and two accumulators). The template's static_assert would
  // otherwise fail the compile, after the rendering and a compiler run.
  const int format = static_cast<int>(spec.kv_format);
  const bool three_warpgroups =
      spec.arch == "sm_90a" && ((spec.kv_format == KvFormat::kMxfp4 &&
                                 MlaWgmmaEligible(format, spec.block_m, spec.block_n, 12)) ||
                                MlaWgmmaRowsWsEligible(format, spec.block_m, spec.block_n, 12));
  if (spec.num_warps == 12 && !three_warpgroups) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KernelSpec.num_warps=12: only on sm_90a, for MXFP4 tiles of 16 or 32 rows by 64 tokens "
        "or fp8 tiles of 64 rows by 64 tokens; this spec has kv_format ",
        AsAbsl(KvFormatName(spec.kv_format)), ", tiles ", spec.block_m, "x", spec.block_n,
        ", arch ", spec.arch));
  }
  return absl::OkStatus();
}

std::string SpecToJson(const KernelSpec& spec) {
  // Keep in the order of kFieldOrder: manifests and recorded lines are compared
  // textually by people and by diff tools.
  return absl::StrCat(
      "{\"template_name\":", jit_internal::JsonQuote(spec.template_name),
      ",\"num_heads\":", spec.num_heads, ",\"max_q_len\":", spec.max_q_len,
      ",\"kv_format\":", jit_internal::JsonQuote(AsAbsl(KvFormatName(spec.kv_format))),
      ",\"q_mode\":", jit_internal::JsonQuote(AsAbsl(QModeName(spec.q_mode))),
      ",\"page_size\":", spec.page_size, ",\"causal\":", spec.causal ? "true" : "false",
      ",\"write_lse\":", spec.write_lse ? "true" : "false", ",\"block_m\":", spec.block_m,
      ",\"block_n\":", spec.block_n, ",\"num_warps\":", spec.num_warps,
      ",\"num_stages\":", spec.num_stages, ",\"arch\":", jit_internal::JsonQuote(spec.arch), "}");
}

namespace {

absl::StatusOr<KernelSpec> SpecFromJsonObject(absl::string_view json) {
  MLAJIT_ASSIGN_OR_RETURN(jit_internal::FlatJsonObject obj, jit_internal::ParseFlatJsonObject(json));
  for (const auto& field : obj.fields) {
    // Not a structured binding: C++17 does not let a lambda capture one (clang
    // rejects it; only g++ accepts it).
    const std::string& key = field.first;
    if (std::find_if(kFieldOrder.begin(), kFieldOrder.end(),
                     [&](const char* f) { return key == f; }) == kFieldOrder.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("spec JSON: unknown field \"", absl::CEscape(key), "\"; expected ",
                       absl::StrJoin(kFieldOrder, ", ")));
    }
  }
  KernelSpec s;
  MLAJIT_ASSIGN_OR_RETURN(s.template_name, obj.GetString("template_name"));
  MLAJIT_ASSIGN_OR_RETURN(s.num_heads, obj.GetInt("num_heads"));
  MLAJIT_ASSIGN_OR_RETURN(s.max_q_len, obj.GetInt("max_q_len"));
  MLAJIT_ASSIGN_OR_RETURN(std::string kv, obj.GetString("kv_format"));
  MLAJIT_ASSIGN_OR_RETURN(s.kv_format, KvFormatFromJsonName(kv));
  MLAJIT_ASSIGN_OR_RETURN(std::string q, obj.GetString("q_mode"));
  MLAJIT_ASSIGN_OR_RETURN(s.q_mode, QModeFromName(q));
  MLAJIT_ASSIGN_OR_RETURN(s.page_size, obj.GetInt("page_size"));
  MLAJIT_ASSIGN_OR_RETURN(s.causal, obj.GetBool("causal"));
  MLAJIT_ASSIGN_OR_RETURN(s.write_lse, obj.GetBool("write_lse"));
  MLAJIT_ASSIGN_OR_RETURN(s.block_m, obj.GetInt("block_m"));
  MLAJIT_ASSIGN_OR_RETURN(s.block_n, obj.GetInt("block_n"));
  MLAJIT_ASSIGN_OR_RETURN(s.num_warps, obj.GetInt("num_warps"));
  MLAJIT_ASSIGN_OR_RETURN(s.num_stages, obj.GetInt("num_stages"));
  MLAJIT_ASSIGN_OR_RETURN(s.arch, obj.GetString("arch"));
  return s;
}

}  // namespace

absl::StatusOr<KernelSpec> SpecFromJson(absl::string_view json) {
  absl::StatusOr<KernelSpec> s = SpecFromJsonObject(json);
  // The flat-object getters name the field; say which document it is in.
  if (!s.ok() && absl::StartsWith(s.status().message(), "field ")) {
    return absl::InvalidArgumentError(absl::StrCat("spec JSON: ", s.status().message()));
  }
  return s;
}

std::vector<std::pair<std::string, std::string>> SpecBindings(const KernelSpec& spec) {
  return {
      {"template_name", spec.template_name},
      {"num_heads", absl::StrCat(spec.num_heads)},
      {"max_q_len", absl::StrCat(spec.max_q_len)},
      {"kv_format", absl::StrCat(static_cast<int>(spec.kv_format))},
      {"q_mode", absl::StrCat(static_cast<int>(spec.q_mode))},
      {"page_size", absl::StrCat(spec.page_size)},
      {"causal", spec.causal ? "1" : "0"},
      {"write_lse", spec.write_lse ? "1" : "0"},
      {"block_m", absl::StrCat(spec.block_m)},
      {"block_n", absl::StrCat(spec.block_n)},
      {"num_warps", absl::StrCat(spec.num_warps)},
      {"num_threads", absl::StrCat(spec.num_warps * 32)},
      {"num_stages", absl::StrCat(spec.num_stages)},
      // A C string literal, so templates can write `constexpr char ARCH[] = {{arch_name}};`.
      {"arch_name", jit_internal::JsonQuote(spec.arch)},
  };
}

std::string SpecName(const KernelSpec& spec) {
  return absl::StrCat(spec.template_name, "_h", spec.num_heads, "_q", spec.max_q_len, "_",
                      AsAbsl(KvFormatName(spec.kv_format)), "_", spec.q_mode == QMode::kFp8 ? "a8" : "a16",
                      "_", spec.page_size == 0 ? std::string("flat") : absl::StrCat("p", spec.page_size),
                      spec.causal ? "_causal" : "_noncausal", spec.write_lse ? "_lse" : "",
                      "_m", spec.block_m, "n", spec.block_n, "w", spec.num_warps, "s",
                      spec.num_stages, "_", spec.arch);
}

}  // namespace mlajit::jit
