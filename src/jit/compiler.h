// The run-time compilers behind one interface: NVRTC for sm_* targets and
// hiprtc for gfx* targets. Both are dlopen'd on first use, so the library has no
// link-time dependency on either and runs (and warms caches) without a GPU.
//
//   MLAJIT_ASSIGN_OR_RETURN(Compiler* c, CompilerForArch("sm_90a"));
//   MLAJIT_RETURN_IF_ERROR(c->CheckArch("sm_90a"));        // before any compile
//   std::vector<std::string> opts = c->Options("sm_90a");
//   MLAJIT_ASSIGN_OR_RETURN(CompiledBinary b, c->Compile(rendered, opts, "sm_90a"));
//
// Identity() names the compiler down to its build: the version, the build id
// where the library reports one, and a hash of the binary produced from a fixed
// probe source (compiled once per process). Two installs with one version number
// but different code generation therefore get different cache keys.
#ifndef MLAJIT_SRC_JIT_COMPILER_H_
#define MLAJIT_SRC_JIT_COMPILER_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/jit/renderer.h"

namespace mlajit::jit {

struct CompiledBinary {
  std::string binary;  // cubin (NVRTC) or code object (hiprtc)
  std::string log;     // compiler diagnostics of a successful compile (warnings)
  double compile_ms = 0;
};

class Compiler {
 public:
  virtual ~Compiler() = default;

  virtual std::string Name() const = 0;  // "nvrtc", "hiprtc"
  // "nvrtc 13.0 (V13.0.88, CL-36424714, probe 0123456789abcdef)"; fixed per process.
  virtual std::string Identity() const = 0;
  // OkStatus when this compiler can build `arch`; kUnimplemented otherwise. Must
  // pass before Compile: some hiprtc versions abort the process on unknown targets.
  virtual absl::Status CheckArch(absl::string_view arch) const = 0;
  // The options Compile should get for `arch` (they are part of the cache key).
  virtual std::vector<std::string> Options(absl::string_view arch) const = 0;
  // Inputs of the build outside the source and options (e.g. a fingerprint of the
  // toolkit include folder passed with -I), as (key field name, value).
  virtual std::vector<std::pair<std::string, std::string>> ExtraKeyFields() const { return {}; }
  // kInternal with the compiler log and the options when the source does not
  // compile; kUnimplemented for an unsupported arch (never passed through).
  virtual absl::StatusOr<CompiledBinary> Compile(const RenderedSource& source,
                                                 const std::vector<std::string>& options,
                                                 const std::string& arch) = 0;
};

// Process-wide instances, opened on first call (dlopen + identity probe); an
// open failure (kFailedPrecondition naming what was tried) is kept and returned
// to every later caller. Never destroyed. Thread-safe.
absl::StatusOr<Compiler*> NvrtcCompiler();
absl::StatusOr<Compiler*> HiprtcCompiler();
// NVRTC for "sm_*", hiprtc for "gfx*"; kUnimplemented for anything else.
absl::StatusOr<Compiler*> CompilerForArch(absl::string_view arch);

}  // namespace mlajit::jit

#endif  // MLAJIT_SRC_JIT_COMPILER_H_
