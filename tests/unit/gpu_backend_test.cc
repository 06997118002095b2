// CPU tests of the GPU stage: the pure helpers, and that opening a backend on a
// machine without a driver fails cleanly. On a machine with a driver the same
// tests check the opposite (the backend opens and sees a device).
#include <dlfcn.h>

#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/gpu/backend.h"
#include "src/gpu/backend_internal.h"

namespace mlajit::gpu {
namespace {

using gpu_internal::CudaArchName;
using gpu_internal::CudaResultCode;
using gpu_internal::DriverCallError;
using gpu_internal::HipResultCode;
using gpu_internal::NormalizeGfxArch;
using ::testing::AnyOf;
using ::testing::HasSubstr;

bool LibraryLoads(const char* name) {
  void* handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  // Kept open: closing libcuda/libamdhip64 is not reliably safe, and the
  // backend under test opens the same library anyway.
  return handle != nullptr;
}

TEST(CudaArchNameTest, ArchSpecificSuffixFromSm90) {
  EXPECT_EQ(CudaArchName(7, 0), "sm_70");
  EXPECT_EQ(CudaArchName(8, 0), "sm_80");
  EXPECT_EQ(CudaArchName(8, 6), "sm_86");
  EXPECT_EQ(CudaArchName(8, 9), "sm_89");
  EXPECT_EQ(CudaArchName(9, 0), "sm_90a");
  EXPECT_EQ(CudaArchName(10, 0), "sm_100a");
  EXPECT_EQ(CudaArchName(10, 3), "sm_103a");
  EXPECT_EQ(CudaArchName(12, 0), "sm_120a");
}

TEST(NormalizeGfxArchTest, StripsFeatureSuffixes) {
  EXPECT_EQ(NormalizeGfxArch("gfx90a:sramecc+:xnack-"), "gfx90a");
  EXPECT_EQ(NormalizeGfxArch("gfx942:sramecc+:xnack-"), "gfx942");
  EXPECT_EQ(NormalizeGfxArch("gfx950"), "gfx950");
  EXPECT_EQ(NormalizeGfxArch("gfx1100 "), "gfx1100");
  EXPECT_EQ(NormalizeGfxArch(""), "");
}

TEST(CudaResultCodeTest, MapsDriverErrorsToStatusCodes) {
  EXPECT_EQ(CudaResultCode(0), absl::StatusCode::kOk);
  EXPECT_EQ(CudaResultCode(1), absl::StatusCode::kInvalidArgument);     // INVALID_VALUE
  EXPECT_EQ(CudaResultCode(2), absl::StatusCode::kResourceExhausted);   // OUT_OF_MEMORY
  EXPECT_EQ(CudaResultCode(3), absl::StatusCode::kFailedPrecondition);  // NOT_INITIALIZED
  EXPECT_EQ(CudaResultCode(34), absl::StatusCode::kFailedPrecondition); // STUB_LIBRARY
  EXPECT_EQ(CudaResultCode(100), absl::StatusCode::kFailedPrecondition);  // NO_DEVICE
  EXPECT_EQ(CudaResultCode(101), absl::StatusCode::kInvalidArgument);     // INVALID_DEVICE
  EXPECT_EQ(CudaResultCode(200), absl::StatusCode::kInvalidArgument);     // INVALID_IMAGE
  EXPECT_EQ(CudaResultCode(209), absl::StatusCode::kInvalidArgument);     // NO_BINARY_FOR_GPU
  EXPECT_EQ(CudaResultCode(400), absl::StatusCode::kInvalidArgument);     // INVALID_HANDLE
  EXPECT_EQ(CudaResultCode(500), absl::StatusCode::kNotFound);            // NOT_FOUND
  EXPECT_EQ(CudaResultCode(701), absl::StatusCode::kResourceExhausted);   // LAUNCH_OUT_OF_RESOURCES
  EXPECT_EQ(CudaResultCode(700), absl::StatusCode::kInternal);            // ILLEGAL_ADDRESS
  EXPECT_EQ(CudaResultCode(999), absl::StatusCode::kInternal);            // UNKNOWN
  EXPECT_EQ(CudaResultCode(803), absl::StatusCode::kFailedPrecondition);  // DRIVER_MISMATCH
}

TEST(HipResultCodeTest, MapsRuntimeErrorsToStatusCodes) {
  EXPECT_EQ(HipResultCode(0), absl::StatusCode::kOk);
  EXPECT_EQ(HipResultCode(1), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HipResultCode(2), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(HipResultCode(35), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(HipResultCode(100), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(HipResultCode(218), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HipResultCode(500), absl::StatusCode::kNotFound);
  EXPECT_EQ(HipResultCode(719), absl::StatusCode::kInternal);
}

TEST(DriverCallErrorTest, NamesTheCallAndTheError) {
  absl::Status s = DriverCallError(CudaResultCode(2), "cuMemAlloc(bytes=1024) on device 0",
                                   "CUDA_ERROR_OUT_OF_MEMORY", "out of memory");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(),
            "cuMemAlloc(bytes=1024) on device 0: CUDA_ERROR_OUT_OF_MEMORY: out of memory");
  // A success code passed by mistake must still produce an error.
  EXPECT_EQ(DriverCallError(absl::StatusCode::kOk, "x", "y", "z").code(),
            absl::StatusCode::kInternal);
}

TEST(ValidateTensorMap2DTest, NamesTheFieldOutOfRange) {
  TensorMap2D ok;
  ok.base = reinterpret_cast<void*>(0x10000);
  ok.cols = 576;
  ok.rows = 1000;
  ok.row_stride = 576;
  ok.box_cols = 128;
  ok.box_rows = 64;
  ok.swizzle = 128;
  EXPECT_TRUE(gpu_internal::ValidateTensorMap2D(ok).ok());
  struct Case {
    const char* field;
    void (*spoil)(TensorMap2D&);
  };
  const Case cases[] = {
      {"base=0x10008", [](TensorMap2D& m) { m.base = reinterpret_cast<void*>(0x10008); }},
      {"base=0x0", [](TensorMap2D& m) { m.base = nullptr; }},
      {"cols=0", [](TensorMap2D& m) { m.cols = 0; }},
      {"rows=4294967297", [](TensorMap2D& m) { m.rows = (uint64_t{1} << 32) + 1; }},
      {"row_stride=584", [](TensorMap2D& m) { m.row_stride = 584; }},   // not a multiple of 16
      {"row_stride=560", [](TensorMap2D& m) { m.row_stride = 560; }},   // shorter than a row
      {"box_rows=257", [](TensorMap2D& m) { m.box_rows = 257; }},
      {"box_cols=24", [](TensorMap2D& m) { m.box_cols = 24; }},
      {"box_cols=256", [](TensorMap2D& m) { m.box_cols = 256; }},  // wider than the swizzle
      {"swizzle=16", [](TensorMap2D& m) { m.swizzle = 16; }},
  };
  for (const Case& c : cases) {
    TensorMap2D m = ok;
    c.spoil(m);
    absl::Status s = gpu_internal::ValidateTensorMap2D(m);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(s.message(), HasSubstr(c.field));
  }
  TensorMap2D unswizzled = ok;
  unswizzled.swizzle = 0;
  unswizzled.box_cols = 256;
  EXPECT_TRUE(gpu_internal::ValidateTensorMap2D(unswizzled).ok());
}

TEST(OpenFirstLibraryTest, ReportsEveryName) {
  std::string why;
  EXPECT_EQ(gpu_internal::OpenFirstLibrary({"libmlajit_absent_a.so", "libmlajit_absent_b.so"},
                                           &why),
            nullptr);
  EXPECT_THAT(why, HasSubstr("libmlajit_absent_a.so"));
  EXPECT_THAT(why, HasSubstr("libmlajit_absent_b.so"));
}

TEST(CudaBackendTest, OpensOnlyWithADriver) {
  auto backend = OpenCudaBackend();
  if (backend.status().code() == absl::StatusCode::kUnimplemented) {
    EXPECT_THAT(backend.status().message(), HasSubstr("built without CUDA headers"));
    return;
  }
  if (!LibraryLoads("libcuda.so.1")) {
    ASSERT_EQ(backend.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(backend.status().message(), HasSubstr("libcuda.so.1"));
    return;
  }
  // A driver is installed. It may still see no device (containers without
  // GPUs): then the error is kFailedPrecondition; otherwise it must work.
  if (!backend.ok()) {
    EXPECT_EQ(backend.status().code(), absl::StatusCode::kFailedPrecondition)
        << backend.status();
    return;
  }
  EXPECT_EQ((*backend)->vendor(), Vendor::kNvidia);
  auto count = (*backend)->DeviceCount();
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_GT(*count, 0);
  auto props = (*backend)->GetDeviceProperties(*count);  // one past the last
  EXPECT_EQ(props.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*backend)->SetCurrentDevice(-1).code(), absl::StatusCode::kInvalidArgument);
}

TEST(HipBackendTest, OpensOnlyWithARuntime) {
  auto backend = OpenHipBackend();
  if (backend.status().code() == absl::StatusCode::kUnimplemented) {
    EXPECT_THAT(backend.status().message(), HasSubstr("built without HIP headers"));
    return;
  }
  if (!LibraryLoads("libamdhip64.so") && !LibraryLoads("libamdhip64.so.6") &&
      !LibraryLoads("libamdhip64.so.5")) {
    ASSERT_EQ(backend.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(backend.status().message(), HasSubstr("libamdhip64"));
    return;
  }
  if (!backend.ok()) {
    EXPECT_EQ(backend.status().code(), absl::StatusCode::kFailedPrecondition)
        << backend.status();
    return;
  }
  EXPECT_EQ((*backend)->vendor(), Vendor::kAmd);
  auto count = (*backend)->DeviceCount();
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_GT(*count, 0);
}

TEST(DefaultBackendTest, FailsCleanlyOrYieldsADevice) {
  auto backend = DefaultBackend();
  if (!backend.ok()) {
    EXPECT_EQ(backend.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(backend.status().message(), HasSubstr("no GPU backend could be opened"));
    EXPECT_THAT(backend.status().message(), AnyOf(HasSubstr("cuda:"), HasSubstr("hip:")));
  } else {
    auto count = (*backend)->DeviceCount();
    ASSERT_TRUE(count.ok()) << count.status();
    EXPECT_GT(*count, 0);
  }
  // Created once: a second call returns the same object or the same error.
  auto again = DefaultBackend();
  EXPECT_EQ(again.ok(), backend.ok());
  if (backend.ok()) {
    EXPECT_EQ(*again, *backend);
  } else {
    EXPECT_EQ(again.status(), backend.status());
  }
}

}  // namespace
}  // namespace mlajit::gpu
