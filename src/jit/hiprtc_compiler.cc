// hiprtc behind the Compiler interface. hiprtc lives in libhiprtc.so (ROCm 6+)
// or inside libamdhip64.so (ROCm 5, e.g. Debian's libamdhip64-5); both are tried,
// also under $ROCM_PATH/lib and /opt/rocm/lib. It compiles without a GPU.
//
// HIP 5.2's hiprtc aborts the whole process when asked for a target its LLVM does
// not know (gfx942 there), so CheckArch consults the target list of the code
// object manager (comgr) that hiprtc uses, and Compile never passes anything else.
// Compiles are serialised: hiprtc of that era is not reliably thread-safe.
#include <algorithm>
#include <cstdlib>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "src/base/log.h"
#include "src/base/status_macros.h"
#include "src/jit/compiler.h"
#include "src/jit/compiler_internal.h"
#include "src/jit/dynamic_library.h"
#include "src/jit/rtc_compile.h"

namespace mlajit::jit {
namespace {

using jit_internal::DynamicLibrary;

struct HiprtcProgramOpaque;
using HiprtcProgram = HiprtcProgramOpaque*;
constexpr int kHiprtcSuccess = 0;
constexpr int kComgrSuccess = 0;

struct HiprtcApi {
  int (*CreateProgram)(HiprtcProgram*, const char*, const char*, int, const char**,
                       const char**);
  int (*DestroyProgram)(HiprtcProgram*);
  int (*CompileProgram)(HiprtcProgram, int, const char**);
  int (*GetCodeSize)(HiprtcProgram, size_t*);
  int (*GetCode)(HiprtcProgram, char*);
  int (*GetProgramLogSize)(HiprtcProgram, size_t*);
  int (*GetProgramLog)(HiprtcProgram, char*);
  const char* (*GetErrorString)(int);
};

constexpr char kProbeSource[] = R"(
extern "C" __global__ void mlajit_probe(float* out, const float* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __expf(in[i]) * 0.5f + in[n - 1 - i] * static_cast<float>(i);
}
)";

// Used only when comgr cannot be asked: targets every hiprtc we would load knows.
constexpr const char* kFallbackTargets[] = {"gfx908", "gfx90a"};

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

std::string DirOf(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

// "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5.2.21153" -> "5.2.21153".
std::string VersionFromFileName(const std::string& path) {
  size_t so = path.rfind(".so.");
  return so == std::string::npos ? "unknown" : path.substr(so + 4);
}

class HiprtcCompilerImpl final : public Compiler {
 public:
  static absl::StatusOr<std::unique_ptr<HiprtcCompilerImpl>> Open() {
    std::vector<std::string> dirs;
    if (!Env("ROCM_PATH").empty()) dirs.push_back(Env("ROCM_PATH") + "/lib");
    dirs.push_back("/opt/rocm/lib");
    MLAJIT_ASSIGN_OR_RETURN(
        DynamicLibrary lib,
        DynamicLibrary::OpenFirst({"libhiprtc.so", "libhiprtc.so.7", "libhiprtc.so.6",
                                   "libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6",
                                   "libamdhip64.so.5"},
                                  dirs, "hiprtcCreateProgram"));
    auto c = std::unique_ptr<HiprtcCompilerImpl>(new HiprtcCompilerImpl(std::move(lib)));
    MLAJIT_RETURN_IF_ERROR(c->Init());
    return c;
  }

  std::string Name() const override { return "hiprtc"; }
  std::string Identity() const override { return identity_; }

  absl::Status CheckArch(absl::string_view arch) const override {
    if (std::find(targets_.begin(), targets_.end(), arch) != targets_.end()) {
      return absl::OkStatus();
    }
    return absl::UnimplementedError(absl::StrCat(
        "arch=\"", arch, "\": hiprtc ", VersionFromFileName(lib_.path()),
        " cannot build it; its compiler knows ", absl::StrJoin(targets_, ", ")));
  }

  std::vector<std::string> Options(absl::string_view arch) const override {
    return {absl::StrCat("--offload-arch=", arch), "-std=c++17", "-O3"};
  }

  absl::StatusOr<CompiledBinary> Compile(const RenderedSource& source,
                                         const std::vector<std::string>& options,
                                         const std::string& arch) override {
    MLAJIT_RETURN_IF_ERROR(CheckArch(arch));
    // The options carry the target too; an unknown one there would abort as well.
    for (const std::string& o : options) {
      absl::string_view v = o;
      if (absl::ConsumePrefix(&v, "--offload-arch=") || absl::ConsumePrefix(&v, "--gpu-architecture=")) {
        MLAJIT_RETURN_IF_ERROR(CheckArch(v));
      }
    }
    absl::MutexLock lock(&mu_);
    return CompileLocked(source, options, arch);
  }

 private:
  explicit HiprtcCompilerImpl(DynamicLibrary lib) : lib_(std::move(lib)) {}

  absl::Status Init() {
#define MLAJIT_HIPRTC_SYM(field, name)                                                \
  api_.field = lib_.Symbol<decltype(api_.field)>(name);                               \
  if (api_.field == nullptr) {                                                        \
    return absl::FailedPreconditionError(absl::StrCat(lib_.path(), " lacks " name));  \
  }
    MLAJIT_HIPRTC_SYM(CreateProgram, "hiprtcCreateProgram")
    MLAJIT_HIPRTC_SYM(DestroyProgram, "hiprtcDestroyProgram")
    MLAJIT_HIPRTC_SYM(CompileProgram, "hiprtcCompileProgram")
    MLAJIT_HIPRTC_SYM(GetCodeSize, "hiprtcGetCodeSize")
    MLAJIT_HIPRTC_SYM(GetCode, "hiprtcGetCode")
    MLAJIT_HIPRTC_SYM(GetProgramLogSize, "hiprtcGetProgramLogSize")
    MLAJIT_HIPRTC_SYM(GetProgramLog, "hiprtcGetProgramLog")
    MLAJIT_HIPRTC_SYM(GetErrorString, "hiprtcGetErrorString")
#undef MLAJIT_HIPRTC_SYM
    LoadTargets();
    return Probe();
  }

  // comgr's ISA table is exactly what the compiler behind hiprtc accepts.
  void LoadTargets() {
    std::string dir = DirOf(lib_.path());
    std::vector<std::string> names = {"libamd_comgr.so.3", "libamd_comgr.so.2", "libamd_comgr.so"};
    absl::StatusOr<DynamicLibrary> comgr =
        DynamicLibrary::OpenFirst(names, {dir}, "amd_comgr_get_isa_count");
    if (comgr.ok()) {
      auto count = comgr->Symbol<int (*)(size_t*)>("amd_comgr_get_isa_count");
      auto name = comgr->Symbol<int (*)(size_t, const char**)>("amd_comgr_get_isa_name");
      auto version = comgr->Symbol<void (*)(size_t*, size_t*)>("amd_comgr_get_version");
      size_t n = 0;
      if (name != nullptr && count(&n) == kComgrSuccess) {
        for (size_t i = 0; i < n; ++i) {
          const char* isa = nullptr;
          if (name(i, &isa) != kComgrSuccess || isa == nullptr) continue;
          absl::string_view s = isa;  // "amdgcn-amd-amdhsa--gfx90a"
          size_t dash = s.rfind('-');
          if (dash != absl::string_view::npos) targets_.emplace_back(s.substr(dash + 1));
        }
      }
      if (version != nullptr) {
        size_t major = 0, minor = 0;
        version(&major, &minor);
        comgr_version_ = absl::StrCat(major, ".", minor);
      }
      comgr_ = std::move(*comgr);
    }
    if (targets_.empty()) {
      MLAJIT_LOG_INFO("hiprtc: cannot list comgr targets (",
                      comgr.ok() ? "empty table" : comgr.status().message(),
                      "); allowing only gfx908 and gfx90a");
      targets_.assign(std::begin(kFallbackTargets), std::end(kFallbackTargets));
    }
  }

  absl::Status Probe() {
    std::string arch;
    for (const char* a : {"gfx90a", "gfx908", "gfx942", "gfx950"}) {
      if (CheckArch(a).ok()) {
        arch = a;
        break;
      }
    }
    if (arch.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "hiprtc (", lib_.path(), ") supports none of gfx90a, gfx908, gfx942, gfx950"));
    }
    RenderedSource src;
    src.program_name = "mlajit_probe.hip";
    src.source = kProbeSource;
    absl::MutexLock lock(&mu_);
    absl::StatusOr<CompiledBinary> b = CompileLocked(src, Options(arch), arch);
    if (!b.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("hiprtc (", lib_.path(), ") cannot compile its probe: ", b.status().message()));
    }
    identity_ = absl::StrCat("hiprtc ", VersionFromFileName(lib_.path()), " (comgr ",
                             comgr_version_.empty() ? "unknown" : comgr_version_, ", probe ",
                             jit_internal::Hash64Hex(b->binary), ")");
    return absl::OkStatus();
  }

  absl::StatusOr<CompiledBinary> CompileLocked(const RenderedSource& source,
                                               const std::vector<std::string>& options,
                                               const std::string& arch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    static constexpr jit_internal::RtcNames kNames{"hiprtc", "hiprtcGetCodeSize", "hiprtcGetCode"};
    return jit_internal::RtcCompile(api_, kHiprtcSuccess, api_.GetCodeSize, api_.GetCode, kNames,
                                    [this](int rc) { return ErrorString(rc); }, source, options,
                                    arch);
  }

  std::string ErrorString(int rc) const {
    const char* s = api_.GetErrorString(rc);
    return s != nullptr ? s : absl::StrCat("hiprtcResult ", rc);
  }

  DynamicLibrary lib_;
  DynamicLibrary comgr_;
  HiprtcApi api_{};
  std::vector<std::string> targets_;
  std::string comgr_version_;
  std::string identity_;
  absl::Mutex mu_;
};

}  // namespace

absl::StatusOr<Compiler*> HiprtcCompiler() {
  static const auto* result = [] {
    auto c = HiprtcCompilerImpl::Open();
    if (!c.ok()) return new absl::StatusOr<Compiler*>(c.status());
    return new absl::StatusOr<Compiler*>(c->release());
  }();
  return *result;
}

}  // namespace mlajit::jit
