// KernelSpec validation, JSON round trip, bindings, names and manifest parsing.
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <tuple>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/jit/kernel_spec.h"
#include "src/jit/manifest.h"

namespace mlajit::jit {
namespace {

using ::testing::HasSubstr;

TEST(JitSpec, DefaultIsValid) { EXPECT_TRUE(ValidateSpec(KernelSpec{}).ok()); }

struct BadCase {
  const char* field;
  void (*mutate)(KernelSpec&);
  const char* message;  // must appear in the error
};

TEST(JitSpec, RejectsEachOutOfRangeFieldNamingIt) {
  const BadCase cases[] = {
      {"num_heads", [](KernelSpec& s) { s.num_heads = 0; }, "KernelSpec.num_heads=0: must be in 1..128"},
      {"num_heads", [](KernelSpec& s) { s.num_heads = 129; }, "num_heads=129"},
      {"max_q_len", [](KernelSpec& s) { s.max_q_len = 9; }, "KernelSpec.max_q_len=9: must be in 1..8"},
      {"page_size", [](KernelSpec& s) { s.page_size = 8; }, "KernelSpec.page_size=8: must be one of"},
      {"block_m", [](KernelSpec& s) { s.block_m = 48; }, "KernelSpec.block_m=48: must be one of {16, 32, 64, 128}"},
      {"block_n", [](KernelSpec& s) { s.block_n = 256; }, "KernelSpec.block_n=256"},
      {"num_warps", [](KernelSpec& s) { s.num_warps = 6; }, "KernelSpec.num_warps=6: must be one of {4, 8, 12, 16}"},
      {"num_stages", [](KernelSpec& s) { s.num_stages = 0; }, "KernelSpec.num_stages=0: must be in 1..4"},
      {"num_stages", [](KernelSpec& s) { s.num_stages = 5; }, "num_stages=5"},
      {"kv_format", [](KernelSpec& s) { s.kv_format = static_cast<KvFormat>(7); }, "KernelSpec.kv_format=7"},
      {"q_mode", [](KernelSpec& s) { s.q_mode = static_cast<QMode>(-1); }, "KernelSpec.q_mode=-1"},
      {"template_name", [](KernelSpec& s) { s.template_name = "MLA-decode"; }, "template_name=\"MLA-decode\": must match [a-z0-9_]+"},
      {"template_name", [](KernelSpec& s) { s.template_name = ""; }, "template_name=\"\""},
      {"template_name", [](KernelSpec& s) { s.template_name = "../etc"; }, "template_name"},
      {"arch", [](KernelSpec& s) { s.arch = ""; }, "KernelSpec.arch=\"\""},
  };
  for (const BadCase& c : cases) {
    KernelSpec s;
    c.mutate(s);
    absl::Status st = ValidateSpec(s);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(std::string(st.message()), HasSubstr(c.message)) << c.field;
  }
}

TEST(JitSpec, AcceptsEveryAllowedValue) {
  for (int h : {1, 16, 77, 128}) {
    for (int q : {1, 4, 8}) {
      for (int p : {0, 1, 16, 32, 64, 128}) {
        KernelSpec s;
        s.num_heads = h;
        s.max_q_len = q;
        s.page_size = p;
        EXPECT_TRUE(ValidateSpec(s).ok()) << h << " " << q << " " << p;
      }
    }
  }
  for (const std::string& arch : KnownArchs()) {
    KernelSpec s;
    s.arch = arch;
    EXPECT_TRUE(ValidateSpec(s).ok()) << arch;
  }
  EXPECT_EQ(KnownArchs().size(), 10u);
}

TEST(JitSpec, TwelveWarpsOnlyForHopperMxfp4SwapAbOrFp8SixtyFourRowTiles) {
  // Three warpgroups: sm_90a MXFP4 tiles of 16 or 32 rows by 64 tokens, or
  // fp8 tiles of 64 rows by 64 tokens. Anything else is refused before a
  // compile.
  auto spec = [](KvFormat f, int m, int n, const char* arch) {
    KernelSpec s;
    s.kv_format = f;
    s.block_m = m;
    s.block_n = n;
    s.num_warps = 12;
    s.arch = arch;
    return s;
  };
  for (int m : {16, 32}) EXPECT_TRUE(ValidateSpec(spec(KvFormat::kMxfp4, m, 64, "sm_90a")).ok());
  EXPECT_TRUE(ValidateSpec(spec(KvFormat::kFp8E4m3, 64, 64, "sm_90a")).ok());
  for (const KernelSpec& s :
       {spec(KvFormat::kFp8E4m3, 16, 64, "sm_90a"), spec(KvFormat::kBf16, 32, 64, "sm_90a"),
        spec(KvFormat::kBf16, 64, 64, "sm_90a"), spec(KvFormat::kFp8E4m3, 64, 32, "sm_90a"),
        spec(KvFormat::kFp8E4m3, 64, 64, "sm_89"),
        spec(KvFormat::kMxfp4, 16, 64, "sm_80"), spec(KvFormat::kMxfp4, 16, 64, "gfx90a"),
        spec(KvFormat::kMxfp4, 64, 64, "sm_90a"), spec(KvFormat::kMxfp4, 32, 32, "sm_90a")}) {
    const absl::Status st = ValidateSpec(s);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << SpecToJson(s);
    EXPECT_THAT(std::string(st.message()), HasSubstr("KernelSpec.num_warps=12")) << SpecToJson(s);
    EXPECT_THAT(std::string(st.message()),
                HasSubstr(absl::StrCat("tiles ", s.block_m, "x", s.block_n, ", arch ", s.arch)));
  }
}

TEST(JitSpec, UnknownArchIsUnimplemented) {
  for (const char* arch : {"sm_75", "gfx1100", "sm_90A", "cuda"}) {
    KernelSpec s;
    s.arch = arch;
    absl::Status st = ValidateSpec(s);
    EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented) << arch;
    EXPECT_THAT(std::string(st.message()), HasSubstr(arch));
    EXPECT_THAT(std::string(st.message()), HasSubstr("sm_90a"));  // lists what is supported
  }
}

TEST(JitSpec, JsonIsOneStableLine) {
  KernelSpec s;
  EXPECT_EQ(SpecToJson(s),
            "{\"template_name\":\"mla_decode\",\"num_heads\":16,\"max_q_len\":1,"
            "\"kv_format\":\"fp8_e4m3\",\"q_mode\":\"bf16\",\"page_size\":0,\"causal\":true,"
            "\"write_lse\":false,\"block_m\":64,\"block_n\":64,\"num_warps\":8,\"num_stages\":2,"
            "\"arch\":\"sm_90a\"}");
}

TEST(JitSpec, JsonRoundTripsEveryField) {
  KernelSpec s;
  s.template_name = "probe";
  s.num_heads = 128;
  s.max_q_len = 4;
  s.kv_format = KvFormat::kMxfp4;
  s.q_mode = QMode::kFp8;
  s.page_size = 64;
  s.causal = false;
  s.write_lse = true;
  s.block_m = 32;
  s.block_n = 16;
  s.num_warps = 12;
  s.num_stages = 3;
  s.arch = "gfx942";
  absl::StatusOr<KernelSpec> back = SpecFromJson(SpecToJson(s));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, s);
  // Whitespace between tokens is fine.
  std::string spaced = SpecToJson(s);
  for (size_t i = spaced.find(','); i != std::string::npos; i = spaced.find(',', i + 3)) {
    spaced.insert(i + 1, "  ");
  }
  EXPECT_EQ(*SpecFromJson(" " + spaced + " \t"), s);
}

TEST(JitSpec, FromJsonIsStrictAndNamesTheField) {
  const std::string good = SpecToJson(KernelSpec{});
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  struct Case {
    std::string json;
    const char* message;
  } cases[] = {
      {replace("\"num_heads\":16", "\"num_heads\":\"16\""), "field \"num_heads\": expected an integer, got \"16\""},
      {replace("\"num_heads\":16,", ""), "field \"num_heads\": missing"},
      {replace("\"causal\":true", "\"causal\":1"), "field \"causal\": expected true or false, got 1"},
      {replace("\"kv_format\":\"fp8_e4m3\"", "\"kv_format\":\"fp16\""), "\"kv_format\"=\"fp16\": must be one of bf16, fp8_e4m3, mxfp4"},
      {replace("\"q_mode\":\"bf16\"", "\"q_mode\":\"int8\""), "\"q_mode\"=\"int8\""},
      {replace("{", "{\"heads\":16,"), "unknown field \"heads\""},
      {replace("\"block_m\":64", "\"block_m\":64.5"), "field \"block_m\": expected an integer"},
      {replace("\"block_m\":64", "\"block_m\":99999999999"), "does not fit in an int"},
      {replace("\"arch\":\"sm_90a\"", "\"arch\":[\"sm_90a\"]"), "nested values are not allowed"},
      {replace("{", "{\"arch\":\"sm_80\","), "duplicate field \"arch\""},
      {good + "x", "trailing text"},
      {good.substr(0, good.size() - 1), "expected ',' or '}'"},
      {"", "expected '{'"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<KernelSpec> s = SpecFromJson(c.json);
    ASSERT_FALSE(s.ok()) << c.json;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << c.json;
    EXPECT_THAT(std::string(s.status().message()), HasSubstr(c.message)) << c.json;
  }
}

TEST(JitSpec, BindingsCarryEveryParameter) {
  KernelSpec s;
  s.num_heads = 32;
  s.kv_format = KvFormat::kMxfp4;
  s.q_mode = QMode::kFp8;
  s.causal = false;
  s.write_lse = true;
  s.page_size = 16;
  s.arch = "gfx90a";
  std::map<std::string, std::string> b;
  for (const auto& [k, v] : SpecBindings(s)) EXPECT_TRUE(b.emplace(k, v).second) << "duplicate " << k;
  EXPECT_EQ(b["template_name"], "mla_decode");
  EXPECT_EQ(b["num_heads"], "32");
  EXPECT_EQ(b["max_q_len"], "1");
  EXPECT_EQ(b["kv_format"], "2");
  EXPECT_EQ(b["q_mode"], "1");
  EXPECT_EQ(b["page_size"], "16");
  EXPECT_EQ(b["causal"], "0");
  EXPECT_EQ(b["write_lse"], "1");
  EXPECT_EQ(b["block_m"], "64");
  EXPECT_EQ(b["block_n"], "64");
  EXPECT_EQ(b["num_warps"], "8");
  EXPECT_EQ(b["num_stages"], "2");
  EXPECT_EQ(b["arch_name"], "\"gfx90a\"");
}

TEST(JitSpec, NamesAreReadableAndDistinct) {
  KernelSpec s;
  EXPECT_EQ(SpecName(s), "mla_decode_h16_q1_fp8_e4m3_a16_flat_causal_m64n64w8s2_sm_90a");
  s.page_size = 64;
  s.q_mode = QMode::kFp8;
  s.causal = false;
  s.write_lse = true;
  s.kv_format = KvFormat::kBf16;
  EXPECT_EQ(SpecName(s), "mla_decode_h16_q1_bf16_a8_p64_noncausal_lse_m64n64w8s2_sm_90a");
}

TEST(JitManifest, ParsesLinesSkippingCommentsAndBlanks) {
  KernelSpec a, b;
  b.num_heads = 128;
  b.arch = "gfx942";
  std::string text = "# DeepSeek\n\n" + SpecToJson(a) + "\n   # indented comment\n" +
                     SpecToJson(b) + "\r\n";
  absl::StatusOr<std::vector<ManifestEntry>> m = ParseManifest(text, "m.jsonl");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->size(), 2u);
  EXPECT_EQ((*m)[0].line, 3);
  EXPECT_EQ((*m)[0].spec, a);
  EXPECT_EQ((*m)[1].line, 5);
  EXPECT_EQ((*m)[1].spec, b);
  EXPECT_EQ(ManifestLine(b), SpecToJson(b));
}

TEST(JitManifest, ErrorsNameTheLine) {
  std::string text = SpecToJson(KernelSpec{}) + "\n# ok\n{\"template_name\":\"x\"}\n";
  absl::StatusOr<std::vector<ManifestEntry>> m = ParseManifest(text, "m.jsonl");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("m.jsonl line 3: "));
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("num_heads"));
  EXPECT_EQ(ReadManifest("/nonexistent/m.jsonl").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace mlajit::jit

namespace mlajit::jit {
namespace {

// The shipped manifests: every line valid, written exactly as SpecToJson (and
// so as MLAJIT_RECORD_MANIFEST) writes it, no duplicates, every TP degree,
// q_len, KV format and layout of DeepSeek-V3 present.
TEST(JitManifest, ShippedManifestsAreCanonicalAndComplete) {
  const char* src = std::getenv("MLAJIT_SOURCE_DIR");
  if (src == nullptr) GTEST_SKIP() << "MLAJIT_SOURCE_DIR not set (run through ctest)";
  for (const char* name : {"deepseek_v3.jsonl", "deepseek_v3_amd.jsonl"}) {
    std::string path = std::string(src) + "/cache/manifests/" + name;
    absl::StatusOr<std::vector<ManifestEntry>> m = ReadManifest(path);
    ASSERT_TRUE(m.ok()) << m.status();
    std::ifstream in(path);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    std::set<std::string> seen;
    std::set<std::tuple<int, int, int, int, int>> shapes;
    for (const ManifestEntry& e : *m) {
      EXPECT_TRUE(ValidateSpec(e.spec).ok()) << name << " line " << e.line;
      EXPECT_EQ(lines[e.line - 1], SpecToJson(e.spec)) << name << " line " << e.line;
      EXPECT_TRUE(seen.insert(lines[e.line - 1]).second) << name << " line " << e.line << " repeats";
      shapes.insert({e.spec.num_heads, e.spec.max_q_len, static_cast<int>(e.spec.kv_format),
                     static_cast<int>(e.spec.q_mode), e.spec.page_size});
    }
    for (int heads : {16, 32, 64, 128}) {
      for (int q = 1; q <= 4; ++q) {
        for (int page : {0, 1, 64}) {
          for (auto [kv, qm] : {std::pair{KvFormat::kBf16, QMode::kBf16}, {KvFormat::kFp8E4m3, QMode::kBf16},
                                {KvFormat::kFp8E4m3, QMode::kFp8}, {KvFormat::kMxfp4, QMode::kBf16}}) {
            EXPECT_TRUE(shapes.count({heads, q, static_cast<int>(kv), static_cast<int>(qm), page}))
                << name << ": h" << heads << " q" << q << " page " << page;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace mlajit::jit
