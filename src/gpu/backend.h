// The GPU backend interface: one API over the CUDA driver and HIP, each loaded
// with dlopen at run time so that the library, the CLI and the CPU tests work on
// machines without a GPU or driver.
//
//   MLAJIT_ASSIGN_OR_RETURN(gpu::Backend* b, gpu::DefaultBackend());
//   MLAJIT_ASSIGN_OR_RETURN(gpu::DeviceProperties p, b->GetDeviceProperties(0));
//   MLAJIT_ASSIGN_OR_RETURN(gpu::ModuleHandle m, b->LoadModule(0, cubin));
//   MLAJIT_ASSIGN_OR_RETURN(gpu::FunctionHandle f, b->GetFunction(m, "mla_decode"));
//   MLAJIT_RETURN_IF_ERROR(b->Launch(f, {grid, block, smem}, args, stream));
//
// Every call that touches a device takes the device ordinal and makes that
// device's primary context current on the calling thread first, so threads may
// switch devices freely. No device or driver -> kFailedPrecondition.
#ifndef MLAJIT_SRC_GPU_BACKEND_H_
#define MLAJIT_SRC_GPU_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace mlajit::gpu {

enum class Vendor { kNvidia, kAmd };

struct DeviceProperties {
  Vendor vendor = Vendor::kNvidia;
  std::string name;        // "NVIDIA H200"
  std::string arch;        // full target: "sm_90a" (arch-specific on sm_90+), "gfx942"
  int sm_count = 0;        // multiprocessors / compute units
  int max_shared_memory_per_block_optin = 0;  // bytes
  int max_threads_per_sm = 0;
  int64_t total_memory = 0;  // bytes
  // "0000:41:00.0" (domain:bus:device.function, hex), the name NVML and
  // nvidia-smi know the device by; empty where the backend does not say (HIP).
  std::string pci_bus_id;
};

// Opaque handles; 0 is never a valid value.
using DevicePtr = uint64_t;
using ModuleHandle = uintptr_t;
using FunctionHandle = uintptr_t;
using StreamHandle = void*;  // CUstream / hipStream_t; nullptr = the default stream
using EventHandle = uintptr_t;
using GraphHandle = uintptr_t;  // an executable graph (CUgraphExec / hipGraphExec_t)

struct LaunchConfig {
  unsigned grid_x = 1, grid_y = 1, grid_z = 1;
  unsigned block_x = 1, block_y = 1, block_z = 1;
  unsigned shared_memory_bytes = 0;  // dynamic
  // Programmatic dependent launch (CUDA, sm_90+): the kernel may be scheduled
  // before the previous kernel on the stream has finished, and must itself wait
  // (griddepcontrol.wait) before touching memory that kernel uses. Ignored by
  // backends without it.
  bool programmatic_dependent = false;
  // Thread-block clusters of this many CTAs along x (CUDA sm_90+; grid_x a
  // multiple of it); 1: none. Backends without clusters refuse more than 1.
  unsigned cluster_x = 1;
};

// A two-dimensional tensor map over a matrix of bytes (CUDA's tensor memory
// accelerator: a kernel copies `box` sub-matrices of it into shared memory
// with one instruction). Rows are `row_stride` bytes apart; a box is
// box_cols bytes of box_rows consecutive rows, written to shared memory with
// the given swizzle (0: none, or 32, 64 or 128 bytes; the box's row must then
// be at most that wide). Rows at or past `rows` read as zeros.
struct TensorMap2D {
  const void* base = nullptr;  // 16-byte aligned
  uint64_t cols = 0;           // bytes per row
  uint64_t rows = 0;
  uint64_t row_stride = 0;     // a multiple of 16
  uint32_t box_cols = 0;       // 1..256, a multiple of 16
  uint32_t box_rows = 0;       // 1..256
  int swizzle = 0;
};
// The encoded map: 128 opaque bytes that a kernel takes as a parameter
// (CUtensorMap's size and alignment).
constexpr size_t kTensorMapBytes = 128;

class Backend {
 public:
  virtual ~Backend() = default;

  virtual Vendor vendor() const = 0;
  virtual absl::StatusOr<int> DeviceCount() = 0;
  virtual absl::StatusOr<DeviceProperties> GetDeviceProperties(int device) = 0;
  // Makes the device's primary context current on this thread.
  virtual absl::Status SetCurrentDevice(int device) = 0;
  // The calling thread's device binding (CUDA: the current context; HIP: the
  // current device) as an opaque token, and putting it back. Every call above
  // that names a device changes the binding; the public entry points restore
  // the caller's with ScopedDeviceRestore so that an engine's own CUDA/HIP calls
  // keep going to the device it chose.
  virtual uintptr_t SaveCurrent() = 0;
  virtual void RestoreCurrent(uintptr_t saved) = 0;
  // kInvalidArgument when work enqueued on `stream` would not run on `device`
  // (CUDA: the stream belongs to another context). nullptr and the special
  // default-stream handles belong to every device. Backends that cannot tell
  // return OK.
  virtual absl::Status CheckStream(int device, StreamHandle stream) = 0;
  // The ordinal of the device whose memory `p` points into, or -1 when that is
  // not one device's memory or cannot be told (host, managed, unknown to the
  // driver, or a backend without pointer queries). Cheap: no synchronisation.
  virtual int PointerDevice(const void* p) = 0;

  // Loads a compiled binary (cubin / code object) on `device`.
  virtual absl::StatusOr<ModuleHandle> LoadModule(int device,
                                                  absl::Span<const uint8_t> binary) = 0;
  virtual absl::Status UnloadModule(int device, ModuleHandle module) = 0;
  virtual absl::StatusOr<FunctionHandle> GetFunction(ModuleHandle module,
                                                     const std::string& name) = 0;
  // Opts the function in to more than 48 KB of dynamic shared memory.
  virtual absl::Status SetMaxDynamicSharedMemory(FunctionHandle f, int bytes) = 0;
  // Enqueues f with kernel parameters `args` (pointers to each argument value).
  virtual absl::Status Launch(int device, FunctionHandle f, const LaunchConfig& config,
                              void** args, StreamHandle stream) = 0;

  virtual absl::StatusOr<DevicePtr> Malloc(int device, size_t bytes) = 0;
  virtual absl::Status Free(int device, DevicePtr p) = 0;
  virtual absl::Status MemcpyHtoD(int device, DevicePtr dst, const void* src, size_t bytes,
                                  StreamHandle stream) = 0;  // async on stream
  virtual absl::Status MemcpyDtoH(int device, void* dst, DevicePtr src, size_t bytes,
                                  StreamHandle stream) = 0;  // async on stream
  virtual absl::Status MemsetD8(int device, DevicePtr dst, uint8_t value, size_t bytes,
                                StreamHandle stream) = 0;  // async on stream

  virtual absl::StatusOr<StreamHandle> CreateStream(int device) = 0;
  virtual absl::Status DestroyStream(int device, StreamHandle stream) = 0;
  virtual absl::Status StreamSynchronize(int device, StreamHandle stream) = 0;

  virtual absl::StatusOr<EventHandle> CreateEvent(int device) = 0;
  virtual absl::Status DestroyEvent(int device, EventHandle event) = 0;
  virtual absl::Status RecordEvent(int device, EventHandle event, StreamHandle stream) = 0;
  virtual absl::Status EventSynchronize(int device, EventHandle event) = 0;
  virtual absl::StatusOr<float> ElapsedMs(EventHandle start, EventHandle end) = 0;

  // Graph capture: everything enqueued on `stream` between BeginCapture and
  // EndCapture is recorded instead of run, then replayed with LaunchGraph.
  //
  //   MLAJIT_RETURN_IF_ERROR(b->BeginCapture(0, stream));
  //   ... Launch / MemsetD8 / mlajit_decode on `stream` ...
  //   MLAJIT_ASSIGN_OR_RETURN(gpu::GraphHandle g, b->EndCapture(0, stream));
  //   MLAJIT_RETURN_IF_ERROR(b->LaunchGraph(0, g, stream));  // as often as wanted
  //   MLAJIT_RETURN_IF_ERROR(b->DestroyGraph(0, g));
  //
  // Thread-local capture mode: only the capturing thread is barred from calls
  // that would synchronize (those invalidate the capture); other threads'
  // unrelated CUDA/HIP work is unaffected. The default stream (nullptr) cannot
  // be captured -> kInvalidArgument.
  virtual absl::Status BeginCapture(int device, StreamHandle stream) = 0;
  // Ends the capture and instantiates what was recorded; the returned handle is
  // the executable graph (the recorded graph itself is released). An error
  // names the cause: a capture invalidated by a disallowed call (the stream
  // still leaves capture mode), one begun on another thread, or none begun.
  virtual absl::StatusOr<GraphHandle> EndCapture(int device, StreamHandle stream) = 0;
  // Enqueues one replay of `graph` on `stream` (any stream of the same device).
  virtual absl::Status LaunchGraph(int device, GraphHandle graph, StreamHandle stream) = 0;
  // graph=0 -> kInvalidArgument. CUDA lets replays still in flight finish and
  // frees the graph after; HIP promises nothing, so synchronize first.
  virtual absl::Status DestroyGraph(int device, GraphHandle graph) = 0;

  // Encodes `map` into `out` (kTensorMapBytes, 128-byte aligned). Host only: no
  // device or stream is touched. kUnimplemented where the backend or driver
  // has no tensor maps (HIP, CUDA drivers before 12.0), kInvalidArgument for
  // a map the hardware cannot describe.
  virtual absl::Status EncodeTensorMap2D(const TensorMap2D& map, void* out) {
    (void)map;
    (void)out;
    return absl::UnimplementedError("tensor maps are not supported by this backend");
  }
};

// Restores the calling thread's device binding on scope exit.
class ScopedDeviceRestore {
 public:
  explicit ScopedDeviceRestore(Backend* backend)
      : backend_(backend), saved_(backend != nullptr ? backend->SaveCurrent() : 0) {}
  ~ScopedDeviceRestore() {
    if (backend_ != nullptr) backend_->RestoreCurrent(saved_);
  }
  ScopedDeviceRestore(const ScopedDeviceRestore&) = delete;
  ScopedDeviceRestore& operator=(const ScopedDeviceRestore&) = delete;

 private:
  Backend* backend_;
  uintptr_t saved_;
};

// A stream created on `device` and destroyed on scope exit.
//
//   gpu::ScopedStream stream(backend, device);
//   MLAJIT_RETURN_IF_ERROR(stream.Create());
//   ... backend->Launch(device, f, config, args, stream.get()) ...
class ScopedStream {
 public:
  ScopedStream(Backend* backend, int device) : backend_(backend), device_(device) {}
  ~ScopedStream() {
    if (stream_ != nullptr) (void)backend_->DestroyStream(device_, stream_);
  }
  ScopedStream(const ScopedStream&) = delete;
  ScopedStream& operator=(const ScopedStream&) = delete;
  absl::Status Create() {
    absl::StatusOr<StreamHandle> s = backend_->CreateStream(device_);
    if (!s.ok()) return s.status();
    stream_ = *s;
    return absl::OkStatus();
  }
  StreamHandle get() const { return stream_; }

 private:
  Backend* backend_;
  int device_;
  StreamHandle stream_ = nullptr;
};

// dlopens libcuda.so.1. kFailedPrecondition (with the dlerror text) when absent
// or when no device is visible.
absl::StatusOr<std::unique_ptr<Backend>> OpenCudaBackend();
// dlopens libamdhip64.so. kFailedPrecondition when absent or no device is visible.
absl::StatusOr<std::unique_ptr<Backend>> OpenHipBackend();
// The process-wide backend: CUDA if it opens, else HIP; created once, never
// destroyed. The error explains what was tried.
absl::StatusOr<Backend*> DefaultBackend();

}  // namespace mlajit::gpu

#endif  // MLAJIT_SRC_GPU_BACKEND_H_
