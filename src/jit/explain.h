// Why two cache entries have different keys: their key fields compared by name
// (hash and preview), plus the spec fields that differ in their metadata. Backs
// `jitcache explain KEY_A KEY_B`.
//
//   KeyExplanation x = ExplainEntries(*a, *b);
//   for (const FieldDifference& d : x.fields) Print(d.name, d.a_preview, d.b_preview);
#ifndef MLAJIT_SRC_JIT_EXPLAIN_H_
#define MLAJIT_SRC_JIT_EXPLAIN_H_

#include <string>
#include <vector>

#include "src/cache/kernel_cache.h"

namespace mlajit::jit {

struct FieldDifference {
  std::string name;
  bool in_a = true, in_b = true;   // a field present on one side only
  std::string a_preview, b_preview;
  std::string a_hash, b_hash;
};

struct SpecDifference {
  std::string field;  // "num_heads"
  std::string a, b;   // JSON values as text ("16", "\"sm_90a\""); "" when absent
};

struct KeyExplanation {
  std::vector<FieldDifference> fields;  // key fields, in a's order then b-only ones
  std::vector<SpecDifference> spec;     // empty when a spec is unreadable
  int same_fields = 0;
};

KeyExplanation ExplainEntries(const cache::CacheEntry& a, const cache::CacheEntry& b);

}  // namespace mlajit::jit

#endif  // MLAJIT_SRC_JIT_EXPLAIN_H_
