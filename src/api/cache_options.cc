#include <cstddef>

#include "absl/strings/str_cat.h"
#include "src/api/c_api_internal.h"

namespace mlajit::api_internal {

absl::StatusOr<cache::CacheOptions> ResolveCacheOptions(const mlajit_cache_options_t* o,
                                                        absl::string_view caller) {
  cache::CacheOptions opts = cache::CacheOptions::FromEnvironment();
  if (o == nullptr) return opts;
  // Callers built before pins_file existed pass the shorter struct: accepted,
  // with the newer fields left at their defaults.
  constexpr size_t kFirstSize = offsetof(mlajit_cache_options_t, pins_file);
  if (o->struct_size < kFirstSize) {
    return absl::InvalidArgumentError(absl::StrCat(
        caller, ": options->struct_size=", o->struct_size, ": expected sizeof(mlajit_cache_options_t)=",
        sizeof(mlajit_cache_options_t), " (use MLAJIT_CACHE_OPTIONS_INIT)"));
  }
  const bool has_pins = o->struct_size >= offsetof(mlajit_cache_options_t, pins_file) + sizeof(o->pins_file);
  if (o->cache_dir != nullptr) {
    if (o->cache_dir[0] == '\0') {
      return absl::InvalidArgumentError(
          absl::StrCat(caller, ": options->cache_dir=\"\": expected a folder path or NULL"));
    }
    opts.cache_dir = o->cache_dir;
  }
  if (o->prebuilt_dir != nullptr) opts.prebuilt_dir = o->prebuilt_dir;
  if (o->memory_only) opts.memory_only = true;
  if (o->disable_jit) opts.disable_jit = true;
  if (o->save_source) opts.save_source = true;
  if (o->trust_cache_dir) opts.trust_cache_dir = true;
  if (o->max_bytes != 0) opts.max_bytes = o->max_bytes;
  if (o->record_manifest != nullptr) opts.record_manifest = o->record_manifest;
  if (has_pins && o->pins_file != nullptr) {
    if (o->pins_file[0] == '\0') {
      return absl::InvalidArgumentError(
          absl::StrCat(caller, ": options->pins_file=\"\": expected a file path or NULL"));
    }
    opts.pins_file = o->pins_file;
  }
  return opts;
}

}  // namespace mlajit::api_internal
