#include "src/cache/options.h"

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "src/base/log.h"
#include "src/cache/fs_util.h"

#ifndef MLAJIT_CACHE_LIBRARY_VERSION
#define MLAJIT_CACHE_LIBRARY_VERSION "0.1.0"
#endif

namespace mlajit::cache {
namespace cache_internal {
namespace {

bool NonEmpty(const char* v) { return v != nullptr && *v != '\0'; }

bool BoolVar(const EnvLookup& getenv, const char* name) {
  const char* v = getenv(name);
  if (v == nullptr) return false;
  std::optional<bool> b = ParseBool(v);
  if (!b.has_value()) {
    MLAJIT_LOG_WARN(name, "=\"", v, "\": expected 1/true/yes/on or 0/false/no/off; using 0");
    return false;
  }
  return *b;
}

}  // namespace

std::optional<bool> ParseBool(absl::string_view s) {
  std::string v = absl::AsciiStrToLower(absl::StripAsciiWhitespace(s));
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v.empty() || v == "0" || v == "false" || v == "no" || v == "off") return false;
  return std::nullopt;
}

std::optional<uint64_t> ParseByteSize(absl::string_view s) {
  std::string v = absl::AsciiStrToLower(absl::StripAsciiWhitespace(s));
  absl::string_view t = v;
  // "4GiB", "4GB", "4B": drop the unit, then read the multiplier letter.
  if (!absl::ConsumeSuffix(&t, "ib")) absl::ConsumeSuffix(&t, "b");
  int shift = 0;
  if (!t.empty()) {
    switch (t.back()) {
      case 'k': shift = 10; break;
      case 'm': shift = 20; break;
      case 'g': shift = 30; break;
      case 't': shift = 40; break;
      default: break;
    }
    if (shift != 0) t.remove_suffix(1);
  }
  uint64_t n;
  if (t.empty() || !absl::SimpleAtoi(t, &n) || t[0] == '-' || t[0] == '+') return std::nullopt;
  if (shift != 0 && n > (~uint64_t{0} >> shift)) return std::nullopt;
  return n << shift;
}

CacheOptions OptionsFromLookup(const EnvLookup& getenv) {
  CacheOptions o;
  if (const char* dir = getenv("MLAJIT_CACHE_DIR"); NonEmpty(dir)) {
    o.cache_dir = dir;
  } else if (const char* xdg = getenv("XDG_CACHE_HOME"); NonEmpty(xdg)) {
    o.cache_dir = JoinPath(xdg, "mlajit");
  } else if (const char* home = getenv("HOME"); NonEmpty(home)) {
    o.cache_dir = JoinPath(JoinPath(home, ".cache"), "mlajit");
  }
  if (const char* p = getenv("MLAJIT_CACHE_PREBUILT"); NonEmpty(p)) o.prebuilt_dir = p;
  o.disable_jit = BoolVar(getenv, "MLAJIT_DISABLE_JIT");
  o.save_source = BoolVar(getenv, "MLAJIT_SAVE_SOURCE");
  o.memory_only = BoolVar(getenv, "MLAJIT_CACHE_MEMORY_ONLY");
  o.trust_cache_dir = BoolVar(getenv, "MLAJIT_CACHE_TRUST_DIR");
  if (const char* m = getenv("MLAJIT_CACHE_MAX_BYTES"); NonEmpty(m)) {
    std::optional<uint64_t> n = ParseByteSize(m);
    if (n.has_value()) {
      o.max_bytes = *n;
    } else {
      MLAJIT_LOG_WARN("MLAJIT_CACHE_MAX_BYTES=\"", m,
                      "\": expected a byte count such as 4294967296, 512M or 4G; using ",
                      o.max_bytes);
    }
  }
  if (const char* r = getenv("MLAJIT_RECORD_MANIFEST"); NonEmpty(r)) o.record_manifest = r;
  if (const char* p = getenv("MLAJIT_CACHE_PINS"); NonEmpty(p)) o.pins_file = p;
  return o;
}

}  // namespace cache_internal

CacheOptions CacheOptions::FromEnvironment() {
  return cache_internal::OptionsFromLookup([](const char* name) { return std::getenv(name); });
}

std::string CacheOptions::LibraryVersion() { return MLAJIT_CACHE_LIBRARY_VERSION; }

}  // namespace mlajit::cache
