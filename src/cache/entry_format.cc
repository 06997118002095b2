#include "src/cache/entry_format.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "src/cache/key.h"

namespace mlajit::cache::cache_internal {
namespace {

void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutString(std::string* out, absl::string_view s) {
  PutU32(out, static_cast<uint32_t>(s.size()));
  out->append(s.data(), s.size());
}
void SetU64(std::string* out, size_t offset, uint64_t v) {
  for (int i = 0; i < 8; ++i) (*out)[offset + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

uint64_t LoadU64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}
uint32_t LoadU32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

// Sequential bounds-checked reader over the metadata block.
class Reader {
 public:
  explicit Reader(absl::string_view data) : data_(data) {}
  bool U32(uint32_t* v) {
    if (data_.size() - pos_ < 4) return false;
    *v = LoadU32(data_.data() + pos_);
    pos_ += 4;
    return true;
  }
  bool U64(uint64_t* v) {
    if (data_.size() - pos_ < 8) return false;
    *v = LoadU64(data_.data() + pos_);
    pos_ += 8;
    return true;
  }
  bool String(std::string* s) {
    uint32_t n;
    if (!U32(&n) || n > data_.size() - pos_) return false;
    s->assign(data_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  size_t remaining() const { return data_.size() - pos_; }

 private:
  absl::string_view data_;
  size_t pos_ = 0;
};

absl::Status Bad(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("invalid cache entry: ", what));
}

}  // namespace

std::string SerializeEntry(const CacheKey& key, const EntryMetadata& metadata,
                           const std::vector<KeyField>& fields, absl::string_view payload) {
  std::string meta;
  PutString(&meta, metadata.template_name);
  PutString(&meta, metadata.arch);
  PutString(&meta, metadata.spec);
  PutString(&meta, metadata.compiler);
  PutString(&meta, metadata.library_version);
  uint64_t ms_bits;
  static_assert(sizeof(ms_bits) == sizeof(metadata.compile_ms));
  std::memcpy(&ms_bits, &metadata.compile_ms, sizeof(ms_bits));
  PutU64(&meta, ms_bits);
  PutU32(&meta, static_cast<uint32_t>(fields.size()));
  for (const KeyField& f : fields) {
    PutString(&meta, f.name);
    PutString(&meta, f.value_preview);
    PutString(&meta, f.value_hash);
  }

  std::string out;
  out.reserve(kEntryHeaderBytes + meta.size() + 8 + payload.size());
  out.append(kEntryMagic, sizeof(kEntryMagic));
  PutU32(&out, kCacheFormatVersion);
  PutU32(&out, 0);
  PutU64(&out, key.hi);
  PutU64(&out, key.lo);
  PutU64(&out, meta.size());
  PutU64(&out, payload.size());
  PutU64(&out, Hash64(payload));
  out += meta;
  PutU64(&out, 0);
  SetU64(&out, out.size() - 8, Hash64(absl::string_view(out.data(), out.size() - 8)));
  out.append(payload.data(), payload.size());
  return out;
}

namespace {

// Everything but copying the payload out; *payload_offset is where it starts.
absl::StatusOr<CacheEntry> ParseImpl(absl::string_view bytes, const CacheKey* expected_key,
                                     ParseMode mode, size_t* payload_offset) {
  if (bytes.size() < kEntryHeaderBytes + 8) {
    return Bad(absl::StrCat(bytes.size(), " bytes, shorter than the ", kEntryHeaderBytes + 8,
                            "-byte minimum (truncated)"));
  }
  const char* p = bytes.data();
  if (std::memcmp(p, kEntryMagic, sizeof(kEntryMagic)) != 0) return Bad("bad magic");
  uint32_t version = LoadU32(p + 8);
  if (version != kCacheFormatVersion) {
    return Bad(absl::StrCat("format version ", version, ", expected ", kCacheFormatVersion));
  }
  CacheEntry e;
  e.key.hi = LoadU64(p + 16);
  e.key.lo = LoadU64(p + 24);
  uint64_t meta_size = LoadU64(p + 32);
  uint64_t payload_size = LoadU64(p + 40);
  uint64_t payload_hash = LoadU64(p + 48);
  if (meta_size > kMaxMetadataBytes || payload_size > kMaxPayloadBytes) {
    return Bad(absl::StrCat("metadata size ", meta_size, " / payload size ", payload_size,
                            " beyond the limits ", kMaxMetadataBytes, " / ", kMaxPayloadBytes));
  }
  // Both sizes are bounded above, so this sum cannot overflow.
  const uint64_t expected_size = kEntryHeaderBytes + meta_size + 8 + payload_size;
  if (bytes.size() != expected_size) {
    return Bad(absl::StrCat(bytes.size(), " bytes, header says ", expected_size,
                            bytes.size() < expected_size ? " (truncated)" : " (trailing bytes)"));
  }
  const size_t meta_end = kEntryHeaderBytes + meta_size;
  uint64_t stored_meta_hash = LoadU64(p + meta_end);
  if (Hash64(bytes.substr(0, meta_end)) != stored_meta_hash) {
    return Bad("header/metadata checksum mismatch (corrupted)");
  }
  if (expected_key != nullptr && !(e.key == *expected_key)) {
    return Bad(absl::StrCat("holds key ", e.key.Hex(), ", expected ", expected_key->Hex(),
                            " (a foreign file under this name)"));
  }

  Reader r(bytes.substr(kEntryHeaderBytes, meta_size));
  uint64_t ms_bits = 0;
  uint32_t nfields = 0;
  if (!r.String(&e.metadata.template_name) || !r.String(&e.metadata.arch) ||
      !r.String(&e.metadata.spec) || !r.String(&e.metadata.compiler) ||
      !r.String(&e.metadata.library_version) || !r.U64(&ms_bits) || !r.U32(&nfields)) {
    return Bad("metadata block too short");
  }
  std::memcpy(&e.metadata.compile_ms, &ms_bits, sizeof(ms_bits));
  // Each field needs at least three 4-byte lengths; bounds the reservation.
  if (nfields > r.remaining() / 12) {
    return Bad(absl::StrCat("field count ", nfields, " does not fit in ", r.remaining(),
                            " metadata bytes"));
  }
  e.fields.resize(nfields);
  for (KeyField& f : e.fields) {
    if (!r.String(&f.name) || !r.String(&f.value_preview) || !r.String(&f.value_hash)) {
      return Bad("key field list too short");
    }
  }
  if (r.remaining() != 0) {
    return Bad(absl::StrCat(r.remaining(), " unexpected bytes after the key fields"));
  }
  if (mode == ParseMode::kFull) {
    absl::string_view payload = bytes.substr(meta_end + 8);
    if (Hash64(payload) != payload_hash) {
      return Bad(absl::StrCat("payload checksum ", Hash64Hex(payload), ", header says ",
                              U64Hex(payload_hash), " (corrupted)"));
    }
  }
  *payload_offset = meta_end + 8;
  return e;
}

}  // namespace

absl::StatusOr<CacheEntry> ParseEntry(absl::string_view bytes, const CacheKey* expected_key,
                                      ParseMode mode) {
  size_t offset = 0;
  absl::StatusOr<CacheEntry> e = ParseImpl(bytes, expected_key, mode, &offset);
  if (e.ok() && mode == ParseMode::kFull) {
    absl::string_view payload = bytes.substr(offset);
    e->payload.assign(payload.data(), payload.size());
  }
  return e;
}

absl::StatusOr<CacheEntry> ParseEntry(std::string&& bytes, const CacheKey* expected_key,
                                      ParseMode mode) {
  size_t offset = 0;
  absl::StatusOr<CacheEntry> e = ParseImpl(bytes, expected_key, mode, &offset);
  if (e.ok() && mode == ParseMode::kFull) {
    bytes.erase(0, offset);  // in place: no new allocation
    e->payload = std::move(bytes);
  }
  return e;
}

}  // namespace mlajit::cache::cache_internal
