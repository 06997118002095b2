#include "src/jit/dynamic_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace mlajit::jit::jit_internal {

DynamicLibrary::DynamicLibrary(DynamicLibrary&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), path_(std::move(other.path_)) {}

DynamicLibrary& DynamicLibrary::operator=(DynamicLibrary&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) dlclose(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
    path_ = std::move(other.path_);
  }
  return *this;
}

DynamicLibrary::~DynamicLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

absl::StatusOr<DynamicLibrary> DynamicLibrary::OpenFirst(const std::vector<std::string>& names,
                                                         const std::vector<std::string>& extra_dirs,
                                                         const char* required_symbol) {
  std::vector<std::string> candidates = names;
  for (const std::string& dir : extra_dirs) {
    if (dir.empty()) continue;
    for (const std::string& n : names) candidates.push_back(absl::StrCat(dir, "/", n));
  }
  std::vector<std::string> tried;
  for (const std::string& c : candidates) {
    // RTLD_LOCAL: the compiler's symbols must not leak into the host's namespace.
    void* h = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      const char* err = dlerror();
      tried.push_back(absl::StrCat(c, " (", err != nullptr ? err : "not found", ")"));
      continue;
    }
    void* sym = dlsym(h, required_symbol);
    if (sym == nullptr) {
      tried.push_back(absl::StrCat(c, " (no ", required_symbol, ")"));
      dlclose(h);
      continue;
    }
    DynamicLibrary lib;
    lib.handle_ = h;
    Dl_info info;
    lib.path_ = (dladdr(sym, &info) != 0 && info.dli_fname != nullptr) ? info.dli_fname : c;
    if (char* real = realpath(lib.path_.c_str(), nullptr)) {
      lib.path_ = real;
      std::free(real);
    }
    return lib;
  }
  return absl::FailedPreconditionError(
      absl::StrCat("cannot load a library exporting ", required_symbol,
                   "; tried: ", absl::StrJoin(tried, "; ")));
}

void* DynamicLibrary::RawSymbol(const char* name) const {
  return handle_ == nullptr ? nullptr : dlsym(handle_, name);
}

}  // namespace mlajit::jit::jit_internal
