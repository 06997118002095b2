// Fuzzes the ELF symbol reader (src/cache/elf_functions.h) that `jitcache show`
// runs on a cache entry's binary: bytes any process sharing the cache folder,
// or a bad disk, may have written.
//
// Oracle: no crash and no read past the input (ASan); errors are
// kInvalidArgument; a listed function's name and size come from inside the
// input, so there are no more functions than 24-byte symbols in it and their
// names (each with its terminator) fit in it end to end, and the list is
// ordered by name.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_check.h"
#include "src/cache/elf_functions.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using mlajit::cache::ElfFunction;
  const absl::string_view image(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::vector<ElfFunction>> fns = mlajit::cache::ListElfFunctions(image);
  if (!fns.ok()) {
    FUZZ_CHECK(fns.status().code() == absl::StatusCode::kInvalidArgument);
    return 0;
  }
  FUZZ_CHECK(fns->size() <= size / 24);
  FUZZ_CHECK(
      std::is_sorted(fns->begin(), fns->end(),
                     [](const ElfFunction& a, const ElfFunction& b) { return a.name < b.name; }));
  size_t name_bytes = 0;
  for (const ElfFunction& f : *fns) name_bytes += f.name.size() + 1;
  FUZZ_CHECK(name_bytes <= size);
  return 0;
}
