// The tensor-rate ceilings: cublasLt, loaded at run time, on an n^3 product.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/base/status_macros.h"
#include "src/jit/dynamic_library.h"
#include "src/reference/formats.h"
#include "tools/bench/ceilings.h"
#include "tools/bench/device_timing.h"
#include "tools/harness/decode_harness.h"

namespace mlajit::bench {
namespace {

// The cublasLt entry points used, with their prototypes as cublasLt.h declares
// them; the bench builds without the header (and without the CUDA toolkit).
// Enum values are those of cublasLt.h, cublas_api.h and library_types.h.
using Handle = void*;
using Desc = void*;
constexpr int kStatusSuccess = 0;
constexpr int kCudaR32F = 0, kCudaR16BF = 14, kCudaR8FE4M3 = 28;  // cudaDataType
constexpr int kComputeF32 = 68;                                   // cublasComputeType_t
constexpr int kOpN = 0, kOpT = 1;                                 // cublasOperation_t
constexpr int kDescTransA = 3, kDescTransB = 4;                   // cublasLtMatmulDescAttributes_t
constexpr int kPrefMaxWorkspaceBytes = 1;  // cublasLtMatmulPreferenceAttributes_t
constexpr size_t kWorkspaceBytes = size_t{32} << 20;

struct Algo {
  uint64_t data[8];
};
struct HeuristicResult {  // cublasLtMatmulHeuristicResult_t
  Algo algo;
  size_t workspace_size;
  int state;
  float waves_count;
  int reserved[4];
};

struct LtApi {
  jit::jit_internal::DynamicLibrary lib;
  int (*create)(Handle*) = nullptr;
  int (*destroy)(Handle) = nullptr;
  int (*desc_create)(Desc*, int, int) = nullptr;
  int (*desc_destroy)(Desc) = nullptr;
  int (*desc_set)(Desc, int, const void*, size_t) = nullptr;
  int (*layout_create)(Desc*, int, uint64_t, uint64_t, int64_t) = nullptr;
  int (*layout_destroy)(Desc) = nullptr;
  int (*pref_create)(Desc*) = nullptr;
  int (*pref_destroy)(Desc) = nullptr;
  int (*pref_set)(Desc, int, const void*, size_t) = nullptr;
  int (*heuristic)(Handle, Desc, Desc, Desc, Desc, Desc, Desc, int, HeuristicResult*,
                   int*) = nullptr;
  int (*matmul)(Handle, Desc, const void*, const void*, Desc, const void*, Desc, const void*,
                const void*, Desc, void*, Desc, const Algo*, void*, size_t, void*) = nullptr;
  const char* (*status_name)(int) = nullptr;

  std::string Error(const char* what, int rc) const {
    return absl::StrCat("cublasLt: ", what, " failed: ",
                        status_name != nullptr ? status_name(rc) : absl::StrCat("status ", rc));
  }
};

absl::Status OpenLt(LtApi* api) {
  MLAJIT_ASSIGN_OR_RETURN(api->lib,
                          jit::jit_internal::DynamicLibrary::OpenFirst(
                              {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"},
                              {"/usr/local/cuda/lib64"}, "cublasLtMatmul"));
  auto bind = [&](auto& fn, const char* symbol) {
    fn = api->lib.Symbol<std::remove_reference_t<decltype(fn)>>(symbol);
    return fn != nullptr;
  };
  bind(api->status_name, "cublasLtGetStatusName");
  const bool ok = bind(api->create, "cublasLtCreate") && bind(api->destroy, "cublasLtDestroy") &&
                  bind(api->desc_create, "cublasLtMatmulDescCreate") &&
                  bind(api->desc_destroy, "cublasLtMatmulDescDestroy") &&
                  bind(api->desc_set, "cublasLtMatmulDescSetAttribute") &&
                  bind(api->layout_create, "cublasLtMatrixLayoutCreate") &&
                  bind(api->layout_destroy, "cublasLtMatrixLayoutDestroy") &&
                  bind(api->pref_create, "cublasLtMatmulPreferenceCreate") &&
                  bind(api->pref_destroy, "cublasLtMatmulPreferenceDestroy") &&
                  bind(api->pref_set, "cublasLtMatmulPreferenceSetAttribute") &&
                  bind(api->heuristic, "cublasLtMatmulAlgoGetHeuristic") &&
                  bind(api->matmul, "cublasLtMatmul");
  if (!ok) return absl::FailedPreconditionError("cublasLt: a required symbol is missing");
  return absl::OkStatus();
}

// Random inputs with no NaN or infinity: e4m3 magnitudes in [2^-7, 1.875],
// bf16 in [0.125, 2). Random data matters: a product of zeros draws less power
// and would report a rate no real matmul reaches.
std::vector<uint8_t> RandomMatrix(MatmulInputs inputs, size_t elements, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> bytes(elements * (inputs == MatmulInputs::kBf16 ? 2 : 1));
  for (size_t i = 0; i < bytes.size(); i += 8) {
    uint64_t r = rng();
    if (inputs == MatmulInputs::kFp8E4m3) {
      r &= 0xBFBFBFBFBFBFBFBFull;  // exponent field <= 7: no NaN, |x| < 2
    } else {
      // Per 16-bit value: sign, exponent 124..127, random 7-bit mantissa.
      uint64_t v = 0;
      for (int k = 0; k < 4; ++k) {
        const uint64_t x = (r >> (16 * k)) & 0xFFFF;
        const uint64_t bits = (x & 0x807F) | ((124 + ((x >> 7) & 3)) << 7);
        v |= bits << (16 * k);
      }
      r = v;
    }
    std::memcpy(&bytes[i], &r, std::min<size_t>(8, bytes.size() - i));
  }
  return bytes;
}

float Element(MatmulInputs inputs, const std::vector<uint8_t>& m, size_t index) {
  if (inputs == MatmulInputs::kFp8E4m3) return reference::Fp8E4m3ToFloat(m[index]);
  uint16_t bits;
  std::memcpy(&bits, &m[2 * index], 2);
  return reference::Bf16ToFloat(bits);
}

}  // namespace

absl::StatusOr<Ceiling> MeasureMatmulRate(gpu::Backend* backend, int device, MatmulInputs inputs,
                                          double warmup_ms, int n, const AfterCeiling& after) {
  if (backend->vendor() != gpu::Vendor::kNvidia) {
    return absl::UnimplementedError("tensor rate is measured with cublasLt, NVIDIA only");
  }
  if (n <= 0 || n % 16 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("matmul size ", n, ": want a multiple of 16"));
  }
  LtApi api;
  MLAJIT_RETURN_IF_ERROR(OpenLt(&api));
  MLAJIT_RETURN_IF_ERROR(backend->SetCurrentDevice(device));
  const bool fp8 = inputs == MatmulInputs::kFp8E4m3;
  const size_t elements = size_t(n) * n;
  const size_t in_bytes = elements * (fp8 ? 1 : 2);
  // A is stored k-major (op T), as cublasLt's fp8 products require; B k-major
  // too (op N). D = A^T B, n x n bf16, column-major.
  const std::vector<uint8_t> a = RandomMatrix(inputs, elements, 1);
  const std::vector<uint8_t> b = RandomMatrix(inputs, elements, 2);

  auto allocate = [&](size_t bytes) {
    return harness::DeviceBuffer::Allocate(backend, device, bytes);
  };
  MLAJIT_ASSIGN_OR_RETURN(harness::DeviceBuffer a_buffer, allocate(in_bytes));
  MLAJIT_ASSIGN_OR_RETURN(harness::DeviceBuffer b_buffer, allocate(in_bytes));
  MLAJIT_ASSIGN_OR_RETURN(harness::DeviceBuffer d_buffer, allocate(elements * 2));
  MLAJIT_ASSIGN_OR_RETURN(harness::DeviceBuffer workspace, allocate(kWorkspaceBytes));
  const gpu::DevicePtr da = a_buffer.ptr(), db = b_buffer.ptr(), dd = d_buffer.ptr();
  gpu::ScopedStream scoped_stream(backend, device);
  MLAJIT_RETURN_IF_ERROR(scoped_stream.Create());
  const gpu::StreamHandle stream = scoped_stream.get();
  MLAJIT_RETURN_IF_ERROR(backend->MemcpyHtoD(device, da, a.data(), in_bytes, stream));
  MLAJIT_RETURN_IF_ERROR(backend->MemcpyHtoD(device, db, b.data(), in_bytes, stream));
  MLAJIT_RETURN_IF_ERROR(backend->MemsetD8(device, dd, 0xFF, elements * 2, stream));  // NaN

  // Descriptors, destroyed in reverse on every path.
  Handle handle = nullptr;
  Desc op = nullptr, la = nullptr, lb = nullptr, ld = nullptr, pref = nullptr;
  struct Release {
    LtApi* api;
    Handle* handle;
    Desc *op, *la, *lb, *ld, *pref;
    ~Release() {
      if (*pref) api->pref_destroy(*pref);
      for (Desc* l : {ld, lb, la}) {
        if (*l) api->layout_destroy(*l);
      }
      if (*op) api->desc_destroy(*op);
      if (*handle) api->destroy(*handle);
    }
  } release{&api, &handle, &op, &la, &lb, &ld, &pref};
  const int in_type = fp8 ? kCudaR8FE4M3 : kCudaR16BF;
  const int trans_a = kOpT, trans_b = kOpN;
  const uint64_t workspace_bytes = kWorkspaceBytes;
  auto check = [&](const char* what, int rc) {
    return rc == kStatusSuccess ? absl::OkStatus() : absl::InternalError(api.Error(what, rc));
  };
  MLAJIT_RETURN_IF_ERROR(check("cublasLtCreate", api.create(&handle)));
  MLAJIT_RETURN_IF_ERROR(check("MatmulDescCreate", api.desc_create(&op, kComputeF32, kCudaR32F)));
  MLAJIT_RETURN_IF_ERROR(
      check("set TRANSA", api.desc_set(op, kDescTransA, &trans_a, sizeof trans_a)));
  MLAJIT_RETURN_IF_ERROR(
      check("set TRANSB", api.desc_set(op, kDescTransB, &trans_b, sizeof trans_b)));
  MLAJIT_RETURN_IF_ERROR(check("layout A", api.layout_create(&la, in_type, n, n, n)));
  MLAJIT_RETURN_IF_ERROR(check("layout B", api.layout_create(&lb, in_type, n, n, n)));
  MLAJIT_RETURN_IF_ERROR(check("layout D", api.layout_create(&ld, kCudaR16BF, n, n, n)));
  MLAJIT_RETURN_IF_ERROR(check("PreferenceCreate", api.pref_create(&pref)));
  MLAJIT_RETURN_IF_ERROR(
      check("set workspace",
            api.pref_set(pref, kPrefMaxWorkspaceBytes, &workspace_bytes, sizeof workspace_bytes)));
  HeuristicResult result{};
  int found = 0;
  MLAJIT_RETURN_IF_ERROR(check(
      "AlgoGetHeuristic", api.heuristic(handle, op, la, lb, ld, ld, pref, 1, &result, &found)));
  if (found < 1) return absl::NotFoundError("cublasLt: no algorithm for this product");

  const float alpha = 1.0f, beta = 0.0f;
  auto enqueue = [&](int) -> absl::Status {
    return check(
        "cublasLtMatmul",
        api.matmul(handle, op, &alpha, reinterpret_cast<void*>(da), la, reinterpret_cast<void*>(db),
                   lb, &beta, reinterpret_cast<void*>(dd), ld, reinterpret_cast<void*>(dd), ld,
                   &result.algo, workspace.get(), kWorkspaceBytes, stream));
  };
  MLAJIT_RETURN_IF_ERROR(WarmUp(backend, device, stream, enqueue, 3, warmup_ms).status());
  MLAJIT_ASSIGN_OR_RETURN(double ms, MedianDeviceMs(backend, device, stream, enqueue, 20));
  if (after) {
    MLAJIT_RETURN_IF_ERROR(after(fp8 ? "fp8" : "bf16", stream, enqueue).status());
  }

  // A few output elements against the host's dot product.
  std::vector<uint16_t> d(elements);
  MLAJIT_RETURN_IF_ERROR(backend->MemcpyDtoH(device, d.data(), dd, elements * 2, stream));
  MLAJIT_RETURN_IF_ERROR(backend->StreamSynchronize(device, stream));
  std::mt19937 pick(7);
  for (int probe = 0; probe < 16; ++probe) {
    const size_t row = pick() % n, col = pick() % n;
    double want = 0, abs_sum = 0;
    for (size_t k = 0; k < size_t(n); ++k) {
      const double term =
          double(Element(inputs, a, row * n + k)) * double(Element(inputs, b, col * n + k));
      want += term;
      abs_sum += std::abs(term);
    }
    const double got = reference::Bf16ToFloat(d[col * n + row]);
    if (!MatmulElementClose(got, want, abs_sum)) {
      return absl::InternalError(absl::StrFormat(
          "cublasLt product check: D[%zu,%zu] = %g, host %g: the timed product is wrong", row, col,
          got, want));
    }
  }
  const double flops = 2.0 * n * double(n) * n;
  return Ceiling{
      flops / (ms * 1e-3), true,
      absl::StrFormat("cublasLt %d^3 %s x %s -> bf16, fp32 accumulate, median of 20 after %.0f ms",
                      n, fp8 ? "e4m3" : "bf16", fp8 ? "e4m3" : "bf16", warmup_ms)};
}

}  // namespace mlajit::bench
