// Fuzzes the cache entry reader (src/cache/entry_format.h): the parser of a file
// that any process sharing the cache folder, or a bad disk, may have written.
//
// Input: one mode byte, then the file. With the mode's low bit set the target
// first rewrites both XXH3 checksums to match, so that mutations reach the
// metadata parser instead of stopping at "checksum mismatch"; with it clear the
// bytes are parsed as they are (checksum handling itself is fuzzed).
//
// Oracle: parsing never crashes; an entry that parses survives a serialize and
// parse round trip unchanged; kMetadataOnly accepts whatever kFull accepts.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "fuzz/fuzz_check.h"
#include "src/cache/entry_format.h"
#include "src/cache/key.h"

namespace {

using mlajit::cache::CacheEntry;
using mlajit::cache::CacheKey;
using mlajit::cache::KeyField;
using mlajit::cache::cache_internal::Hash64;
using mlajit::cache::cache_internal::kEntryHeaderBytes;
using mlajit::cache::cache_internal::ParseEntry;
using mlajit::cache::cache_internal::ParseMode;

uint64_t LoadU64(const std::string& s, size_t at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + i]);
  return v;
}
void StoreU64(std::string* s, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) (*s)[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

// Makes the checksums agree with the bytes where the header's sizes fit the
// input; leaves the input alone otherwise (the parser must reject it anyway).
void FixChecksums(std::string* f) {
  if (f->size() < kEntryHeaderBytes + 8) return;
  const uint64_t meta = LoadU64(*f, 32);
  if (meta > f->size() - kEntryHeaderBytes - 8) return;
  const size_t meta_end = kEntryHeaderBytes + meta;
  StoreU64(f, 48, Hash64(absl::string_view(*f).substr(meta_end + 8)));
  StoreU64(f, meta_end, Hash64(absl::string_view(*f).substr(0, meta_end)));
}

bool SameFields(const std::vector<KeyField>& a, const std::vector<KeyField>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || a[i].value_preview != b[i].value_preview ||
        a[i].value_hash != b[i].value_hash) {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string file(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) FixChecksums(&file);

  absl::StatusOr<CacheEntry> meta_only = ParseEntry(file, nullptr, ParseMode::kMetadataOnly);
  absl::StatusOr<CacheEntry> full = ParseEntry(file, nullptr, ParseMode::kFull);
  if (!full.ok()) {
    FUZZ_CHECK(full.status().code() == absl::StatusCode::kDataLoss);
    return 0;
  }
  FUZZ_CHECK(meta_only.ok());
  FUZZ_CHECK(meta_only->payload.empty());

  // A key that differs is a foreign file, never this entry.
  CacheKey other = full->key;
  other.lo ^= 1;
  FUZZ_CHECK(!ParseEntry(file, &other, ParseMode::kMetadataOnly).ok());
  // The rvalue overload (the disk tier's) agrees with the view one.
  absl::StatusOr<CacheEntry> moved = ParseEntry(std::string(file), &full->key, ParseMode::kFull);
  FUZZ_CHECK(moved.ok() && moved->payload == full->payload);

  const CacheEntry& e = *full;
  std::string again = mlajit::cache::cache_internal::SerializeEntry(e.key, e.metadata, e.fields,
                                                                   e.payload);
  absl::StatusOr<CacheEntry> r = ParseEntry(again, &e.key, ParseMode::kFull);
  FUZZ_CHECK(r.ok());
  FUZZ_CHECK(r->payload == e.payload);
  FUZZ_CHECK(SameFields(r->fields, e.fields));
  FUZZ_CHECK(r->metadata.template_name == e.metadata.template_name &&
             r->metadata.arch == e.metadata.arch && r->metadata.spec == e.metadata.spec &&
             r->metadata.compiler == e.metadata.compiler &&
             r->metadata.library_version == e.metadata.library_version);
  // Bitwise: the f64 field may hold any bit pattern, NaNs included.
  FUZZ_CHECK(std::memcmp(&r->metadata.compile_ms, &e.metadata.compile_ms, sizeof(double)) == 0);
  return 0;
}
