// KernelCache across processes: concurrent compilers of one empty directory, and
// a writer killed in the middle of publishing. Children are fork()ed before any
// thread exists and leave with _exit(), never returning into gtest.
#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/unit/temp_dir.h"
#include "src/cache/kernel_cache.h"

namespace mlajit::cache {
namespace {

namespace fs = std::filesystem;

using test_support::TempDir;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Kernel {
  CacheKey key;
  std::vector<KeyField> fields;
  EntryMetadata meta;
  std::string payload;
};

Kernel MakeKernel(int i) {
  Kernel k;
  KeyBuilder kb;
  kb.Add("source", absl::StrCat("// kernel ", i));
  kb.Add("arch", "sm_90a");
  k.key = kb.Finish();
  k.fields = kb.fields();
  k.meta.template_name = "mla_decode";
  k.meta.arch = "sm_90a";
  k.meta.spec = absl::StrCat(R"({"id":)", i, "}");
  k.payload = absl::StrCat("payload ", i, " ", std::string(4096 + i, 'p'));
  return k;
}

// Appends one line with a single write() on O_APPEND: atomic between processes.
void AppendLine(const std::string& path, const std::string& line) {
  int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return;
  std::string l = line + "\n";
  (void)!write(fd, l.data(), l.size());
  close(fd);
}

// Returns 0 when every lookup succeeded with the right payload.
int ChildWork(const CacheOptions& o, const std::string& compile_log, int child, int num_keys) {
  absl::StatusOr<std::unique_ptr<KernelCache>> cache = KernelCache::Open(o);
  if (!cache.ok()) return 10;
  for (int j = 0; j < num_keys; ++j) {
    Kernel k = MakeKernel((j + child) % num_keys);  // each child starts elsewhere
    absl::StatusOr<std::shared_ptr<const CacheEntry>> e = (*cache)->GetOrCompile(
        k.key, k.fields, k.meta, [&]() -> absl::StatusOr<CompileResult> {
          AppendLine(compile_log, k.key.Hex());
          CompileResult r;
          r.payload = k.payload;
          return r;
        });
    if (!e.ok()) return 20;
    if ((*e)->payload != k.payload) return 30;
  }
  return 0;
}

TEST(CacheMultiProcess, ConcurrentProcessesCompileEachKeyOnce) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  CacheOptions o;
  o.cache_dir = dir.Sub("cache");  // empty; created by whoever comes first
  o.lock_timeout_s = 120;
  const std::string compile_log = dir.Sub("compiles.log");
  constexpr int kProcs = 10;
  constexpr int kKeys = 6;
  for (int round = 0; round < 3; ++round) {  // three rounds over fresh directories
    SCOPED_TRACE(round);
    o.cache_dir = dir.Sub(absl::StrCat("cache", round));
    std::string log = absl::StrCat(compile_log, round);
    // Children wait on a pipe so that they all start together.
    int go[2];
    ASSERT_EQ(pipe(go), 0);
    std::vector<pid_t> pids;
    for (int c = 0; c < kProcs; ++c) {
      pid_t pid = fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) {
        close(go[1]);
        char b;
        (void)!read(go[0], &b, 1);  // returns 0 when the parent closes the pipe
        _exit(ChildWork(o, log, c, kKeys));
      }
      pids.push_back(pid);
    }
    close(go[0]);
    close(go[1]);  // start
    for (pid_t pid : pids) {
      int status = 0;
      ASSERT_EQ(waitpid(pid, &status, 0), pid);
      EXPECT_TRUE(WIFEXITED(status)) << "child killed, status " << status;
      EXPECT_EQ(WEXITSTATUS(status), 0);
    }
    std::map<std::string, int> compiled;
    for (absl::string_view line : absl::StrSplit(ReadAll(log), '\n', absl::SkipEmpty())) {
      ++compiled[std::string(line)];
    }
    ASSERT_EQ(compiled.size(), static_cast<size_t>(kKeys));
    for (int i = 0; i < kKeys; ++i) EXPECT_EQ(compiled[MakeKernel(i).key.Hex()], 1) << i;

    absl::StatusOr<std::unique_ptr<KernelCache>> cache = KernelCache::Open(o);
    ASSERT_TRUE(cache.ok());
    absl::StatusOr<std::vector<EntryInfo>> bad = (*cache)->Verify();
    ASSERT_TRUE(bad.ok());
    EXPECT_TRUE(bad->empty()) << (*bad)[0].problem;
    absl::StatusOr<CacheStats> stats = (*cache)->Stats();
    ASSERT_TRUE(stats.ok());
    // Counters add up across processes.
    EXPECT_EQ(stats->entries, static_cast<uint64_t>(kKeys));
    EXPECT_EQ(stats->compiles, static_cast<uint64_t>(kKeys));
    EXPECT_EQ(stats->misses, static_cast<uint64_t>(kKeys));
    EXPECT_EQ(stats->hits, static_cast<uint64_t>(kProcs * kKeys - kKeys));
  }
}

TEST(CacheMultiProcess, WriterKilledMidWriteLeavesNoBadEntry) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  CacheOptions o;
  o.cache_dir = dir.Sub("cache");
  o.lock_timeout_s = 60;  // the dead writer's lock must be free long before this
  Kernel k = MakeKernel(1);
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(ready[0]);
    CacheOptions co = o;
    // Half of the temp file is written: tell the parent, then wait to be killed.
    co.fault_injection = [fd = ready[1]](absl::string_view step) {
      if (step == "partial_write") {
        (void)!write(fd, "x", 1);
        for (;;) pause();
      }
      return 0;
    };
    absl::StatusOr<std::unique_ptr<KernelCache>> cache = KernelCache::Open(co);
    if (cache.ok()) {
      (void)(*cache)->GetOrCompile(k.key, k.fields, k.meta, [&]() -> absl::StatusOr<CompileResult> {
        CompileResult r;
        r.payload = k.payload;
        return r;
      });
    }
    _exit(1);  // not reached when the hook blocks
  }
  close(ready[1]);
  char b = 0;
  ASSERT_EQ(read(ready[0], &b, 1), 1) << "child exited before writing";
  close(ready[0]);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status));

  // The half-written temp file exists, but no entry is visible.
  std::vector<std::string> temps, entries;
  for (const auto& e : fs::recursive_directory_iterator(o.cache_dir)) {
    std::string name = e.path().filename().string();
    if (absl::StrContains(name, ".tmp.")) temps.push_back(e.path().string());
    if (absl::EndsWith(name, ".bin")) entries.push_back(e.path().string());
  }
  EXPECT_EQ(temps.size(), 1u);
  EXPECT_TRUE(entries.empty());

  absl::StatusOr<std::unique_ptr<KernelCache>> cache = KernelCache::Open(o);
  ASSERT_TRUE(cache.ok());
  EXPECT_TRUE((*cache)->Verify()->empty());
  EXPECT_TRUE((*cache)->List()->empty());
  int calls = 0;
  // The kernel released the dead writer's lock, so this does not wait.
  absl::StatusOr<std::shared_ptr<const CacheEntry>> e = (*cache)->GetOrCompile(
      k.key, k.fields, k.meta, [&]() -> absl::StatusOr<CompileResult> {
        ++calls;
        CompileResult r;
        r.payload = k.payload;
        return r;
      });
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ((*e)->source, CacheEntry::Source::kCompiled);
  EXPECT_EQ((*e)->payload, k.payload);
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE((*cache)->Verify()->empty());
  // Maintenance removes the dead writer's leftover once its lock is free.
  ASSERT_TRUE((*cache)->PruneStale().ok());
  for (const std::string& t : temps) EXPECT_FALSE(fs::exists(t)) << t;
  EXPECT_TRUE((*cache)->Read(k.key).ok());
}

}  // namespace
}  // namespace mlajit::cache
