// The KV tensor maps on the GPU: the backend encodes them, and the tensor
// copies through them write a tile whose every byte is where the layout
// that the products' descriptors and the cp.async copies use says: fp8's
// five copies (what the swap-AB decode kernel issues per tile,
// mla_wgmma_tma.cuh CopyKvTileTma) in MlaWgmmaFp8Offset, bf16's nine (the
// 64-row seesaw's blocks) in MlaRowsKvOffset. Skips without an sm_90a device.
#include "src/plan/kv_tensor_maps.h"

#include <array>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernel_templates/mla_params.h"
#include "kernel_templates/mla_wgmma_layout.h"
#include "kernel_templates/mla_wgmma_rows_layout.h"
#include "src/gpu/backend.h"
#include "src/jit/compiler.h"
#include "src/jit/renderer.h"
#include "src/jit/template_store.h"
#include "tools/harness/decode_harness.h"

namespace mlajit {
namespace {

// One CTA copies the tile at slot `slot` into a 1024-byte-aligned stage as
// the decode kernels do, then writes the stage out byte for byte: fp8 (the
// four 128-byte blocks through map 0, the rope block through map 1) or bf16
// (nine 128-byte blocks through map 0).
constexpr char kCopyKernel[] = R"(
#include "mla_params.h"
template <int TOKEN_BYTES>
__device__ void CopyStage(const MlaDecodeParams& p, int slot, unsigned char* out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int COPIES = TOKEN_BYTES == 576 ? 5 : 9;
  extern __shared__ __align__(128) unsigned char smem[];
  const unsigned base = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  unsigned char* stage = smem + ((1024u - (base & 1023u)) & 1023u);
  __shared__ __align__(8) unsigned long long bar;
  const unsigned bar_addr = static_cast<unsigned>(__cvta_generic_to_shared(&bar));
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(bar_addr));
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar_addr),
                 "r"(64 * TOKEN_BYTES) : "memory");
    for (int i = 0; i < COPIES; ++i) {
      const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(stage + 8192 * i));
      const MlaTensorMap* map = &p.kv_maps[TOKEN_BYTES == 576 && i == 4 ? 1 : 0];
      asm volatile(
          "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
          " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
          "l"(reinterpret_cast<unsigned long long>(map)), "r"(128 * i), "r"(slot), "r"(bar_addr)
          : "memory");
    }
  }
  asm volatile(
      "{\n.reg .pred done;\nWAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], 0;\n"
      "@!done bra WAIT;\n}\n" ::"r"(bar_addr) : "memory");
  for (int i = threadIdx.x; i < 64 * TOKEN_BYTES; i += blockDim.x) out[i] = stage[i];
#endif
}
extern "C" __global__ void copy_fp8_stage(const __grid_constant__ MlaDecodeParams p, int slot,
                                          unsigned char* out) {
  CopyStage<576>(p, slot, out);
}
extern "C" __global__ void copy_bf16_tile(const __grid_constant__ MlaDecodeParams p, int slot,
                                          unsigned char* out) {
  CopyStage<1152>(p, slot, out);
}
)";

class KvTensorMapsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto backend = gpu::DefaultBackend();
    if (!backend.ok()) GTEST_SKIP() << "no GPU backend: " << backend.status();
    backend_ = *backend;
    auto props = backend_->GetDeviceProperties(kDevice);
    ASSERT_TRUE(props.ok()) << props.status();
    if (props->arch != "sm_90a") GTEST_SKIP() << "the decode kernels' tensor maps: sm_90a only";
    arch_ = props->arch;
  }

  // Copies the tiles at an odd slot and at the buffer's last 64 slots of a
  // random buffer of tokens of `token_bytes` with kernel `name`, and expects
  // token t's 16-byte chunk c at offset(t, c) of the stage.
  void ExpectCopiesLandAt(const char* name, int token_bytes, int (*offset)(int t, int c)) {
    auto compiler = jit::CompilerForArch(arch_);
    ASSERT_TRUE(compiler.ok()) << compiler.status();
    auto params_header = jit::TemplateStore::Embedded()->Read("mla_params.h");
    ASSERT_TRUE(params_header.ok()) << params_header.status();
    jit::RenderedSource source;
    source.template_name = "copy_stage";
    source.program_name = "copy_stage.cu";
    source.source = kCopyKernel;
    source.headers.push_back({"mla_params.h", *params_header});
    auto binary = (*compiler)->Compile(source, (*compiler)->Options(arch_), arch_);
    ASSERT_TRUE(binary.ok()) << binary.status();
    const auto* code = reinterpret_cast<const uint8_t*>(binary->binary.data());
    auto module = backend_->LoadModule(kDevice, {code, binary->binary.size()});
    ASSERT_TRUE(module.ok()) << module.status();
    auto kernel = backend_->GetFunction(*module, name);
    ASSERT_TRUE(kernel.ok()) << kernel.status();

    constexpr int kSlots = 517;
    const int stage_bytes = 64 * token_bytes;
    std::vector<uint8_t> kv(size_t{kSlots} * token_bytes);
    std::mt19937 rng(harness::FreshSeed());
    for (uint8_t& b : kv) b = static_cast<uint8_t>(rng());
    auto kv_dev = harness::DeviceBuffer::Allocate(backend_, kDevice, kv.size());
    auto out_dev = harness::DeviceBuffer::Allocate(backend_, kDevice, stage_bytes);
    ASSERT_TRUE(kv_dev.ok() && out_dev.ok());
    ASSERT_TRUE(backend_->MemcpyHtoD(kDevice, kv_dev->ptr(), kv.data(), kv.size(), nullptr).ok());

    plan::KvTensorMaps maps([this](const gpu::TensorMap2D& m, void* out) {
      return backend_->EncodeTensorMap2D(m, out);
    });
    MlaDecodeParams p{};
    maps.Fill(kv_dev->get(), token_bytes, &p);
    ASSERT_EQ(p.kv_map_rows, plan::kKvMapRows) << "the backend did not encode the maps";
    maps.Fill(kv_dev->get(), token_bytes, &p);
    EXPECT_EQ(maps.encodes(), 2) << "a second call with the same buffer encodes again";

    const unsigned smem = static_cast<unsigned>(stage_bytes) + 1024;
    ASSERT_TRUE(backend_->SetMaxDynamicSharedMemory(*kernel, smem).ok());
    for (int slot : {131, kSlots - 64}) {
      SCOPED_TRACE(absl::StrCat(name, " slot ", slot));
      ASSERT_TRUE(backend_->MemsetD8(kDevice, out_dev->ptr(), 0xA5, stage_bytes, nullptr).ok());
      gpu::DevicePtr out_ptr = out_dev->ptr();
      void* args[] = {&p, &slot, &out_ptr};
      gpu::LaunchConfig config;
      config.block_x = 128;
      config.shared_memory_bytes = smem;
      ASSERT_TRUE(backend_->Launch(kDevice, *kernel, config, args, nullptr).ok());
      std::vector<uint8_t> stage(stage_bytes);
      ASSERT_TRUE(
          backend_->MemcpyDtoH(kDevice, stage.data(), out_dev->ptr(), stage_bytes, nullptr).ok());
      ASSERT_TRUE(backend_->StreamSynchronize(kDevice, nullptr).ok());
      int wrong = 0;
      for (int t = 0; t < 64; ++t) {
        for (int c = 0; c < token_bytes / 16; ++c) {
          const uint8_t* want = kv.data() + static_cast<size_t>(slot + t) * token_bytes + 16 * c;
          if (std::memcmp(stage.data() + offset(t, c), want, 16) != 0 && ++wrong <= 5) {
            ADD_FAILURE() << "token " << t << " chunk " << c << " is not at stage offset "
                          << offset(t, c);
          }
        }
      }
      EXPECT_EQ(wrong, 0);
    }
    EXPECT_TRUE(backend_->UnloadModule(kDevice, *module).ok());
  }

  static constexpr int kDevice = 0;
  gpu::Backend* backend_ = nullptr;
  std::string arch_;
};

TEST_F(KvTensorMapsTest, Fp8CopiesLandInTheStageLayout) {
  ExpectCopiesLandAt("copy_fp8_stage", 576, [](int t, int c) { return MlaWgmmaFp8Offset(t, c); });
}

TEST_F(KvTensorMapsTest, Bf16CopiesLandInTheRowsLayout) {
  ExpectCopiesLandAt("copy_bf16_tile", 1152, [](int t, int c) { return MlaRowsKvOffset(t, c); });
}

TEST_F(KvTensorMapsTest, MapsTheHardwareCannotDescribeAreRejected) {
  // Over a real allocation: the 580.159 driver refuses to encode any map
  // whose base is not device memory (over a made-up address the valid shapes
  // failed too, so the bad shape's rejection proved nothing).
  auto kv_dev = harness::DeviceBuffer::Allocate(backend_, kDevice, 64 * 1152);
  ASSERT_TRUE(kv_dev.ok()) << kv_dev.status();
  const std::array<gpu::TensorMap2D, 2> good = plan::KvTensorMapDescs(kv_dev->get(), 576);
  alignas(128) MlaTensorMap out;
  const std::array<gpu::TensorMap2D, 2> bf16 = plan::KvTensorMapDescs(kv_dev->get(), 1152);
  for (const gpu::TensorMap2D& m : {good[0], good[1], bf16[0], bf16[1]}) {
    absl::Status s = backend_->EncodeTensorMap2D(m, &out);
    EXPECT_TRUE(s.ok()) << "box " << m.box_cols << " x " << m.box_rows << ": " << s;
  }
  gpu::TensorMap2D bad = good[0];
  bad.box_cols = 256;  // wider than the 128-byte swizzle
  absl::Status s = backend_->EncodeTensorMap2D(bad, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

}  // namespace
}  // namespace mlajit
