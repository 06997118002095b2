// The cache key of a kernel: XXH3-128 (cache::KeyBuilder) over named,
// length-prefixed fields, in this order:
//   cache_format, library_version, template_name, arch, compiler (identity with
//   build), options, the compiler's extra inputs (e.g. cuda_include), source,
//   then header:<name> for every included template-tree header.
// Field names are stable: `jitcache explain` compares two entries by them.
//
//   KeyInputs in{&rendered, opts, "sm_90a", compiler->Identity(), compiler->ExtraKeyFields()};
//   DerivedKey k = DeriveKey(in);   // k.key.Hex(), k.fields
#ifndef MLAJIT_SRC_JIT_KEY_H_
#define MLAJIT_SRC_JIT_KEY_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "src/cache/kernel_cache.h"
#include "src/jit/renderer.h"

namespace mlajit::jit {

// "0.1.0": the version of this build, part of every key.
std::string LibraryVersion();

struct KeyInputs {
  const RenderedSource* source = nullptr;
  std::vector<std::string> options;
  std::string arch;
  std::string compiler_identity;
  std::vector<std::pair<std::string, std::string>> compiler_extra;
  std::string library_version = LibraryVersion();
  uint32_t cache_format_version = cache::kCacheFormatVersion;
};

struct DerivedKey {
  cache::CacheKey key;
  std::vector<cache::KeyField> fields;
};

DerivedKey DeriveKey(const KeyInputs& in);

}  // namespace mlajit::jit

#endif  // MLAJIT_SRC_JIT_KEY_H_
