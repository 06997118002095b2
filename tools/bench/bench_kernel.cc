#include "tools/bench/bench_kernel.h"

#include <cstdint>
#include <cstdlib>

#include "absl/strings/str_format.h"
#include "src/base/status_macros.h"

namespace mlajit::bench {

absl::StatusOr<jit::CompiledBinary> CompileBenchKernel(const std::string& name, const char* source,
                                                       const std::string& arch) {
  MLAJIT_ASSIGN_OR_RETURN(jit::Compiler * compiler, jit::CompilerForArch(arch));
  jit::RenderedSource rendered;
  rendered.template_name = name;
  rendered.program_name = name + ".cu";
  rendered.source = source;
  return compiler->Compile(rendered, compiler->Options(arch), arch);
}

bool DependentLaunchOn(const gpu::DeviceProperties& props) {
  return props.vendor == gpu::Vendor::kNvidia && props.arch.rfind("sm_", 0) == 0 &&
         std::atoi(props.arch.c_str() + 3) >= 90;
}

absl::Status CheckLaunchCount(gpu::Backend* backend, int device, gpu::StreamHandle stream,
                              gpu::DevicePtr counter, uint64_t launches, const char* what) {
  uint32_t got = 0;
  MLAJIT_RETURN_IF_ERROR(backend->MemcpyDtoH(device, &got, counter, 4, stream));
  MLAJIT_RETURN_IF_ERROR(backend->StreamSynchronize(device, stream));
  if (got != static_cast<uint32_t>(launches)) {
    return absl::InternalError(
        absl::StrFormat("%s: the kernels counted %u launches of %u: some did not run", what, got,
                        static_cast<uint32_t>(launches)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<BenchKernel>> BenchKernel::Load(gpu::Backend* backend, int device,
                                                               const std::string& name,
                                                               const char* source) {
  MLAJIT_ASSIGN_OR_RETURN(gpu::DeviceProperties props, backend->GetDeviceProperties(device));
  MLAJIT_ASSIGN_OR_RETURN(jit::CompiledBinary binary, CompileBenchKernel(name, source, props.arch));
  std::unique_ptr<BenchKernel> k(new BenchKernel(backend, device));
  const auto* code = reinterpret_cast<const uint8_t*>(binary.binary.data());
  MLAJIT_ASSIGN_OR_RETURN(k->module_, backend->LoadModule(device, {code, binary.binary.size()}));
  MLAJIT_ASSIGN_OR_RETURN(k->function_, backend->GetFunction(k->module_, name));
  return k;
}

BenchKernel::~BenchKernel() {
  if (module_ != 0) (void)backend_->UnloadModule(device_, module_);
}

}  // namespace mlajit::bench
