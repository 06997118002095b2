// A dlopen'd shared library with typed symbol lookup, for the run-time
// compilers (the library links against neither NVRTC nor hiprtc).
//
//   MLAJIT_ASSIGN_OR_RETURN(DynamicLibrary lib, DynamicLibrary::OpenFirst(
//       {"libnvrtc.so.13", "libnvrtc.so.12"}, {"/usr/local/cuda/lib64"}));
//   auto* version = lib.Symbol<int (*)(int*, int*)>("nvrtcVersion");
#ifndef MLAJIT_SRC_JIT_DYNAMIC_LIBRARY_H_
#define MLAJIT_SRC_JIT_DYNAMIC_LIBRARY_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mlajit::jit::jit_internal {

class DynamicLibrary {
 public:
  DynamicLibrary() = default;
  DynamicLibrary(DynamicLibrary&& other) noexcept;
  DynamicLibrary& operator=(DynamicLibrary&& other) noexcept;
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;
  ~DynamicLibrary();

  // Tries each name with the default search path, then inside each extra folder;
  // the first one that opens and exports `required_symbol` wins.
  // kFailedPrecondition lists every attempt with its dlerror().
  static absl::StatusOr<DynamicLibrary> OpenFirst(const std::vector<std::string>& names,
                                                  const std::vector<std::string>& extra_dirs,
                                                  const char* required_symbol);

  void* RawSymbol(const char* name) const;
  template <typename Fn>
  Fn Symbol(const char* name) const {
    return reinterpret_cast<Fn>(RawSymbol(name));
  }
  // The resolved file of the library (via dladdr on required_symbol).
  const std::string& path() const { return path_; }

 private:
  void* handle_ = nullptr;
  std::string path_;
};

}  // namespace mlajit::jit::jit_internal

#endif  // MLAJIT_SRC_JIT_DYNAMIC_LIBRARY_H_
