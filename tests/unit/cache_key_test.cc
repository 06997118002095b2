// Key derivation, the entry file format and option parsing of src/cache.
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "src/cache/entry_format.h"
#include "src/cache/key.h"
#include "src/cache/kernel_cache.h"
#include "src/cache/options.h"

namespace mlajit::cache {
namespace {

using cache_internal::ParseEntry;
using cache_internal::ParseMode;
using cache_internal::SerializeEntry;

using Fields = std::vector<std::pair<std::string, std::string>>;

Fields SampleFields() {
  return {{"source", std::string(300, 's') + "template body"},
          {"header:mla_common.cuh", "#pragma once\nconstexpr int D = 576;\n"},
          {"options", "-O3 -std=c++17"},
          {"arch", "sm_90a"},
          {"compiler", "nvrtc 12.8 build 35404655"},
          {"library_version", "0.1.0"},
          {"format_version", "1"}};
}

CacheKey KeyOf(const Fields& fields) {
  KeyBuilder kb;
  for (const auto& [n, v] : fields) kb.Add(n, v);
  return kb.Finish();
}

// When the test binary is started with this variable set it only writes the key
// of SampleFields() to the named file and exits: a fresh process for the
// determinism test, with a new address space layout and a new heap.
constexpr char kChildOutVar[] = "MLAJIT_CACHE_KEY_TEST_CHILD_OUT";
const bool kIsKeyChild = [] {
  const char* out = std::getenv(kChildOutVar);
  if (out == nullptr) return false;
  std::string hex = KeyOf(SampleFields()).Hex();
  FILE* f = std::fopen(out, "w");
  int rc = 1;
  if (f != nullptr) {
    rc = std::fputs(hex.c_str(), f) >= 0 ? 0 : 1;
    rc |= std::fclose(f) != 0;
  }
  _exit(rc);
}();

std::string KeyFromFreshProcess(const std::string& out_path) {
  pid_t pid = fork();
  if (pid == 0) {
    setenv(kChildOutVar, out_path.c_str(), 1);
    execl("/proc/self/exe", "cache_key_child", static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  std::ifstream in(out_path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(CacheKey, SameInFreshProcesses) {
  ASSERT_FALSE(kIsKeyChild);
  char dir[] = "/tmp/mlajit_cache_key.XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string a = KeyFromFreshProcess(std::string(dir) + "/a");
  std::string b = KeyFromFreshProcess(std::string(dir) + "/b");
  std::remove((std::string(dir) + "/a").c_str());
  std::remove((std::string(dir) + "/b").c_str());
  rmdir(dir);
  EXPECT_EQ(a.size(), 32u);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, KeyOf(SampleFields()).Hex());
}

TEST(CacheKey, MatchesDocumentedDerivation) {
  // XXH3-128 of (u64le len, name, u64le len, value)*: recomputed here
  // independently of KeyBuilder.
  std::string buf;
  auto put = [&buf](const std::string& s) {
    uint64_t n = s.size();
    for (int i = 0; i < 8; ++i) buf.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
    buf += s;
  };
  for (const auto& [n, v] : SampleFields()) {
    put(n);
    put(v);
  }
  XXH128_hash_t h = XXH3_128bits(buf.data(), buf.size());
  CacheKey k = KeyOf(SampleFields());
  EXPECT_EQ(k.hi, h.high64);
  EXPECT_EQ(k.lo, h.low64);
  // Pinned: a change here silently invalidates every deployed cache.
  EXPECT_EQ(KeyOf({{"a", "b"}}).Hex(), "4e8071d3974d16754bcb794c7d699bd6");
}

TEST(CacheKey, EveryFieldNameAndValueMatters) {
  const Fields base = SampleFields();
  std::set<std::string> seen = {KeyOf(base).Hex()};
  auto expect_new = [&seen](const Fields& f, const std::string& what) {
    EXPECT_TRUE(seen.insert(KeyOf(f).Hex()).second) << what << " did not change the key";
  };
  for (size_t i = 0; i < base.size(); ++i) {
    Fields f = base;
    f[i].first += "x";
    expect_new(f, "name of field " + f[i].first);
    f = base;
    f[i].second += "x";
    expect_new(f, "value of field " + f[i].first);
    f = base;
    f[i].second.back() ^= 1;  // one bit, same length
    expect_new(f, "one bit of field " + f[i].first);
    f = base;
    f.erase(f.begin() + static_cast<long>(i));
    expect_new(f, "dropping field " + base[i].first);
    if (i + 1 < base.size()) {
      f = base;
      std::swap(f[i], f[i + 1]);
      expect_new(f, "swapping fields " + base[i].first);
    }
  }
  // Boundaries are length-prefixed, so moving bytes across one changes the key.
  EXPECT_NE(KeyOf({{"ab", "c"}}), KeyOf({{"a", "bc"}}));
  EXPECT_NE(KeyOf({{"a", "b"}, {"c", "d"}}), KeyOf({{"a", "b\x01c\x01d"}}));
  EXPECT_NE(KeyOf({{"", "a"}}), KeyOf({{"a", ""}}));
  EXPECT_NE(KeyOf({{"a", ""}, {"", ""}}), KeyOf({{"a", ""}}));
  EXPECT_NE(KeyOf({}), KeyOf({{"", ""}}));
}

TEST(CacheKey, HexRoundTripAndErrors) {
  CacheKey k = KeyOf(SampleFields());
  std::string hex = k.Hex();
  ASSERT_EQ(hex.size(), 32u);
  EXPECT_EQ(hex.find_first_not_of("0123456789abcdef"), std::string::npos);
  absl::StatusOr<CacheKey> back = CacheKey::FromHex(hex);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, k);
  for (std::string bad : {std::string("abc"), hex + "0", "G" + hex.substr(1),
                          "A" + hex.substr(1), std::string(32, ' ')}) {
    absl::StatusOr<CacheKey> r = CacheKey::FromHex(bad);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("expected 32 lowercase hex digits"),
              absl::string_view::npos);
  }
}

TEST(CacheKey, FieldsCarryPreviewAndHash) {
  KeyBuilder kb;
  kb.Add("arch", "sm_90a");
  kb.Add("source", std::string(97, 'x'));
  kb.Add("exact", std::string(96, 'y'));
  ASSERT_EQ(kb.fields().size(), 3u);
  EXPECT_EQ(kb.fields()[0].name, "arch");
  EXPECT_EQ(kb.fields()[0].value_preview, "sm_90a");
  EXPECT_EQ(kb.fields()[0].value_hash, cache_internal::U64Hex(XXH3_64bits("sm_90a", 6)));
  EXPECT_EQ(kb.fields()[1].value_preview, "<97 bytes>");
  EXPECT_EQ(kb.fields()[2].value_preview, std::string(96, 'y'));
  EXPECT_EQ(kb.fields()[1].value_hash.size(), 16u);
}

// ---- entry format ----

struct Sample {
  CacheKey key;
  EntryMetadata meta;
  std::vector<KeyField> fields;
  std::string payload;
  std::string bytes;
};

Sample MakeSample(size_t payload_bytes = 64) {
  Sample s;
  KeyBuilder kb;
  for (const auto& [n, v] : SampleFields()) kb.Add(n, v);
  s.key = kb.Finish();
  s.fields = kb.fields();
  s.meta.template_name = "mla_decode";
  s.meta.arch = "sm_90a";
  s.meta.spec = R"({"num_heads":16,"kv_format":"fp8_e4m3"})";
  s.meta.compiler = "nvrtc 12.8";
  s.meta.library_version = "0.1.0";
  s.meta.compile_ms = 1234.5;
  for (size_t i = 0; i < payload_bytes; ++i) s.payload.push_back(static_cast<char>(i * 7 + 1));
  s.bytes = SerializeEntry(s.key, s.meta, s.fields, s.payload);
  return s;
}

void PutU64At(std::string* b, size_t off, uint64_t v) {
  for (int i = 0; i < 8; ++i) (*b)[off + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
void PutU32At(std::string* b, size_t off, uint32_t v) {
  for (int i = 0; i < 4; ++i) (*b)[off + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint64_t GetU64At(const std::string& b, size_t off) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[off + i]);
  return v;
}
// Recomputes the header/metadata checksum so that a tampered length reaches the
// metadata parser instead of being stopped by the checksum.
void FixMetaChecksum(std::string* b) {
  uint64_t meta = GetU64At(*b, 32);
  size_t end = cache_internal::kEntryHeaderBytes + meta;
  if (end + 8 > b->size()) return;
  PutU64At(b, end, cache_internal::Hash64(absl::string_view(*b).substr(0, end)));
}

TEST(CacheEntryFormat, RoundTrip) {
  Sample s = MakeSample();
  absl::StatusOr<CacheEntry> e = ParseEntry(s.bytes, &s.key, ParseMode::kFull);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->key, s.key);
  EXPECT_EQ(e->payload, s.payload);
  EXPECT_EQ(e->metadata.template_name, "mla_decode");
  EXPECT_EQ(e->metadata.arch, "sm_90a");
  EXPECT_EQ(e->metadata.spec, s.meta.spec);
  EXPECT_EQ(e->metadata.compiler, "nvrtc 12.8");
  EXPECT_EQ(e->metadata.library_version, "0.1.0");
  EXPECT_EQ(e->metadata.compile_ms, 1234.5);
  ASSERT_EQ(e->fields.size(), s.fields.size());
  for (size_t i = 0; i < s.fields.size(); ++i) {
    EXPECT_EQ(e->fields[i].name, s.fields[i].name);
    EXPECT_EQ(e->fields[i].value_preview, s.fields[i].value_preview);
    EXPECT_EQ(e->fields[i].value_hash, s.fields[i].value_hash);
  }
  EXPECT_EQ(std::memcmp(s.bytes.data(), "MLAJITCE", 8), 0);
  EXPECT_EQ(static_cast<unsigned char>(s.bytes[8]), kCacheFormatVersion);  // little-endian

  absl::StatusOr<CacheEntry> m = ParseEntry(s.bytes, &s.key, ParseMode::kMetadataOnly);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->payload.empty());
  EXPECT_EQ(m->metadata.spec, s.meta.spec);

  // Empty payload and no fields are legal.
  std::string empty = SerializeEntry(s.key, EntryMetadata{}, {}, "");
  EXPECT_TRUE(ParseEntry(empty, &s.key, ParseMode::kFull).ok());
}

TEST(CacheEntryFormat, EverySingleByteFlipIsDetected) {
  Sample s = MakeSample(40);
  for (size_t i = 0; i < s.bytes.size(); ++i) {
    for (unsigned char mask : {0x01, 0x80}) {
      std::string b = s.bytes;
      b[i] = static_cast<char>(b[i] ^ mask);
      absl::StatusOr<CacheEntry> e = ParseEntry(b, &s.key, ParseMode::kFull);
      ASSERT_FALSE(e.ok()) << "flip at byte " << i << " not detected";
      EXPECT_EQ(e.status().code(), absl::StatusCode::kDataLoss);
    }
  }
}

TEST(CacheEntryFormat, EveryTruncationIsDetected) {
  Sample s = MakeSample(40);
  for (size_t n = 0; n < s.bytes.size(); ++n) {
    absl::StatusOr<CacheEntry> e = ParseEntry(s.bytes.substr(0, n), &s.key, ParseMode::kFull);
    ASSERT_FALSE(e.ok()) << "truncation to " << n;
    EXPECT_EQ(e.status().code(), absl::StatusCode::kDataLoss);
  }
  absl::StatusOr<CacheEntry> longer = ParseEntry(s.bytes + "x", &s.key, ParseMode::kFull);
  EXPECT_NE(longer.status().message().find("trailing"), absl::string_view::npos)
      << longer.status();
}

TEST(CacheEntryFormat, NamesTheProblem) {
  Sample s = MakeSample();
  std::string b = s.bytes;
  PutU32At(&b, 8, kCacheFormatVersion + 1);
  EXPECT_NE(ParseEntry(b, &s.key, ParseMode::kFull).status().message().find("format version"),
            absl::string_view::npos);
  CacheKey other = s.key;
  other.lo ^= 1;
  absl::Status foreign = ParseEntry(s.bytes, &other, ParseMode::kFull).status();
  EXPECT_NE(foreign.message().find("holds key " + s.key.Hex()), absl::string_view::npos)
      << foreign;
  EXPECT_NE(foreign.message().find(other.Hex()), absl::string_view::npos);
  b = s.bytes;
  b.back() ^= 0x10;
  EXPECT_NE(ParseEntry(b, &s.key, ParseMode::kFull).status().message().find("payload checksum"),
            absl::string_view::npos);
  EXPECT_TRUE(ParseEntry(b, &s.key, ParseMode::kMetadataOnly).ok());  // payload not checked
  b = s.bytes;
  b[0] = 'X';
  EXPECT_NE(ParseEntry(b, &s.key, ParseMode::kFull).status().message().find("magic"),
            absl::string_view::npos);
}

TEST(CacheEntryFormat, HostileLengthsAreRejectedWithoutAllocating) {
  Sample s = MakeSample();
  // Sizes in the header far beyond the limits.
  for (size_t off : {32u, 40u}) {
    std::string b = s.bytes;
    PutU64At(&b, off, ~uint64_t{0});
    FixMetaChecksum(&b);
    EXPECT_EQ(ParseEntry(b, &s.key, ParseMode::kFull).status().code(),
              absl::StatusCode::kDataLoss);
  }
  // A string length and a field count beyond the metadata block, with a valid
  // checksum so that the metadata parser itself has to catch them.
  const size_t meta0 = cache_internal::kEntryHeaderBytes;
  std::string b = s.bytes;
  PutU32At(&b, meta0, 0xFFFFFFF0u);  // template_name length
  FixMetaChecksum(&b);
  EXPECT_NE(ParseEntry(b, &s.key, ParseMode::kFull).status().message().find("too short"),
            absl::string_view::npos);
  // Field count sits after five strings and the f64.
  size_t off = meta0;
  for (int i = 0; i < 5; ++i) {
    uint32_t n = 0;
    for (int j = 3; j >= 0; --j) n = (n << 8) | static_cast<unsigned char>(s.bytes[off + j]);
    off += 4 + n;
  }
  off += 8;
  b = s.bytes;
  PutU32At(&b, off, 0xFFFFFFFFu);
  FixMetaChecksum(&b);
  EXPECT_NE(ParseEntry(b, &s.key, ParseMode::kFull).status().message().find("field count"),
            absl::string_view::npos);
}

TEST(CacheEntryFormat, RandomMutationsNeverCrash) {
  Sample s = MakeSample(200);
  std::mt19937 rng(12345);
  int accepted = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string b = s.bytes;
    int edits = 1 + static_cast<int>(rng() % 8);
    for (int e = 0; e < edits; ++e) {
      switch (rng() % 4) {  // b.size() >= 4 here
        case 0:
          b[rng() % b.size()] = static_cast<char>(rng());
          break;
        case 1:
          b.resize(4 + rng() % (b.size() - 3));
          break;
        case 2:
          b.insert(rng() % b.size(), 1, static_cast<char>(rng()));
          break;
        case 3:  // plant a random length anywhere
          PutU32At(&b, rng() % (b.size() - 3), static_cast<uint32_t>(rng()));
          break;
      }
    }
    if (rng() % 2) FixMetaChecksum(&b);
    absl::StatusOr<CacheEntry> e = ParseEntry(b, nullptr, ParseMode::kFull);
    if (e.ok()) {
      ++accepted;
      // Whatever is accepted is self-consistent.
      EXPECT_TRUE(ParseEntry(SerializeEntry(e->key, e->metadata, e->fields, e->payload),
                             &e->key, ParseMode::kFull)
                      .ok());
    }
  }
  EXPECT_LT(accepted, 3000);
}

// ---- options ----

TEST(CacheOptionsEnv, DirectoryPrecedence) {
  using cache_internal::OptionsFromLookup;
  auto env = [](std::vector<std::pair<std::string, std::string>> vars) {
    return [vars](const char* name) -> const char* {
      for (const auto& [k, v] : vars) {
        if (k == name) return v.c_str();
      }
      return nullptr;
    };
  };
  EXPECT_EQ(OptionsFromLookup(env({{"MLAJIT_CACHE_DIR", "/c"}, {"XDG_CACHE_HOME", "/x"},
                                   {"HOME", "/h"}})).cache_dir, "/c");
  EXPECT_EQ(OptionsFromLookup(env({{"XDG_CACHE_HOME", "/x"}, {"HOME", "/h"}})).cache_dir,
            "/x/mlajit");
  EXPECT_EQ(OptionsFromLookup(env({{"MLAJIT_CACHE_DIR", ""}, {"HOME", "/h"}})).cache_dir,
            "/h/.cache/mlajit");
  EXPECT_EQ(OptionsFromLookup(env({})).cache_dir, "");

  CacheOptions o = OptionsFromLookup(env({{"HOME", "/h"},
                                          {"MLAJIT_CACHE_PREBUILT", "/opt/kernels"},
                                          {"MLAJIT_DISABLE_JIT", "1"},
                                          {"MLAJIT_SAVE_SOURCE", "true"},
                                          {"MLAJIT_CACHE_MAX_BYTES", "512M"},
                                          {"MLAJIT_RECORD_MANIFEST", "/tmp/m.jsonl"},
                                          {"MLAJIT_CACHE_TRUST_DIR", "yes"}}));
  EXPECT_EQ(o.prebuilt_dir, "/opt/kernels");
  EXPECT_TRUE(o.disable_jit);
  EXPECT_TRUE(o.save_source);
  EXPECT_TRUE(o.trust_cache_dir);
  EXPECT_FALSE(o.memory_only);
  EXPECT_EQ(o.max_bytes, uint64_t{512} << 20);
  EXPECT_EQ(o.record_manifest, "/tmp/m.jsonl");
  EXPECT_EQ(o.library_version, CacheOptions::LibraryVersion());

  CacheOptions d = OptionsFromLookup(env({{"MLAJIT_DISABLE_JIT", "0"},
                                          {"MLAJIT_CACHE_MAX_BYTES", "lots"}}));
  EXPECT_FALSE(d.disable_jit);
  EXPECT_EQ(d.max_bytes, CacheOptions().max_bytes);  // bad value: default kept
}

TEST(CacheOptionsEnv, ByteSizes) {
  using cache_internal::ParseByteSize;
  EXPECT_EQ(ParseByteSize("123"), 123u);
  EXPECT_EQ(ParseByteSize("4G"), uint64_t{4} << 30);
  EXPECT_EQ(ParseByteSize("4GiB"), uint64_t{4} << 30);
  EXPECT_EQ(ParseByteSize("10kb"), 10u << 10);
  EXPECT_EQ(ParseByteSize(" 7 "), 7u);
  EXPECT_EQ(ParseByteSize("-1"), std::nullopt);
  EXPECT_EQ(ParseByteSize("G"), std::nullopt);
  EXPECT_EQ(ParseByteSize("1.5G"), std::nullopt);
  EXPECT_EQ(ParseByteSize("99999999999999999999"), std::nullopt);
  EXPECT_EQ(ParseByteSize("17179869184T"), std::nullopt);  // overflows
}

}  // namespace
}  // namespace mlajit::cache
