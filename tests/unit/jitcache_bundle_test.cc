// `jitcache export` and `jitcache import` as separate processes: a round trip
// between two folders with pins, one with the autotuner's records, and a
// tampered bundle refused with exit 1 naming the entry. The source cache is
// filled through the library with a fake compiler, so no NVRTC is needed.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/cache/kernel_cache.h"
#include "src/tune/tuning_table.h"
#include "tests/unit/sample_tuning_record.h"

namespace mlajit {
namespace {

using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

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

struct Result {
  int exit_code = -1;
  std::string out, err;
};

class JitcacheBundle : public ::testing::Test {
 protected:
  void SetUp() override {
    tool_ = ToolPath();
    if (tool_.empty() || access(tool_.c_str(), X_OK) != 0) GTEST_SKIP() << "jitcache is not built";
    dir_ = ::testing::TempDir() + "/jitcache_bundle_" + std::to_string(getpid());
    ASSERT_EQ(std::system(("rm -rf '" + dir_ + "' && mkdir -p '" + dir_ + "' && chmod 700 '" + dir_ + "'").c_str()), 0);
  }
  void TearDown() override {
    if (!dir_.empty()) std::system(("rm -rf '" + dir_ + "'").c_str());
  }
  Result Run(const std::string& args) {
    std::string out = dir_ + "/stdout", err = dir_ + "/stderr";
    int rc = std::system(("'" + tool_ + "' " + args + " >'" + out + "' 2>'" + err + "' </dev/null").c_str());
    return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, ReadFile(out), ReadFile(err)};
  }
  void Fill(const std::string& cache_dir, int n) {
    cache::CacheOptions o;
    o.cache_dir = cache_dir;
    auto c = cache::KernelCache::Open(o);
    ASSERT_TRUE(c.ok());
    for (int i = 0; i < n; ++i) {
      cache::KeyBuilder kb;
      kb.Add("source", absl::StrCat("cli kernel ", i));
      cache::EntryMetadata m;
      m.template_name = "mla_decode";
      m.arch = "sm_90a";
      m.spec = absl::StrCat(R"({"id":)", i, "}");
      std::string payload = absl::StrCat("binary ", i, std::string(500, 'x'));
      keys_.push_back(kb.Finish().Hex());
      ASSERT_TRUE((*c)->GetOrCompile(kb.Finish(), kb.fields(), m, [payload]() -> absl::StatusOr<cache::CompileResult> {
        cache::CompileResult r;
        r.payload = payload;
        return r;
      }).ok());
    }
  }
  std::string tool_, dir_;
  std::vector<std::string> keys_;
};

TEST_F(JitcacheBundle, ExportImportRoundTripWithPins) {
  Fill(dir_ + "/src", 3);
  Result e = Run("--cache-dir '" + dir_ + "/src' export --out '" + dir_ + "/k.bundle' --manifest '" + dir_ + "/k.pins'");
  ASSERT_EQ(e.exit_code, 0) << e.err;
  EXPECT_THAT(e.out, HasSubstr("exported 3 entries"));
  Result i = Run("--cache-dir '" + dir_ + "/dst' import '" + dir_ + "/k.bundle' --expect-manifest '" + dir_ + "/k.pins'");
  ASSERT_EQ(i.exit_code, 0) << i.err;
  EXPECT_THAT(i.out, HasSubstr("installed 3 entries"));
  Result v = Run("--cache-dir '" + dir_ + "/dst' verify");
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  EXPECT_THAT(v.out, HasSubstr("3 entries checked, 0 bad"));
  EXPECT_EQ(Run("export").exit_code, 2);  // --out is required
}

TEST_F(JitcacheBundle, TuningRecordsAreExportedAndMerged) {
  Fill(dir_ + "/src", 2);
  const tune::TuningRecord r =
      testing_util::SampleTuningRecord(16, 3, cache::CacheOptions::LibraryVersion());
  tune::TuningRecord wide = r;
  wide.key.work_bucket = 9;
  std::ofstream(dir_ + "/src/tuning.jsonl")
      << tune::ToJsonLine(r) << "\n" << tune::ToJsonLine(wide) << "\n";
  Result e = Run("--cache-dir '" + dir_ + "/src' export --out '" + dir_ + "/k.bundle'");
  ASSERT_EQ(e.exit_code, 0) << e.err;
  EXPECT_THAT(e.out, HasSubstr("exported 2 entries"));
  EXPECT_THAT(e.out, HasSubstr("and 2 tuning records to"));
  Result i = Run("--cache-dir '" + dir_ + "/dst' import '" + dir_ + "/k.bundle'");
  ASSERT_EQ(i.exit_code, 0) << i.err;
  EXPECT_THAT(i.out, HasSubstr("installed 2 entries"));
  EXPECT_THAT(i.out, HasSubstr("and 2 tuning records from"));
  Result t = Run("--cache-dir '" + dir_ + "/dst' tuning --json");
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_THAT(t.out, HasSubstr("work2^3"));
  EXPECT_THAT(t.out, HasSubstr("work2^9"));
  EXPECT_THAT(t.out, HasSubstr("\"malformed\":0"));
}

TEST_F(JitcacheBundle, TamperedBundleIsRefusedNamingTheEntry) {
  Fill(dir_ + "/src", 2);
  ASSERT_EQ(Run("--cache-dir '" + dir_ + "/src' export --out '" + dir_ + "/k.bundle'").exit_code, 0);
  std::string b = ReadFile(dir_ + "/k.bundle");
  size_t at = b.find("binary 1");
  ASSERT_NE(at, std::string::npos);
  b[at + 20] ^= 0x20;
  std::ofstream(dir_ + "/bad.bundle", std::ios::binary) << b;
  Result i = Run("--cache-dir '" + dir_ + "/dst' import '" + dir_ + "/bad.bundle'");
  EXPECT_EQ(i.exit_code, 1);
  EXPECT_THAT(i.err, HasSubstr("entry " + keys_[1]));
  EXPECT_THAT(i.err, HasSubstr("nothing installed"));
  Result l = Run("--cache-dir '" + dir_ + "/dst' list --json");
  EXPECT_THAT(l.out, HasSubstr("\"entries\":[]"));
}

}  // namespace
}  // namespace mlajit
