// The CUDA driver entry points the backend uses, resolved from libcuda.so.1 with
// dlsym so that nothing links against the driver. Private to src/gpu.
//
//   CudaDriverApi api;
//   std::string why;
//   if (!api.Load(&why)) return absl::FailedPreconditionError(why);
//   CUresult r = api.cuInit(0);
//
// ABI: each member is declared with the prototype cuda.h gives the name and is
// resolved by the symbol cuda.h maps that name to. cuda.h #defines e.g.
// cuMemAlloc -> cuMemAlloc_v2 and cuEventDestroy -> cuEventDestroy_v2, and the
// unversioned exports keep the old ABI (32-bit sizes), so the member
// `cuMemAlloc` below really is `cuMemAlloc_v2` after preprocessing and the
// string we dlsym is "cuMemAlloc_v2": prototype and symbol cannot disagree.
// CUDA_API_PER_THREAD_DEFAULT_STREAM must stay undefined (no _ptsz/_ptds).
#ifndef MLAJIT_SRC_GPU_CUDA_DRIVER_API_H_
#define MLAJIT_SRC_GPU_CUDA_DRIVER_API_H_

#include <cuda.h>

#include <string>

#if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM) || defined(__CUDA_API_PER_THREAD_DEFAULT_STREAM)
#error "the CUDA backend binds the legacy-default-stream driver entry points"
#endif

namespace mlajit::gpu::gpu_internal {

// X(name): required. Each name is macro-expanded before use (see above).
#define MLAJIT_CUDA_DRIVER_FUNCTIONS(X) \
  X(cuGetErrorName)                     \
  X(cuGetErrorString)                   \
  X(cuInit)                             \
  X(cuDeviceGetCount)                   \
  X(cuDeviceGet)                        \
  X(cuDeviceGetName)                    \
  X(cuDeviceGetAttribute)               \
  X(cuDeviceTotalMem)                   \
  X(cuDevicePrimaryCtxRetain)           \
  X(cuDevicePrimaryCtxRelease)          \
  X(cuCtxSetCurrent)                    \
  X(cuCtxGetCurrent)                    \
  X(cuStreamGetCtx)                     \
  X(cuPointerGetAttributes)             \
  X(cuModuleLoadDataEx)                 \
  X(cuModuleUnload)                     \
  X(cuModuleGetFunction)                \
  X(cuFuncSetAttribute)                 \
  X(cuLaunchKernel)                     \
  X(cuLaunchKernelEx)                   \
  X(cuMemAlloc)                         \
  X(cuMemFree)                          \
  X(cuMemcpyHtoDAsync)                  \
  X(cuMemcpyDtoHAsync)                  \
  X(cuMemsetD8Async)                    \
  X(cuStreamCreate)                     \
  X(cuStreamDestroy)                    \
  X(cuStreamSynchronize)                \
  X(cuEventCreate)                      \
  X(cuEventDestroy)                     \
  X(cuEventRecord)                      \
  X(cuEventSynchronize)                 \
  X(cuEventElapsedTime)                 \
  X(cuStreamBeginCapture)               \
  X(cuStreamEndCapture)                 \
  X(cuGraphInstantiateWithFlags)        \
  X(cuGraphLaunch)                      \
  X(cuGraphExecDestroy)                 \
  X(cuGraphDestroy)

#define MLAJIT_CUDA_STRINGIFY_INNER_(x) #x
// Expands the argument first, so MLAJIT_CUDA_SYMBOL_NAME(cuMemAlloc) is "cuMemAlloc_v2".
#define MLAJIT_CUDA_SYMBOL_NAME(x) MLAJIT_CUDA_STRINGIFY_INNER_(x)

struct CudaDriverApi {
#define MLAJIT_CUDA_DECLARE_(name) decltype(&::name) name = nullptr;
  MLAJIT_CUDA_DRIVER_FUNCTIONS(MLAJIT_CUDA_DECLARE_)
#undef MLAJIT_CUDA_DECLARE_

  // Optional (null when the driver lacks it): tensor maps, CUDA 12.0 drivers on.
  decltype(&::cuTensorMapEncodeTiled) cuTensorMapEncodeTiled = nullptr;

  // dlopens libcuda.so.1 and resolves every entry point. On failure returns
  // false with the reason in `*why`; the object is then unusable.
  bool Load(std::string* why);

  // The dlsym names actually bound, in table order ("cuMemAlloc_v2", ...).
  static const char* const kSymbolNames[];
  static const int kSymbolCount;

  void* library = nullptr;
};

}  // namespace mlajit::gpu::gpu_internal

#endif  // MLAJIT_SRC_GPU_CUDA_DRIVER_API_H_
