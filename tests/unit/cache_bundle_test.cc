// Trust pinning: SHA-256 vectors, export -> import round trips through the C
// ABI, tampered bundles refused naming the entry, pins files parsed strictly,
// and the prebuilt layer refusing entries its pins do not list. Bundles that
// carry the autotuner's records: round trip, merge, and malformed sections.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/unit/sample_tuning_record.h"
#include "tests/unit/temp_dir.h"
#include "mlajit/mlajit.h"
#include "src/base/log.h"
#include "src/cache/kernel_cache.h"
#include "src/cache/pins.h"
#include "src/cache/sha256.h"
#include "src/tune/tuning_table.h"

namespace mlajit::cache {
namespace {

namespace fs = std::filesystem;
using cache_internal::PinSet;
using cache_internal::Sha256Hex;
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

using test_support::TempDir;

struct Kernel {
  CacheKey key;
  std::vector<KeyField> fields;
  EntryMetadata meta;
  std::string payload;
};

Kernel MakeKernel(int i) {
  Kernel k;
  KeyBuilder kb;
  kb.Add("source", absl::StrCat("// bundle kernel ", i));
  kb.Add("arch", "sm_90a");
  k.key = kb.Finish();
  k.fields = kb.fields();
  k.meta.template_name = "mla_decode";
  k.meta.arch = "sm_90a";
  k.meta.spec = absl::StrCat(R"({"id":)", i, "}");
  k.meta.compiler = "fake 1.0";
  k.payload = absl::StrCat("cubin-", i, std::string(3000, static_cast<char>('A' + i)));
  return k;
}

CompileFn CompileOf(const Kernel& k, int* calls) {
  return [k, calls]() -> absl::StatusOr<CompileResult> {
    ++*calls;
    CompileResult r;
    r.payload = k.payload;
    return r;
  };
}

// Fills `dir` with kernels 0..n-1 through the library.
void Fill(const std::string& dir, int n) {
  CacheOptions o;
  o.cache_dir = dir;
  auto c = KernelCache::Open(o);
  ASSERT_TRUE(c.ok());
  int calls = 0;
  for (int i = 0; i < n; ++i) {
    Kernel k = MakeKernel(i);
    ASSERT_TRUE((*c)->GetOrCompile(k.key, k.fields, k.meta, CompileOf(k, &calls)).ok());
  }
}

class SilenceLogs {
 public:
  SilenceLogs() {
    SetLogSink([](LogLevel, std::string_view line, void* self) {
      static_cast<SilenceLogs*>(self)->lines += std::string(line) + "\n";
    }, this);
  }
  ~SilenceLogs() { SetLogSink(nullptr, nullptr); }
  std::string lines;
};

// What libmlajit.so has logged (the C ABI's calls log through the library's
// own sink). Installed once and never removed: the library keeps the sink for
// the life of the process.
std::string& LibraryLogLines() {
  static std::string* lines = [] {
    auto* l = new std::string;
    mlajit_set_log_sink(
        [](mlajit_log_level_t, const char* line, void* user) {
          *static_cast<std::string*>(user) += std::string(line) + "\n";
        },
        l);
    return l;
  }();
  return *lines;
}

mlajit_cache_t OpenC(const std::string& dir, const char* pins = nullptr, const char* prebuilt = nullptr) {
  mlajit_cache_options_t o = MLAJIT_CACHE_OPTIONS_INIT;
  o.cache_dir = dir.c_str();
  o.pins_file = pins;
  o.prebuilt_dir = prebuilt;
  mlajit_cache_t c = nullptr;
  EXPECT_EQ(mlajit_cache_open(&o, &c), MLAJIT_STATUS_OK) << mlajit_last_error();
  return c;
}

TEST(CacheBundle, Sha256KnownVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Sha256Hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(CacheBundle, ExportImportRoundTrip) {
  SilenceLogs logs;
  TempDir dir;
  Fill(dir.Sub("src"), 5);
  mlajit_cache_t src = OpenC(dir.Sub("src"));
  ASSERT_NE(src, nullptr);
  const std::string bundle = dir.Sub("k.bundle"), pins = dir.Sub("k.pins");
  char* json = nullptr;
  ASSERT_EQ(mlajit_cache_export(src, bundle.c_str(), pins.c_str(), &json), MLAJIT_STATUS_OK)
      << mlajit_last_error();
  EXPECT_TRUE(absl::StrContains(json, "\"entries\":5")) << json;
  EXPECT_TRUE(absl::StrContains(json, "\"skipped\":0")) << json;
  EXPECT_TRUE(absl::StrContains(json, "\"tuning_records\":0")) << json;
  mlajit_free(json);
  mlajit_cache_close(src);

  // The manifest is a pins file listing each key with its payload digest.
  absl::StatusOr<PinSet> set = PinSet::Load(pins);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(set->Check(MakeKernel(i).key, MakeKernel(i).payload), "");
  EXPECT_TRUE(absl::StartsWith(ReadAll(bundle), "mlajit-bundle 1 5\n"));

  mlajit_cache_t dst = OpenC(dir.Sub("dst"));
  ASSERT_NE(dst, nullptr);
  ASSERT_EQ(mlajit_cache_import(dst, bundle.c_str(), pins.c_str(), &json), MLAJIT_STATUS_OK)
      << mlajit_last_error();
  EXPECT_TRUE(absl::StrContains(json, "\"installed\":5")) << json;
  EXPECT_TRUE(absl::StrContains(json, "\"tuning_records\":0")) << json;
  mlajit_free(json);
  EXPECT_FALSE(fs::exists(dir.Sub("dst/tuning.jsonl")));  // a version-1 bundle carries none
  int bad = -1;
  ASSERT_EQ(mlajit_cache_verify_json(dst, &bad, &json), MLAJIT_STATUS_OK);
  mlajit_free(json);
  EXPECT_EQ(bad, 0);
  mlajit_cache_close(dst);

  // Imported entries are disk hits: nothing compiles.
  CacheOptions o;
  o.cache_dir = dir.Sub("dst");
  auto c = KernelCache::Open(o);
  ASSERT_TRUE(c.ok());
  int calls = 0;
  for (int i = 0; i < 5; ++i) {
    Kernel k = MakeKernel(i);
    absl::StatusOr<EntryPtr> e = (*c)->GetOrCompile(k.key, k.fields, k.meta, CompileOf(k, &calls));
    ASSERT_TRUE(e.ok());
    EXPECT_EQ((*e)->payload, k.payload);
    EXPECT_EQ((*e)->source, CacheEntry::Source::kDisk);
  }
  EXPECT_EQ(calls, 0);
}

// A refused import installed nothing; closes the cache.
void ExpectNoEntriesThenClose(mlajit_cache_t dst) {
  char* json = nullptr;
  EXPECT_EQ(mlajit_cache_list_json(dst, &json), MLAJIT_STATUS_OK);
  if (json != nullptr) {
    EXPECT_TRUE(absl::StrContains(json, "\"entries\":[]")) << "nothing installed: " << json;
    mlajit_free(json);
  }
  mlajit_cache_close(dst);
}

// Tuning records: what mlajit_tune writes into <cache_dir>/tuning.jsonl.
tune::TuningRecord Record(int rows, int bucket, int block_m = 16) {
  return testing_util::SampleTuningRecord(rows, bucket, CacheOptions::LibraryVersion(), block_m);
}

void WriteTuning(const std::string& cache_dir, const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& l : lines) absl::StrAppend(&text, l, "\n");
  WriteAll(cache_dir + "/tuning.jsonl", text);
}

// The records of this library version in <cache_dir>/tuning.jsonl.
std::unique_ptr<tune::TuningTable> LoadTuning(const std::string& cache_dir, int expected) {
  auto t = std::make_unique<tune::TuningTable>(CacheOptions::LibraryVersion());
  absl::StatusOr<int> n = t->Load(cache_dir);
  EXPECT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(n.value_or(-1), expected);
  return t;
}

// The record of `r`'s class that `t` holds, as its line ("" when none).
std::string Held(const tune::TuningTable& t, const tune::TuningRecord& r) {
  std::optional<tune::TuningRecord> found = t.Find(r.key);
  return found ? tune::ToJsonLine(*found) : "";
}

// Exports `dir`/src (kernels 0..n-1 and `tuning` as its tuning.jsonl) to
// `dir`/k.bundle; returns the summary JSON.
std::string ExportWithTuning(const TempDir& dir, int n, const std::vector<std::string>& tuning) {
  Fill(dir.Sub("src"), n);
  WriteTuning(dir.Sub("src"), tuning);
  mlajit_cache_t src = OpenC(dir.Sub("src"));
  char* json = nullptr;
  EXPECT_EQ(mlajit_cache_export(src, dir.Sub("k.bundle").c_str(), nullptr, &json), MLAJIT_STATUS_OK)
      << mlajit_last_error();
  std::string out = json != nullptr ? json : "";
  mlajit_free(json);
  mlajit_cache_close(src);
  return out;
}

TEST(CacheBundle, TuningRecordsTravelWithTheKernels) {
  std::string& logs = LibraryLogLines();
  logs.clear();
  TempDir dir;
  const tune::TuningRecord a = Record(16, 3), b = Record(128, 9, 64);
  tune::TuningRecord old = Record(32, 5);
  old.library_version = "0.0.1";  // another library's: kept, as TuningTable keeps it
  std::string json = ExportWithTuning(
      dir, 2, {tune::ToJsonLine(a), "not a record", tune::ToJsonLine(b), tune::ToJsonLine(old)});
  EXPECT_TRUE(absl::StrContains(json, "\"entries\":2")) << json;
  EXPECT_TRUE(absl::StrContains(json, "\"tuning_records\":3")) << json;
  EXPECT_TRUE(absl::StrContains(logs, "tuning.jsonl:2: malformed tuning record left out"))
      << logs;
  const std::string bundle = dir.Sub("k.bundle");
  const std::string text = ReadAll(bundle);
  EXPECT_TRUE(absl::StartsWith(text, "mlajit-bundle 2 2 3\n")) << text.substr(0, 40);
  EXPECT_TRUE(absl::StrContains(text, absl::StrCat("\ntuning ", tune::ToJsonLine(b), "\n")));
  EXPECT_FALSE(absl::StrContains(text, "not a record"));

  mlajit_cache_t dst = OpenC(dir.Sub("dst"));
  ASSERT_NE(dst, nullptr);
  char* out = nullptr;
  ASSERT_EQ(mlajit_cache_import(dst, bundle.c_str(), nullptr, &out), MLAJIT_STATUS_OK)
      << mlajit_last_error();
  EXPECT_TRUE(absl::StrContains(out, "\"installed\":2")) << out;
  EXPECT_TRUE(absl::StrContains(out, "\"tuning_records\":3")) << out;
  mlajit_free(out);
  mlajit_cache_close(dst);

  std::unique_ptr<tune::TuningTable> t = LoadTuning(dir.Sub("dst"), 2);
  EXPECT_EQ(Held(*t, a), tune::ToJsonLine(a));
  EXPECT_EQ(Held(*t, b), tune::ToJsonLine(b));
  EXPECT_TRUE(absl::StrContains(ReadAll(dir.Sub("dst/tuning.jsonl")), tune::ToJsonLine(old)));
}

TEST(CacheBundle, ImportedTuningRecordsMergeByClass) {
  SilenceLogs logs;
  TempDir dir;
  const tune::TuningRecord a = Record(16, 3), b = Record(128, 9, 64);
  ExportWithTuning(dir, 1, {tune::ToJsonLine(a), tune::ToJsonLine(b)});
  // The destination has its own record of a's class, one of a class the bundle
  // lacks, and another library's record of a's class.
  const tune::TuningRecord mine_a = Record(16, 3, 32), mine_c = Record(64, 7);
  tune::TuningRecord old_a = Record(16, 3, 8);
  old_a.library_version = "0.0.1";
  fs::create_directories(dir.Sub("dst"));
  ASSERT_EQ(chmod(dir.Sub("dst").c_str(), 0700), 0);
  WriteTuning(dir.Sub("dst"),
              {tune::ToJsonLine(old_a), tune::ToJsonLine(mine_a), tune::ToJsonLine(mine_c)});

  mlajit_cache_t dst = OpenC(dir.Sub("dst"));
  ASSERT_NE(dst, nullptr);
  ASSERT_EQ(mlajit_cache_import(dst, dir.Sub("k.bundle").c_str(), nullptr, nullptr),
            MLAJIT_STATUS_OK)
      << mlajit_last_error();
  mlajit_cache_close(dst);

  std::unique_ptr<tune::TuningTable> t = LoadTuning(dir.Sub("dst"), 3);
  EXPECT_EQ(Held(*t, a), tune::ToJsonLine(a));  // the bundle's replaced the destination's
  EXPECT_EQ(Held(*t, b), tune::ToJsonLine(b));
  EXPECT_EQ(Held(*t, mine_c), tune::ToJsonLine(mine_c));
  const std::string text = ReadAll(dir.Sub("dst/tuning.jsonl"));
  EXPECT_FALSE(absl::StrContains(text, tune::ToJsonLine(mine_a))) << text;
  // Another version's record of the same class is neither replaced nor a replacement.
  EXPECT_TRUE(absl::StrContains(text, tune::ToJsonLine(old_a))) << text;
}

TEST(CacheBundle, MalformedTuningRecordFailsTheImportNamingItsLine) {
  SilenceLogs logs;
  TempDir dir;
  const tune::TuningRecord a = Record(16, 3), b = Record(128, 9, 64);
  ExportWithTuning(dir, 2, {tune::ToJsonLine(a), tune::ToJsonLine(b)});
  std::string text = ReadAll(dir.Sub("k.bundle"));
  // Header, 2 manifest lines, then the tuning lines: b's is line 5.
  const std::string line_b = tune::ToJsonLine(b);
  size_t at = text.find(line_b);
  ASSERT_NE(at, std::string::npos);
  std::string bad_b = line_b;
  bad_b.replace(bad_b.find("\"rows\":"), 7, "\"lines\":");
  text.replace(at, line_b.size(), bad_b);
  const std::string path = dir.Sub("bad.bundle");
  WriteAll(path, text);

  mlajit_cache_t dst = OpenC(dir.Sub("dst"));
  ASSERT_NE(dst, nullptr);
  EXPECT_EQ(mlajit_cache_import(dst, path.c_str(), nullptr, nullptr), MLAJIT_STATUS_DATA_LOSS);
  const std::string error = mlajit_last_error();
  EXPECT_TRUE(absl::StrContains(error, "tuning line 2 of 2 (line 5 of the bundle)")) << error;
  EXPECT_TRUE(absl::StrContains(error, "\"rows\": missing")) << error;
  EXPECT_TRUE(absl::StrContains(error, "nothing installed")) << error;
  ExpectNoEntriesThenClose(dst);
  EXPECT_FALSE(fs::exists(dir.Sub("dst/tuning.jsonl")));

  // A memory-only cache has nowhere to keep records: refused before installing.
  mlajit_cache_options_t o = MLAJIT_CACHE_OPTIONS_INIT;
  o.memory_only = 1;
  mlajit_cache_t mem = nullptr;
  ASSERT_EQ(mlajit_cache_open(&o, &mem), MLAJIT_STATUS_OK) << mlajit_last_error();
  EXPECT_EQ(mlajit_cache_import(mem, dir.Sub("k.bundle").c_str(), nullptr, nullptr),
            MLAJIT_STATUS_FAILED_PRECONDITION);
  EXPECT_TRUE(absl::StrContains(mlajit_last_error(), "carries 2 tuning records"))
      << mlajit_last_error();
  mlajit_cache_close(mem);
}

TEST(CacheBundle, BrokenTuningSectionIsNotABundle) {
  SilenceLogs logs;
  TempDir dir;
  const std::string line_a = tune::ToJsonLine(Record(16, 3));
  const std::string line_b = tune::ToJsonLine(Record(128, 9, 64));
  ExportWithTuning(dir, 1, {line_a, line_b});
  const std::string original = ReadAll(dir.Sub("k.bundle"));
  ASSERT_TRUE(absl::StartsWith(original, "mlajit-bundle 2 1 2\n"));
  const std::string head_rest = original.substr(original.find('\n'));  // from the first '\n'
  const size_t end_at = original.find("\nend\n");
  ASSERT_NE(end_at, std::string::npos);
  const size_t b_at = original.find("tuning " + line_b);
  ASSERT_NE(b_at, std::string::npos);

  struct Case {
    const char* name;
    std::string bytes;
    std::string needle;
  };
  std::vector<Case> cases = {
      {"count too high", "mlajit-bundle 2 1 3" + head_rest,
       "line 5, tuning line 3 of 3 \"end\": expected \"tuning <JSON>\""},
      {"count too low", "mlajit-bundle 2 1 1" + head_rest,
       "line 4 \"tuning {\\\"device"},  // the extra tuning line, where "end" should be
      {"no tuning count", "mlajit-bundle 2 1" + head_rest,
       "or \"mlajit-bundle 2 <count> <tuning count>\""},
      {"cut in the section", original.substr(0, b_at), "tuning section ends after 1 of 2 lines"},
      {"line without the prefix", original.substr(0, b_at) + "tuned" + original.substr(b_at + 6),
       "line 4, tuning line 2 of 2 \"tuned {"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = dir.Sub(absl::StrCat("bad-", c.name, ".bundle"));
    WriteAll(path, c.bytes);
    mlajit_cache_t dst = OpenC(dir.Sub(absl::StrCat("dst-", c.name)));
    ASSERT_NE(dst, nullptr);
    EXPECT_EQ(mlajit_cache_import(dst, path.c_str(), nullptr, nullptr),
              MLAJIT_STATUS_INVALID_ARGUMENT);
    EXPECT_TRUE(absl::StrContains(mlajit_last_error(), absl::StrCat("bundle ", path, ": ")))
        << mlajit_last_error();
    EXPECT_TRUE(absl::StrContains(mlajit_last_error(), c.needle)) << mlajit_last_error();
    ExpectNoEntriesThenClose(dst);
    EXPECT_FALSE(fs::exists(dir.Sub(absl::StrCat("dst-", c.name, "/tuning.jsonl"))));
  }
}

TEST(CacheBundle, TamperedEntryIsRejectedByName) {
  SilenceLogs logs;
  TempDir dir;
  Fill(dir.Sub("src"), 3);
  mlajit_cache_t src = OpenC(dir.Sub("src"));
  ASSERT_NE(src, nullptr);
  const std::string bundle = dir.Sub("k.bundle"), pins = dir.Sub("k.pins");
  ASSERT_EQ(mlajit_cache_export(src, bundle.c_str(), pins.c_str(), nullptr), MLAJIT_STATUS_OK);
  mlajit_cache_close(src);
  const std::string original = ReadAll(bundle);
  const Kernel victim = MakeKernel(1);
  const std::string victim_payload = victim.payload;
  size_t at = original.find(victim_payload);
  ASSERT_NE(at, std::string::npos);

  struct Case {
    const char* name;
    std::string bytes;
    mlajit_status_t status;
    std::string needle;
  };
  std::vector<Case> cases;
  {
    std::string b = original;  // one payload byte flipped: the entry checksum catches it
    b[at + 100] ^= 1;
    cases.push_back({"payload byte", b, MLAJIT_STATUS_DATA_LOSS, victim.key.Hex()});
  }
  {
    // The manifest line re-pointed at another digest: the SHA-256 comparison catches it.
    std::string b = original;
    std::string digest = Sha256Hex(victim_payload);
    size_t d = b.find(digest);
    ASSERT_NE(d, std::string::npos);
    b.replace(d, 64, std::string(64, '0'));
    cases.push_back({"manifest digest", b, MLAJIT_STATUS_DATA_LOSS, victim.key.Hex()});
  }
  cases.push_back({"truncated", original.substr(0, original.size() - 7), MLAJIT_STATUS_INVALID_ARGUMENT,
                   "truncated"});
  cases.push_back({"not a bundle", "hello\n", MLAJIT_STATUS_INVALID_ARGUMENT, "mlajit-bundle 1"});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = dir.Sub(absl::StrCat("bad-", c.name, ".bundle"));
    WriteAll(path, c.bytes);
    const std::string dst_dir = dir.Sub(absl::StrCat("dst-", c.name));
    mlajit_cache_t dst = OpenC(dst_dir);
    ASSERT_NE(dst, nullptr);
    EXPECT_EQ(mlajit_cache_import(dst, path.c_str(), nullptr, nullptr), c.status);
    EXPECT_TRUE(absl::StrContains(mlajit_last_error(), c.needle)) << mlajit_last_error();
    ExpectNoEntriesThenClose(dst);
  }

  // An intact bundle whose entry is not in the expected pins is refused too.
  const std::string partial = dir.Sub("partial.pins");
  std::string text = ReadAll(pins);
  size_t line = text.find(victim.key.Hex());
  ASSERT_NE(line, std::string::npos);
  text.erase(line, text.find('\n', line) + 1 - line);
  WriteAll(partial, text);
  mlajit_cache_t dst = OpenC(dir.Sub("dst-pins"));
  ASSERT_NE(dst, nullptr);
  EXPECT_EQ(mlajit_cache_import(dst, bundle.c_str(), partial.c_str(), nullptr), MLAJIT_STATUS_DATA_LOSS);
  EXPECT_TRUE(absl::StrContains(mlajit_last_error(), absl::StrCat("entry ", victim.key.Hex(), ": key ",
                                                                  victim.key.Hex(), " is not listed")))
      << mlajit_last_error();
  mlajit_cache_close(dst);
}

TEST(CacheBundle, PinsFileIsParsedStrictly) {
  const std::string key = MakeKernel(0).key.Hex();
  const std::string sha(64, 'a');
  EXPECT_TRUE(PinSet::Parse(absl::StrCat("# comment\n\n", key, " ", sha, " 100 {\"id\":0}\n"), "p").ok());
  struct Bad {
    std::string text, needle;
  };
  for (const Bad& b : std::vector<Bad>{
           {absl::StrCat(key, "\n"), "p line 1: \""},
           {absl::StrCat("xyz ", sha, "\n"), "key \"xyz\" is malformed"},
           {absl::StrCat(key, " ABC\n"), "sha256 \"ABC\" is malformed"},
           {absl::StrCat(key, " ", sha, "\n", key, " ", std::string(64, 'b'), "\n"),
            "p line 2: key " + key + " is pinned to two digests"}}) {
    absl::StatusOr<PinSet> p = PinSet::Parse(b.text, "p");
    ASSERT_FALSE(p.ok()) << b.text;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(p.status().message(), b.needle)) << p.status();
  }
  // A cache asked to pin with an unreadable file does not open (fail closed).
  CacheOptions o;
  o.memory_only = true;
  o.pins_file = "/nonexistent/pins.txt";
  absl::StatusOr<std::unique_ptr<KernelCache>> c = KernelCache::Open(o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(c.status().message(), "pins_file")) << c.status();
}

TEST(CacheBundle, PinsRefuseUnlistedPrebuiltEntriesAndAcceptListedOnes) {
  SilenceLogs logs;
  TempDir dir;
  const std::string prebuilt = dir.Sub("prebuilt");
  Fill(prebuilt, 3);
  chmod(prebuilt.c_str(), 0755);
  // Pins for kernels 0 and 1 only; kernel 2's line is dropped, and kernel 1 is
  // pinned to the digest of a different binary.
  std::string pins_text = absl::StrCat(MakeKernel(0).key.Hex(), " ", Sha256Hex(MakeKernel(0).payload), "\n",
                                       MakeKernel(1).key.Hex(), " ", Sha256Hex("another binary"), "\n");
  const std::string pins = dir.Sub("pins.txt");
  WriteAll(pins, pins_text);

  CacheOptions o;
  o.memory_only = true;
  o.prebuilt_dir = prebuilt;
  o.pins_file = pins;
  o.disable_jit = true;  // a refused entry must not be replaced by a compile here
  auto c = KernelCache::Open(o);
  ASSERT_TRUE(c.ok()) << c.status();
  int calls = 0;
  Kernel k0 = MakeKernel(0), k1 = MakeKernel(1), k2 = MakeKernel(2);
  absl::StatusOr<EntryPtr> e0 = (*c)->GetOrCompile(k0.key, k0.fields, k0.meta, CompileOf(k0, &calls));
  ASSERT_TRUE(e0.ok()) << e0.status();
  EXPECT_EQ((*e0)->source, CacheEntry::Source::kPrebuilt);
  EXPECT_EQ((*e0)->payload, k0.payload);
  for (const Kernel* k : {&k1, &k2}) {
    absl::StatusOr<EntryPtr> e = (*c)->GetOrCompile(k->key, k->fields, k->meta, CompileOf(*k, &calls));
    ASSERT_FALSE(e.ok());
    EXPECT_EQ(e.status().code(), absl::StatusCode::kFailedPrecondition);  // a miss with JIT off
    EXPECT_TRUE(absl::StrContains(logs.lines, absl::StrCat("refused by the pins (key ", k->key.Hex())))
        << logs.lines;
  }
  EXPECT_TRUE(absl::StrContains(logs.lines, "is not listed in " + pins)) << logs.lines;
  EXPECT_TRUE(absl::StrContains(logs.lines, "but " + pins + " pins " + Sha256Hex("another binary")))
      << logs.lines;
  EXPECT_EQ(calls, 0);

  // Without pins the same layer serves all three (the control case).
  o.pins_file.clear();
  auto open = KernelCache::Open(o);
  ASSERT_TRUE(open.ok());
  for (const Kernel* k : {&k0, &k1, &k2}) {
    EXPECT_TRUE((*open)->GetOrCompile(k->key, k->fields, k->meta, CompileOf(*k, &calls)).ok());
  }

  // Through the C ABI and with JIT on: the refused entry is compiled instead.
  mlajit_cache_options_t co = MLAJIT_CACHE_OPTIONS_INIT;
  co.memory_only = 1;
  co.pins_file = "";
  mlajit_cache_t h = nullptr;
  EXPECT_EQ(mlajit_cache_open(&co, &h), MLAJIT_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(mlajit_last_error(), "options->pins_file=\"\"")) << mlajit_last_error();
  o.pins_file = pins;
  o.disable_jit = false;
  auto jit = KernelCache::Open(o);
  ASSERT_TRUE(jit.ok());
  absl::StatusOr<EntryPtr> e2 = (*jit)->GetOrCompile(k2.key, k2.fields, k2.meta, CompileOf(k2, &calls));
  ASSERT_TRUE(e2.ok());
  EXPECT_EQ((*e2)->source, CacheEntry::Source::kCompiled);
  EXPECT_EQ(calls, 1);
}

TEST(CacheBundle, OlderOptionsStructWithoutPinsIsAccepted) {
  TempDir dir;
  mlajit_cache_options_t o = MLAJIT_CACHE_OPTIONS_INIT;
  o.struct_size = offsetof(mlajit_cache_options_t, pins_file);
  o.memory_only = 1;
  o.pins_file = "/this/field/is/past/the/struct";  // must not be read
  mlajit_cache_t c = nullptr;
  ASSERT_EQ(mlajit_cache_open(&o, &c), MLAJIT_STATUS_OK) << mlajit_last_error();
  mlajit_cache_close(c);
  o.struct_size = offsetof(mlajit_cache_options_t, record_manifest);
  EXPECT_EQ(mlajit_cache_open(&o, &c), MLAJIT_STATUS_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace mlajit::cache
