// Fault injection for the kernel cache: a full disk at every write step (injected,
// and a real 64 KiB tmpfs where this user may mount one), permission flips while
// running, an entry file swapped under a reader, warmers SIGKILLed at random
// points, and skewed clocks. After each scenario Verify() is clean and every
// lookup returns the right payload, from the cache or by recompiling.
//
// Tests run as root in CI, where chmod does not bite: the permission scenario
// then runs in a forked child that drops to uid/gid 65534 over a directory it
// owns, so the kernel really refuses; as an ordinary user it runs in-process.
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "tests/unit/temp_dir.h"
#include "src/base/log.h"
#include "src/cache/entry_format.h"
#include "src/cache/file_lock.h"
#include "src/cache/kernel_cache.h"

namespace mlajit::cache {
namespace {

namespace fs = std::filesystem;
using EntryPtr = std::shared_ptr<const CacheEntry>;
using Source = CacheEntry::Source;

using test_support::TempDir;

struct Kernel {
  CacheKey key;
  std::vector<KeyField> fields;
  EntryMetadata meta;
  std::string payload;
};

Kernel MakeKernel(int i, size_t payload_bytes = 2000) {
  Kernel k;
  KeyBuilder kb;
  kb.Add("source", absl::StrCat("// fault kernel ", i));
  kb.Add("arch", "sm_90a");
  k.key = kb.Finish();
  k.fields = kb.fields();
  k.meta.template_name = "mla_decode";
  k.meta.arch = "sm_90a";
  k.meta.spec = absl::StrCat(R"({"id":)", i, "}");
  k.meta.compiler = "fake 1.0";
  k.payload = absl::StrCat("payload-", i, "-", std::string(payload_bytes, static_cast<char>('a' + i % 26)));
  return k;
}

CompileFn CompileOf(const Kernel& k, std::atomic<int>* calls = nullptr) {
  return [k, calls]() -> absl::StatusOr<CompileResult> {
    if (calls != nullptr) calls->fetch_add(1);
    CompileResult r;
    r.payload = k.payload;
    return r;
  };
}

std::string EntryPath(const std::string& cache_dir, const CacheKey& key) {
  std::string hex = key.Hex();
  return absl::StrCat(cache_dir, "/v", kCacheFormatVersion, "/", hex.substr(0, 2), "/", hex, ".bin");
}

std::vector<std::string> FilesUnder(const std::string& root, absl::string_view containing) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::exists(root, ec)) return out;
  for (const auto& e : fs::recursive_directory_iterator(root, ec)) {
    if (e.is_regular_file() && absl::StrContains(e.path().filename().string(), containing)) {
      out.push_back(e.path().string());
    }
  }
  return out;
}

void WriteAll(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

std::unique_ptr<KernelCache> MustOpen(const CacheOptions& o) {
  absl::StatusOr<std::unique_ptr<KernelCache>> c = KernelCache::Open(o);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *std::move(c) : nullptr;
}

// "" when the cache verifies clean and a fresh instance returns every kernel's
// payload (from disk or by compiling); otherwise what went wrong.
std::string CheckHealthy(const CacheOptions& o, const std::vector<Kernel>& kernels) {
  absl::StatusOr<std::unique_ptr<KernelCache>> c = KernelCache::Open(o);
  if (!c.ok()) return absl::StrCat("open: ", c.status().ToString());
  absl::StatusOr<std::vector<EntryInfo>> bad = (*c)->Verify();
  if (!bad.ok()) return absl::StrCat("verify: ", bad.status().ToString());
  if (!bad->empty()) return absl::StrCat("verify: ", bad->size(), " bad, first ", (*bad)[0].path, ": ", (*bad)[0].problem);
  for (const Kernel& k : kernels) {
    absl::StatusOr<EntryPtr> e = (*c)->GetOrCompile(k.key, k.fields, k.meta, CompileOf(k));
    if (!e.ok()) return absl::StrCat("lookup ", k.key.Hex(), ": ", e.status().ToString());
    if ((*e)->payload != k.payload) return absl::StrCat("lookup ", k.key.Hex(), ": wrong payload");
  }
  return "";
}

class SilenceLogs {
 public:
  SilenceLogs() { SetLogSink([](LogLevel, std::string_view, void*) {}, nullptr); }
  ~SilenceLogs() { SetLogSink(nullptr, nullptr); }
};

// ---- disk full -------------------------------------------------------------

TEST(CacheFault, DiskFullAtEveryWriteStep) {
  SilenceLogs quiet;
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  std::vector<Kernel> kernels;
  for (int i = 0; i < 4; ++i) kernels.push_back(MakeKernel(i));
  for (const char* step : {"mkdir", "open_temp", "partial_write", "fsync", "rename", "fsync_dir"}) {
    for (int err : {ENOSPC, EDQUOT}) {
      SCOPED_TRACE(absl::StrCat(step, " errno ", err));
      CacheOptions o;
      o.cache_dir = dir.Sub(absl::StrCat("full_", step, "_", err));
      ASSERT_EQ(mkdir(o.cache_dir.c_str(), 0700), 0);
      std::string s = step;
      o.fault_injection = [s, err](absl::string_view at) { return at == s ? err : 0; };
      auto cache = MustOpen(o);
      ASSERT_NE(cache, nullptr);
      for (const Kernel& k : kernels) {
        absl::StatusOr<EntryPtr> e = cache->GetOrCompile(k.key, k.fields, k.meta, CompileOf(k));
        ASSERT_TRUE(e.ok()) << e.status();
        EXPECT_EQ((*e)->payload, k.payload);
      }
      // A failed write leaves no temp file and no visible entry, except after
      // fsync_dir, where the rename already happened: that entry is complete.
      EXPECT_TRUE(FilesUnder(o.cache_dir, ".tmp.").empty());
      if (s != "fsync_dir") {
        EXPECT_TRUE(FilesUnder(o.cache_dir, ".bin").empty());
      }
      o.fault_injection = nullptr;  // space again
      EXPECT_EQ(CheckHealthy(o, kernels), "");
    }
  }
}

TEST(CacheFault, IntermittentDiskFullKeepsEveryLookupCorrect) {
  SilenceLogs quiet;
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  CacheOptions o;
  o.cache_dir = dir.Sub("cache");
  // Every write step fails with probability 1/3, from a fixed seed.
  auto rng = std::make_shared<std::mt19937>(1234);
  auto mu = std::make_shared<absl::Mutex>();
  o.fault_injection = [rng, mu](absl::string_view) {
    absl::MutexLock l(mu.get());
    return (*rng)() % 3 == 0 ? ENOSPC : 0;
  };
  std::vector<Kernel> kernels;
  for (int i = 0; i < 24; ++i) kernels.push_back(MakeKernel(i));
  for (int pass = 0; pass < 5; ++pass) {
    auto cache = MustOpen(o);  // fresh memory tier: every pass goes to disk
    ASSERT_NE(cache, nullptr);
    for (const Kernel& k : kernels) {
      absl::StatusOr<EntryPtr> e = cache->GetOrCompile(k.key, k.fields, k.meta, CompileOf(k));
      ASSERT_TRUE(e.ok()) << e.status();
      ASSERT_EQ((*e)->payload, k.payload);
    }
    EXPECT_TRUE(FilesUnder(o.cache_dir, ".tmp.").empty());
  }
  o.fault_injection = nullptr;
  EXPECT_EQ(CheckHealthy(o, kernels), "");
}

TEST(CacheFault, RealTinyFilesystemFillsUp) {
  if (geteuid() != 0) GTEST_SKIP() << "mounting a tmpfs needs root (uid " << geteuid() << ")";
  SilenceLogs quiet;
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string mnt = dir.Sub("tiny");
  ASSERT_EQ(mkdir(mnt.c_str(), 0700), 0);
  if (mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=64k,mode=0700") != 0) {
    GTEST_SKIP() << "mount -t tmpfs -o size=64k refused here: " << strerror(errno);
  }
  struct Unmount {
    std::string path;
    ~Unmount() { umount2(path.c_str(), MNT_DETACH); }
  } unmount{mnt};
  CacheOptions o;
  o.cache_dir = mnt + "/cache";
  o.max_bytes = uint64_t{1} << 30;  // the filesystem, not the cap, must be what fills
  std::vector<Kernel> kernels;
  for (int i = 0; i < 12; ++i) kernels.push_back(MakeKernel(i, 9000));  // ~108 KB > 64 KiB
  auto cache = MustOpen(o);
  ASSERT_NE(cache, nullptr);
  for (const Kernel& k : kernels) {
    absl::StatusOr<EntryPtr> e = cache->GetOrCompile(k.key, k.fields, k.meta, CompileOf(k));
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_EQ((*e)->payload, k.payload);
  }
  std::vector<std::string> entries = FilesUnder(o.cache_dir, ".bin");
  EXPECT_GT(entries.size(), 0u);                  // some fitted...
  EXPECT_LT(entries.size(), kernels.size());      // ...and the disk really filled
  EXPECT_TRUE(FilesUnder(o.cache_dir, ".tmp.").empty());
  cache.reset();
  EXPECT_EQ(CheckHealthy(o, kernels), "");
  std::cout << "[ tmpfs    ] " << entries.size() << " of " << kernels.size()
            << " entries fitted in 64 KiB\n";
}

// ---- permission flips ------------------------------------------------------

// Runs as the user that owns `root`: flips modes between operations. "" on success.
std::string PermissionFlips(const std::string& root) {
  CacheOptions o;
  o.cache_dir = root + "/cache";
  std::vector<Kernel> kernels;
  for (int i = 0; i < 6; ++i) kernels.push_back(MakeKernel(i));
  auto get = [&](KernelCache& c, const Kernel& k) -> std::string {
    absl::StatusOr<EntryPtr> e = c.GetOrCompile(k.key, k.fields, k.meta, CompileOf(k));
    if (!e.ok()) return absl::StrCat("lookup ", k.meta.spec, ": ", e.status().ToString());
    if ((*e)->payload != k.payload) return absl::StrCat("lookup ", k.meta.spec, ": wrong payload");
    return "";
  };
  absl::StatusOr<std::unique_ptr<KernelCache>> a = KernelCache::Open(o);
  if (!a.ok()) return a.status().ToString();
  if (std::string s = get(**a, kernels[0]); !s.empty()) return s;
  const std::string ns = absl::StrCat(o.cache_dir, "/v", kCacheFormatVersion);
  const std::string shard0 = ns + "/" + kernels[0].key.Hex().substr(0, 2);
  if (access(EntryPath(o.cache_dir, kernels[0].key).c_str(), R_OK) != 0) return "entry 0 not written";

  // Namespace read-only while running: new shards cannot be created.
  chmod(ns.c_str(), 0500);
  if (std::string s = get(**a, kernels[1]); !s.empty()) return "ns 0500: " + s;
  {
    absl::StatusOr<std::unique_ptr<KernelCache>> b = KernelCache::Open(o);
    if (!b.ok()) return b.status().ToString();
    if (std::string s = get(**b, kernels[0]); !s.empty()) return "ns 0500, fresh: " + s;
    if (std::string s = get(**b, kernels[2]); !s.empty()) return "ns 0500, fresh: " + s;
  }
  // The entry's shard unreadable: the entry cannot be read nor locked.
  chmod(ns.c_str(), 0700);
  chmod(shard0.c_str(), 0000);
  {
    absl::StatusOr<std::unique_ptr<KernelCache>> b = KernelCache::Open(o);
    if (!b.ok()) return b.status().ToString();
    if (std::string s = get(**b, kernels[0]); !s.empty()) return "shard 0000: " + s;
  }
  // The whole cache dir closed while an instance is open.
  chmod(shard0.c_str(), 0700);
  chmod(o.cache_dir.c_str(), 0000);
  for (const Kernel& k : kernels) {
    if (std::string s = get(**a, k); !s.empty()) return "cache dir 0000: " + s;
  }
  chmod(o.cache_dir.c_str(), 0700);
  a->reset();
  return CheckHealthy(o, kernels);
}

TEST(CacheFault, PermissionFlipsWhileRunning) {
  SilenceLogs quiet;
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  if (geteuid() != 0) {
    EXPECT_EQ(PermissionFlips(dir.path()), "");
    return;
  }
  // Root ignores modes: drop to an unprivileged uid in a child that owns a
  // subdirectory, so that the kernel enforces every flip.
  constexpr uid_t kNobody = 65534;
  const std::string root = dir.Sub("owned");
  ASSERT_EQ(mkdir(root.c_str(), 0700), 0);
  ASSERT_EQ(chown(root.c_str(), kNobody, kNobody), 0);
  ASSERT_EQ(chmod(dir.path().c_str(), 0711), 0);  // traversable by the child
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(pipefd[0]);
    std::string result;
    if (setgroups(0, nullptr) != 0 || setgid(kNobody) != 0 || setuid(kNobody) != 0) {
      result = absl::StrCat("SKIP cannot drop to uid ", kNobody, ": ", strerror(errno));
    } else {
      result = PermissionFlips(root);
    }
    (void)!write(pipefd[1], result.data(), result.size());
    _exit(0);
  }
  close(pipefd[1]);
  std::string result;
  char buf[512];
  for (ssize_t n; (n = read(pipefd[0], buf, sizeof(buf))) > 0;) result.append(buf, n);
  close(pipefd[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child died, status " << status;
  if (absl::StartsWith(result, "SKIP")) GTEST_SKIP() << result;
  EXPECT_EQ(result, "");
}

// The injection hook makes the same flips visible to a root process: EACCES and
// EROFS at alternating steps between operations.
TEST(CacheFault, InjectedPermissionFlipsBetweenOperations) {
  SilenceLogs quiet;
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  CacheOptions o;
  o.cache_dir = dir.Sub("cache");
  auto denied = std::make_shared<std::atomic<int>>(0);  // 0: allowed, else the errno
  o.fault_injection = [denied](absl::string_view step) {
    int err = denied->load();
    return (step == "open_temp" || step == "mkdir" || step == "rename") ? err : 0;
  };
  std::vector<Kernel> kernels;
  for (int i = 0; i < 12; ++i) kernels.push_back(MakeKernel(i));
  for (int round = 0; round < 3; ++round) {
    auto cache = MustOpen(o);
    ASSERT_NE(cache, nullptr);
    for (size_t i = 0; i < kernels.size(); ++i) {
      denied->store(i % 3 == 0 ? EACCES : i % 3 == 1 ? EROFS : 0);
      const Kernel& k = kernels[(i + round * 5) % kernels.size()];
      absl::StatusOr<EntryPtr> e = cache->GetOrCompile(k.key, k.fields, k.meta, CompileOf(k));
      ASSERT_TRUE(e.ok()) << e.status();
      ASSERT_EQ((*e)->payload, k.payload);
    }
  }
  denied->store(0);
  EXPECT_TRUE(FilesUnder(o.cache_dir, ".tmp.").empty());
  EXPECT_EQ(CheckHealthy(o, kernels), "");
}

// ---- a file replaced under a reader -----------------------------------------

// The compiler waits on the key lock after finding a damaged entry; while it
// waits, the file is replaced by a valid entry of another key. The re-check
// after the lock must see the swap, refuse it and compile.
TEST(CacheFault, EntryReplacedBetweenLockAndRead) {
  SilenceLogs quiet;
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  CacheOptions o;
  o.cache_dir = dir.Sub("cache");
  o.lock_timeout_s = 60;
  Kernel k = MakeKernel(1), other = MakeKernel(2);
  auto cache = MustOpen(o);
  ASSERT_NE(cache, nullptr);
  ASSERT_TRUE(cache->GetOrCompile(other.key, other.fields, other.meta, CompileOf(other)).ok());
  const std::string path = EntryPath(o.cache_dir, k.key);
  const std::string shard = path.substr(0, path.rfind('/'));
  fs::create_directories(shard);
  WriteAll(path, "garbage that is not an entry");
  absl::StatusOr<cache_internal::FileLock> held =
      cache_internal::FileLock::Acquire(shard + "/" + k.key.Hex() + ".lock", 10);
  ASSERT_TRUE(held.ok()) << held.status();

  std::atomic<int> calls{0};
  absl::StatusOr<EntryPtr> result = absl::UnknownError("not run");
  std::thread reader([&] {
    auto c2 = MustOpen(o);
    if (c2 != nullptr) result = c2->GetOrCompile(k.key, k.fields, k.meta, CompileOf(k, &calls));
  });
  // Swap while the reader is (or is about to be) blocked on the lock: a valid
  // file of another key, published the way a writer would.
  std::string foreign = cache_internal::SerializeEntry(other.key, other.meta, other.fields, other.payload);
  WriteAll(path + ".swap", foreign);
  ASSERT_EQ(rename((path + ".swap").c_str(), path.c_str()), 0);
  held->Release();
  reader.join();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ((*result)->payload, k.payload);
  EXPECT_EQ((*result)->source, Source::kCompiled);
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(CheckHealthy(o, {k, other}), "");
}

// A thread keeps replacing the entry file (damaged, truncated, another key's,
// the right one, or none) while fresh instances look the key up.
TEST(CacheFault, EntrySwappedContinuouslyUnderReaders) {
  SilenceLogs quiet;
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  CacheOptions o;
  o.cache_dir = dir.Sub("cache");
  Kernel k = MakeKernel(3), other = MakeKernel(4);
  std::string good = cache_internal::SerializeEntry(k.key, k.meta, k.fields, k.payload);
  std::string foreign = cache_internal::SerializeEntry(other.key, other.meta, other.fields, other.payload);
  std::string flipped = good;
  flipped[flipped.size() - 10] ^= 0x5a;
  const std::vector<std::string> variants = {good, foreign, flipped, good.substr(0, good.size() / 2),
                                             "junk", ""};
  const std::string path = EntryPath(o.cache_dir, k.key);
  fs::create_directories(path.substr(0, path.rfind('/')));
  std::atomic<bool> stop{false};
  std::thread swapper([&] {
    std::mt19937 rng(99);
    for (int n = 0; !stop.load(); ++n) {
      const std::string& v = variants[rng() % variants.size()];
      if (v.empty()) {
        unlink(path.c_str());
        continue;
      }
      std::string tmp = absl::StrCat(path, ".swap", n % 2);
      WriteAll(tmp, v);
      rename(tmp.c_str(), path.c_str());
    }
  });
  int lookups = 0;
  for (; lookups < 400; ++lookups) {
    auto cache = MustOpen(o);
    ASSERT_NE(cache, nullptr);
    absl::StatusOr<EntryPtr> e = cache->GetOrCompile(k.key, k.fields, k.meta, CompileOf(k));
    ASSERT_TRUE(e.ok()) << e.status();
    ASSERT_EQ((*e)->payload, k.payload) << "lookup " << lookups;
  }
  stop = true;
  swapper.join();
  for (const std::string& f : FilesUnder(o.cache_dir, ".swap")) unlink(f.c_str());
  // The swapper's last write may be a damaged file: that one is expected, and
  // the next lookup repairs it.
  {
    auto cache = MustOpen(o);
    ASSERT_NE(cache, nullptr);
    ASSERT_TRUE(cache->GetOrCompile(k.key, k.fields, k.meta, CompileOf(k)).ok());
  }
  EXPECT_EQ(CheckHealthy(o, {k}), "");
}

// ---- warmers killed at random points ---------------------------------------

// A child: looks every kernel up in a random order with a compile that takes a
// random short time and writes that stall at random steps. Exit 0 when every
// payload was right.
[[noreturn]] void WarmerChild(CacheOptions o, const std::vector<Kernel>& kernels, unsigned seed) {
  std::mt19937 rng(seed);
  o.fault_injection = [&rng](absl::string_view) {
    usleep(rng() % 400);
    return 0;
  };
  absl::StatusOr<std::unique_ptr<KernelCache>> c = KernelCache::Open(o);
  if (!c.ok()) _exit(10);
  std::vector<int> order(kernels.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::shuffle(order.begin(), order.end(), rng);
  for (int i : order) {
    const Kernel& k = kernels[i];
    absl::StatusOr<EntryPtr> e = (*c)->GetOrCompile(k.key, k.fields, k.meta,
                                                    [&]() -> absl::StatusOr<CompileResult> {
                                                      usleep(rng() % 2000);
                                                      CompileResult r;
                                                      r.payload = k.payload;
                                                      return r;
                                                    });
    if (!e.ok()) _exit(20);
    if ((*e)->payload != k.payload) _exit(30);
  }
  if (rng() % 4 == 0 && !(*c)->PruneToBytes(o.max_bytes / 2).ok()) _exit(40);
  _exit(0);
}

TEST(CacheFault, WarmersKilledAtRandomPoints) {
  SilenceLogs quiet;
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  CacheOptions o;
  o.cache_dir = dir.Sub("cache");
  o.lock_timeout_s = 60;  // a killed holder's lock is released by the kernel at once
  std::vector<Kernel> kernels;
  for (int i = 0; i < 8; ++i) kernels.push_back(MakeKernel(i));
  // Room for about six of the eight: eviction runs concurrently with the kills.
  o.max_bytes = 6 * 2200;
  constexpr int kRounds = 200;
  constexpr int kProcs = 4;
  std::mt19937 rng(2024);
  int kills = 0, finished = 0;
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    std::vector<pid_t> pids;
    for (int c = 0; c < kProcs; ++c) {
      unsigned seed = rng();
      pid_t pid = fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) WarmerChild(o, kernels, seed);
      pids.push_back(pid);
    }
    usleep(rng() % 6000);
    for (pid_t pid : pids) {
      if (rng() % 2 == 0) kill(pid, SIGKILL);
    }
    for (pid_t pid : pids) {
      int status = 0;
      ASSERT_EQ(waitpid(pid, &status, 0), pid);
      if (WIFSIGNALED(status)) {
        ASSERT_EQ(WTERMSIG(status), SIGKILL);
        ++kills;
      } else {
        ASSERT_TRUE(WIFEXITED(status));
        ASSERT_EQ(WEXITSTATUS(status), 0) << "a surviving warmer saw a wrong result";
        ++finished;
      }
    }
    absl::StatusOr<std::unique_ptr<KernelCache>> c = KernelCache::Open(o);
    ASSERT_TRUE(c.ok());
    absl::StatusOr<std::vector<EntryInfo>> bad = (*c)->Verify();
    ASSERT_TRUE(bad.ok());
    ASSERT_TRUE(bad->empty()) << (*bad)[0].path << ": " << (*bad)[0].problem;
  }
  // Killed writers leave temp files; maintenance clears them once their locks are free.
  {
    auto c = MustOpen(o);
    ASSERT_NE(c, nullptr);
    ASSERT_TRUE(c->PruneStale().ok());
  }
  EXPECT_TRUE(FilesUnder(o.cache_dir, ".tmp.").empty());
  o.max_bytes = uint64_t{1} << 30;
  EXPECT_EQ(CheckHealthy(o, kernels), "");
  EXPECT_GT(kills, 0);
  EXPECT_GT(finished, 0);
  std::cout << "[ survived ] " << kRounds << " rounds of " << kProcs << " warmers: " << kills
            << " SIGKILLed, " << finished << " finished\n";
}

// ---- clock skew ------------------------------------------------------------

TEST(CacheFault, ClockSkewDoesNotBreakEvictionOrPrune) {
  SilenceLogs quiet;
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  constexpr int64_t kNow = 1'700'000'000;
  constexpr int64_t kTenYears = int64_t{10} * 365 * 24 * 3600;
  auto clock = std::make_shared<std::atomic<int64_t>>(kNow);
  CacheOptions o;
  o.cache_dir = dir.Sub("cache");
  o.clock = [clock] { return clock->load(); };
  o.use_record_interval_s = 0;
  std::vector<Kernel> kernels;
  for (int i = 0; i < 6; ++i) kernels.push_back(MakeKernel(i));
  auto put = [&](const Kernel& k, int64_t at) {
    clock->store(at);
    auto c = MustOpen(o);
    ASSERT_NE(c, nullptr);
    ASSERT_TRUE(c->GetOrCompile(k.key, k.fields, k.meta, CompileOf(k)).ok());
  };
  auto on_disk = [&](const Kernel& k) { return access(EntryPath(o.cache_dir, k.key).c_str(), F_OK) == 0; };
  // Order matters: each publish re-anchors stamps ahead of the clock of the
  // moment, so the future ones are written last.
  put(kernels[2], 1);  // written under a clock at the epoch
  put(kernels[3], kNow - 300);
  put(kernels[4], kNow - 200);
  put(kernels[5], kNow - 100);
  put(kernels[0], kNow + kTenYears);  // ...and two under a clock ten years ahead
  put(kernels[1], kNow + kTenYears);
  clock->store(kNow);
  auto c = MustOpen(o);
  ASSERT_NE(c, nullptr);
  uint64_t entry_bytes = 0;
  absl::StatusOr<std::vector<EntryInfo>> listed = c->List();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 6u);
  for (const EntryInfo& e : *listed) entry_bytes = std::max<uint64_t>(entry_bytes, e.file_bytes);

  // LRU down to four entries: the epoch one and the oldest real one go; the
  // future ones are re-anchored to now, not kept as "newest forever".
  absl::StatusOr<uint64_t> evicted = c->PruneToBytes(4 * entry_bytes);
  ASSERT_TRUE(evicted.ok()) << evicted.status();
  EXPECT_EQ(*evicted, 2u);
  EXPECT_FALSE(on_disk(kernels[2]));
  EXPECT_FALSE(on_disk(kernels[3]));
  for (int i : {0, 1, 4, 5}) EXPECT_TRUE(on_disk(kernels[i])) << i;
  listed = c->List();
  ASSERT_TRUE(listed.ok());
  for (const EntryInfo& e : *listed) EXPECT_LE(e.last_use_unix_s, kNow) << e.path;

  // An hour later, entries unused for 30 minutes go, the formerly future ones too.
  clock->store(kNow + 3600);
  absl::StatusOr<uint64_t> pruned = c->PruneOlderThan(1800);
  ASSERT_TRUE(pruned.ok());
  EXPECT_EQ(*pruned, 4u);
  EXPECT_TRUE(c->List()->empty());

  // A clock that steps back after a hit still rewrites the use record.
  clock->store(kNow + kTenYears);
  ASSERT_TRUE(c->GetOrCompile(kernels[0].key, kernels[0].fields, kernels[0].meta, CompileOf(kernels[0])).ok());
  clock->store(kNow);
  ASSERT_TRUE(c->GetOrCompile(kernels[0].key, kernels[0].fields, kernels[0].meta, CompileOf(kernels[0])).ok());
  listed = c->List();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].last_use_unix_s, kNow);
  c.reset();
  EXPECT_EQ(CheckHealthy(o, kernels), "");
}

}  // namespace
}  // namespace mlajit::cache
