#include "src/cache/key.h"

#include <xxhash.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace mlajit::cache {
namespace cache_internal {
namespace {

// Little-endian, fixed width: the key must not depend on the host's byte order.
void AppendU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

bool ParseHex64(absl::string_view hex, uint64_t* out) {
  uint64_t v = 0;
  for (char c : hex) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else {
      return false;
    }
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  *out = v;
  return true;
}

}  // namespace

uint64_t Hash64(absl::string_view data) { return XXH3_64bits(data.data(), data.size()); }

std::string U64Hex(uint64_t v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[i] = kDigits[v & 0xf];
  return s;
}

std::string Hash64Hex(absl::string_view data) { return U64Hex(Hash64(data)); }

KeyField MakeKeyField(absl::string_view name, absl::string_view value) {
  KeyField f;
  f.name = std::string(name);
  f.value_preview = value.size() <= kMaxPreviewBytes ? std::string(value)
                                                     : absl::StrCat("<", value.size(), " bytes>");
  f.value_hash = Hash64Hex(value);
  return f;
}

}  // namespace cache_internal

std::string CacheKey::Hex() const {
  return cache_internal::U64Hex(hi) + cache_internal::U64Hex(lo);
}

absl::StatusOr<CacheKey> CacheKey::FromHex(absl::string_view hex) {
  CacheKey k;
  if (hex.size() != 32 || !cache_internal::ParseHex64(hex.substr(0, 16), &k.hi) ||
      !cache_internal::ParseHex64(hex.substr(16), &k.lo)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cache key \"", absl::CEscape(hex.substr(0, 64)), "\" (", hex.size(),
        " chars): expected 32 lowercase hex digits"));
  }
  return k;
}

void KeyBuilder::Add(absl::string_view name, absl::string_view value) {
  // Each part is prefixed with its length so that ("ab","c") and ("a","bc"), or a
  // name/value boundary moved by one byte, can never produce the same buffer.
  cache_internal::AppendU64(&buffer_, name.size());
  buffer_.append(name.data(), name.size());
  cache_internal::AppendU64(&buffer_, value.size());
  buffer_.append(value.data(), value.size());
  fields_.push_back(cache_internal::MakeKeyField(name, value));
}

CacheKey KeyBuilder::Finish() const {
  // Seedless XXH3-128 of the buffer only: no pointers, time or process state, so
  // every process and every run derives the same key.
  XXH128_hash_t h = XXH3_128bits(buffer_.data(), buffer_.size());
  CacheKey k;
  k.hi = h.high64;
  k.lo = h.low64;
  return k;
}

const std::vector<KeyField>& KeyBuilder::fields() const { return fields_; }

}  // namespace mlajit::cache
