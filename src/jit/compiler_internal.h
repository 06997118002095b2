// Pieces shared by the compiler implementations and the key derivation: a
// streaming XXH3-64 over length-prefixed parts, for fingerprints that must not
// confuse ("ab","c") with ("a","bc").
//
//   Hasher h;  h.Add(name);  h.Add(contents);  std::string hex = h.Hex();
#ifndef MLAJIT_SRC_JIT_COMPILER_INTERNAL_H_
#define MLAJIT_SRC_JIT_COMPILER_INTERNAL_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace mlajit::jit::jit_internal {

class Hasher {
 public:
  Hasher();
  ~Hasher();
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;

  void Add(absl::string_view part);  // 8-byte length, then the bytes
  uint64_t Digest() const;
  std::string Hex() const;  // 16 lowercase hex digits

 private:
  void* state_;  // XXH3_state_t, kept out of this header
};

std::string Hash64Hex(absl::string_view data);

}  // namespace mlajit::jit::jit_internal

#endif  // MLAJIT_SRC_JIT_COMPILER_INTERNAL_H_
