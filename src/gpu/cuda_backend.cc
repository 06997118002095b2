// Backend over the CUDA driver API, loaded from libcuda.so.1 at run time.
//
// Contexts: each device's primary context is retained lazily, once, and made
// current (cuCtxSetCurrent) at the start of every call that names a device, so
// a thread may hop between devices and share contexts with the CUDA runtime and
// other libraries in the process. Calls that take only a handle (GetFunction,
// SetMaxDynamicSharedMemory, ElapsedMs) look up the device the handle was
// created on.
//
// Graph capture: Launch, MemcpyHtoD, MemcpyDtoH and MemsetD8 only enqueue; they
// never call a synchronizing driver function, so they may be captured.
// BeginCapture uses CU_STREAM_CAPTURE_MODE_THREAD_LOCAL: the global mode would
// make an unrelated cuMemAlloc on any other thread of the process invalidate
// our capture (and fail), which a library must not impose on its host.
#include <dlfcn.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "src/base/status_macros.h"
#include "src/gpu/backend.h"
#include "src/gpu/backend_internal.h"
#include "src/gpu/cuda_driver_api.h"

namespace mlajit::gpu {
namespace gpu_internal {

// CudaResultCode() works on raw integers so that it needs no cuda.h; pin the
// values it relies on to the header's.
static_assert(CUDA_SUCCESS == 0 && CUDA_ERROR_INVALID_VALUE == 1 &&
              CUDA_ERROR_OUT_OF_MEMORY == 2 && CUDA_ERROR_NOT_INITIALIZED == 3 &&
              CUDA_ERROR_DEINITIALIZED == 4 && CUDA_ERROR_STUB_LIBRARY == 34 &&
              CUDA_ERROR_DEVICE_UNAVAILABLE == 46 && CUDA_ERROR_NO_DEVICE == 100 &&
              CUDA_ERROR_INVALID_DEVICE == 101 && CUDA_ERROR_INVALID_IMAGE == 200 &&
              CUDA_ERROR_NO_BINARY_FOR_GPU == 209 && CUDA_ERROR_INVALID_PTX == 218 &&
              CUDA_ERROR_UNSUPPORTED_PTX_VERSION == 222 &&
              CUDA_ERROR_INVALID_HANDLE == 400 && CUDA_ERROR_NOT_FOUND == 500 &&
              CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES == 701 &&
              CUDA_ERROR_SYSTEM_NOT_READY == 802 &&
              CUDA_ERROR_SYSTEM_DRIVER_MISMATCH == 803 &&
              CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE == 804,
              "CUresult values changed; update CudaResultCode()");

// Handles are passed through as integers; make sure they fit.
static_assert(sizeof(CUdeviceptr) == sizeof(DevicePtr));
static_assert(sizeof(CUmodule) <= sizeof(ModuleHandle));
static_assert(sizeof(CUfunction) <= sizeof(FunctionHandle));
static_assert(sizeof(CUevent) <= sizeof(EventHandle));
static_assert(sizeof(CUstream) == sizeof(StreamHandle));
static_assert(sizeof(CUgraphExec) <= sizeof(GraphHandle));

#define MLAJIT_CUDA_NAME_(name) MLAJIT_CUDA_SYMBOL_NAME(name),
const char* const CudaDriverApi::kSymbolNames[] = {
    MLAJIT_CUDA_DRIVER_FUNCTIONS(MLAJIT_CUDA_NAME_)};
#undef MLAJIT_CUDA_NAME_
const int CudaDriverApi::kSymbolCount =
    static_cast<int>(sizeof(kSymbolNames) / sizeof(kSymbolNames[0]));

namespace {

// Entry points whose header-mapped version is newer than some drivers we
// support, with an older export of the same prototype to fall back to.
// cuEventElapsedTime_v2 appeared in 12.8; only its error reporting differs.
const char* OlderSymbol(const char* symbol) {
  if (std::strcmp(symbol, "cuEventElapsedTime_v2") == 0) return "cuEventElapsedTime";
  return nullptr;
}

}  // namespace

bool CudaDriverApi::Load(std::string* why) {
  library = OpenFirstLibrary({"libcuda.so.1"}, why);
  if (library == nullptr) {
    *why = absl::StrCat("the NVIDIA driver library libcuda.so.1 could not be loaded (", *why,
                        ")");
    return false;
  }
  std::string missing;
  auto resolve = [&](const char* symbol, auto* slot) {
    void* p = dlsym(library, symbol);
    if (p == nullptr) {
      if (const char* older = OlderSymbol(symbol)) p = dlsym(library, older);
    }
    if (p == nullptr) {
      absl::StrAppend(&missing, missing.empty() ? "" : ", ", symbol);
      return;
    }
    *slot = reinterpret_cast<std::remove_pointer_t<decltype(slot)>>(p);
  };
#define MLAJIT_CUDA_RESOLVE_(name) resolve(MLAJIT_CUDA_SYMBOL_NAME(name), &name);
  MLAJIT_CUDA_DRIVER_FUNCTIONS(MLAJIT_CUDA_RESOLVE_)
#undef MLAJIT_CUDA_RESOLVE_
  cuTensorMapEncodeTiled = reinterpret_cast<decltype(cuTensorMapEncodeTiled)>(
      dlsym(library, MLAJIT_CUDA_SYMBOL_NAME(cuTensorMapEncodeTiled)));
  if (!missing.empty()) {
    *why = absl::StrCat("libcuda.so.1 lacks driver entry points: ", missing,
                        " (driver too old for this build?)");
    // The library stays loaded: unloading libcuda is not reliably safe.
    return false;
  }
  return true;
}

namespace {

constexpr int kErrorLogBytes = 16 * 1024;

class CudaBackend final : public Backend {
 public:
  static absl::StatusOr<std::unique_ptr<Backend>> Open() {
    auto backend = std::unique_ptr<CudaBackend>(new CudaBackend());
    MLAJIT_RETURN_IF_ERROR(backend->Init());
    return std::unique_ptr<Backend>(std::move(backend));
  }

  ~CudaBackend() override {
    // Drops our reference on each primary context we retained; the driver keeps
    // the context alive while anyone else (the CUDA runtime, another backend)
    // still holds one.
    for (int d = 0; d < device_count_; ++d) {
      if (contexts_[d].load(std::memory_order_acquire) != nullptr) {
        api_.cuDevicePrimaryCtxRelease(devices_[d]);
      }
    }
  }

  Vendor vendor() const override { return Vendor::kNvidia; }

  absl::StatusOr<int> DeviceCount() override { return device_count_; }

  absl::StatusOr<DeviceProperties> GetDeviceProperties(int device) override {
    MLAJIT_RETURN_IF_ERROR(CheckDevice(device));
    const CUdevice dev = devices_[device];
    DeviceProperties props;
    props.vendor = Vendor::kNvidia;
    char name[256] = {};
    MLAJIT_RETURN_IF_ERROR(Check(api_.cuDeviceGetName(name, sizeof(name) - 1, dev),
                                 "cuDeviceGetName", device));
    props.name = name;
    int major = 0, minor = 0;
    MLAJIT_RETURN_IF_ERROR(
        Attribute(device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "COMPUTE_CAPABILITY_MAJOR",
                  &major));
    MLAJIT_RETURN_IF_ERROR(
        Attribute(device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "COMPUTE_CAPABILITY_MINOR",
                  &minor));
    props.arch = CudaArchName(major, minor);
    MLAJIT_RETURN_IF_ERROR(Attribute(device, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                     "MULTIPROCESSOR_COUNT", &props.sm_count));
    MLAJIT_RETURN_IF_ERROR(Attribute(device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                                     "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN",
                                     &props.max_shared_memory_per_block_optin));
    MLAJIT_RETURN_IF_ERROR(Attribute(device, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
                                     "MAX_THREADS_PER_MULTIPROCESSOR",
                                     &props.max_threads_per_sm));
    size_t total = 0;
    MLAJIT_RETURN_IF_ERROR(Check(api_.cuDeviceTotalMem(&total, dev), "cuDeviceTotalMem", device));
    props.total_memory = static_cast<int64_t>(total);
    // Only a name for tools (NVML): a driver that does not say leaves it
    // empty rather than failing the runtime that asked for the properties.
    int domain = 0, bus = 0, slot = 0;
    if (Attribute(device, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, "PCI_DOMAIN_ID", &domain).ok() &&
        Attribute(device, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, "PCI_BUS_ID", &bus).ok() &&
        Attribute(device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, "PCI_DEVICE_ID", &slot).ok()) {
      props.pci_bus_id = absl::StrFormat("%04x:%02x:%02x.0", domain, bus, slot);
    }
    return props;
  }

  absl::Status SetCurrentDevice(int device) override { return MakeCurrent(device); }

  uintptr_t SaveCurrent() override {
    CUcontext ctx = nullptr;
    if (api_.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS) ctx = nullptr;
    return reinterpret_cast<uintptr_t>(ctx);
  }

  void RestoreCurrent(uintptr_t saved) override {
    CUcontext now = nullptr;
    if (api_.cuCtxGetCurrent(&now) == CUDA_SUCCESS && reinterpret_cast<uintptr_t>(now) == saved) {
      return;
    }
    // Nothing useful to do on failure: the caller's context was valid a moment
    // ago, and the next call that names a device sets its own anyway.
    (void)api_.cuCtxSetCurrent(reinterpret_cast<CUcontext>(saved));
  }

  absl::Status CheckStream(int device, StreamHandle stream) override {
    MLAJIT_RETURN_IF_ERROR(CheckDevice(device));
    const auto handle = reinterpret_cast<uintptr_t>(stream);
    // The legacy and per-thread default streams are per context: they run on
    // whichever context is current at enqueue, which Launch makes ours.
    if (handle == 0 || handle == reinterpret_cast<uintptr_t>(CU_STREAM_LEGACY) ||
        handle == reinterpret_cast<uintptr_t>(CU_STREAM_PER_THREAD)) {
      return absl::OkStatus();
    }
    CUcontext ctx = nullptr;
    CUresult r = api_.cuStreamGetCtx(static_cast<CUstream>(stream), &ctx);
    if (r != CUDA_SUCCESS) {
      return absl::InvalidArgumentError(absl::StrCat(
          "stream=0x", absl::Hex(handle), ": not a usable CUDA stream (",
          Error(r, "cuStreamGetCtx").message(), ")"));
    }
    if (ctx == contexts_[device].load(std::memory_order_acquire)) return absl::OkStatus();
    for (int d = 0; d < device_count_; ++d) {
      if (ctx == contexts_[d].load(std::memory_order_acquire)) {
        return absl::InvalidArgumentError(
            absl::StrCat("stream=0x", absl::Hex(handle), ": belongs to device ", d,
                         ", but this runtime runs on device ", device,
                         ": pass a stream created on device ", device));
      }
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "stream=0x", absl::Hex(handle), ": belongs to a CUDA context other than device ", device,
        "'s primary context (the one the CUDA runtime uses): create the stream with the CUDA "
        "runtime on device ", device));
  }

  int PointerDevice(const void* p) override {
    if (p == nullptr) return -1;
    CUpointer_attribute attributes[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                        CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                        CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
    unsigned int memory_type = 0;
    unsigned int is_managed = 0;  // the driver writes a bool-sized value; zeroed first
    int ordinal = -1;
    void* values[] = {&memory_type, &is_managed, &ordinal};
    if (api_.cuPointerGetAttributes(3, attributes, values,
                                    reinterpret_cast<CUdeviceptr>(p)) != CUDA_SUCCESS) {
      return -1;
    }
    if (is_managed != 0 || memory_type != CU_MEMORYTYPE_DEVICE) return -1;
    return ordinal >= 0 && ordinal < device_count_ ? ordinal : -1;
  }

  absl::StatusOr<ModuleHandle> LoadModule(int device,
                                          absl::Span<const uint8_t> binary) override {
    if (binary.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("LoadModule on device ", device, ": binary is empty: expected a cubin"));
    }
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    // The driver reads the image in place: an ELF cubin wants 8-byte alignment
    // and PTX text a terminating NUL, which a Span does not promise. Copy when
    // either is missing.
    const bool is_elf = binary.size() >= 4 && std::memcmp(binary.data(), "\x7f" "ELF", 4) == 0;
    const bool aligned = reinterpret_cast<uintptr_t>(binary.data()) % alignof(uint64_t) == 0;
    const bool terminated = binary.back() == 0;
    std::vector<uint64_t> copy;
    const void* image = binary.data();
    if (!aligned || (!is_elf && !terminated)) {
      copy.assign(binary.size() / sizeof(uint64_t) + 1, 0);  // +1: room for the NUL
      std::memcpy(copy.data(), binary.data(), binary.size());
      image = copy.data();
    }

    std::string error_log(kErrorLogBytes, '\0');
    CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void* values[] = {error_log.data(),
                      reinterpret_cast<void*>(static_cast<uintptr_t>(error_log.size()))};
    CUmodule module = nullptr;
    CUresult r = api_.cuModuleLoadDataEx(&module, image, 2, options, values);
    if (r != CUDA_SUCCESS) {
      error_log.resize(std::strlen(error_log.c_str()));
      absl::Status status =
          Error(r, absl::StrCat("cuModuleLoadDataEx(bytes=", binary.size(),
                                is_elf ? ", elf" : ", not elf", ") on device ", device));
      if (!error_log.empty()) {
        return absl::Status(status.code(),
                            absl::StrCat(status.message(), "\njit log:\n", error_log));
      }
      return status;
    }
    const auto handle = reinterpret_cast<ModuleHandle>(module);
    absl::MutexLock lock(&mu_);
    module_device_[handle] = device;
    return handle;
  }

  absl::Status UnloadModule(int device, ModuleHandle module) override {
    if (module == 0) return absl::InvalidArgumentError("UnloadModule: module=0: not a module");
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    MLAJIT_RETURN_IF_ERROR(Check(api_.cuModuleUnload(reinterpret_cast<CUmodule>(module)),
                                 "cuModuleUnload", device));
    absl::MutexLock lock(&mu_);
    module_device_.erase(module);
    absl::erase_if(function_device_,
                   [module](const auto& entry) { return entry.second.module == module; });
    return absl::OkStatus();
  }

  absl::StatusOr<FunctionHandle> GetFunction(ModuleHandle module,
                                             const std::string& name) override {
    MLAJIT_ASSIGN_OR_RETURN(int device, DeviceOf(module_device_, module, "module"));
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    CUfunction f = nullptr;
    CUresult r = api_.cuModuleGetFunction(&f, reinterpret_cast<CUmodule>(module), name.c_str());
    if (r != CUDA_SUCCESS) {
      return Error(r, absl::StrCat("cuModuleGetFunction(name=\"", name, "\") on device ", device));
    }
    const auto handle = reinterpret_cast<FunctionHandle>(f);
    absl::MutexLock lock(&mu_);
    function_device_[handle] = {module, device};
    return handle;
  }

  absl::Status SetMaxDynamicSharedMemory(FunctionHandle f, int bytes) override {
    int device = -1;
    {
      absl::MutexLock lock(&mu_);
      auto it = function_device_.find(f);
      if (it == function_device_.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "SetMaxDynamicSharedMemory: function=0x", absl::Hex(f), ": not from GetFunction"));
      }
      device = it->second.device;
    }
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    CUresult r = api_.cuFuncSetAttribute(reinterpret_cast<CUfunction>(f),
                                         CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes);
    if (r != CUDA_SUCCESS) {
      return Error(r, absl::StrCat("cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes=",
                                   bytes, ") on device ", device));
    }
    return absl::OkStatus();
  }

  absl::Status Launch(int device, FunctionHandle f, const LaunchConfig& c, void** args,
                      StreamHandle stream) override {
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    CUresult r;
    if (c.programmatic_dependent || c.cluster_x > 1) {
      CUlaunchAttribute attributes[2] = {};
      unsigned count = 0;
      if (c.programmatic_dependent) {
        attributes[count].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attributes[count++].value.programmaticStreamSerializationAllowed = 1;
      }
      if (c.cluster_x > 1) {
        attributes[count].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attributes[count].value.clusterDim.x = c.cluster_x;
        attributes[count].value.clusterDim.y = 1;
        attributes[count++].value.clusterDim.z = 1;
      }
      CUlaunchConfig launch{};
      launch.gridDimX = c.grid_x;
      launch.gridDimY = c.grid_y;
      launch.gridDimZ = c.grid_z;
      launch.blockDimX = c.block_x;
      launch.blockDimY = c.block_y;
      launch.blockDimZ = c.block_z;
      launch.sharedMemBytes = c.shared_memory_bytes;
      launch.hStream = static_cast<CUstream>(stream);
      launch.attrs = attributes;
      launch.numAttrs = count;
      r = api_.cuLaunchKernelEx(&launch, reinterpret_cast<CUfunction>(f), args, nullptr);
    } else {
      r = api_.cuLaunchKernel(reinterpret_cast<CUfunction>(f), c.grid_x, c.grid_y, c.grid_z,
                              c.block_x, c.block_y, c.block_z, c.shared_memory_bytes,
                              static_cast<CUstream>(stream), args, nullptr);
    }
    if (r != CUDA_SUCCESS) {
      return Error(r, absl::StrCat("cuLaunchKernel(grid=[", c.grid_x, ",", c.grid_y, ",",
                                   c.grid_z, "], block=[", c.block_x, ",", c.block_y, ",",
                                   c.block_z, "], shared_memory_bytes=", c.shared_memory_bytes,
                                   ", cluster_x=", c.cluster_x, ") on device ", device));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<DevicePtr> Malloc(int device, size_t bytes) override {
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    CUdeviceptr p = 0;
    CUresult r = api_.cuMemAlloc(&p, bytes);
    if (r != CUDA_SUCCESS) {
      return Error(r, absl::StrCat("cuMemAlloc(bytes=", bytes, ") on device ", device));
    }
    return static_cast<DevicePtr>(p);
  }

  absl::Status Free(int device, DevicePtr p) override {
    if (p == 0) return absl::OkStatus();
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    CUresult r = api_.cuMemFree(static_cast<CUdeviceptr>(p));
    if (r != CUDA_SUCCESS) {
      return Error(r, absl::StrCat("cuMemFree(ptr=0x", absl::Hex(p), ") on device ", device));
    }
    return absl::OkStatus();
  }

  absl::Status MemcpyHtoD(int device, DevicePtr dst, const void* src, size_t bytes,
                          StreamHandle stream) override {
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    CUresult r = api_.cuMemcpyHtoDAsync(static_cast<CUdeviceptr>(dst), src, bytes,
                                        static_cast<CUstream>(stream));
    if (r != CUDA_SUCCESS) {
      return Error(r, absl::StrCat("cuMemcpyHtoDAsync(dst=0x", absl::Hex(dst), ", bytes=", bytes,
                                   ") on device ", device));
    }
    return absl::OkStatus();
  }

  absl::Status MemcpyDtoH(int device, void* dst, DevicePtr src, size_t bytes,
                          StreamHandle stream) override {
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    CUresult r = api_.cuMemcpyDtoHAsync(dst, static_cast<CUdeviceptr>(src), bytes,
                                        static_cast<CUstream>(stream));
    if (r != CUDA_SUCCESS) {
      return Error(r, absl::StrCat("cuMemcpyDtoHAsync(src=0x", absl::Hex(src), ", bytes=", bytes,
                                   ") on device ", device));
    }
    return absl::OkStatus();
  }

  absl::Status MemsetD8(int device, DevicePtr dst, uint8_t value, size_t bytes,
                        StreamHandle stream) override {
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    CUresult r = api_.cuMemsetD8Async(static_cast<CUdeviceptr>(dst), value, bytes,
                                      static_cast<CUstream>(stream));
    if (r != CUDA_SUCCESS) {
      return Error(r, absl::StrCat("cuMemsetD8Async(dst=0x", absl::Hex(dst),
                                   ", value=", static_cast<int>(value), ", bytes=", bytes, ") on device ", device));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<StreamHandle> CreateStream(int device) override {
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    CUstream stream = nullptr;
    // Non-blocking: our streams must not serialize behind the legacy default
    // stream, which other libraries in the process may be using.
    CUresult r = api_.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING);
    if (r != CUDA_SUCCESS) {
      return Error(r, absl::StrCat("cuStreamCreate(NON_BLOCKING) on device ", device));
    }
    return static_cast<StreamHandle>(stream);
  }

  absl::Status DestroyStream(int device, StreamHandle stream) override {
    if (stream == nullptr) return absl::OkStatus();  // the default stream is not ours
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    return Check(api_.cuStreamDestroy(static_cast<CUstream>(stream)), "cuStreamDestroy", device);
  }

  absl::Status StreamSynchronize(int device, StreamHandle stream) override {
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    return Check(api_.cuStreamSynchronize(static_cast<CUstream>(stream)), "cuStreamSynchronize",
                 device);
  }

  absl::StatusOr<EventHandle> CreateEvent(int device) override {
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    CUevent event = nullptr;
    MLAJIT_RETURN_IF_ERROR(
        Check(api_.cuEventCreate(&event, CU_EVENT_DEFAULT), "cuEventCreate", device));
    const auto handle = reinterpret_cast<EventHandle>(event);
    absl::MutexLock lock(&mu_);
    event_device_[handle] = device;
    return handle;
  }

  absl::Status DestroyEvent(int device, EventHandle event) override {
    if (event == 0) return absl::InvalidArgumentError("DestroyEvent: event=0: not an event");
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    MLAJIT_RETURN_IF_ERROR(
        Check(api_.cuEventDestroy(reinterpret_cast<CUevent>(event)), "cuEventDestroy", device));
    absl::MutexLock lock(&mu_);
    event_device_.erase(event);
    return absl::OkStatus();
  }

  absl::Status RecordEvent(int device, EventHandle event, StreamHandle stream) override {
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    return Check(api_.cuEventRecord(reinterpret_cast<CUevent>(event), static_cast<CUstream>(stream)),
                 "cuEventRecord", device);
  }

  absl::Status EventSynchronize(int device, EventHandle event) override {
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    return Check(api_.cuEventSynchronize(reinterpret_cast<CUevent>(event)), "cuEventSynchronize",
                 device);
  }

  absl::StatusOr<float> ElapsedMs(EventHandle start, EventHandle end) override {
    MLAJIT_ASSIGN_OR_RETURN(int device, DeviceOf(event_device_, start, "event"));
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    float ms = 0;
    MLAJIT_RETURN_IF_ERROR(Check(api_.cuEventElapsedTime(&ms, reinterpret_cast<CUevent>(start),
                                                         reinterpret_cast<CUevent>(end)),
                                 "cuEventElapsedTime", device));
    return ms;
  }

  absl::Status BeginCapture(int device, StreamHandle stream) override {
    const auto handle = reinterpret_cast<uintptr_t>(stream);
    if (handle == 0 || handle == reinterpret_cast<uintptr_t>(CU_STREAM_LEGACY)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "BeginCapture on device ", device, ": stream=0x", absl::Hex(handle),
          " is the legacy default stream, which cannot be captured: pass a stream from "
          "CreateStream"));
    }
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    CUresult r = api_.cuStreamBeginCapture(static_cast<CUstream>(stream),
                                           CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    if (r != CUDA_SUCCESS) {
      return Error(r, absl::StrCat("cuStreamBeginCapture(stream=0x", absl::Hex(handle),
                                   ", mode=THREAD_LOCAL) on device ", device));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<GraphHandle> EndCapture(int device, StreamHandle stream) override {
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    const auto handle = reinterpret_cast<uintptr_t>(stream);
    CUgraph graph = nullptr;
    CUresult r = api_.cuStreamEndCapture(static_cast<CUstream>(stream), &graph);
    if (r != CUDA_SUCCESS) {
      // The driver returns no graph on failure; release one anyway if it did.
      if (graph != nullptr) (void)api_.cuGraphDestroy(graph);
      absl::Status status = Error(r, absl::StrCat("cuStreamEndCapture(stream=0x",
                                                  absl::Hex(handle), ") on device ", device));
      return absl::Status(status.code(), absl::StrCat(status.message(), CaptureHint(r)));
    }
    CUgraphExec exec = nullptr;
    r = api_.cuGraphInstantiateWithFlags(&exec, graph, 0);
    // The executable graph is independent of the graph it was made from.
    (void)api_.cuGraphDestroy(graph);
    if (r != CUDA_SUCCESS) {
      return Error(r, absl::StrCat("cuGraphInstantiateWithFlags(flags=0) of the graph captured on "
                                   "stream=0x",
                                   absl::Hex(handle), " on device ", device));
    }
    return reinterpret_cast<GraphHandle>(exec);
  }

  absl::Status LaunchGraph(int device, GraphHandle graph, StreamHandle stream) override {
    if (graph == 0) {
      return absl::InvalidArgumentError("LaunchGraph: graph=0: not a graph from EndCapture");
    }
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    CUresult r =
        api_.cuGraphLaunch(reinterpret_cast<CUgraphExec>(graph), static_cast<CUstream>(stream));
    if (r != CUDA_SUCCESS) {
      return Error(r, absl::StrCat("cuGraphLaunch(graph=0x", absl::Hex(graph), ", stream=0x",
                                   absl::Hex(reinterpret_cast<uintptr_t>(stream)),
                                   ") on device ", device));
    }
    return absl::OkStatus();
  }

  absl::Status DestroyGraph(int device, GraphHandle graph) override {
    if (graph == 0) {
      return absl::InvalidArgumentError("DestroyGraph: graph=0: not a graph from EndCapture");
    }
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    CUresult r = api_.cuGraphExecDestroy(reinterpret_cast<CUgraphExec>(graph));
    if (r != CUDA_SUCCESS) {
      return Error(r, absl::StrCat("cuGraphExecDestroy(graph=0x", absl::Hex(graph),
                                   ") on device ", device));
    }
    return absl::OkStatus();
  }

  absl::Status EncodeTensorMap2D(const TensorMap2D& map, void* out) override {
    static_assert(sizeof(CUtensorMap) == kTensorMapBytes && alignof(CUtensorMap) <= 128);
    MLAJIT_RETURN_IF_ERROR(ValidateTensorMap2D(map));
    if (reinterpret_cast<uintptr_t>(out) % alignof(CUtensorMap) != 0) {
      return absl::InvalidArgumentError("EncodeTensorMap2D: out must be aligned like CUtensorMap");
    }
    if (api_.cuTensorMapEncodeTiled == nullptr) {
      return absl::UnimplementedError(
          "tensor maps: this driver lacks cuTensorMapEncodeTiled (needs a CUDA 12.0 driver)");
    }
    const cuuint64_t dims[2] = {map.cols, map.rows};
    const cuuint64_t strides[1] = {map.row_stride};
    const cuuint32_t box[2] = {map.box_cols, map.box_rows};
    const cuuint32_t element_strides[2] = {1, 1};
    const CUtensorMapSwizzle swizzle = map.swizzle == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                                       : map.swizzle == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                       : map.swizzle == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
                                                           : CU_TENSOR_MAP_SWIZZLE_NONE;
    // Out-of-bounds rows fill with zeros (FLOAT_OOB_FILL_NONE); L2 lines of
    // 128 bytes, as the cp.async copies it replaces hint.
    CUresult r = api_.cuTensorMapEncodeTiled(
        static_cast<CUtensorMap*>(out), CU_TENSOR_MAP_DATA_TYPE_UINT8, 2,
        const_cast<void*>(map.base), dims, strides, box, element_strides,
        CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
      return Error(r, absl::StrCat("cuTensorMapEncodeTiled(cols=", map.cols, " rows=", map.rows,
                                   " box=", map.box_cols, "x", map.box_rows,
                                   " swizzle=", map.swizzle, ")"));
    }
    return absl::OkStatus();
  }

 private:
  struct FunctionInfo {
    ModuleHandle module;
    int device;
  };

  CudaBackend() = default;

  absl::Status Init() {
    std::string why;
    if (!api_.Load(&why)) return absl::FailedPreconditionError(why);
    CUresult r = api_.cuInit(0);
    if (r != CUDA_SUCCESS) {
      absl::Status status = Error(r, "cuInit(0)");
      // Whatever cuInit reports, a driver that does not initialize is a
      // missing-driver condition for our callers.
      return absl::FailedPreconditionError(status.message());
    }
    int count = 0;
    MLAJIT_RETURN_IF_ERROR(Check(api_.cuDeviceGetCount(&count), "cuDeviceGetCount"));
    if (count <= 0) {
      return absl::FailedPreconditionError(
          "the CUDA driver reports no device (cuDeviceGetCount returned 0; check "
          "CUDA_VISIBLE_DEVICES)");
    }
    devices_.resize(count);
    for (int d = 0; d < count; ++d) {
      MLAJIT_RETURN_IF_ERROR(
          Check(api_.cuDeviceGet(&devices_[d], d), absl::StrCat("cuDeviceGet(ordinal=", d, ")")));
    }
    contexts_ = std::make_unique<std::atomic<CUcontext>[]>(count);
    for (int d = 0; d < count; ++d) contexts_[d].store(nullptr, std::memory_order_relaxed);
    device_count_ = count;
    return absl::OkStatus();
  }

  absl::Status Error(CUresult r, absl::string_view call) const {
    const char* name = nullptr;
    const char* text = nullptr;
    if (api_.cuGetErrorName == nullptr || api_.cuGetErrorName(r, &name) != CUDA_SUCCESS) {
      name = nullptr;
    }
    if (api_.cuGetErrorString == nullptr || api_.cuGetErrorString(r, &text) != CUDA_SUCCESS) {
      text = nullptr;
    }
    const std::string fallback = absl::StrCat("CUresult ", static_cast<int>(r));
    return DriverCallError(CudaResultCode(static_cast<int>(r)), call,
                           name != nullptr ? name : fallback,
                           text != nullptr ? text : "unknown error");
  }

  absl::Status Check(CUresult r, absl::string_view call) const {
    if (r == CUDA_SUCCESS) return absl::OkStatus();
    return Error(r, call);
  }

  absl::Status Check(CUresult r, const char* function, int device) const {
    if (r == CUDA_SUCCESS) return absl::OkStatus();
    return Error(r, absl::StrCat(function, " on device ", device));
  }

  // What to do about a failed cuStreamEndCapture; the driver's own text says
  // only what went wrong.
  static absl::string_view CaptureHint(CUresult r) {
    switch (r) {
      case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
        return " (a call on the capturing thread that cannot be captured, e.g. a synchronizing "
               "one or one on the legacy default stream, or a failed enqueue, invalidated the "
               "capture; the stream is no longer capturing)";
      case CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD:
        return " (the capture was begun on another thread: end it on the thread that began it)";
      case CUDA_ERROR_STREAM_CAPTURE_UNMATCHED:
      case CUDA_ERROR_ILLEGAL_STATE:
        return " (the stream is not capturing: call BeginCapture on it first)";
      default:
        return "";
    }
  }

  absl::Status Attribute(int device, CUdevice_attribute attribute, const char* name, int* value) {
    CUresult r = api_.cuDeviceGetAttribute(value, attribute, devices_[device]);
    if (r != CUDA_SUCCESS) {
      return Error(r, absl::StrCat("cuDeviceGetAttribute(", name, ") on device ", device));
    }
    return absl::OkStatus();
  }

  absl::Status CheckDevice(int device) const {
    if (device < 0 || device >= device_count_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "device=", device, ": must be in [0, ", device_count_, ") (CUDA devices visible)"));
    }
    return absl::OkStatus();
  }

  // Retains the primary context on first use (under mu_, so only once per
  // device and backend) and makes it current. The fast path is one atomic load
  // and cuCtxGetCurrent (cuCtxSetCurrent when another context is current); none
  // of them synchronizes.
  absl::Status MakeCurrent(int device) {
    MLAJIT_RETURN_IF_ERROR(CheckDevice(device));
    CUcontext ctx = contexts_[device].load(std::memory_order_acquire);
    if (ctx == nullptr) {
      absl::MutexLock lock(&mu_);
      ctx = contexts_[device].load(std::memory_order_relaxed);
      if (ctx == nullptr) {
        MLAJIT_RETURN_IF_ERROR(Check(api_.cuDevicePrimaryCtxRetain(&ctx, devices_[device]),
                                     "cuDevicePrimaryCtxRetain", device));
        contexts_[device].store(ctx, std::memory_order_release);
      }
    }
    // Already current (the common case within one call): a thread-local read
    // instead of a context switch.
    CUcontext now = nullptr;
    if (api_.cuCtxGetCurrent(&now) == CUDA_SUCCESS && now == ctx) return absl::OkStatus();
    return Check(api_.cuCtxSetCurrent(ctx), "cuCtxSetCurrent", device);
  }

  template <typename Map>
  absl::StatusOr<int> DeviceOf(const Map& map, uintptr_t handle, const char* what) {
    absl::MutexLock lock(&mu_);
    auto it = map.find(handle);
    if (it == map.end()) {
      return absl::InvalidArgumentError(absl::StrCat(what, "=0x", absl::Hex(handle),
                                                     ": not created by this backend"));
    }
    return it->second;
  }

  CudaDriverApi api_;
  int device_count_ = 0;
  std::vector<CUdevice> devices_;
  std::unique_ptr<std::atomic<CUcontext>[]> contexts_;

  absl::Mutex mu_;
  absl::flat_hash_map<ModuleHandle, int> module_device_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<FunctionHandle, FunctionInfo> function_device_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<EventHandle, int> event_device_ ABSL_GUARDED_BY(mu_);
};

}  // namespace
}  // namespace gpu_internal

absl::StatusOr<std::unique_ptr<Backend>> OpenCudaBackend() {
  return gpu_internal::CudaBackend::Open();
}

}  // namespace mlajit::gpu
