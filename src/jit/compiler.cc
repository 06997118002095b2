#include "src/jit/compiler.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace mlajit::jit {

absl::StatusOr<Compiler*> CompilerForArch(absl::string_view arch) {
  if (absl::StartsWith(arch, "sm_")) return NvrtcCompiler();
  if (absl::StartsWith(arch, "gfx")) return HiprtcCompiler();
  return absl::UnimplementedError(absl::StrCat(
      "arch=\"", arch, "\": no run-time compiler for it (sm_* uses NVRTC, gfx* hiprtc)"));
}

}  // namespace mlajit::jit
