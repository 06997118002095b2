// The functions an ELF code object defines, read from its symbol table: the
// kernels (and device functions) of a cached binary, with the bytes of code
// each one takes. NVRTC's cubins and hiprtc's code objects are both ELF64.
//
// A cache entry's payload may have been written by any process sharing the
// folder, or damaged on disk, so the reader trusts no offset or count: each is
// checked against the bytes present, and a malformed image is an error.
//
//   absl::StatusOr<std::vector<ElfFunction>> fns = ListElfFunctions(payload);
//   for (const ElfFunction& f : *fns) printf("%s %llu\n", f.name.c_str(), f.code_bytes);
#ifndef MLAJIT_SRC_CACHE_ELF_FUNCTIONS_H_
#define MLAJIT_SRC_CACHE_ELF_FUNCTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mlajit::cache {

struct ElfFunction {
  std::string name;
  uint64_t code_bytes = 0;  // the symbol's size: its machine code
};

// Every defined function symbol (STT_FUNC, in a section) of a little-endian
// ELF64 image, ordered by name. kInvalidArgument when the image is not one or
// an offset, count or name runs past its end.
absl::StatusOr<std::vector<ElfFunction>> ListElfFunctions(absl::string_view image);

}  // namespace mlajit::cache

#endif  // MLAJIT_SRC_CACHE_ELF_FUNCTIONS_H_
