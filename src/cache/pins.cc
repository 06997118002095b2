#include "src/cache/pins.h"

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/cache/fs_util.h"
#include "src/cache/sha256.h"

namespace mlajit::cache::cache_internal {
namespace {

// A pins file is a short text; this only keeps a wrong path (a kernel image)
// from being read whole.
constexpr uint64_t kMaxPinsFileBytes = uint64_t{64} << 20;

bool IsLowerHex(absl::string_view s, size_t n) {
  return s.size() == n && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

}  // namespace

absl::StatusOr<PinSet> PinSet::Load(const std::string& path) {
  absl::StatusOr<FileData> data = ReadFileBounded(path, kMaxPinsFileBytes);
  if (!data.ok()) {
    return absl::Status(data.status().code(),
                        absl::StrCat("pins file ", path, ": ", data.status().message()));
  }
  return Parse(data->bytes, path);
}

absl::StatusOr<PinSet> PinSet::Parse(absl::string_view text, absl::string_view origin) {
  PinSet set;
  set.origin_ = std::string(origin);
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripTrailingAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::vector<absl::string_view> parts = absl::StrSplit(line, absl::MaxSplits(' ', 2));
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat(origin, " line ", line_no, ": ", why,
                                                     " (expected \"<32 hex key> <64 hex sha256>"
                                                     " [text]\")"));
    };
    if (parts.size() < 2) return bad(absl::StrCat("\"", line, "\" has fewer than two fields"));
    if (!IsLowerHex(parts[0], 32)) return bad(absl::StrCat("key \"", parts[0], "\" is malformed"));
    if (!IsLowerHex(parts[1], 64)) {
      return bad(absl::StrCat("sha256 \"", parts[1], "\" is malformed"));
    }
    absl::StatusOr<CacheKey> key = CacheKey::FromHex(parts[0]);
    if (!key.ok()) return bad(key.status().message());
    auto [it, inserted] = set.pins_.emplace(*key, std::string(parts[1]));
    if (!inserted && it->second != parts[1]) {
      return bad(absl::StrCat("key ", parts[0], " is pinned to two digests (", it->second,
                              " and ", parts[1], ")"));
    }
  }
  return set;
}

std::string PinSet::Check(const CacheKey& key, absl::string_view payload) const {
  auto it = pins_.find(key);
  if (it == pins_.end()) return absl::StrCat("key ", key.Hex(), " is not listed in ", origin_);
  std::string digest = Sha256Hex(payload);
  if (digest != it->second) {
    return absl::StrCat("key ", key.Hex(), " has payload sha256 ", digest, " but ", origin_,
                        " pins ", it->second);
  }
  return "";
}

}  // namespace mlajit::cache::cache_internal
