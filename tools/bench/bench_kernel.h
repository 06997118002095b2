// The bench's own small kernels (the streaming read of the ceilings, the
// empty kernel of the launch floor): compiled at run time by the library's
// compiler for the device, loaded, and unloaded when done.
//
//   MLAJIT_ASSIGN_OR_RETURN(auto k, BenchKernel::Load(backend, 0, "my_kernel", kSource));
//   backend->Launch(0, k->function(), config, args, stream);
#ifndef MLAJIT_TOOLS_BENCH_BENCH_KERNEL_H_
#define MLAJIT_TOOLS_BENCH_BENCH_KERNEL_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "src/gpu/backend.h"
#include "src/jit/compiler.h"

namespace mlajit::bench {

// `source` (one translation unit without includes) compiled for `arch`; its
// entry point is `name`.
absl::StatusOr<jit::CompiledBinary> CompileBenchKernel(const std::string& name, const char* source,
                                                       const std::string& arch);

// Whether kernels on a device with `props` can be launched as programmatic
// dependents (CUDA sm_90 and later; the bench's kernels then run
// griddepcontrol as the library's do).
bool DependentLaunchOn(const gpu::DeviceProperties& props);

// Once `stream` is idle: the 32-bit counter at `counter`, which the bench's
// kernels bump once per launch, must equal `launches`, or an InternalError
// names `what` and both counts (some launch did not run).
absl::Status CheckLaunchCount(gpu::Backend* backend, int device, gpu::StreamHandle stream,
                              gpu::DevicePtr counter, uint64_t launches, const char* what);

class BenchKernel {
 public:
  // Compiled for `device`'s architecture and loaded there.
  static absl::StatusOr<std::unique_ptr<BenchKernel>> Load(gpu::Backend* backend, int device,
                                                           const std::string& name,
                                                           const char* source);
  ~BenchKernel();
  BenchKernel(const BenchKernel&) = delete;
  BenchKernel& operator=(const BenchKernel&) = delete;

  gpu::FunctionHandle function() const { return function_; }

 private:
  BenchKernel(gpu::Backend* backend, int device) : backend_(backend), device_(device) {}
  gpu::Backend* backend_;
  int device_;
  gpu::ModuleHandle module_ = 0;
  gpu::FunctionHandle function_ = 0;
};

}  // namespace mlajit::bench

#endif  // MLAJIT_TOOLS_BENCH_BENCH_KERNEL_H_
