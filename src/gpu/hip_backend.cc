// Backend over the HIP runtime's module API, loaded from libamdhip64 at run
// time.
//
// Every call that names a device starts with hipSetDevice (thread-local and
// cheap), which is HIP's equivalent of making the primary context current.
// Handle-only calls look up the device the handle was created on.
//
// ABI: prototypes come from the HIP headers this is compiled against (Debian
// ships 5.2); the entry points used here kept their signatures through ROCm 6.
// Two things did not stay put and are handled explicitly:
//  - hipDeviceProp_t changed layout in ROCm 6 (hipGetDevicePropertiesR0600), so
//    the only field read from it, gcnArchName, is located defensively in an
//    oversized buffer (see GcnArchName below); everything else comes from
//    hipDeviceGetAttribute / hipDeviceGetName / hipDeviceTotalMem.
//  - hipDeviceAttribute_t values are taken from the 5.x header; the ones used
//    here have the same values in ROCm 6.
//
// Graph capture: Launch, MemcpyHtoD, MemcpyDtoH and MemsetD8 only enqueue.
// BeginCapture uses hipStreamCaptureModeThreadLocal, as on CUDA, so that other
// threads' unrelated HIP calls neither fail nor invalidate our capture.
#include <dlfcn.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <hip/hip_runtime_api.h>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "src/base/status_macros.h"
#include "src/gpu/backend.h"
#include "src/gpu/backend_internal.h"

namespace mlajit::gpu {
namespace gpu_internal {
namespace {

static_assert(hipSuccess == 0 && hipErrorInvalidValue == 1 && hipErrorOutOfMemory == 2 &&
                  hipErrorNotInitialized == 3 && hipErrorDeinitialized == 4 &&
                  hipErrorInsufficientDriver == 35 && hipErrorNoDevice == 100 &&
                  hipErrorInvalidDevice == 101 && hipErrorInvalidImage == 200 &&
                  hipErrorNoBinaryForGpu == 209 && hipErrorInvalidKernelFile == 218 &&
                  hipErrorInvalidHandle == 400 && hipErrorNotFound == 500 &&
                  hipErrorLaunchOutOfResources == 701,
              "hipError_t values changed; update HipResultCode()");

// Offsets of gcnArchName[256] in the two hipDeviceProp_t layouts: R0000 (ROCm
// <= 5, the struct in the headers we compile against) and R0600 (ROCm 6+).
constexpr size_t kGcnArchNameOffsetR0000 = offsetof(hipDeviceProp_t, gcnArchName);
constexpr size_t kGcnArchNameOffsetR0600 = 1160;
// Far larger than either layout (about 1.5 KB), so a newer runtime that writes
// a bigger struct still stays inside the buffer.
constexpr size_t kDevicePropBufferBytes = 64 * 1024;

using GetDevicePropertiesFn = hipError_t (*)(void* prop, int device);

// hipGraphInstantiate's error log.
constexpr size_t kGraphLogBytes = 4096;

#define MLAJIT_HIP_FUNCTIONS(X) \
  X(hipGetErrorName)            \
  X(hipGetErrorString)          \
  X(hipInit)                    \
  X(hipGetDeviceCount)          \
  X(hipSetDevice)               \
  X(hipGetDevice)               \
  X(hipDeviceGet)               \
  X(hipDeviceGetName)           \
  X(hipDeviceGetAttribute)      \
  X(hipDeviceTotalMem)          \
  X(hipModuleLoadData)          \
  X(hipModuleUnload)            \
  X(hipModuleGetFunction)       \
  X(hipModuleLaunchKernel)      \
  X(hipFree)                    \
  X(hipMemcpyHtoDAsync)         \
  X(hipMemcpyDtoHAsync)         \
  X(hipMemsetD8Async)           \
  X(hipStreamCreateWithFlags)   \
  X(hipStreamDestroy)           \
  X(hipStreamSynchronize)       \
  X(hipEventCreate)             \
  X(hipEventDestroy)            \
  X(hipEventRecord)             \
  X(hipEventSynchronize)        \
  X(hipEventElapsedTime)        \
  X(hipStreamBeginCapture)      \
  X(hipStreamEndCapture)        \
  X(hipGraphInstantiate)        \
  X(hipGraphLaunch)             \
  X(hipGraphExecDestroy)        \
  X(hipGraphDestroy)

struct HipApi {
#define MLAJIT_HIP_DECLARE_(name) decltype(&::name) name = nullptr;
  MLAJIT_HIP_FUNCTIONS(MLAJIT_HIP_DECLARE_)
#undef MLAJIT_HIP_DECLARE_
  // hipMalloc is overloaded (a template for typed pointers), so spell it out.
  hipError_t (*hipMalloc)(void** ptr, size_t size) = nullptr;
  GetDevicePropertiesFn get_device_properties = nullptr;
  size_t gcn_arch_name_offset = 0;
  void* library = nullptr;

  bool Load(std::string* why) {
    library = OpenFirstLibrary({"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"}, why);
    if (library == nullptr) {
      *why = absl::StrCat("the HIP runtime libamdhip64 could not be loaded (", *why, ")");
      return false;
    }
    std::string missing;
    auto resolve = [&](const char* symbol, auto* slot) {
      void* p = dlsym(library, symbol);
      if (p == nullptr) {
        absl::StrAppend(&missing, missing.empty() ? "" : ", ", symbol);
        return;
      }
      *slot = reinterpret_cast<std::remove_pointer_t<decltype(slot)>>(p);
    };
#define MLAJIT_HIP_RESOLVE_(name) resolve(#name, &name);
    MLAJIT_HIP_FUNCTIONS(MLAJIT_HIP_RESOLVE_)
#undef MLAJIT_HIP_RESOLVE_
    resolve("hipMalloc", &hipMalloc);
    if (void* p = dlsym(library, "hipGetDevicePropertiesR0600")) {
      get_device_properties = reinterpret_cast<GetDevicePropertiesFn>(p);
      gcn_arch_name_offset = kGcnArchNameOffsetR0600;
    } else if (void* p = dlsym(library, "hipGetDeviceProperties")) {
      get_device_properties = reinterpret_cast<GetDevicePropertiesFn>(p);
      gcn_arch_name_offset = kGcnArchNameOffsetR0000;
    } else {
      absl::StrAppend(&missing, missing.empty() ? "" : ", ", "hipGetDeviceProperties");
    }
    if (!missing.empty()) {
      *why = absl::StrCat("libamdhip64 lacks entry points: ", missing);
      return false;
    }
    return true;
  }
};

// Finds "gfxNNN[:features]" in a hipDeviceProp buffer: at the expected offset
// if the layout is the one we think, else the first NUL-terminated "gfx..."
// string in the buffer (name[] at offset 0 is the marketing name, never "gfx").
std::string FindGcnArchName(const char* buffer, size_t size, size_t expected_offset) {
  auto arch_at = [&](size_t offset) -> std::string {
    if (offset + 4 > size || std::strncmp(buffer + offset, "gfx", 3) != 0) return "";
    const char* end = static_cast<const char*>(std::memchr(buffer + offset, '\0', size - offset));
    if (end == nullptr || end - (buffer + offset) > 255) return "";
    return std::string(buffer + offset, end);
  };
  std::string arch = arch_at(expected_offset);
  for (size_t offset = 256; arch.empty() && offset + 4 <= size; offset += 4) {
    arch = arch_at(offset);
  }
  return arch;
}

class HipBackend final : public Backend {
 public:
  static absl::StatusOr<std::unique_ptr<Backend>> Open() {
    auto backend = std::unique_ptr<HipBackend>(new HipBackend());
    MLAJIT_RETURN_IF_ERROR(backend->Init());
    return std::unique_ptr<Backend>(std::move(backend));
  }

  Vendor vendor() const override { return Vendor::kAmd; }

  absl::StatusOr<int> DeviceCount() override { return device_count_; }

  absl::StatusOr<DeviceProperties> GetDeviceProperties(int device) override {
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    DeviceProperties props;
    props.vendor = Vendor::kAmd;
    hipDevice_t dev = 0;
    MLAJIT_RETURN_IF_ERROR(Check(api_.hipDeviceGet(&dev, device), "hipDeviceGet", device));
    char name[256] = {};
    MLAJIT_RETURN_IF_ERROR(
        Check(api_.hipDeviceGetName(name, sizeof(name) - 1, dev), "hipDeviceGetName", device));
    props.name = name;
    MLAJIT_RETURN_IF_ERROR(Attribute(device, hipDeviceAttributeMultiprocessorCount,
                                     "MultiprocessorCount", &props.sm_count));
    MLAJIT_RETURN_IF_ERROR(Attribute(device, hipDeviceAttributeMaxThreadsPerMultiProcessor,
                                     "MaxThreadsPerMultiProcessor", &props.max_threads_per_sm));
    // AMD has no opt-in: a block may use all of the LDS the device reports.
    int optin = 0;
    MLAJIT_RETURN_IF_ERROR(Attribute(device, hipDeviceAttributeMaxSharedMemoryPerBlock,
                                     "MaxSharedMemoryPerBlock",
                                     &props.max_shared_memory_per_block_optin));
    if (api_.hipDeviceGetAttribute(&optin, hipDeviceAttributeSharedMemPerBlockOptin, device) ==
            hipSuccess &&
        optin > props.max_shared_memory_per_block_optin) {
      props.max_shared_memory_per_block_optin = optin;
    }
    size_t total = 0;
    MLAJIT_RETURN_IF_ERROR(
        Check(api_.hipDeviceTotalMem(&total, dev), "hipDeviceTotalMem", device));
    props.total_memory = static_cast<int64_t>(total);

    std::vector<uint64_t> buffer(kDevicePropBufferBytes / sizeof(uint64_t), 0);
    MLAJIT_RETURN_IF_ERROR(Check(api_.get_device_properties(buffer.data(), device),
                                 "hipGetDeviceProperties", device));
    props.arch = NormalizeGfxArch(FindGcnArchName(reinterpret_cast<const char*>(buffer.data()),
                                                  kDevicePropBufferBytes,
                                                  api_.gcn_arch_name_offset));
    if (props.arch.empty()) {
      return absl::InternalError(absl::StrCat(
          "hipGetDeviceProperties on device ", device,
          ": no gcnArchName (\"gfx...\") found in the returned properties"));
    }
    return props;
  }

  absl::Status SetCurrentDevice(int device) override { return MakeCurrent(device); }

  // Token: device + 1, 0 when hipGetDevice fails (then nothing is restored).
  uintptr_t SaveCurrent() override {
    int device = -1;
    if (api_.hipGetDevice(&device) != hipSuccess || device < 0) return 0;
    return static_cast<uintptr_t>(device) + 1;
  }

  void RestoreCurrent(uintptr_t saved) override {
    if (saved == 0) return;
    int now = -1;
    const int device = static_cast<int>(saved - 1);
    if (api_.hipGetDevice(&now) == hipSuccess && now == device) return;
    (void)api_.hipSetDevice(device);
  }

  // HIP 5.x has no stream-to-device query; a stream of another device makes
  // the launch fail with the runtime's error instead.
  absl::Status CheckStream(int device, StreamHandle) override {
    if (device < 0 || device >= device_count_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "device=", device, ": must be in [0, ", device_count_, ") (HIP devices visible)"));
    }
    return absl::OkStatus();
  }

  // hipPointerAttribute_t's memory-type enum changed values in ROCm 6; rather
  // than guess which runtime is loaded, HIP pointers are not classified.
  int PointerDevice(const void*) override { return -1; }

  absl::StatusOr<ModuleHandle> LoadModule(int device,
                                          absl::Span<const uint8_t> binary) override {
    if (binary.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "LoadModule on device ", device, ": binary is empty: expected a code object"));
    }
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    // Code objects are ELF; hand the loader an 8-byte aligned copy if needed.
    std::vector<uint64_t> copy;
    const void* image = binary.data();
    if (reinterpret_cast<uintptr_t>(binary.data()) % alignof(uint64_t) != 0) {
      copy.assign(binary.size() / sizeof(uint64_t) + 1, 0);
      std::memcpy(copy.data(), binary.data(), binary.size());
      image = copy.data();
    }
    hipModule_t module = nullptr;
    hipError_t r = api_.hipModuleLoadData(&module, image);
    if (r != hipSuccess) {
      return Error(r, absl::StrCat("hipModuleLoadData(bytes=", binary.size(), ") on device ",
                                   device));
    }
    const auto handle = reinterpret_cast<ModuleHandle>(module);
    absl::MutexLock lock(&mu_);
    module_device_[handle] = device;
    return handle;
  }

  absl::Status UnloadModule(int device, ModuleHandle module) override {
    if (module == 0) return absl::InvalidArgumentError("UnloadModule: module=0: not a module");
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    MLAJIT_RETURN_IF_ERROR(Check(api_.hipModuleUnload(reinterpret_cast<hipModule_t>(module)),
                                 "hipModuleUnload", device));
    absl::MutexLock lock(&mu_);
    module_device_.erase(module);
    for (auto it = function_device_.begin(); it != function_device_.end();) {
      if (it->second.module == module) {
        function_device_.erase(it++);
      } else {
        ++it;
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<FunctionHandle> GetFunction(ModuleHandle module,
                                             const std::string& name) override {
    MLAJIT_ASSIGN_OR_RETURN(int device, DeviceOf(module_device_, module, "module"));
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    hipFunction_t f = nullptr;
    hipError_t r =
        api_.hipModuleGetFunction(&f, reinterpret_cast<hipModule_t>(module), name.c_str());
    if (r != hipSuccess) {
      return Error(r,
                   absl::StrCat("hipModuleGetFunction(name=\"", name, "\") on device ", device));
    }
    const auto handle = reinterpret_cast<FunctionHandle>(f);
    absl::MutexLock lock(&mu_);
    function_device_[handle] = {module, device};
    return handle;
  }

  // AMD needs no opt-in for large dynamic LDS; the launch itself fails if the
  // request exceeds the device. Only the bounds are checked here.
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
    int limit = 0;
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    MLAJIT_RETURN_IF_ERROR(
        Attribute(device, hipDeviceAttributeMaxSharedMemoryPerBlock, "MaxSharedMemoryPerBlock",
                  &limit));
    if (bytes < 0 || bytes > limit) {
      return absl::InvalidArgumentError(absl::StrCat("SetMaxDynamicSharedMemory: bytes=", bytes,
                                                     ": must be in [0, ", limit, "] on device ",
                                                     device));
    }
    return absl::OkStatus();
  }

  absl::Status Launch(int device, FunctionHandle f, const LaunchConfig& c, void** args,
                      StreamHandle stream) override {
    if (c.cluster_x > 1) {
      return absl::UnimplementedError(absl::StrCat(
          "Launch: cluster_x=", c.cluster_x, ": thread-block clusters need CUDA sm_90 or later"));
    }
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    hipError_t r = api_.hipModuleLaunchKernel(
        reinterpret_cast<hipFunction_t>(f), c.grid_x, c.grid_y, c.grid_z, c.block_x, c.block_y,
        c.block_z, c.shared_memory_bytes, static_cast<hipStream_t>(stream), args, nullptr);
    if (r != hipSuccess) {
      return Error(r, absl::StrCat("hipModuleLaunchKernel(grid=[", c.grid_x, ",", c.grid_y, ",",
                                   c.grid_z, "], block=[", c.block_x, ",", c.block_y, ",",
                                   c.block_z, "], shared_memory_bytes=", c.shared_memory_bytes,
                                   ") on device ", device));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<DevicePtr> Malloc(int device, size_t bytes) override {
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    void* p = nullptr;
    hipError_t r = api_.hipMalloc(&p, bytes);
    if (r != hipSuccess) {
      return Error(r, absl::StrCat("hipMalloc(bytes=", bytes, ") on device ", device));
    }
    return reinterpret_cast<DevicePtr>(p);
  }

  absl::Status Free(int device, DevicePtr p) override {
    if (p == 0) return absl::OkStatus();
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    hipError_t r = api_.hipFree(reinterpret_cast<void*>(p));
    if (r != hipSuccess) {
      return Error(r, absl::StrCat("hipFree(ptr=0x", absl::Hex(p), ") on device ", device));
    }
    return absl::OkStatus();
  }

  absl::Status MemcpyHtoD(int device, DevicePtr dst, const void* src, size_t bytes,
                          StreamHandle stream) override {
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    // HIP 5 declares the source non-const; it is only read.
    hipError_t r = api_.hipMemcpyHtoDAsync(reinterpret_cast<hipDeviceptr_t>(dst),
                                           const_cast<void*>(src), bytes,
                                           static_cast<hipStream_t>(stream));
    if (r != hipSuccess) {
      return Error(r, absl::StrCat("hipMemcpyHtoDAsync(dst=0x", absl::Hex(dst), ", bytes=", bytes,
                                   ") on device ", device));
    }
    return absl::OkStatus();
  }

  absl::Status MemcpyDtoH(int device, void* dst, DevicePtr src, size_t bytes,
                          StreamHandle stream) override {
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    hipError_t r = api_.hipMemcpyDtoHAsync(dst, reinterpret_cast<hipDeviceptr_t>(src), bytes,
                                           static_cast<hipStream_t>(stream));
    if (r != hipSuccess) {
      return Error(r, absl::StrCat("hipMemcpyDtoHAsync(src=0x", absl::Hex(src), ", bytes=", bytes,
                                   ") on device ", device));
    }
    return absl::OkStatus();
  }

  absl::Status MemsetD8(int device, DevicePtr dst, uint8_t value, size_t bytes,
                        StreamHandle stream) override {
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    hipError_t r = api_.hipMemsetD8Async(reinterpret_cast<hipDeviceptr_t>(dst), value, bytes,
                                         static_cast<hipStream_t>(stream));
    if (r != hipSuccess) {
      return Error(r, absl::StrCat("hipMemsetD8Async(dst=0x", absl::Hex(dst),
                                   ", value=", static_cast<int>(value), ", bytes=", bytes,
                                   ") on device ", device));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<StreamHandle> CreateStream(int device) override {
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    hipStream_t stream = nullptr;
    // Non-blocking, as on CUDA: never serialize behind the null stream.
    MLAJIT_RETURN_IF_ERROR(Check(api_.hipStreamCreateWithFlags(&stream, hipStreamNonBlocking),
                                 "hipStreamCreateWithFlags(NonBlocking)", device));
    return static_cast<StreamHandle>(stream);
  }

  absl::Status DestroyStream(int device, StreamHandle stream) override {
    if (stream == nullptr) return absl::OkStatus();
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    return Check(api_.hipStreamDestroy(static_cast<hipStream_t>(stream)), "hipStreamDestroy",
                 device);
  }

  absl::Status StreamSynchronize(int device, StreamHandle stream) override {
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    return Check(api_.hipStreamSynchronize(static_cast<hipStream_t>(stream)),
                 "hipStreamSynchronize", device);
  }

  absl::StatusOr<EventHandle> CreateEvent(int device) override {
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    hipEvent_t event = nullptr;
    MLAJIT_RETURN_IF_ERROR(Check(api_.hipEventCreate(&event), "hipEventCreate", device));
    const auto handle = reinterpret_cast<EventHandle>(event);
    absl::MutexLock lock(&mu_);
    event_device_[handle] = device;
    return handle;
  }

  absl::Status DestroyEvent(int device, EventHandle event) override {
    if (event == 0) return absl::InvalidArgumentError("DestroyEvent: event=0: not an event");
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    MLAJIT_RETURN_IF_ERROR(Check(api_.hipEventDestroy(reinterpret_cast<hipEvent_t>(event)),
                                 "hipEventDestroy", device));
    absl::MutexLock lock(&mu_);
    event_device_.erase(event);
    return absl::OkStatus();
  }

  absl::Status RecordEvent(int device, EventHandle event, StreamHandle stream) override {
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    return Check(api_.hipEventRecord(reinterpret_cast<hipEvent_t>(event),
                                     static_cast<hipStream_t>(stream)),
                 "hipEventRecord", device);
  }

  absl::Status EventSynchronize(int device, EventHandle event) override {
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    return Check(api_.hipEventSynchronize(reinterpret_cast<hipEvent_t>(event)),
                 "hipEventSynchronize", device);
  }

  absl::StatusOr<float> ElapsedMs(EventHandle start, EventHandle end) override {
    MLAJIT_ASSIGN_OR_RETURN(int device, DeviceOf(event_device_, start, "event"));
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    float ms = 0;
    MLAJIT_RETURN_IF_ERROR(Check(api_.hipEventElapsedTime(&ms, reinterpret_cast<hipEvent_t>(start),
                                                          reinterpret_cast<hipEvent_t>(end)),
                                 "hipEventElapsedTime", device));
    return ms;
  }

  absl::Status BeginCapture(int device, StreamHandle stream) override {
    if (stream == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "BeginCapture on device ", device,
          ": stream=0x0 is the null stream, which cannot be captured: pass a stream from "
          "CreateStream"));
    }
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    hipError_t r = api_.hipStreamBeginCapture(static_cast<hipStream_t>(stream),
                                              hipStreamCaptureModeThreadLocal);
    if (r != hipSuccess) {
      return Error(r, absl::StrCat("hipStreamBeginCapture(stream=0x",
                                   absl::Hex(reinterpret_cast<uintptr_t>(stream)),
                                   ", mode=ThreadLocal) on device ", device));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<GraphHandle> EndCapture(int device, StreamHandle stream) override {
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    const auto handle = reinterpret_cast<uintptr_t>(stream);
    hipGraph_t graph = nullptr;
    hipError_t r = api_.hipStreamEndCapture(static_cast<hipStream_t>(stream), &graph);
    if (r != hipSuccess) {
      if (graph != nullptr) (void)api_.hipGraphDestroy(graph);
      absl::Status status = Error(r, absl::StrCat("hipStreamEndCapture(stream=0x",
                                                  absl::Hex(handle), ") on device ", device));
      return absl::Status(status.code(), absl::StrCat(status.message(), CaptureHint(r)));
    }
    hipGraphExec_t exec = nullptr;
    std::string log(kGraphLogBytes, '\0');
    r = api_.hipGraphInstantiate(&exec, graph, nullptr, log.data(), log.size());
    (void)api_.hipGraphDestroy(graph);  // the executable graph does not need it
    if (r != hipSuccess) {
      log.resize(std::strlen(log.c_str()));
      absl::Status status =
          Error(r, absl::StrCat("hipGraphInstantiate of the graph captured on stream=0x",
                                absl::Hex(handle), " on device ", device));
      if (log.empty()) return status;
      return absl::Status(status.code(), absl::StrCat(status.message(), "\nlog:\n", log));
    }
    return reinterpret_cast<GraphHandle>(exec);
  }

  absl::Status LaunchGraph(int device, GraphHandle graph, StreamHandle stream) override {
    if (graph == 0) {
      return absl::InvalidArgumentError("LaunchGraph: graph=0: not a graph from EndCapture");
    }
    MLAJIT_RETURN_IF_ERROR(MakeCurrent(device));
    hipError_t r = api_.hipGraphLaunch(reinterpret_cast<hipGraphExec_t>(graph),
                                       static_cast<hipStream_t>(stream));
    if (r != hipSuccess) {
      return Error(r, absl::StrCat("hipGraphLaunch(graph=0x", absl::Hex(graph), ", stream=0x",
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
    hipError_t r = api_.hipGraphExecDestroy(reinterpret_cast<hipGraphExec_t>(graph));
    if (r != hipSuccess) {
      return Error(r, absl::StrCat("hipGraphExecDestroy(graph=0x", absl::Hex(graph),
                                   ") on device ", device));
    }
    return absl::OkStatus();
  }

 private:
  struct FunctionInfo {
    ModuleHandle module;
    int device;
  };

  HipBackend() = default;

  absl::Status Init() {
    std::string why;
    if (!api_.Load(&why)) return absl::FailedPreconditionError(why);
    hipError_t r = api_.hipInit(0);
    if (r != hipSuccess) {
      return absl::FailedPreconditionError(Error(r, "hipInit(0)").message());
    }
    int count = 0;
    r = api_.hipGetDeviceCount(&count);
    // ROCm reports "no device" as an error from hipGetDeviceCount.
    if (r == hipErrorNoDevice || (r == hipSuccess && count <= 0)) {
      return absl::FailedPreconditionError(
          "the HIP runtime reports no device (check HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES)");
    }
    MLAJIT_RETURN_IF_ERROR(Check(r, "hipGetDeviceCount"));
    device_count_ = count;
    return absl::OkStatus();
  }

  absl::Status Error(hipError_t r, absl::string_view call) const {
    const char* name = api_.hipGetErrorName != nullptr ? api_.hipGetErrorName(r) : nullptr;
    const char* text = api_.hipGetErrorString != nullptr ? api_.hipGetErrorString(r) : nullptr;
    const std::string fallback = absl::StrCat("hipError_t ", static_cast<int>(r));
    return DriverCallError(HipResultCode(static_cast<int>(r)), call,
                           name != nullptr ? name : fallback,
                           text != nullptr ? text : "unknown error");
  }

  absl::Status Check(hipError_t r, absl::string_view call) const {
    if (r == hipSuccess) return absl::OkStatus();
    return Error(r, call);
  }

  absl::Status Check(hipError_t r, const char* function, int device) const {
    if (r == hipSuccess) return absl::OkStatus();
    return Error(r, absl::StrCat(function, " on device ", device));
  }

  // What to do about a failed hipStreamEndCapture; the runtime's own text says
  // only what went wrong.
  static absl::string_view CaptureHint(hipError_t r) {
    switch (r) {
      case hipErrorStreamCaptureInvalidated:
        return " (a call on the capturing thread that cannot be captured, e.g. a synchronizing "
               "one or one on the null stream, or a failed enqueue, invalidated the capture)";
      case hipErrorStreamCaptureWrongThread:
        return " (the capture was begun on another thread: end it on the thread that began it)";
      case hipErrorStreamCaptureUnmatched:
      case hipErrorIllegalState:
        return " (the stream is not capturing: call BeginCapture on it first)";
      default:
        return "";
    }
  }

  absl::Status Attribute(int device, hipDeviceAttribute_t attribute, const char* name,
                         int* value) {
    hipError_t r = api_.hipDeviceGetAttribute(value, attribute, device);
    if (r != hipSuccess) {
      return Error(r, absl::StrCat("hipDeviceGetAttribute(", name, ") on device ", device));
    }
    return absl::OkStatus();
  }

  absl::Status MakeCurrent(int device) {
    if (device < 0 || device >= device_count_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "device=", device, ": must be in [0, ", device_count_, ") (HIP devices visible)"));
    }
    return Check(api_.hipSetDevice(device), "hipSetDevice", device);
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

  HipApi api_;
  int device_count_ = 0;

  absl::Mutex mu_;
  absl::flat_hash_map<ModuleHandle, int> module_device_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<FunctionHandle, FunctionInfo> function_device_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<EventHandle, int> event_device_ ABSL_GUARDED_BY(mu_);
};

}  // namespace
}  // namespace gpu_internal

absl::StatusOr<std::unique_ptr<Backend>> OpenHipBackend() {
  return gpu_internal::HipBackend::Open();
}

}  // namespace mlajit::gpu
