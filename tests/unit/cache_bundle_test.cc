// Trust pinning: SHA-256 vectors, export -> import round trips through the C
// ABI, tampered bundles refused naming the entry, pins files parsed strictly,
// and the prebuilt layer refusing entries its pins do not list.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/unit/temp_dir.h"
#include "mlajit/mlajit.h"
#include "src/base/log.h"
#include "src/cache/kernel_cache.h"
#include "src/cache/pins.h"
#include "src/cache/sha256.h"

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
  mlajit_free(json);
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
    char* json = nullptr;
    ASSERT_EQ(mlajit_cache_list_json(dst, &json), MLAJIT_STATUS_OK);
    EXPECT_TRUE(absl::StrContains(json, "\"entries\":[]")) << "nothing installed: " << json;
    mlajit_free(json);
    mlajit_cache_close(dst);
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
