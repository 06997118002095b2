// NVRTC behind the Compiler interface. NVRTC is loaded with dlopen (libnvrtc.so.13,
// .12, unversioned; then from $CUDA_HOME/lib64, $CUDA_PATH/lib64 and
// /usr/local/cuda/lib64) and produces a CUBIN for the exact target
// (--gpu-architecture=sm_90a). NVRTC ships no cuda_bf16.h / cuda_fp8.h of its
// own, so the toolkit include folder next to the loaded NVRTC (or under
// CUDA_HOME, /usr/local/cuda) is passed with -I and fingerprinted into the key.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/base/log.h"
#include "src/base/status_macros.h"
#include "src/jit/compiler.h"
#include "src/jit/compiler_internal.h"
#include "src/jit/dynamic_library.h"
#include "src/jit/rtc_compile.h"

namespace mlajit::jit {
namespace {

using jit_internal::DynamicLibrary;

struct NvrtcProgramOpaque;
using NvrtcProgram = NvrtcProgramOpaque*;
constexpr int kNvrtcSuccess = 0;

// The subset of the NVRTC C API we call, with its ABI (stable since CUDA 11).
struct NvrtcApi {
  int (*Version)(int*, int*);
  int (*GetNumSupportedArchs)(int*);
  int (*GetSupportedArchs)(int*);
  int (*CreateProgram)(NvrtcProgram*, const char*, const char*, int, const char* const*,
                       const char* const*);
  int (*DestroyProgram)(NvrtcProgram*);
  int (*CompileProgram)(NvrtcProgram, int, const char* const*);
  int (*GetCUBINSize)(NvrtcProgram, size_t*);
  int (*GetCUBIN)(NvrtcProgram, char*);
  int (*GetPTXSize)(NvrtcProgram, size_t*);
  int (*GetPTX)(NvrtcProgram, char*);
  int (*GetProgramLogSize)(NvrtcProgram, size_t*);
  int (*GetProgramLog)(NvrtcProgram, char*);
  const char* (*GetErrorString)(int);
};

// Fixed forever: its output is this compiler's fingerprint. Changing it changes
// every key (harmless, but pointless).
constexpr char kProbeSource[] = R"(
extern "C" __global__ void mlajit_probe(float* out, const float* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __expf(in[i]) * 0.5f + in[n - 1 - i] * static_cast<float>(i);
}
)";

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

bool IsFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The toolkit's own headers (top level) by content, everything below (cccl,
// crt, ...) by name and size: hashing 30 MB per process start would cost more
// than it buys, and toolkit updates change sizes of these files in practice.
void FingerprintDir(const std::string& root, const std::string& rel, int depth,
                    jit_internal::Hasher& h) {
  DIR* d = opendir((root + rel).c_str());
  if (d == nullptr) return;
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) {
    std::string path = absl::StrCat(root, rel, "/", n);
    struct stat st;
    if (stat(path.c_str(), &st) != 0) continue;
    std::string rel_path = absl::StrCat(rel, "/", n);
    if (S_ISDIR(st.st_mode)) {
      if (depth < 12) FingerprintDir(root, rel_path, depth + 1, h);
    } else if (S_ISREG(st.st_mode)) {
      h.Add(rel_path);
      if (depth == 0 && (absl::EndsWith(n, ".h") || absl::EndsWith(n, ".hpp"))) {
        h.Add(ReadFileOrEmpty(path));
      } else {
        h.Add(absl::StrCat(static_cast<int64_t>(st.st_size)));
      }
    }
  }
}

class NvrtcCompilerImpl final : public Compiler {
 public:
  static absl::StatusOr<std::unique_ptr<NvrtcCompilerImpl>> Open() {
    std::vector<std::string> dirs;
    for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
      std::string v = Env(var);
      if (!v.empty()) dirs.push_back(v + "/lib64");
    }
    dirs.push_back("/usr/local/cuda/lib64");
    MLAJIT_ASSIGN_OR_RETURN(
        DynamicLibrary lib,
        DynamicLibrary::OpenFirst({"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}, dirs,
                                  "nvrtcCompileProgram"));
    auto c = std::unique_ptr<NvrtcCompilerImpl>(new NvrtcCompilerImpl(std::move(lib)));
    MLAJIT_RETURN_IF_ERROR(c->Init());
    return c;
  }

  std::string Name() const override { return "nvrtc"; }
  std::string Identity() const override { return identity_; }

  absl::Status CheckArch(absl::string_view arch) const override {
    int number = 0;
    bool arch_specific = absl::EndsWith(arch, "a");
    absl::string_view digits = arch;
    if (!absl::ConsumePrefix(&digits, "sm_")) return Unsupported(arch, "not an sm_* target");
    if (arch_specific) digits.remove_suffix(1);
    if (!absl::SimpleAtoi(digits, &number)) return Unsupported(arch, "not an sm_* target");
    if (std::find(archs_.begin(), archs_.end(), number) == archs_.end()) {
      return Unsupported(arch, absl::StrCat("supported: sm_", absl::StrJoin(archs_, ", sm_")));
    }
    // Arch-specific ("a") targets arrived after their base numbers.
    int v = major_ * 10 + minor_;
    if (arch_specific && ((number == 90 && v < 120) || (number == 100 && v < 128) ||
                          (number != 90 && number != 100 && v < 128))) {
      return Unsupported(arch, "this NVRTC version has no arch-specific target for it");
    }
    return absl::OkStatus();
  }

  std::vector<std::string> Options(absl::string_view arch) const override {
    // No --use_fast_math: it turns on flush-to-zero and approximate division for
    // the whole kernel; the kernels use the fast intrinsics (exp2f, __fdividef)
    // explicitly where accuracy allows.
    std::vector<std::string> opts = {absl::StrCat("--gpu-architecture=", arch), "-std=c++17",
                                     "-default-device", "-lineinfo"};
    if (!include_dir_.empty()) opts.push_back(absl::StrCat("-I", include_dir_));
    return opts;
  }

  std::vector<std::pair<std::string, std::string>> ExtraKeyFields() const override {
    if (include_dir_.empty()) return {{"cuda_include", "none"}};
    return {{"cuda_include", include_fingerprint_}};
  }

  absl::StatusOr<CompiledBinary> Compile(const RenderedSource& source,
                                         const std::vector<std::string>& options,
                                         const std::string& arch) override {
    MLAJIT_RETURN_IF_ERROR(CheckArch(arch));
    static constexpr jit_internal::RtcNames kNames{"nvrtc", "nvrtcGetCUBINSize", "nvrtcGetCUBIN"};
    return jit_internal::RtcCompile(api_, kNvrtcSuccess, api_.GetCUBINSize, api_.GetCUBIN, kNames,
                                    [this](int rc) { return ErrorString(rc); }, source, options,
                                    arch);
  }

 private:
  explicit NvrtcCompilerImpl(DynamicLibrary lib) : lib_(std::move(lib)) {}

  static absl::Status Unsupported(absl::string_view arch, absl::string_view why) {
    return absl::UnimplementedError(
        absl::StrCat("arch=\"", arch, "\": NVRTC cannot build it (", why, ")"));
  }

  absl::Status Init() {
#define MLAJIT_NVRTC_SYM(field, name)                                                      \
  api_.field = lib_.Symbol<decltype(api_.field)>(name);                                    \
  if (api_.field == nullptr) {                                                             \
    return absl::FailedPreconditionError(absl::StrCat(lib_.path(), " lacks " name));       \
  }
    MLAJIT_NVRTC_SYM(Version, "nvrtcVersion")
    MLAJIT_NVRTC_SYM(GetNumSupportedArchs, "nvrtcGetNumSupportedArchs")
    MLAJIT_NVRTC_SYM(GetSupportedArchs, "nvrtcGetSupportedArchs")
    MLAJIT_NVRTC_SYM(CreateProgram, "nvrtcCreateProgram")
    MLAJIT_NVRTC_SYM(DestroyProgram, "nvrtcDestroyProgram")
    MLAJIT_NVRTC_SYM(CompileProgram, "nvrtcCompileProgram")
    MLAJIT_NVRTC_SYM(GetCUBINSize, "nvrtcGetCUBINSize")
    MLAJIT_NVRTC_SYM(GetCUBIN, "nvrtcGetCUBIN")
    MLAJIT_NVRTC_SYM(GetPTXSize, "nvrtcGetPTXSize")
    MLAJIT_NVRTC_SYM(GetPTX, "nvrtcGetPTX")
    MLAJIT_NVRTC_SYM(GetProgramLogSize, "nvrtcGetProgramLogSize")
    MLAJIT_NVRTC_SYM(GetProgramLog, "nvrtcGetProgramLog")
    MLAJIT_NVRTC_SYM(GetErrorString, "nvrtcGetErrorString")
#undef MLAJIT_NVRTC_SYM
    if (api_.Version(&major_, &minor_) != kNvrtcSuccess) {
      return absl::FailedPreconditionError(absl::StrCat(lib_.path(), ": nvrtcVersion failed"));
    }
    int n = 0;
    if (api_.GetNumSupportedArchs(&n) == kNvrtcSuccess && n > 0) {
      archs_.resize(n);
      if (api_.GetSupportedArchs(archs_.data()) != kNvrtcSuccess) archs_.clear();
    }
    if (archs_.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat(lib_.path(), ": nvrtcGetSupportedArchs reports no targets"));
    }
    FindIncludeDir();
    return Probe();
  }

  void FindIncludeDir() {
    std::vector<std::string> candidates;
    size_t slash = lib_.path().rfind('/');
    if (slash != std::string::npos) candidates.push_back(lib_.path().substr(0, slash) + "/../include");
    for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
      std::string v = Env(var);
      if (!v.empty()) candidates.push_back(v + "/include");
    }
    candidates.push_back("/usr/local/cuda/include");
    for (const std::string& c : candidates) {
      if (!IsFile(c + "/cuda_bf16.h")) continue;
      char* real = realpath(c.c_str(), nullptr);
      include_dir_ = real != nullptr ? real : c;
      std::free(real);
      jit_internal::Hasher h;
      FingerprintDir(include_dir_, "", 0, h);
      include_fingerprint_ = h.Hex();
      return;
    }
    MLAJIT_LOG_WARN("no CUDA toolkit include folder with cuda_bf16.h found (tried ",
                    absl::StrJoin(candidates, ", "),
                    "); templates that include toolkit headers will not compile");
  }

  // Compiles kProbeSource to a CUBIN and PTX once; the PTX header carries the
  // release and build id, the CUBIN hash the exact code generation.
  absl::Status Probe() {
    int probe_arch = std::find(archs_.begin(), archs_.end(), 80) != archs_.end() ? 80 : archs_.front();
    RenderedSource src;
    src.program_name = "mlajit_probe.cu";
    src.source = kProbeSource;
    std::vector<std::string> opts = {absl::StrCat("--gpu-architecture=sm_", probe_arch)};
    NvrtcProgram prog = nullptr;
    if (api_.CreateProgram(&prog, src.source.c_str(), src.program_name.c_str(), 0, nullptr,
                           nullptr) != kNvrtcSuccess) {
      return absl::FailedPreconditionError("NVRTC probe: nvrtcCreateProgram failed");
    }
    const char* opt = opts[0].c_str();
    int rc = api_.CompileProgram(prog, 1, &opt);
    std::string ptx, cubin;
    size_t size = 0;
    if (rc == kNvrtcSuccess && api_.GetPTXSize(prog, &size) == kNvrtcSuccess) {
      ptx.resize(size);
      api_.GetPTX(prog, ptx.data());
    }
    if (rc == kNvrtcSuccess && api_.GetCUBINSize(prog, &size) == kNvrtcSuccess) {
      cubin.resize(size);
      api_.GetCUBIN(prog, cubin.data());
    }
    std::string log = ProgramLog(prog);
    api_.DestroyProgram(&prog);
    if (rc != kNvrtcSuccess || cubin.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "NVRTC (", lib_.path(), ") cannot compile its probe: ", ErrorString(rc), "\n", log));
    }
    std::vector<std::string> build;
    for (absl::string_view line : absl::StrSplit(ptx, '\n')) {
      if (!absl::ConsumePrefix(&line, "//")) break;
      line = absl::StripAsciiWhitespace(line);
      if (absl::ConsumePrefix(&line, "Compiler Build ID:")) {
        build.emplace_back(absl::StripAsciiWhitespace(line));
      } else if (absl::StartsWith(line, "Cuda compilation tools")) {
        size_t v = line.rfind(' ');
        if (v != absl::string_view::npos) build.emplace_back(line.substr(v + 1));
      }
    }
    build.push_back(absl::StrCat("probe ", jit_internal::Hash64Hex(cubin + ptx)));
    identity_ = absl::StrCat("nvrtc ", major_, ".", minor_, " (", absl::StrJoin(build, ", "), ")");
    return absl::OkStatus();
  }

  std::string ProgramLog(NvrtcProgram prog) const {
    size_t size = 0;
    if (api_.GetProgramLogSize(prog, &size) != kNvrtcSuccess || size <= 1) return "";
    std::string log(size, '\0');
    if (api_.GetProgramLog(prog, log.data()) != kNvrtcSuccess) return "";
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    return log;
  }

  std::string ErrorString(int rc) const {
    const char* s = api_.GetErrorString != nullptr ? api_.GetErrorString(rc) : nullptr;
    return s != nullptr ? s : absl::StrCat("nvrtcResult ", rc);
  }

  DynamicLibrary lib_;
  NvrtcApi api_{};
  int major_ = 0, minor_ = 0;
  std::vector<int> archs_;
  std::string include_dir_;
  std::string include_fingerprint_;
  std::string identity_;
};

}  // namespace

absl::StatusOr<Compiler*> NvrtcCompiler() {
  static const auto* result = [] {
    auto c = NvrtcCompilerImpl::Open();
    if (!c.ok()) return new absl::StatusOr<Compiler*>(c.status());
    return new absl::StatusOr<Compiler*>(c->release());
  }();
  return *result;
}

}  // namespace mlajit::jit
