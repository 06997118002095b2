// Writes seed inputs for fuzz_cache_entry: entries produced by SerializeEntry
// (as the cache writes them), each prefixed with the fuzzer's mode byte.
//
//   make_cache_entry_seeds fuzz/corpus/cache_entry
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "src/cache/entry_format.h"
#include "src/cache/key.h"

namespace {

using mlajit::cache::CacheKey;
using mlajit::cache::EntryMetadata;
using mlajit::cache::KeyField;

bool Write(const std::string& path, char mode, const std::string& entry) {
  std::ofstream out(path, std::ios::binary);
  out.put(mode);
  out << entry;
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  EntryMetadata m;
  m.template_name = "mla_decode";
  m.arch = "sm_90a";
  m.spec = R"({"template":"mla_decode","num_heads":16})";
  m.compiler = "nvrtc 12.4";
  m.library_version = "0.1.0";
  m.compile_ms = 812.5;
  std::vector<KeyField> fields = {
      {"spec", m.spec, mlajit::cache::cache_internal::Hash64Hex(m.spec)},
      {"source", "<4096 bytes>", "0123456789abcdef"},
  };
  const CacheKey key{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  using mlajit::cache::cache_internal::SerializeEntry;
  bool ok = Write(dir + "/full", 1, SerializeEntry(key, m, fields, "\x7f" "ELF binary payload"));
  ok &= Write(dir + "/full_raw", 0, SerializeEntry(key, m, fields, "payload"));
  ok &= Write(dir + "/empty", 1, SerializeEntry(CacheKey{}, EntryMetadata{}, {}, ""));
  std::string truncated = SerializeEntry(key, m, fields, "payload");
  truncated.resize(truncated.size() / 2);
  ok &= Write(dir + "/truncated", 1, truncated);
  return ok ? 0 : 1;
}
