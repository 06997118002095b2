// The on-disk form of one cache entry, independent of where it is stored.
//
// Layout (all integers little-endian):
//   0   char[8]  magic "MLAJITCE"
//   8   u32      format version (kCacheFormatVersion)
//   12  u32      reserved, 0
//   16  u64      key.hi
//   24  u64      key.lo
//   32  u64      M: size of the metadata block
//   40  u64      P: payload size
//   48  u64      XXH3-64 of the payload
//   56  metadata block (M bytes): template_name, arch, spec, compiler,
//       library_version as (u32 length, bytes); compile_ms as IEEE-754 f64 bits
//       (u64); u32 field count; per field name, value_preview, value_hash as
//       (u32 length, bytes)
//   56+M u64     XXH3-64 of bytes [0, 56+M): the header and metadata
//   64+M payload (P bytes); the file is exactly 64+M+P bytes.
//
// The parser never trusts a length: every one is checked against the bytes
// actually present before it is used, so it allocates at most the input size and
// a malformed file is an error, never a crash.
//
//   std::string bytes = SerializeEntry(entry);
//   absl::StatusOr<CacheEntry> e = ParseEntry(bytes, &expected_key, ParseMode::kFull);
#ifndef MLAJIT_SRC_CACHE_ENTRY_FORMAT_H_
#define MLAJIT_SRC_CACHE_ENTRY_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/cache/kernel_cache.h"

namespace mlajit::cache::cache_internal {

inline constexpr char kEntryMagic[8] = {'M', 'L', 'A', 'J', 'I', 'T', 'C', 'E'};
inline constexpr size_t kEntryHeaderBytes = 56;
// Bounds that make a hostile length harmless; real entries are far smaller.
inline constexpr uint64_t kMaxMetadataBytes = uint64_t{16} << 20;
inline constexpr uint64_t kMaxPayloadBytes = uint64_t{1} << 30;
inline constexpr uint64_t kMaxEntryFileBytes = kEntryHeaderBytes + kMaxMetadataBytes + 8 +
                                               kMaxPayloadBytes;

std::string SerializeEntry(const CacheKey& key, const EntryMetadata& metadata,
                           const std::vector<KeyField>& fields, absl::string_view payload);

enum class ParseMode {
  kFull,          // everything, payload checksum included
  kMetadataOnly,  // header and metadata checked; payload neither checked nor copied
};

// kDataLoss describing the first problem found ("bad magic", "format version 2,
// expected 1", "holds key X, expected Y", "payload checksum ..."). With
// expected_key null the key is not compared. source and path are left default.
absl::StatusOr<CacheEntry> ParseEntry(absl::string_view bytes, const CacheKey* expected_key,
                                      ParseMode mode);
// The same, taking the file contents: in kFull mode the payload reuses the
// buffer (no second copy of a large binary).
absl::StatusOr<CacheEntry> ParseEntry(std::string&& bytes, const CacheKey* expected_key,
                                      ParseMode mode);

}  // namespace mlajit::cache::cache_internal

#endif  // MLAJIT_SRC_CACHE_ENTRY_FORMAT_H_
