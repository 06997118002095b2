// GPU tests of the backend on the default device: properties, memory, streams,
// events, graph capture, module loading and launching (kernels compiled here
// with NVRTC), large dynamic shared memory and concurrent use from two threads.
// Skips with a reason when no backend opens.
//
// NVRTC is dlopen'd directly by the test (a minimal binding below) so that these
// tests depend on nothing but the backend; kernel tests skip without it.
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/gpu/backend.h"

namespace mlajit::gpu {
namespace {

using ::testing::HasSubstr;

// --- A minimal NVRTC binding (prototypes as in nvrtc.h, CUDA 11-13). ---
struct Nvrtc {
  using Program = struct NvrtcProgramOpaque*;
  int (*create)(Program*, const char*, const char*, int, const char* const*,
                const char* const*) = nullptr;
  int (*destroy)(Program*) = nullptr;
  int (*compile)(Program, int, const char* const*) = nullptr;
  int (*cubin_size)(Program, size_t*) = nullptr;
  int (*cubin)(Program, char*) = nullptr;
  int (*log_size)(Program, size_t*) = nullptr;
  int (*log)(Program, char*) = nullptr;
  const char* (*error_string)(int) = nullptr;

  // nullptr (with the reason in *why) when NVRTC is not installed.
  static const Nvrtc* Get(std::string* why) {
    static std::string* error = new std::string;
    static const Nvrtc* const nvrtc = [] {
      const char* names[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12",
                             "/usr/local/cuda/lib64/libnvrtc.so"};
      void* lib = nullptr;
      for (const char* name : names) {
        if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
        absl::StrAppend(error, name, ": ", dlerror(), "; ");
      }
      if (lib == nullptr) return static_cast<Nvrtc*>(nullptr);
      auto* n = new Nvrtc;
      bool ok = true;
      auto bind = [&](const char* symbol, auto* slot) {
        void* p = dlsym(lib, symbol);
        if (p == nullptr) {
          absl::StrAppend(error, "missing ", symbol, "; ");
          ok = false;
        }
        *slot = reinterpret_cast<std::remove_pointer_t<decltype(slot)>>(p);
      };
      bind("nvrtcCreateProgram", &n->create);
      bind("nvrtcDestroyProgram", &n->destroy);
      bind("nvrtcCompileProgram", &n->compile);
      bind("nvrtcGetCUBINSize", &n->cubin_size);
      bind("nvrtcGetCUBIN", &n->cubin);
      bind("nvrtcGetProgramLogSize", &n->log_size);
      bind("nvrtcGetProgramLog", &n->log);
      bind("nvrtcGetErrorString", &n->error_string);
      return ok ? n : nullptr;
    }();
    if (nvrtc == nullptr && why != nullptr) *why = *error;
    return nvrtc;
  }

  // Compiles `source` for `arch` ("sm_90a") to a cubin.
  absl::StatusOr<std::vector<uint8_t>> Compile(const std::string& source,
                                               const std::string& arch) const {
    Program prog = nullptr;
    if (int r = create(&prog, source.c_str(), "backend_test.cu", 0, nullptr, nullptr); r != 0) {
      return absl::InternalError(absl::StrCat("nvrtcCreateProgram: ", error_string(r)));
    }
    const std::string arch_flag = "--gpu-architecture=" + arch;
    const char* options[] = {arch_flag.c_str(), "--std=c++17"};
    const int result = compile(prog, 2, options);
    size_t log_bytes = 0;
    log_size(prog, &log_bytes);
    std::string log(log_bytes, '\0');
    if (log_bytes > 0) this->log(prog, log.data());
    if (result != 0) {
      destroy(&prog);
      return absl::InternalError(
          absl::StrCat("nvrtcCompileProgram(", arch_flag, "): ", error_string(result), "\n", log));
    }
    size_t bytes = 0;
    cubin_size(prog, &bytes);
    std::vector<uint8_t> binary(bytes);
    cubin(prog, reinterpret_cast<char*>(binary.data()));
    destroy(&prog);
    return binary;
  }
};

constexpr char kKernels[] = R"(
extern "C" __global__ void fill_pattern(unsigned* out, unsigned n, unsigned seed) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = i * 2654435761u ^ seed;
}

// Writes 0..words-1 to dynamic shared memory, then thread 0 sums them.
extern "C" __global__ void sum_dynamic_smem(unsigned* out, unsigned words) {
  extern __shared__ unsigned smem[];
  for (unsigned i = threadIdx.x; i < words; i += blockDim.x) smem[i] = i;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned sum = 0;
    for (unsigned i = 0; i < words; ++i) sum += smem[i];
    out[0] = sum;
  }
}
)";

uint32_t Pattern(uint32_t i, uint32_t seed) { return (i * 2654435761u) ^ seed; }

class BackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto backend = DefaultBackend();
    if (!backend.ok()) GTEST_SKIP() << "no GPU backend: " << backend.status();
    backend_ = *backend;
    auto props = backend_->GetDeviceProperties(kDevice);
    ASSERT_TRUE(props.ok()) << props.status();
    props_ = *props;
  }

  // The test kernels as a module on kDevice; skips when they cannot be built here.
  void LoadKernels() {
    if (backend_->vendor() != Vendor::kNvidia) GTEST_SKIP() << "kernel tests use NVRTC (CUDA)";
    std::string why;
    const Nvrtc* nvrtc = Nvrtc::Get(&why);
    if (nvrtc == nullptr) GTEST_SKIP() << "NVRTC not available: " << why;
    auto cubin = nvrtc->Compile(kKernels, props_.arch);
    ASSERT_TRUE(cubin.ok()) << cubin.status();
    auto module = backend_->LoadModule(kDevice, *cubin);
    ASSERT_TRUE(module.ok()) << module.status();
    module_ = *module;
  }

  void TearDown() override {
    if (module_ != 0) {
      EXPECT_TRUE(backend_->UnloadModule(kDevice, module_).ok());
    }
  }

  static constexpr int kDevice = 0;
  Backend* backend_ = nullptr;
  DeviceProperties props_;
  ModuleHandle module_ = 0;
};

TEST_F(BackendTest, DevicePropertiesAreSane) {
  EXPECT_FALSE(props_.name.empty());
  EXPECT_FALSE(props_.arch.empty());
  if (props_.vendor == Vendor::kNvidia) {
    EXPECT_THAT(props_.arch, ::testing::StartsWith("sm_"));
    // domain:bus:device.function, as NVML and nvidia-smi name the device.
    EXPECT_THAT(props_.pci_bus_id,
                ::testing::MatchesRegex("[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\\.0"));
  } else {
    EXPECT_THAT(props_.arch, ::testing::StartsWith("gfx"));
    EXPECT_EQ(props_.arch.find(':'), std::string::npos);
  }
  EXPECT_GT(props_.sm_count, 0);
  EXPECT_GE(props_.max_shared_memory_per_block_optin, 48 * 1024);
  EXPECT_GT(props_.max_threads_per_sm, 0);
  EXPECT_GT(props_.total_memory, int64_t{1} << 30);
  auto count = backend_->DeviceCount();
  ASSERT_TRUE(count.ok());
  EXPECT_EQ(backend_->GetDeviceProperties(*count).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::cout << "device 0: " << props_.name << " " << props_.arch << ", " << props_.sm_count
            << " SMs, " << props_.max_shared_memory_per_block_optin << " B smem/block, "
            << props_.total_memory << " B, PCI " << props_.pci_bus_id << "\n";
}

TEST_F(BackendTest, MemoryRoundTripOnAStream) {
  constexpr size_t kBytes = 1 << 20;
  auto stream = backend_->CreateStream(kDevice);
  ASSERT_TRUE(stream.ok()) << stream.status();
  auto p = backend_->Malloc(kDevice, kBytes);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_NE(*p, 0u);

  std::vector<uint8_t> in(kBytes), out(kBytes, 0xEE);
  for (size_t i = 0; i < kBytes; ++i) in[i] = static_cast<uint8_t>(i * 7 + 3);
  ASSERT_TRUE(backend_->MemcpyHtoD(kDevice, *p, in.data(), kBytes, *stream).ok());
  ASSERT_TRUE(backend_->MemsetD8(kDevice, *p + 4096, 0x5A, 8192, *stream).ok());
  ASSERT_TRUE(backend_->MemcpyDtoH(kDevice, out.data(), *p, kBytes, *stream).ok());
  ASSERT_TRUE(backend_->StreamSynchronize(kDevice, *stream).ok());
  for (size_t i = 0; i < kBytes; ++i) {
    const uint8_t want = (i >= 4096 && i < 4096 + 8192) ? 0x5A : in[i];
    ASSERT_EQ(out[i], want) << "byte " << i;
  }
  EXPECT_TRUE(backend_->Free(kDevice, *p).ok());
  EXPECT_TRUE(backend_->DestroyStream(kDevice, *stream).ok());
}

TEST_F(BackendTest, DefaultStreamWorksToo) {
  auto p = backend_->Malloc(kDevice, 256);
  ASSERT_TRUE(p.ok()) << p.status();
  std::vector<uint8_t> out(256, 0);
  ASSERT_TRUE(backend_->MemsetD8(kDevice, *p, 0x11, 256, nullptr).ok());
  ASSERT_TRUE(backend_->MemcpyDtoH(kDevice, out.data(), *p, 256, nullptr).ok());
  ASSERT_TRUE(backend_->StreamSynchronize(kDevice, nullptr).ok());
  EXPECT_EQ(out, std::vector<uint8_t>(256, 0x11));
  EXPECT_TRUE(backend_->Free(kDevice, *p).ok());
}

TEST_F(BackendTest, HugeAllocationIsResourceExhausted) {
  auto p = backend_->Malloc(kDevice, size_t{1} << 50);  // 1 PiB
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted) << p.status();
  EXPECT_THAT(p.status().message(), HasSubstr("on device 0"));
  std::cout << "1 PiB allocation: " << p.status() << "\n";
}

TEST_F(BackendTest, EventsMeasureElapsedTime) {
  auto stream = backend_->CreateStream(kDevice);
  ASSERT_TRUE(stream.ok()) << stream.status();
  auto start = backend_->CreateEvent(kDevice);
  auto end = backend_->CreateEvent(kDevice);
  ASSERT_TRUE(start.ok() && end.ok());
  auto p = backend_->Malloc(kDevice, 64 << 20);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_TRUE(backend_->RecordEvent(kDevice, *start, *stream).ok());
  ASSERT_TRUE(backend_->MemsetD8(kDevice, *p, 1, 64 << 20, *stream).ok());
  ASSERT_TRUE(backend_->RecordEvent(kDevice, *end, *stream).ok());
  ASSERT_TRUE(backend_->EventSynchronize(kDevice, *end).ok());
  auto ms = backend_->ElapsedMs(*start, *end);
  ASSERT_TRUE(ms.ok()) << ms.status();
  EXPECT_GE(*ms, 0.0f);
  EXPECT_TRUE(backend_->Free(kDevice, *p).ok());
  EXPECT_TRUE(backend_->DestroyEvent(kDevice, *start).ok());
  EXPECT_TRUE(backend_->DestroyEvent(kDevice, *end).ok());
  EXPECT_TRUE(backend_->DestroyStream(kDevice, *stream).ok());
}

// Two memsets captured into a graph cover the first three quarters of a buffer;
// between replays the whole buffer is reset outside the graph. Each replay must
// rewrite exactly its three quarters, and capturing must not run anything.
TEST_F(BackendTest, GraphCaptureReplaysTheCapturedWork) {
  constexpr size_t kBytes = 1 << 20, kHalf = kBytes / 2, kQuarter = kBytes / 4;
  constexpr uint8_t kFirst = 0x5A, kSecond = 0xC3, kBefore = 0xEE;
  EXPECT_EQ(backend_->BeginCapture(kDevice, nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend_->LaunchGraph(kDevice, 0, nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend_->DestroyGraph(kDevice, 0).code(), absl::StatusCode::kInvalidArgument);

  auto stream = backend_->CreateStream(kDevice);
  ASSERT_TRUE(stream.ok()) << stream.status();
  auto p = backend_->Malloc(kDevice, kBytes);
  ASSERT_TRUE(p.ok()) << p.status();
  std::vector<uint8_t> host(kBytes);
  auto read_back = [&]() -> absl::Status {
    std::fill(host.begin(), host.end(), 0);
    absl::Status s = backend_->MemcpyDtoH(kDevice, host.data(), *p, kBytes, *stream);
    return s.ok() ? backend_->StreamSynchronize(kDevice, *stream) : s;
  };
  ASSERT_TRUE(backend_->MemsetD8(kDevice, *p, kBefore, kBytes, *stream).ok());
  ASSERT_TRUE(backend_->StreamSynchronize(kDevice, *stream).ok());

  absl::Status begin = backend_->BeginCapture(kDevice, *stream);
  ASSERT_TRUE(begin.ok()) << begin;
  absl::Status first = backend_->MemsetD8(kDevice, *p, kFirst, kHalf, *stream);
  absl::Status second = backend_->MemsetD8(kDevice, *p + kHalf, kSecond, kQuarter, *stream);
  // Ended even when an enqueue failed, so the stream leaves capture mode.
  auto graph = backend_->EndCapture(kDevice, *stream);
  ASSERT_TRUE(first.ok()) << first;
  ASSERT_TRUE(second.ok()) << second;
  ASSERT_TRUE(graph.ok()) << graph.status();
  ASSERT_NE(*graph, 0u);

  ASSERT_TRUE(read_back().ok());
  for (size_t i = 0; i < kBytes; ++i) {
    ASSERT_EQ(host[i], kBefore) << "captured work ran during capture; byte " << i;
  }

  const uint8_t resets[] = {0x00, 0x11, 0x22};
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(backend_->MemsetD8(kDevice, *p, resets[round], kBytes, *stream).ok());
    absl::Status launch = backend_->LaunchGraph(kDevice, *graph, *stream);
    ASSERT_TRUE(launch.ok()) << launch;
    ASSERT_TRUE(read_back().ok());
    for (size_t i = 0; i < kBytes; ++i) {
      const uint8_t want = i < kHalf ? kFirst : i < kHalf + kQuarter ? kSecond : resets[round];
      ASSERT_EQ(host[i], want) << "replay " << round << ", byte " << i;
    }
  }

  EXPECT_TRUE(backend_->DestroyGraph(kDevice, *graph).ok());
  EXPECT_TRUE(backend_->Free(kDevice, *p).ok());
  EXPECT_TRUE(backend_->DestroyStream(kDevice, *stream).ok());
}

TEST_F(BackendTest, InvalidModuleIsAnErrorNotACrash) {
  const std::vector<uint8_t> garbage = {0x7f, 'E', 'L', 'F', 1, 2, 3, 4, 5, 6, 7, 8};
  auto module = backend_->LoadModule(kDevice, garbage);
  ASSERT_FALSE(module.ok());
  EXPECT_EQ(module.status().code(), absl::StatusCode::kInvalidArgument) << module.status();
  EXPECT_THAT(module.status().message(), HasSubstr("on device 0"));
  std::cout << "garbage ELF: " << module.status() << "\n";

  const std::vector<uint8_t> text = {'n', 'o', 't', ' ', 'p', 't', 'x'};
  EXPECT_FALSE(backend_->LoadModule(kDevice, text).ok());
  EXPECT_EQ(backend_->LoadModule(kDevice, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend_->GetFunction(/*module=*/12345, "f").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(BackendTest, CompiledKernelWritesPattern) {
  LoadKernels();
  if (IsSkipped() || HasFatalFailure()) return;
  auto missing = backend_->GetFunction(module_, "no_such_kernel");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  std::cout << "missing kernel: " << missing.status() << "\n";
  auto f = backend_->GetFunction(module_, "fill_pattern");
  ASSERT_TRUE(f.ok()) << f.status();

  constexpr uint32_t kN = 100000, kSeed = 0xC0FFEE;
  auto stream = backend_->CreateStream(kDevice);
  ASSERT_TRUE(stream.ok());
  auto out = backend_->Malloc(kDevice, kN * sizeof(uint32_t));
  ASSERT_TRUE(out.ok());
  ASSERT_TRUE(backend_->MemsetD8(kDevice, *out, 0xFF, kN * sizeof(uint32_t), *stream).ok());
  DevicePtr out_ptr = *out;
  uint32_t n = kN, seed = kSeed;
  void* args[] = {&out_ptr, &n, &seed};
  LaunchConfig config;
  config.grid_x = (kN + 255) / 256;
  config.block_x = 256;
  ASSERT_TRUE(backend_->Launch(kDevice, *f, config, args, *stream).ok());
  std::vector<uint32_t> host(kN);
  ASSERT_TRUE(backend_->MemcpyDtoH(kDevice, host.data(), *out, kN * sizeof(uint32_t), *stream).ok());
  ASSERT_TRUE(backend_->StreamSynchronize(kDevice, *stream).ok());
  for (uint32_t i = 0; i < kN; ++i) ASSERT_EQ(host[i], Pattern(i, kSeed)) << "index " << i;

  // A launch the hardware cannot run is an error, not a crash.
  LaunchConfig too_big = config;
  too_big.block_x = 4096;
  absl::Status too_big_status = backend_->Launch(kDevice, *f, too_big, args, *stream);
  EXPECT_EQ(too_big_status.code(), absl::StatusCode::kInvalidArgument) << too_big_status;
  std::cout << "block_x=4096: " << too_big_status << "\n";

  EXPECT_TRUE(backend_->Free(kDevice, *out).ok());
  EXPECT_TRUE(backend_->DestroyStream(kDevice, *stream).ok());
}

TEST_F(BackendTest, LargeDynamicSharedMemory) {
  constexpr int kBytes = 200 * 1024;
  if (props_.max_shared_memory_per_block_optin < kBytes) {
    GTEST_SKIP() << "device allows only " << props_.max_shared_memory_per_block_optin
                 << " B of shared memory per block";
  }
  LoadKernels();
  if (IsSkipped() || HasFatalFailure()) return;
  auto f = backend_->GetFunction(module_, "sum_dynamic_smem");
  ASSERT_TRUE(f.ok()) << f.status();
  auto out = backend_->Malloc(kDevice, sizeof(uint32_t));
  ASSERT_TRUE(out.ok());
  DevicePtr out_ptr = *out;
  uint32_t words = kBytes / sizeof(uint32_t);
  void* args[] = {&out_ptr, &words};
  LaunchConfig config;
  config.block_x = 256;
  config.shared_memory_bytes = kBytes;
  // Without the opt-in, more than 48 KB must be refused.
  EXPECT_FALSE(backend_->Launch(kDevice, *f, config, args, nullptr).ok());
  ASSERT_TRUE(backend_->SetMaxDynamicSharedMemory(*f, kBytes).ok());
  ASSERT_TRUE(backend_->Launch(kDevice, *f, config, args, nullptr).ok());
  uint32_t sum = 0;
  ASSERT_TRUE(backend_->MemcpyDtoH(kDevice, &sum, *out, sizeof(sum), nullptr).ok());
  ASSERT_TRUE(backend_->StreamSynchronize(kDevice, nullptr).ok());
  EXPECT_EQ(sum, static_cast<uint32_t>(uint64_t{words} * (words - 1) / 2));
  EXPECT_TRUE(backend_->Free(kDevice, *out).ok());
}

TEST_F(BackendTest, TwoThreadsOnSeparateStreams) {
  LoadKernels();
  if (IsSkipped() || HasFatalFailure()) return;
  auto f = backend_->GetFunction(module_, "fill_pattern");
  ASSERT_TRUE(f.ok()) << f.status();
  constexpr uint32_t kN = 1 << 20;
  constexpr int kRounds = 20;
  absl::Status results[2];
  auto worker = [&](int t) {
    absl::Status& result = results[t];
    auto fail = [&](absl::string_view what, const absl::Status& s) {
      result = absl::Status(s.code(), absl::StrCat("thread ", t, ": ", what, ": ", s.message()));
    };
    auto stream = backend_->CreateStream(kDevice);
    if (!stream.ok()) return fail("CreateStream", stream.status());
    auto out = backend_->Malloc(kDevice, kN * sizeof(uint32_t));
    if (!out.ok()) return fail("Malloc", out.status());
    std::vector<uint32_t> host(kN);
    for (int round = 0; round < kRounds && result.ok(); ++round) {
      DevicePtr out_ptr = *out;
      uint32_t n = kN, seed = static_cast<uint32_t>(t * 1000 + round);
      void* args[] = {&out_ptr, &n, &seed};
      LaunchConfig config;
      config.grid_x = kN / 256;
      config.block_x = 256;
      absl::Status s = backend_->Launch(kDevice, *f, config, args, *stream);
      if (s.ok()) s = backend_->MemcpyDtoH(kDevice, host.data(), *out, kN * 4, *stream);
      if (s.ok()) s = backend_->StreamSynchronize(kDevice, *stream);
      if (!s.ok()) return fail("round", s);
      for (uint32_t i = 0; i < kN; i += 4099) {
        if (host[i] != Pattern(i, seed)) {
          result = absl::InternalError(absl::StrCat("thread ", t, " round ", round, " index ", i,
                                                    ": got ", host[i], ", want ",
                                                    Pattern(i, seed)));
          break;
        }
      }
    }
    if (absl::Status s = backend_->Free(kDevice, *out); !s.ok()) fail("Free", s);
    if (absl::Status s = backend_->DestroyStream(kDevice, *stream); !s.ok()) {
      fail("DestroyStream", s);
    }
  };
  std::thread a(worker, 0), b(worker, 1);
  a.join();
  b.join();
  EXPECT_TRUE(results[0].ok()) << results[0];
  EXPECT_TRUE(results[1].ok()) << results[1];
}

}  // namespace
}  // namespace mlajit::gpu
