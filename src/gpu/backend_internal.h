// Vendor-neutral helpers shared by the CUDA and HIP backends: architecture
// names, driver-error to absl::Status mapping and dlopen with a readable error.
// Nothing here includes a vendor header, so the CPU tests exercise it on any
// machine.
//
//   CudaArchName(9, 0);                        // "sm_90a"
//   NormalizeGfxArch("gfx90a:sramecc+:xnack-"); // "gfx90a"
//   return DriverCallError(CudaResultCode(r), "cuMemAlloc(bytes=64) on device 0",
//                          "CUDA_ERROR_OUT_OF_MEMORY", "out of memory");
#ifndef MLAJIT_SRC_GPU_BACKEND_INTERNAL_H_
#define MLAJIT_SRC_GPU_BACKEND_INTERNAL_H_

#include <initializer_list>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "src/gpu/backend.h"

namespace mlajit::gpu::gpu_internal {

// The NVRTC/ptxas target for compute capability major.minor. From sm_90 on every
// major architecture has an arch-specific variant ("a": wgmma, TMA multicast,
// tcgen05, ...), and our kernels need it, so those get the suffix.
std::string CudaArchName(int major, int minor);

// "gfx90a:sramecc+:xnack-" -> "gfx90a": drops the target-feature suffixes HIP
// reports in gcnArchName; hiprtc takes the bare processor name.
std::string NormalizeGfxArch(absl::string_view gcn_arch_name);

// The absl code for a CUresult value (see STYLE.md "Errors"). Takes the raw
// integer so it is usable (and testable) without cuda.h.
absl::StatusCode CudaResultCode(int result);
// The same for hipError_t, whose values follow CUDA's where they overlap.
absl::StatusCode HipResultCode(int result);

// "<call>: <error_name>: <error_string>" with `code`; the call text names the
// function and its arguments, e.g. "cuMemAlloc(bytes=64) on device 0".
absl::Status DriverCallError(absl::StatusCode code, absl::string_view call,
                             absl::string_view error_name, absl::string_view error_string);

// kInvalidArgument naming the field when `map` is outside what a tensor map
// can describe (TensorMap2D's comments; CUDA's cuTensorMapEncodeTiled limits).
absl::Status ValidateTensorMap2D(const TensorMap2D& map);

// dlopens the first library in `names` that loads (RTLD_NOW | RTLD_LOCAL).
// Returns nullptr and sets `*why` to every name with its dlerror() otherwise.
void* OpenFirstLibrary(std::initializer_list<const char*> names, std::string* why);

}  // namespace mlajit::gpu::gpu_internal

#endif  // MLAJIT_SRC_GPU_BACKEND_INTERNAL_H_
