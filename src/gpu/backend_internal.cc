#include "src/gpu/backend_internal.h"

#include <dlfcn.h>

#include <cctype>
#include <utility>

#include "absl/strings/str_cat.h"

namespace mlajit::gpu::gpu_internal {

std::string CudaArchName(int major, int minor) {
  std::string name = absl::StrCat("sm_", major, minor);
  if (major >= 9) name += 'a';
  return name;
}

std::string NormalizeGfxArch(absl::string_view gcn_arch_name) {
  absl::string_view arch = gcn_arch_name.substr(0, gcn_arch_name.find(':'));
  while (!arch.empty() && std::isspace(static_cast<unsigned char>(arch.back()))) {
    arch.remove_suffix(1);
  }
  return std::string(arch);
}

absl::Status ValidateTensorMap2D(const TensorMap2D& map) {
  auto invalid = [](absl::string_view field, auto value, absl::string_view expected) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor map ", field, "=", value, ": ", expected));
  };
  const auto base = reinterpret_cast<uintptr_t>(map.base);
  if (base == 0 || base % 16 != 0) {
    return invalid("base", absl::StrCat("0x", absl::Hex(base)),
                   "must be non-null and 16-byte aligned");
  }
  constexpr uint64_t kMaxDim = uint64_t{1} << 32;
  if (map.cols < 1 || map.cols > kMaxDim) return invalid("cols", map.cols, "must be in 1..2^32");
  if (map.rows < 1 || map.rows > kMaxDim) return invalid("rows", map.rows, "must be in 1..2^32");
  if (map.row_stride % 16 != 0 || map.row_stride < map.cols ||
      map.row_stride >= (uint64_t{1} << 40)) {
    return invalid("row_stride", map.row_stride,
                   absl::StrCat("must be a multiple of 16, at least cols (", map.cols,
                                ") and below 2^40"));
  }
  if (map.box_rows < 1 || map.box_rows > 256) {
    return invalid("box_rows", map.box_rows, "must be in 1..256");
  }
  if (map.box_cols < 16 || map.box_cols > 256 || map.box_cols % 16 != 0) {
    return invalid("box_cols", map.box_cols, "must be a multiple of 16 in 16..256");
  }
  if (map.swizzle != 0 && map.swizzle != 32 && map.swizzle != 64 && map.swizzle != 128) {
    return invalid("swizzle", map.swizzle, "must be 0, 32, 64 or 128");
  }
  if (map.swizzle != 0 && map.box_cols > static_cast<uint32_t>(map.swizzle)) {
    return invalid("box_cols", map.box_cols,
                   absl::StrCat("must be at most the swizzle span (", map.swizzle, " bytes)"));
  }
  return absl::OkStatus();
}

// Values from cuda.h (CUresult); cuda_backend.cc static_asserts that they match.
absl::StatusCode CudaResultCode(int result) {
  switch (result) {
    case 0:    // CUDA_SUCCESS
      return absl::StatusCode::kOk;
    case 1:    // CUDA_ERROR_INVALID_VALUE
    case 101:  // CUDA_ERROR_INVALID_DEVICE
    case 200:  // CUDA_ERROR_INVALID_IMAGE
    case 209:  // CUDA_ERROR_NO_BINARY_FOR_GPU
    case 218:  // CUDA_ERROR_INVALID_PTX
    case 222:  // CUDA_ERROR_UNSUPPORTED_PTX_VERSION
    case 400:  // CUDA_ERROR_INVALID_HANDLE
      return absl::StatusCode::kInvalidArgument;
    case 500:  // CUDA_ERROR_NOT_FOUND (e.g. no such kernel in the module)
      return absl::StatusCode::kNotFound;
    case 2:    // CUDA_ERROR_OUT_OF_MEMORY
    case 701:  // CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
      return absl::StatusCode::kResourceExhausted;
    case 3:    // CUDA_ERROR_NOT_INITIALIZED
    case 4:    // CUDA_ERROR_DEINITIALIZED
    case 34:   // CUDA_ERROR_STUB_LIBRARY
    case 46:   // CUDA_ERROR_DEVICE_UNAVAILABLE
    case 100:  // CUDA_ERROR_NO_DEVICE
    case 802:  // CUDA_ERROR_SYSTEM_NOT_READY
    case 803:  // CUDA_ERROR_SYSTEM_DRIVER_MISMATCH
    case 804:  // CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE
      return absl::StatusCode::kFailedPrecondition;
    default:
      return absl::StatusCode::kInternal;
  }
}

// Values from hip_runtime_api.h (hipError_t).
absl::StatusCode HipResultCode(int result) {
  switch (result) {
    case 0:    // hipSuccess
      return absl::StatusCode::kOk;
    case 1:    // hipErrorInvalidValue
    case 101:  // hipErrorInvalidDevice
    case 200:  // hipErrorInvalidImage
    case 209:  // hipErrorNoBinaryForGpu
    case 218:  // hipErrorInvalidKernelFile
    case 400:  // hipErrorInvalidHandle
      return absl::StatusCode::kInvalidArgument;
    case 500:  // hipErrorNotFound
      return absl::StatusCode::kNotFound;
    case 2:    // hipErrorOutOfMemory
    case 701:  // hipErrorLaunchOutOfResources
      return absl::StatusCode::kResourceExhausted;
    case 3:    // hipErrorNotInitialized
    case 4:    // hipErrorDeinitialized
    case 35:   // hipErrorInsufficientDriver
    case 100:  // hipErrorNoDevice
      return absl::StatusCode::kFailedPrecondition;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::Status DriverCallError(absl::StatusCode code, absl::string_view call,
                             absl::string_view error_name, absl::string_view error_string) {
  if (code == absl::StatusCode::kOk) code = absl::StatusCode::kInternal;
  return absl::Status(code, absl::StrCat(call, ": ", error_name, ": ", error_string));
}

void* OpenFirstLibrary(std::initializer_list<const char*> names, std::string* why) {
  std::string errors;
  for (const char* name : names) {
    if (void* handle = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return handle;
    const char* error = dlerror();
    absl::StrAppend(&errors, errors.empty() ? "" : "; ", "dlopen(", name,
                    ") failed: ", error != nullptr ? error : "unknown error");
  }
  if (why != nullptr) *why = std::move(errors);
  return nullptr;
}

}  // namespace mlajit::gpu::gpu_internal
