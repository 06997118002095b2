#include "src/jit/compiler_internal.h"

#include <xxhash.h>

#include <cstdio>

namespace mlajit::jit::jit_internal {

Hasher::Hasher() : state_(XXH3_createState()) { XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_)); }
Hasher::~Hasher() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

void Hasher::Add(absl::string_view part) {
  unsigned char len[8];
  uint64_t n = part.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));  // little endian, always
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), len, sizeof(len));
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), part.data(), part.size());
}

uint64_t Hasher::Digest() const { return XXH3_64bits_digest(static_cast<XXH3_state_t*>(state_)); }

std::string Hasher::Hex() const {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(Digest()));
  return buf;
}

std::string Hash64Hex(absl::string_view data) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx",
                static_cast<unsigned long long>(XXH3_64bits(data.data(), data.size())));
  return buf;
}

}  // namespace mlajit::jit::jit_internal
