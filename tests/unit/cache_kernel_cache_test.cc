// KernelCache behaviour in one process: tiers, validation of what is read,
// fallbacks, security rules, eviction, maintenance, single-flight across threads.
// Every test works in a fresh mkdtemp directory and never touches ~/.cache.
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "tests/unit/temp_dir.h"
#include "src/base/log.h"
#include "src/cache/disk_tier.h"
#include "src/cache/entry_format.h"
#include "src/cache/file_lock.h"
#include "src/cache/kernel_cache.h"

namespace mlajit::cache {
namespace {

namespace fs = std::filesystem;
using Source = CacheEntry::Source;
using EntryPtr = std::shared_ptr<const CacheEntry>;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
void WriteAll(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}
mode_t ModeOf(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0;
}
bool Exists(const std::string& path) { return fs::exists(fs::symlink_status(path)); }

// Relative path -> (size, mtime ns) of every file under `root`.
std::map<std::string, std::pair<uintmax_t, int64_t>> Snapshot(const std::string& root) {
  std::map<std::string, std::pair<uintmax_t, int64_t>> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    struct stat st;
    lstat(e.path().c_str(), &st);
    out[fs::relative(e.path(), root).string()] = {
        e.is_regular_file() ? e.file_size() : 0,
        int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec};
  }
  return out;
}

std::vector<std::string> FilesUnder(const std::string& root, absl::string_view containing) {
  std::vector<std::string> out;
  if (!Exists(root)) return out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (e.is_regular_file() && absl::StrContains(e.path().filename().string(), containing)) {
      out.push_back(e.path().string());
    }
  }
  return out;
}

using test_support::TempDir;

class LogCapture {
 public:
  LogCapture() { SetLogSink(&LogCapture::Sink, this); }
  ~LogCapture() { SetLogSink(nullptr, nullptr); }
  int Count(absl::string_view needle) {
    absl::MutexLock lock(&mu_);
    int n = 0;
    for (const std::string& l : lines_) n += absl::StrContains(l, needle) ? 1 : 0;
    return n;
  }
  int Warnings() {
    absl::MutexLock lock(&mu_);
    return warnings_;
  }
  std::string All() {
    absl::MutexLock lock(&mu_);
    std::string s;
    for (const std::string& l : lines_) absl::StrAppend(&s, l, "\n");
    return s;
  }
  void Reset() {
    absl::MutexLock lock(&mu_);
    lines_.clear();
    warnings_ = 0;
  }

 private:
  static void Sink(LogLevel level, std::string_view line, void* user) {
    auto* self = static_cast<LogCapture*>(user);
    absl::MutexLock lock(&self->mu_);
    self->lines_.emplace_back(line);
    if (level == LogLevel::kWarn) ++self->warnings_;
  }
  absl::Mutex mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
  int warnings_ ABSL_GUARDED_BY(mu_) = 0;
};

struct Kernel {
  CacheKey key;
  std::vector<KeyField> fields;
  EntryMetadata meta;
  std::string payload;
};

Kernel MakeKernel(int i, const std::string& arch = "sm_90a") {
  Kernel k;
  KeyBuilder kb;
  kb.Add("source", absl::StrCat("// kernel ", i, "\n", std::string(200, 'k')));
  kb.Add("arch", arch);
  k.key = kb.Finish();
  k.fields = kb.fields();
  k.meta.template_name = "mla_decode";
  k.meta.arch = arch;
  k.meta.spec = absl::StrCat(R"({"num_heads":)", 16 + i, R"(,"arch":")", arch, R"("})");
  k.meta.compiler = "fake 1.0";
  // Same size for every i so eviction arithmetic is simple.
  k.payload = absl::StrCat("binary-", 100 + i % 900, "-", std::string(1000, 'b'));
  return k;
}

class CacheTest : public ::testing::Test {
 protected:
  CacheOptions Opts() const {
    CacheOptions o;
    o.cache_dir = dir_.Sub("cache");
    o.lock_timeout_s = 30;
    return o;
  }
  std::unique_ptr<KernelCache> OpenCache(const CacheOptions& o) {
    absl::StatusOr<std::unique_ptr<KernelCache>> c = KernelCache::Open(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }
  CompileFn Compiler(const Kernel& k, std::atomic<int>* calls) {
    return [k, calls]() -> absl::StatusOr<CompileResult> {
      calls->fetch_add(1);
      CompileResult r;
      r.payload = k.payload;
      r.source = "// source of " + k.meta.spec;
      r.compile_ms = 12.5;
      return r;
    };
  }
  absl::StatusOr<EntryPtr> Get(KernelCache& c, const Kernel& k, std::atomic<int>* calls) {
    return c.GetOrCompile(k.key, k.fields, k.meta, Compiler(k, calls));
  }
  std::string EntryPath(const CacheOptions& o, const CacheKey& key) const {
    std::string hex = key.Hex();
    return absl::StrCat(o.cache_dir, "/v", kCacheFormatVersion, "/", hex.substr(0, 2), "/", hex,
                        ".bin");
  }

  TempDir dir_;
  LogCapture logs_;
};

TEST_F(CacheTest, CompileThenMemoryThenDisk) {
  ASSERT_FALSE(dir_.path().empty());
  CacheOptions o = Opts();
  Kernel k = MakeKernel(1);
  std::atomic<int> calls{0};
  {
    auto cache = OpenCache(o);
    absl::StatusOr<EntryPtr> e = Get(*cache, k, &calls);
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_EQ((*e)->source, Source::kCompiled);
    EXPECT_EQ((*e)->payload, k.payload);
    EXPECT_EQ((*e)->path, EntryPath(o, k.key));
    EXPECT_EQ((*e)->metadata.compile_ms, 12.5);
    EXPECT_EQ((*e)->metadata.library_version, CacheOptions::LibraryVersion());
    e = Get(*cache, k, &calls);
    ASSERT_TRUE(e.ok());
    EXPECT_EQ((*e)->source, Source::kMemory);
    EXPECT_EQ((*e)->payload, k.payload);
    EXPECT_EQ(calls.load(), 1);
  }
  const std::string path = EntryPath(o, k.key);
  ASSERT_TRUE(Exists(path));
  EXPECT_EQ(ModeOf(path), 0600u);
  EXPECT_TRUE(Exists(path.substr(0, path.size() - 4) + ".lock"));
  EXPECT_TRUE(Exists(path.substr(0, path.size() - 4) + ".use"));
  EXPECT_TRUE(FilesUnder(o.cache_dir, ".tmp.").empty());

  auto cache = OpenCache(o);  // a new instance: nothing in memory
  absl::StatusOr<EntryPtr> e = Get(*cache, k, &calls);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ((*e)->source, Source::kDisk);
  EXPECT_EQ((*e)->payload, k.payload);
  EXPECT_EQ((*e)->metadata.spec, k.meta.spec);
  ASSERT_EQ((*e)->fields.size(), 2u);
  EXPECT_EQ((*e)->fields[1].value_preview, "sm_90a");
  EXPECT_EQ(calls.load(), 1);
  absl::StatusOr<std::vector<EntryInfo>> bad = cache->Verify();
  ASSERT_TRUE(bad.ok());
  EXPECT_TRUE(bad->empty());
  EXPECT_EQ(logs_.Warnings(), 0) << logs_.All();

  absl::StatusOr<EntryPtr> r = cache->Read(k.key);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->payload, k.payload);
  EXPECT_EQ(cache->Read(MakeKernel(2).key).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(CacheTest, CreatesMissingDirectories0700) {
  CacheOptions o = Opts();
  o.cache_dir = dir_.Sub("a/b/c");
  umask(022);
  auto cache = OpenCache(o);
  for (const char* d : {"a", "a/b", "a/b/c"}) EXPECT_EQ(ModeOf(dir_.Sub(d)), 0700u) << d;
  std::atomic<int> calls{0};
  Kernel k = MakeKernel(1);
  ASSERT_TRUE(Get(*cache, k, &calls).ok());
  std::string shard = EntryPath(o, k.key);
  shard = shard.substr(0, shard.rfind('/'));
  EXPECT_EQ(ModeOf(shard), 0700u);
  EXPECT_EQ(ModeOf(shard.substr(0, shard.rfind('/'))), 0700u);  // v1
  EXPECT_TRUE(Exists(EntryPath(o, k.key)));
}

TEST_F(CacheTest, RefusesDirectoryWritableByOthersUnlessTrusted) {
  for (mode_t mode : {0777, 0770, 0702}) {
    SCOPED_TRACE(mode);
    CacheOptions o = Opts();
    o.cache_dir = dir_.Sub(absl::StrCat("shared", mode));
    ASSERT_EQ(mkdir(o.cache_dir.c_str(), 0700), 0);
    ASSERT_EQ(chmod(o.cache_dir.c_str(), mode), 0);
    logs_.Reset();
    auto cache = OpenCache(o);
    std::atomic<int> calls{0};
    for (int i = 0; i < 3; ++i) {
      absl::StatusOr<EntryPtr> e = Get(*cache, MakeKernel(i), &calls);
      ASSERT_TRUE(e.ok()) << e.status();
      EXPECT_EQ((*e)->source, Source::kCompiled);
      EXPECT_TRUE((*e)->path.empty());
    }
    EXPECT_EQ(logs_.Warnings(), 1) << logs_.All();
    EXPECT_EQ(logs_.Count("writable by"), 1) << logs_.All();
    EXPECT_EQ(logs_.Count(o.cache_dir), 1);
    EXPECT_TRUE(fs::is_empty(o.cache_dir));

    o.trust_cache_dir = true;
    logs_.Reset();
    auto trusted = OpenCache(o);
    absl::StatusOr<EntryPtr> e = Get(*trusted, MakeKernel(0), &calls);
    ASSERT_TRUE(e.ok());
    EXPECT_TRUE(Exists(EntryPath(o, MakeKernel(0).key)));
    EXPECT_EQ(logs_.Warnings(), 0) << logs_.All();
  }
}

TEST_F(CacheTest, RefusesDirectoryOwnedByAnotherUser) {
  CacheOptions o = Opts();
  if (geteuid() == 0) {
    ASSERT_EQ(mkdir(o.cache_dir.c_str(), 0700), 0);
    ASSERT_EQ(chown(o.cache_dir.c_str(), 65534, 65534), 0);
  } else {
    o.cache_dir = "/";  // owned by root, and never written to: it is refused
  }
  auto cache = OpenCache(o);
  std::atomic<int> calls{0};
  absl::StatusOr<EntryPtr> e = Get(*cache, MakeKernel(1), &calls);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ((*e)->source, Source::kCompiled);
  EXPECT_EQ(logs_.Count("owned by uid"), 1) << logs_.All();
  if (geteuid() == 0) {
    EXPECT_TRUE(fs::is_empty(o.cache_dir));
  }
}

TEST_F(CacheTest, EntryOwnedByOthersOrWritableByOthersIsInvalid) {
  CacheOptions o = Opts();
  Kernel k = MakeKernel(3);
  std::atomic<int> calls{0};
  ASSERT_TRUE(Get(*OpenCache(o), k, &calls).ok());
  const std::string path = EntryPath(o, k.key);
  std::vector<std::pair<std::string, std::function<void()>>> tamper = {
      {"writable by others", [&] { chmod(path.c_str(), 0606); }}};
  if (geteuid() == 0) {
    tamper.push_back({"owned by uid 65534", [&] { chown(path.c_str(), 65534, 65534); }});
  }
  for (auto& [problem, fn] : tamper) {
    SCOPED_TRACE(problem);
    fn();
    auto cache = OpenCache(o);
    absl::StatusOr<std::vector<EntryInfo>> bad = cache->Verify();
    ASSERT_TRUE(bad.ok());
    ASSERT_EQ(bad->size(), 1u);
    EXPECT_TRUE(absl::StrContains((*bad)[0].problem, problem)) << (*bad)[0].problem;
    logs_.Reset();
    int before = calls.load();
    absl::StatusOr<EntryPtr> e = Get(*cache, k, &calls);
    ASSERT_TRUE(e.ok());
    EXPECT_EQ((*e)->source, Source::kCompiled);
    EXPECT_EQ(calls.load(), before + 1);
    EXPECT_EQ(logs_.Warnings(), 1) << logs_.All();
    EXPECT_EQ(ModeOf(path), 0600u);  // replaced by a file of ours
    EXPECT_TRUE(cache->Verify()->empty());
  }
}

// Each damage is found by Verify, and GetOrCompile recompiles, replaces and warns once.
TEST_F(CacheTest, DamagedEntriesAreMissesThatGetReplaced) {
  CacheOptions o = Opts();
  Kernel k = MakeKernel(7);
  Kernel other = MakeKernel(8);
  std::atomic<int> calls{0};
  {
    auto cache = OpenCache(o);
    ASSERT_TRUE(Get(*cache, k, &calls).ok());
    ASSERT_TRUE(Get(*cache, other, &calls).ok());
  }
  const std::string path = EntryPath(o, k.key);
  const std::string good = ReadAll(path);
  const std::string foreign = ReadAll(EntryPath(o, other.key));
  ASSERT_GT(good.size(), 1000u);
  std::string wrong_version = good;
  wrong_version[8] = static_cast<char>(kCacheFormatVersion + 1);

  struct Damage {
    std::string name, bytes, problem;
  };
  std::vector<Damage> damages = {
      {"payload byte flipped", good.substr(0, good.size() - 10) + "X" + good.substr(good.size() - 9),
       "payload checksum"},
      {"metadata byte flipped",
       good.substr(0, 70) + static_cast<char>(good[70] ^ 4) + good.substr(71), "checksum"},
      {"truncated", good.substr(0, good.size() / 2), "truncated"},
      {"empty", "", "truncated"},
      {"foreign file", foreign, "foreign"},
      {"wrong version", wrong_version, "format version"},
      {"garbage", std::string(5000, '\xff'), "bad magic"},
  };
  for (const Damage& d : damages) {
    SCOPED_TRACE(d.name);
    WriteAll(path, d.bytes);
    chmod(path.c_str(), 0600);
    auto cache = OpenCache(o);
    absl::StatusOr<std::vector<EntryInfo>> bad = cache->Verify();
    ASSERT_TRUE(bad.ok());
    ASSERT_EQ(bad->size(), 1u);
    EXPECT_EQ((*bad)[0].path, path);
    EXPECT_FALSE((*bad)[0].valid);
    EXPECT_TRUE(absl::StrContains((*bad)[0].problem, d.problem)) << (*bad)[0].problem;
    EXPECT_EQ(cache->Read(k.key).status().code(), absl::StatusCode::kDataLoss);

    logs_.Reset();
    int before = calls.load();
    absl::StatusOr<EntryPtr> e = Get(*cache, k, &calls);
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_EQ((*e)->source, Source::kCompiled);
    EXPECT_EQ((*e)->payload, k.payload);
    EXPECT_EQ(calls.load(), before + 1);
    EXPECT_EQ(logs_.Warnings(), 1) << logs_.All();
    EXPECT_EQ(logs_.Count(path), 1) << logs_.All();
    EXPECT_EQ(ReadAll(path), good);  // replaced by a correct entry
    EXPECT_TRUE(cache->Verify()->empty());
  }
  // A stray file whose name is not a key is reported too.
  std::string stray = path.substr(0, path.rfind('/')) + "/not-a-key.bin";
  WriteAll(stray, "x");
  absl::StatusOr<std::vector<EntryInfo>> bad = OpenCache(o)->Verify();
  ASSERT_TRUE(bad.ok());
  ASSERT_EQ(bad->size(), 1u);
  EXPECT_EQ((*bad)[0].path, stray);
}

TEST_F(CacheTest, UnusableDirectoryFallsBackToMemory) {
  // A path under a regular file (ENOTDIR) is unusable even for root.
  WriteAll(dir_.Sub("file"), "x");
  CacheOptions o = Opts();
  o.cache_dir = dir_.Sub("file/cache");
  auto cache = OpenCache(o);
  std::atomic<int> calls{0};
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<EntryPtr> e = Get(*cache, MakeKernel(i), &calls);
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_EQ((*e)->source, Source::kCompiled);
    EXPECT_EQ((*e)->payload, MakeKernel(i).payload);
  }
  absl::StatusOr<EntryPtr> again = Get(*cache, MakeKernel(0), &calls);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->source, Source::kMemory);
  EXPECT_EQ(calls.load(), 3);
  EXPECT_EQ(logs_.Warnings(), 1) << logs_.All();
  EXPECT_EQ(logs_.Count("memory only"), 1) << logs_.All();
  absl::StatusOr<CacheStats> stats = cache->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->entries, 3u);
  EXPECT_EQ(stats->compiles, 3u);
  EXPECT_EQ(stats->hits, 1u);
}

TEST_F(CacheTest, ReadOnlyDirectoryFallsBackToMemory) {
  if (geteuid() == 0) GTEST_SKIP() << "root ignores permission bits; covered by the ENOTDIR "
                                      "and injected-failure variants";
  CacheOptions o = Opts();
  Kernel k = MakeKernel(1);
  std::atomic<int> calls{0};
  ASSERT_TRUE(Get(*OpenCache(o), k, &calls).ok());  // one entry readable afterwards
  for (const auto& e : fs::recursive_directory_iterator(o.cache_dir)) {
    if (e.is_directory()) chmod(e.path().c_str(), 0500);
  }
  chmod(o.cache_dir.c_str(), 0500);
  logs_.Reset();
  auto cache = OpenCache(o);
  absl::StatusOr<EntryPtr> hit = Get(*cache, k, &calls);
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ((*hit)->source, Source::kDisk);  // a read-only cache still serves hits
  for (int i = 2; i < 5; ++i) {
    absl::StatusOr<EntryPtr> e = Get(*cache, MakeKernel(i), &calls);
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_EQ((*e)->source, Source::kCompiled);
  }
  EXPECT_EQ(logs_.Warnings(), 1) << logs_.All();
}

TEST_F(CacheTest, InjectedWriteFailuresFallBackToMemory) {
  for (auto [step, err] : std::vector<std::pair<std::string, int>>{{"fsync", ENOSPC},
                                                                   {"open_temp", EROFS},
                                                                   {"partial_write", ENOSPC},
                                                                   {"rename", EACCES},
                                                                   {"mkdir", EROFS}}) {
    SCOPED_TRACE(step);
    CacheOptions o = Opts();
    o.cache_dir = dir_.Sub("inject_" + step);
    ASSERT_EQ(mkdir(o.cache_dir.c_str(), 0700), 0);
    std::string injected_step = step;
    int injected_err = err;
    o.fault_injection = [injected_step, injected_err](absl::string_view s) {
      return s == injected_step ? injected_err : 0;
    };
    logs_.Reset();
    auto cache = OpenCache(o);
    std::atomic<int> calls{0};
    for (int i = 0; i < 3; ++i) {
      absl::StatusOr<EntryPtr> e = Get(*cache, MakeKernel(i), &calls);
      ASSERT_TRUE(e.ok()) << e.status();
      EXPECT_EQ((*e)->source, Source::kCompiled);
      EXPECT_EQ((*e)->payload, MakeKernel(i).payload);
      EXPECT_TRUE((*e)->path.empty());
    }
    EXPECT_EQ(calls.load(), 3);
    EXPECT_EQ(logs_.Warnings(), 1) << logs_.All();
    EXPECT_EQ(logs_.Count(strerror(err)), 1) << logs_.All();
    EXPECT_TRUE(FilesUnder(o.cache_dir, ".bin").empty());  // no entry, no temp file
  }
}

TEST_F(CacheTest, EvictionKeepsTheCapInLruOrder) {
  CacheOptions o = Opts();
  auto now = std::make_shared<std::atomic<int64_t>>(1000);
  o.clock = [now] { return now->load(); };
  o.use_record_interval_s = 60;
  std::atomic<int> calls{0};
  std::vector<Kernel> ks;
  for (int i = 0; i < 5; ++i) ks.push_back(MakeKernel(i));
  uint64_t one = 0;
  {
    auto probe = OpenCache(o);  // learn the size of one entry
    ASSERT_TRUE(Get(*probe, ks[0], &calls).ok());
    one = (*probe->List())[0].file_bytes;
    ASSERT_TRUE(probe->Clear().ok());
  }
  ASSERT_GT(one, 1000u);
  o.max_bytes = 3 * one;  // room for three entries
  auto cache = OpenCache(o);
  for (int i = 0; i < 3; ++i) {  // last use 1000, 1100, 1200
    now->store(1000 + 100 * i);
    ASSERT_TRUE(Get(*cache, ks[i], &calls).ok());
  }
  now->store(1300);
  ASSERT_EQ((*Get(*cache, ks[0], &calls))->source, Source::kMemory);  // k0 used at 1300
  now->store(1400);
  ASSERT_TRUE(Get(*cache, ks[3], &calls).ok());  // over the cap: k1 is the LRU
  EXPECT_FALSE(Exists(EntryPath(o, ks[1].key)));
  for (int i : {0, 2, 3}) EXPECT_TRUE(Exists(EntryPath(o, ks[i].key))) << i;
  now->store(1500);
  ASSERT_TRUE(Get(*cache, ks[4], &calls).ok());  // now k2 (1200) goes
  EXPECT_FALSE(Exists(EntryPath(o, ks[2].key)));
  for (int i : {0, 3, 4}) EXPECT_TRUE(Exists(EntryPath(o, ks[i].key))) << i;
  absl::StatusOr<CacheStats> stats = cache->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->entries, 3u);
  EXPECT_LE(stats->bytes, o.max_bytes);
  // Lock files are never removed.
  EXPECT_TRUE(Exists(EntryPath(o, ks[1].key).substr(0, EntryPath(o, ks[1].key).size() - 4) +
                     ".lock"));

  // Explicit pruning: by age, then by size, both on our last-use records.
  absl::StatusOr<std::vector<EntryInfo>> list = cache->List();
  ASSERT_TRUE(list.ok());
  std::map<std::string, int64_t> last_use;
  for (const EntryInfo& e : *list) last_use[e.key.Hex()] = e.last_use_unix_s;
  EXPECT_EQ(last_use[ks[0].key.Hex()], 1300);
  EXPECT_EQ(last_use[ks[3].key.Hex()], 1400);
  EXPECT_EQ(last_use[ks[4].key.Hex()], 1500);
  now->store(1600);
  EXPECT_EQ(*cache->PruneOlderThan(250), 1u);  // cutoff 1350: k0
  EXPECT_FALSE(Exists(EntryPath(o, ks[0].key)));
  EXPECT_EQ(*cache->PruneToBytes(one), 1u);  // k3 is older than k4
  EXPECT_TRUE(Exists(EntryPath(o, ks[4].key)));
  EXPECT_EQ(cache->PruneOlderThan(-1).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(CacheTest, UseRecordIsRewrittenAtMostOncePerInterval) {
  CacheOptions o = Opts();
  auto now = std::make_shared<std::atomic<int64_t>>(5000);
  o.clock = [now] { return now->load(); };
  o.use_record_interval_s = 60;
  Kernel k = MakeKernel(1);
  std::atomic<int> calls{0};
  auto cache = OpenCache(o);
  ASSERT_TRUE(Get(*cache, k, &calls).ok());
  std::string use = EntryPath(o, k.key);
  use = use.substr(0, use.size() - 4) + ".use";
  auto mtime = [&use] {
    struct stat st;
    return stat(use.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_mtime) : -1;
  };
  EXPECT_EQ(mtime(), 5000);
  now->store(5059);
  ASSERT_TRUE(Get(*cache, k, &calls).ok());
  EXPECT_EQ(mtime(), 5000);  // within the interval: no write
  now->store(5060);
  ASSERT_TRUE(Get(*cache, k, &calls).ok());
  EXPECT_EQ(mtime(), 5060);
}

TEST_F(CacheTest, DisableJitFailsOnMissAndServesHits) {
  CacheOptions o = Opts();
  Kernel present = MakeKernel(1);
  Kernel absent = MakeKernel(2);
  std::atomic<int> calls{0};
  ASSERT_TRUE(Get(*OpenCache(o), present, &calls).ok());
  o.disable_jit = true;
  auto cache = OpenCache(o);
  absl::StatusOr<EntryPtr> hit = Get(*cache, present, &calls);
  ASSERT_TRUE(hit.ok()) << hit.status();
  EXPECT_EQ((*hit)->source, Source::kDisk);
  absl::StatusOr<EntryPtr> miss = Get(*cache, absent, &calls);
  EXPECT_EQ(miss.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(miss.status().message(), absent.key.Hex())) << miss.status();
  EXPECT_TRUE(absl::StrContains(miss.status().message(), absent.meta.spec)) << miss.status();
  EXPECT_TRUE(absl::StrContains(miss.status().message(), "MLAJIT_DISABLE_JIT"));
  EXPECT_EQ(calls.load(), 1);
  EXPECT_FALSE(Exists(EntryPath(o, absent.key)));
}

TEST_F(CacheTest, PrebuiltLayerIsConsultedFirstAndNeverWritten) {
  CacheOptions build = Opts();
  build.cache_dir = dir_.Sub("prebuilt");
  Kernel in_prebuilt = MakeKernel(1);
  Kernel not_in_prebuilt = MakeKernel(2);
  std::atomic<int> calls{0};
  ASSERT_TRUE(Get(*OpenCache(build), in_prebuilt, &calls).ok());
  ASSERT_EQ(calls.load(), 1);
  const auto before = Snapshot(build.cache_dir);

  CacheOptions o = Opts();
  o.prebuilt_dir = build.cache_dir;
  {
    auto cache = OpenCache(o);
    absl::StatusOr<EntryPtr> e = Get(*cache, in_prebuilt, &calls);
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_EQ((*e)->source, Source::kPrebuilt);
    EXPECT_EQ((*e)->payload, in_prebuilt.payload);
    EXPECT_EQ(calls.load(), 1);
    e = Get(*cache, not_in_prebuilt, &calls);
    ASSERT_TRUE(e.ok());
    EXPECT_EQ((*e)->source, Source::kCompiled);
    EXPECT_EQ(calls.load(), 2);
    ASSERT_TRUE(cache->Stats().ok());
    ASSERT_TRUE(cache->PruneStale().ok());
  }
  EXPECT_EQ(Snapshot(build.cache_dir), before);  // not a byte, not an mtime changed
  EXPECT_TRUE(Exists(EntryPath(o, not_in_prebuilt.key)));
  EXPECT_FALSE(Exists(EntryPath(o, in_prebuilt.key)));  // hits are not copied

  // A prebuilt dir writable by others is ignored (with a warning) unless trusted.
  chmod(build.cache_dir.c_str(), 0757);
  logs_.Reset();
  auto untrusted = OpenCache(o);
  EXPECT_EQ(logs_.Count("prebuilt"), 1) << logs_.All();
  absl::StatusOr<EntryPtr> e = Get(*untrusted, in_prebuilt, &calls);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ((*e)->source, Source::kCompiled);
  o.trust_cache_dir = true;
  o.cache_dir = dir_.Sub("cache2");
  e = Get(*OpenCache(o), in_prebuilt, &calls);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ((*e)->source, Source::kPrebuilt);
}

TEST_F(CacheTest, SingleFlightAcrossThreads) {
  CacheOptions o = Opts();
  Kernel k = MakeKernel(5);
  constexpr int kThreads = 16;
  auto cache = OpenCache(o);
  std::atomic<int> calls{0};
  std::atomic<int> arrived{0};
  // The compile waits until every thread has at least started its call, so the
  // others overlap with it (they find the flight or, at worst, the result).
  CompileFn compile = [&]() -> absl::StatusOr<CompileResult> {
    calls.fetch_add(1);
    while (arrived.load() < kThreads) std::this_thread::yield();
    CompileResult r;
    r.payload = k.payload;
    return r;
  };
  std::vector<absl::StatusOr<EntryPtr>> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      arrived.fetch_add(1);
      results[t] = cache->GetOrCompile(k.key, k.fields, k.meta, compile);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(calls.load(), 1);
  for (const auto& r : results) {
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ((*r)->payload, k.payload);
  }

  // A failing compile is shared by the waiters and not remembered.
  Kernel f = MakeKernel(6);
  std::atomic<int> failing_calls{0};
  arrived = 0;
  CompileFn fail = [&]() -> absl::StatusOr<CompileResult> {
    failing_calls.fetch_add(1);
    while (arrived.load() < kThreads) std::this_thread::yield();
    return absl::InternalError("template failed to compile");
  };
  threads.clear();
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      arrived.fetch_add(1);
      results[t] = cache->GetOrCompile(f.key, f.fields, f.meta, fail);
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& r : results) EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_GE(failing_calls.load(), 1);
  int after_wave = failing_calls.load();
  EXPECT_FALSE(cache->GetOrCompile(f.key, f.fields, f.meta, fail).ok());
  EXPECT_EQ(failing_calls.load(), after_wave + 1);  // retried
  EXPECT_FALSE(Exists(EntryPath(o, f.key)));
}

TEST_F(CacheTest, RecordManifestAppendsOneLinePerCompile) {
  CacheOptions o = Opts();
  o.record_manifest = dir_.Sub("manifest.jsonl");
  std::atomic<int> calls{0};
  auto cache = OpenCache(o);
  Kernel a = MakeKernel(1), b = MakeKernel(2);
  b.meta.spec = "{\"multi\":\n1}";
  ASSERT_TRUE(Get(*cache, a, &calls).ok());
  ASSERT_TRUE(Get(*cache, a, &calls).ok());  // a hit records nothing
  ASSERT_TRUE(Get(*cache, b, &calls).ok());
  EXPECT_EQ(ReadAll(o.record_manifest), a.meta.spec + "\n{\"multi\": 1}\n");
  // Appends, never truncates: a second process adds to the same file.
  CacheOptions o2 = o;
  o2.cache_dir = dir_.Sub("other");
  ASSERT_TRUE(Get(*OpenCache(o2), a, &calls).ok());
  EXPECT_EQ(ReadAll(o.record_manifest), a.meta.spec + "\n{\"multi\": 1}\n" + a.meta.spec + "\n");
}

TEST_F(CacheTest, SaveSourceWritesBesideTheEntry) {
  CacheOptions o = Opts();
  o.save_source = true;
  std::atomic<int> calls{0};
  Kernel k = MakeKernel(4);
  auto cache = OpenCache(o);
  ASSERT_TRUE(Get(*cache, k, &calls).ok());
  std::string path = EntryPath(o, k.key);
  std::string cu = path.substr(0, path.size() - 4) + ".cu";
  EXPECT_EQ(ReadAll(cu), "// source of " + k.meta.spec);
  EXPECT_EQ(ModeOf(cu), 0600u);
  EXPECT_EQ((*cache->List())[0].file_bytes, fs::file_size(path) + fs::file_size(cu));
  ASSERT_EQ(*cache->Clear(), 1u);
  EXPECT_FALSE(Exists(cu));
}

TEST_F(CacheTest, StatsPersistAcrossInstances) {
  CacheOptions o = Opts();
  std::atomic<int> calls{0};
  {
    auto cache = OpenCache(o);
    ASSERT_TRUE(Get(*cache, MakeKernel(1), &calls).ok());  // miss + compile
    ASSERT_TRUE(Get(*cache, MakeKernel(2, "gfx942"), &calls).ok());
    ASSERT_TRUE(Get(*cache, MakeKernel(1), &calls).ok());  // memory hit
  }
  auto cache = OpenCache(o);
  ASSERT_TRUE(Get(*cache, MakeKernel(2, "gfx942"), &calls).ok());  // disk hit
  absl::StatusOr<CacheStats> s = cache->Stats();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->entries, 2u);
  EXPECT_GT(s->bytes, 2000u);
  EXPECT_EQ(s->compiles, 2u);
  EXPECT_EQ(s->misses, 2u);
  EXPECT_EQ(s->hits, 2u);
  // List carries the metadata to group by.
  absl::StatusOr<std::vector<EntryInfo>> list = cache->List();
  ASSERT_TRUE(list.ok());
  std::map<std::string, int> by_arch;
  for (const EntryInfo& e : *list) {
    EXPECT_TRUE(e.valid);
    EXPECT_EQ(e.metadata.template_name, "mla_decode");
    ++by_arch[e.metadata.arch];
  }
  EXPECT_EQ(by_arch, (std::map<std::string, int>{{"gfx942", 1}, {"sm_90a", 1}}));
}

TEST_F(CacheTest, PruneStaleRemovesOtherVersions) {
  CacheOptions old_lib = Opts();
  old_lib.library_version = "0.0.9";
  std::atomic<int> calls{0};
  Kernel old_k = MakeKernel(1), cur_k = MakeKernel(2);
  ASSERT_TRUE(Get(*OpenCache(old_lib), old_k, &calls).ok());
  CacheOptions o = Opts();
  auto cache = OpenCache(o);
  ASSERT_TRUE(Get(*cache, cur_k, &calls).ok());
  // Another format version's namespace, with one entry.
  std::string other_ns = o.cache_dir + "/v" + std::to_string(kCacheFormatVersion + 6);
  fs::create_directories(other_ns + "/ab");
  WriteAll(other_ns + "/ab/" + std::string(32, 'a') + ".bin", "old format");
  fs::create_directories(o.cache_dir + "/notes");  // not ours: left alone
  absl::StatusOr<uint64_t> removed = cache->PruneStale();
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 2u);
  EXPECT_FALSE(Exists(other_ns));
  EXPECT_TRUE(Exists(o.cache_dir + "/notes"));
  EXPECT_FALSE(Exists(EntryPath(o, old_k.key)));
  EXPECT_TRUE(Exists(EntryPath(o, cur_k.key)));
}

TEST_F(CacheTest, ClearKeepsLockFilesAndSkipsNothingElse) {
  CacheOptions o = Opts();
  std::atomic<int> calls{0};
  auto cache = OpenCache(o);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(Get(*cache, MakeKernel(i), &calls).ok());
  absl::StatusOr<uint64_t> n = cache->Clear();
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 4u);
  EXPECT_TRUE(FilesUnder(o.cache_dir, ".bin").empty());
  EXPECT_TRUE(FilesUnder(o.cache_dir, ".use").empty());
  int key_locks = 0;  // stats.lock aside
  for (const std::string& f : FilesUnder(o.cache_dir, ".lock")) {
    key_locks += fs::path(f).filename().string().size() == 32 + 5 ? 1 : 0;
  }
  EXPECT_EQ(key_locks, 4);
  EXPECT_EQ(cache->Stats()->entries, 0u);
  // The memory tier is cleared too: the next call compiles again.
  ASSERT_EQ((*Get(*cache, MakeKernel(0), &calls))->source, Source::kCompiled);
  EXPECT_EQ(calls.load(), 5);
}

TEST_F(CacheTest, LockWaitIsBounded) {
  CacheOptions o = Opts();
  o.lock_timeout_s = 0.05;
  Kernel k = MakeKernel(9);
  auto cache = OpenCache(o);
  cache_internal::DiskTierOptions tier_options;
  tier_options.root = o.cache_dir;
  cache_internal::DiskTier tier(tier_options);
  // Hold the key's lock as another compiler would (OFD locks conflict even
  // within one process).
  fs::create_directories(tier.ShardDir(k.key));
  absl::StatusOr<cache_internal::FileLock> held =
      cache_internal::FileLock::Acquire(tier.LockPath(k.key), 1);
  ASSERT_TRUE(held.ok()) << held.status();
  std::atomic<int> calls{0};
  absl::StatusOr<EntryPtr> e = Get(*cache, k, &calls);
  EXPECT_EQ(e.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(e.status().message(), tier.LockPath(k.key))) << e.status();
  EXPECT_EQ(calls.load(), 0);
  held->Release();
  e = Get(*cache, k, &calls);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(calls.load(), 1);
}

TEST_F(CacheTest, OptionsAreValidated) {
  CacheOptions o = Opts();
  o.lock_timeout_s = -1;
  absl::StatusOr<std::unique_ptr<KernelCache>> c = KernelCache::Open(o);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(c.status().message(), "lock_timeout_s=-1")) << c.status();
}

TEST_F(CacheTest, MemoryOnlyWritesNothing) {
  CacheOptions o = Opts();
  o.memory_only = true;
  std::atomic<int> calls{0};
  auto cache = OpenCache(o);
  ASSERT_TRUE(Get(*cache, MakeKernel(1), &calls).ok());
  EXPECT_EQ((*Get(*cache, MakeKernel(1), &calls))->source, Source::kMemory);
  EXPECT_FALSE(Exists(o.cache_dir));
  EXPECT_EQ(cache->List()->size(), 1u);
  EXPECT_EQ(logs_.Warnings(), 0);
}

// Not a speed assertion: prints what a warm disk hit and a memory hit cost here.
TEST_F(CacheTest, ReportsHitCosts) {
  CacheOptions o = Opts();
  Kernel k = MakeKernel(1);
  k.payload = std::string(256 << 10, 'p');  // a typical cubin size
  std::atomic<int> calls{0};
  const CompileFn compile = Compiler(k, &calls);
  ASSERT_TRUE(OpenCache(o)->GetOrCompile(k.key, k.fields, k.meta, compile).ok());
  // Disk hit: the first lookup of a key in a fresh instance (as in a new process):
  // read, checksum, parse, use-record update, memory-tier insert.
  constexpr int kDiskIters = 200;
  std::vector<std::unique_ptr<KernelCache>> caches;
  for (int i = 0; i < kDiskIters; ++i) caches.push_back(OpenCache(o));
  auto t0 = std::chrono::steady_clock::now();
  for (auto& c : caches) {
    absl::StatusOr<EntryPtr> e = c->GetOrCompile(k.key, k.fields, k.meta, compile);
    ASSERT_TRUE(e.ok() && (*e)->source == Source::kDisk);
  }
  auto t1 = std::chrono::steady_clock::now();
  KernelCache& cache = *caches.back();
  constexpr int kMemIters = 200000;
  auto t2 = std::chrono::steady_clock::now();
  for (int i = 0; i < kMemIters; ++i) {
    absl::StatusOr<EntryPtr> e = cache.GetOrCompile(k.key, k.fields, k.meta, compile);
    ASSERT_TRUE(e.ok() && (*e)->source == Source::kMemory);
  }
  auto t3 = std::chrono::steady_clock::now();
  EXPECT_EQ(calls.load(), 1);
  double disk_us = std::chrono::duration<double, std::micro>(t1 - t0).count() / kDiskIters;
  double mem_ns = std::chrono::duration<double, std::nano>(t3 - t2).count() / kMemIters;
  std::cout << "[ timing ] warm disk hit (256 KiB entry): " << disk_us
            << " us; memory hit: " << mem_ns << " ns\n";
  RecordProperty("disk_hit_us", std::to_string(disk_us));
  RecordProperty("memory_hit_ns", std::to_string(mem_ns));
}

}  // namespace
}  // namespace mlajit::cache
