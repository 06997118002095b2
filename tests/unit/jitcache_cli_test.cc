// The jitcache CLI, run as a separate process against a temporary cache: warm,
// list, stats, verify (clean and corrupted), explain, prune, clear, usage
// errors, record-and-replay, and many concurrent warm-ups into one folder.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mlajit/mlajit.h"
#include "src/jit/compiler.h"
#include "src/jit/kernel_spec.h"
#include "src/tune/tuning_table.h"
#include "tools/jitcache/json_value.h"

namespace mlajit {
namespace {

using ::testing::HasSubstr;
using tools::JsonValue;

struct Result {
  int exit_code = -1;
  std::string out, err;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// $MLAJIT_BINARY_DIR/tools/jitcache/jitcache, else found from this test's own
// path (<build>/tests/<test>), so the test also runs outside ctest.
std::string ToolPath() {
  if (const char* bin = std::getenv("MLAJIT_BINARY_DIR"); bin != nullptr && bin[0] != '\0') {
    return std::string(bin) + "/tools/jitcache/jitcache";
  }
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "";
  std::string path(self, static_cast<size_t>(n));
  for (int up = 0; up < 2; ++up) path = path.substr(0, path.rfind('/'));
  return path + "/tools/jitcache/jitcache";
}

class JitcacheCli : public ::testing::Test {
 protected:
  void SetUp() override {
    tool_ = ToolPath();
    if (tool_.empty()) GTEST_SKIP() << "cannot locate the jitcache binary (set MLAJIT_BINARY_DIR)";
    if (access(tool_.c_str(), X_OK) != 0) GTEST_SKIP() << tool_ << " is not built";
    dir_ = ::testing::TempDir() + "/jitcache_cli_" + std::to_string(getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_EQ(std::system(("rm -rf '" + dir_ + "' && mkdir -p '" + dir_ + "' && chmod 700 '" + dir_ + "'").c_str()), 0);
    cache_ = dir_ + "/cache";
  }
  void TearDown() override {
    if (!dir_.empty()) std::system(("rm -rf '" + dir_ + "'").c_str());
  }

  // Runs `jitcache <args>` with `env` prefixed (e.g. "MLAJIT_X=1").
  Result Run(const std::string& args, const std::string& env = "") {
    std::string out = dir_ + "/stdout", err = dir_ + "/stderr";
    std::string cmd = env + " '" + tool_ + "' " + args + " >'" + out + "' 2>'" + err + "' </dev/null";
    int rc = std::system(cmd.c_str());
    Result r;
    r.exit_code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    r.out = ReadFile(out);
    r.err = ReadFile(err);
    return r;
  }
  Result RunCache(const std::string& args, const std::string& env = "") {
    return Run("--cache-dir '" + cache_ + "' " + args, env);
  }

  JsonValue Json(const Result& r) {
    std::string error;
    std::optional<JsonValue> v = tools::ParseJson(r.out, &error);
    EXPECT_TRUE(v.has_value()) << error << "\n" << r.out;
    return v.value_or(JsonValue());
  }

  // Two fast probe specs.
  std::string WriteManifest() {
    jit::KernelSpec a;
    a.template_name = "probe";
    jit::KernelSpec b = a;
    b.num_heads = 32;
    std::string path = dir_ + "/small.jsonl";
    std::ofstream(path) << "# two probe kernels\n" << jit::SpecToJson(a) << "\n\n" << jit::SpecToJson(b) << "\n";
    return path;
  }

  std::vector<std::string> Keys() {
    Result r = RunCache("list --json");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::vector<std::string> keys;
    const JsonValue list = Json(r);  // range-for over a temporary's member would dangle
    for (const JsonValue& e : list["entries"].items()) keys.push_back(e["key"].str());
    return keys;
  }

  std::string tool_, dir_, cache_;
};

#define REQUIRE_NVRTC()                                                                  \
  do {                                                                                   \
    if (!jit::CompilerForArch("sm_90a").ok()) GTEST_SKIP() << "NVRTC is not installed"; \
  } while (0)

TEST_F(JitcacheCli, UsageErrorsExitTwo) {
  EXPECT_EQ(Run("").exit_code, 2);
  Result r = Run("frobnicate");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("unknown command 'frobnicate'"));
  r = Run("list --bogus");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("unknown option --bogus for 'list'"));
  EXPECT_EQ(Run("show").exit_code, 2);
  EXPECT_EQ(Run("explain onlyone").exit_code, 2);
  EXPECT_EQ(RunCache("prune").exit_code, 2);
  r = RunCache("prune --older-than 7 days");
  EXPECT_EQ(r.exit_code, 2);
  r = RunCache("prune --older-than 7x");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--older-than=7x"));
  EXPECT_EQ(RunCache("prune --max-bytes lots").exit_code, 2);
  EXPECT_EQ(RunCache("warm --jobs 0").exit_code, 2);
  EXPECT_EQ(Run("--cache-dir").exit_code, 2);
}

TEST_F(JitcacheCli, HelpEverywhere) {
  Result r = Run("--help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* c : {"list", "show KEY", "verify", "stats", "prune", "clear", "warm", "explain KEY_A KEY_B"}) {
    EXPECT_THAT(r.out, HasSubstr(c));
  }
  for (const char* c : {"list", "show", "verify", "stats", "prune", "clear", "warm", "explain"}) {
    r = Run(std::string(c) + " --help");
    EXPECT_EQ(r.exit_code, 0) << c;
    EXPECT_THAT(r.out, HasSubstr(std::string("usage: jitcache [--cache-dir DIR] [--json] ") + c)) << c;
  }
  EXPECT_THAT(Run("prune -h").out, HasSubstr("--older-than"));
}

TEST_F(JitcacheCli, TuningListsRecordsMarkingStaleAndMalformed) {
  Result r = RunCache("tuning");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("no tuning records"), std::string::npos) << r.out;
  tune::TuningRecord rec;
  rec.key = {"NVIDIA H200", "sm_90a", 132, 1, 0, 0, 32, 9};
  rec.shape.block_m = 16;
  rec.shape.num_warps = 4;
  rec.shape.ctas_per_sm = 1;
  rec.median_ns = 26370;
  rec.default_ns = 26820;
  rec.candidates = 8;
  rec.library_version = mlajit_version();
  tune::TuningRecord old = rec;
  old.library_version = "0.0.1";
  old.key.rows = 16;
  ASSERT_EQ(std::system(("mkdir -p '" + cache_ + "'").c_str()), 0);
  std::ofstream(cache_ + "/tuning.jsonl")
      << tune::ToJsonLine(rec) << "\n" << tune::ToJsonLine(old) << "\n{broken\n";
  r = RunCache("tuning");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("NVIDIA H200 sm_90a/132 fp8 a16 flat rows32 work2^9"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("16x64 w4 s2 c1 split64"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("26.37"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0.0.1 (stale)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 malformed lines skipped"), std::string::npos) << r.out;
  const JsonValue v = Json(RunCache("tuning --json"));
  ASSERT_EQ(v["records"].items().size(), 2u);
  EXPECT_TRUE(v["records"].items()[0]["current"].boolean());
  EXPECT_FALSE(v["records"].items()[1]["current"].boolean());
  EXPECT_EQ(v["records"].items()[0]["block_m"].integer(), 16);
  EXPECT_EQ(v["malformed"].integer(), 1);
}

TEST_F(JitcacheCli, EmptyCacheListsNothingAndVerifiesClean) {
  Result r = RunCache("list");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("no entries"));
  r = RunCache("verify");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = RunCache("show 0123456789abcdef0123456789abcdef");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("0123456789abcdef0123456789abcdef"));
  r = RunCache("warm --manifest '" + dir_ + "/missing.jsonl'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("missing.jsonl"));
}

TEST_F(JitcacheCli, BadManifestLineFailsNamingTheLine) {
  std::string path = dir_ + "/bad.jsonl";
  std::ofstream(path) << "# c\n" << jit::SpecToJson(jit::KernelSpec{}) << "\n{\"num_heads\":16}\n";
  Result r = RunCache("warm --manifest '" + path + "'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("bad.jsonl line 3"));
  r = RunCache("warm --manifest '" + WriteManifest() + "' --arch sm_75");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("sm_75"));
  EXPECT_THAT(r.err, HasSubstr("line 2"));
}

TEST_F(JitcacheCli, WarmInspectCorruptRepairPruneClear) {
  REQUIRE_NVRTC();
  const std::string manifest = WriteManifest();
  Result r = RunCache("warm --manifest '" + manifest + "' --arch sm_90a --jobs 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("warmed 2 specs"));
  EXPECT_THAT(r.err, HasSubstr("[1/2] "));  // not a terminal: one plain line per spec
  EXPECT_THAT(r.err, HasSubstr("[2/2] probe_h"));
  EXPECT_EQ(r.err.find('\r'), std::string::npos);

  std::vector<std::string> keys = Keys();
  ASSERT_EQ(keys.size(), 2u);

  r = RunCache("stats --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  JsonValue stats = Json(r);
  EXPECT_EQ(stats["entries"].integer(), 2);
  EXPECT_GT(stats["bytes"].integer(), 0);
  EXPECT_EQ(stats["by_arch"]["sm_90a"]["entries"].integer(), 2);
  EXPECT_EQ(stats["by_template"]["probe"]["entries"].integer(), 2);
  r = RunCache("stats");
  EXPECT_THAT(r.out, HasSubstr("by template:"));

  r = RunCache("list");
  EXPECT_THAT(r.out, HasSubstr(keys[0]));
  EXPECT_THAT(r.out, HasSubstr("h32 q1 fp8_e4m3 a16 flat causal"));

  r = RunCache("show " + keys[0].substr(0, 8));  // a unique prefix
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("probe_kernel"));
  EXPECT_THAT(r.out, HasSubstr("nvrtc "));
  r = RunCache("show " + keys[1] + " --json");
  JsonValue shown = Json(r);
  EXPECT_EQ(shown["key"].str(), keys[1]);
  EXPECT_EQ(shown["spec"]["template_name"].str(), "probe");
  // The functions of the binary, read from its symbol table, with their code.
  EXPECT_FALSE(shown.has("functions_error")) << shown["functions_error"].str();
  bool listed = false;
  for (const JsonValue& f : shown["functions"].items()) {
    if (f["name"].str() == "probe_kernel") listed = f["code_bytes"].integer() > 0;
  }
  EXPECT_TRUE(listed) << r.out;
  r = RunCache("show " + keys[1]);
  EXPECT_THAT(r.out, HasSubstr("functions (bytes of code):\n  probe_kernel "));

  r = RunCache("verify");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("2 entries checked, 0 bad"));

  r = RunCache("explain " + keys[0] + " " + keys[1]);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("source"));
  EXPECT_THAT(r.out, HasSubstr("num_heads"));
  r = RunCache("explain --json " + keys[0] + " " + keys[1]);
  JsonValue x = Json(r);
  ASSERT_EQ(x["fields"].items().size(), 1u) << r.out;  // only the rendered source differs
  EXPECT_EQ(x["fields"].items()[0]["name"].str(), "source");
  ASSERT_EQ(x["spec"].items().size(), 1u);
  EXPECT_EQ(x["spec"].items()[0]["field"].str(), "num_heads");

  // Corrupt one entry's payload: verify names it and fails.
  std::string victim;
  const JsonValue list = Json(RunCache("list --json"));
  for (const JsonValue& e : list["entries"].items()) {
    if (e["key"].str() == keys[0]) victim = e["path"].str();
  }
  ASSERT_FALSE(victim.empty());
  {
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-100, std::ios::end);
    f.write("CORRUPT!", 8);
  }
  r = RunCache("verify");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr(keys[0]));
  EXPECT_THAT(r.out, HasSubstr("1 bad"));
  EXPECT_EQ(Json(RunCache("verify --json"))["bad"].items().size(), 1u);

  // A second warm treats the bad file as a miss and replaces it.
  r = RunCache("warm --manifest '" + manifest + "' --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  JsonValue summary = Json(r);
  EXPECT_EQ(summary["compiled"].integer(), 1);
  EXPECT_EQ(summary["cached"].integer(), 1);
  EXPECT_EQ(RunCache("verify").exit_code, 0);

  r = RunCache("prune --older-than 7d --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Json(r)["removed"].integer(), 0);
  EXPECT_EQ(Keys().size(), 2u);
  r = RunCache("prune --max-bytes 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LE(Keys().size(), 1u);

  ASSERT_EQ(RunCache("warm --manifest '" + manifest + "'").exit_code, 0);
  r = RunCache("clear");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("removed 2 entries"));
  EXPECT_TRUE(Keys().empty());
}

TEST_F(JitcacheCli, RecordedSpecsReplayAsAManifest) {
  REQUIRE_NVRTC();
  const std::string manifest = WriteManifest();
  const std::string recorded = dir_ + "/recorded.jsonl";
  Result r = RunCache("warm --manifest '" + manifest + "'", "MLAJIT_RECORD_MANIFEST='" + recorded + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Every recorded line is a manifest line, byte for byte.
  std::set<std::string> expected, got;
  std::istringstream m(ReadFile(manifest)), rec(ReadFile(recorded));
  for (std::string line; std::getline(m, line);) {
    if (!line.empty() && line[0] != '#') expected.insert(line);
  }
  for (std::string line; std::getline(rec, line);) got.insert(line);
  EXPECT_EQ(got, expected);
  std::vector<std::string> keys = Keys();

  cache_ = dir_ + "/replayed";
  r = RunCache("warm --manifest '" + recorded + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> replayed = Keys();
  EXPECT_EQ(std::set<std::string>(replayed.begin(), replayed.end()),
            std::set<std::string>(keys.begin(), keys.end()));
}

TEST_F(JitcacheCli, ConcurrentWarmupsIntoOneFolder) {
  REQUIRE_NVRTC();
  const std::string manifest = WriteManifest();
  constexpr int kProcesses = 8;
  std::string script;
  for (int i = 0; i < kProcesses; ++i) {
    std::string tag = dir_ + "/p" + std::to_string(i);
    script += "('" + tool_ + "' --cache-dir '" + cache_ + "' warm --manifest '" + manifest +
              "' --jobs 2 >'" + tag + ".out' 2>&1; echo $? >'" + tag + ".rc') & ";
  }
  script += "wait";
  ASSERT_EQ(std::system(("bash -c \"" + script + "\"").c_str()), 0);
  for (int i = 0; i < kProcesses; ++i) {
    std::string tag = dir_ + "/p" + std::to_string(i);
    EXPECT_EQ(ReadFile(tag + ".rc"), "0\n") << "process " << i << ":\n" << ReadFile(tag + ".out");
  }
  Result r = RunCache("verify");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(Keys().size(), 2u);
  JsonValue stats = Json(RunCache("stats --json"));
  EXPECT_EQ(stats["entries"].integer(), 2);
}

}  // namespace
}  // namespace mlajit
