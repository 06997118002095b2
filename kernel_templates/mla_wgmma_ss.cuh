// Shared-memory-operand ("SS") warpgroup MMAs of the sm_90a decode paths
// (mla_decode_wgmma_rows.cuh, and S of mla_decode_wgmma.cuh): both operands are read through matrix
// descriptors (mla_wgmma_common.cuh's Desc), accumulators are fp32.
//   SsM64N64K16:  S [64 x 64]  (+)= A [64 x 16] . B [16 x 64], both K-major
//   SsE4m3<NN>:   D [64 x NN] (+)= A [64 x 32] . B [32 x NN] for e4m3 operands
//                 (a8 Q, the KV tile as stored), both K-major (fp8 has no
//                 transpose); NN = 64 for the 64-row path, 16..64 for swap AB
//   SsBf16<NN>:   D [64 x NN] (+)= A [64 x 16] . B [16 x NN] for bf16 operands,
//                 both K-major: S of the swap-AB path on bf16 tiles
//   SsM64N256K16: O [64 x 256] (+)= A [64 x 16] . B [16 x 256], A K-major and
//                 B MN-major (the transpose bit set: 16-bit types only)
//   RsM64N64K16:  D [64 x 64] (+)= A [64 x 16] . B [16 x 64] with A in
//                 registers (f16) and B K-major: O^T += V^T P^T of the
//                 warp-specialised 64-row path
//   RsM64N256K16Bf16: O [64 x 256] (+)= P [64 x 16] . V [16 x 256], P in
//                 registers (bf16), V MN-major: the seesaw schedule's own P
// TYPE is the operand type, f16 or bf16. The register lists are spelled out:
// inline PTX takes one operand per accumulator.
#ifndef MLAJIT_KERNEL_TEMPLATES_MLA_WGMMA_SS_CUH_
#define MLAJIT_KERNEL_TEMPLATES_MLA_WGMMA_SS_CUH_

#include "mla_wgmma_common.cuh"

namespace mla_wgmma_ss {

using mla_wgmma::Desc;

#define MLA_ACC8(i)                                                                           \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
      "+f"(d[i + 6]), "+f"(d[i + 7])

#define MLA_WGMMA_SS_REGS_32                                               \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define MLA_WGMMA_SS_REGS_128                                                                    \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                       \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "             \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "             \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "             \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "             \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "             \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"

#define MLA_WGMMA_SS_N64(TYPE)                                                              \
  asm volatile(                                                                             \
      "{\n.reg .pred p;\n.reg .b64 da, db;\nsetp.ne.b32 p, %36, 0;\n"                       \
      "mov.b64 da, {%32, %33};\nmov.b64 db, {%34, %35};\n"                                  \
      "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " {" MLA_WGMMA_SS_REGS_32 \
      "}, da, db, p, 1, 1, 0, 0;\n}\n"                                                      \
      : MLA_ACC8(0), MLA_ACC8(8), MLA_ACC8(16), MLA_ACC8(24)                                \
      : "r"(a.lo), "r"(a.hi), "r"(b.lo), "r"(b.hi), "r"(accumulate))

#define MLA_WGMMA_SS_N64_E4M3                                                       \
  asm volatile(                                                                     \
      "{\n.reg .pred p;\n.reg .b64 da, db;\nsetp.ne.b32 p, %36, 0;\n"               \
      "mov.b64 da, {%32, %33};\nmov.b64 db, {%34, %35};\n"                          \
      "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {" MLA_WGMMA_SS_REGS_32 \
      "}, da, db, p, 1, 1;\n}\n"                                                    \
      : MLA_ACC8(0), MLA_ACC8(8), MLA_ACC8(16), MLA_ACC8(24)                        \
      : "r"(a.lo), "r"(a.hi), "r"(b.lo), "r"(b.hi), "r"(accumulate))

// The swap-AB path's S (N = 16, 32: 8 or 16 accumulators), both operands
// K-major. KIND is the shape and types (m64nNk32 e4m3, m64nNk16 bf16), TAIL
// the transpose flags that 16-bit types take ("" for e4m3).
#define MLA_WGMMA_SS_N16(KIND, TAIL)                                     \
  asm volatile(                                                          \
      "{\n.reg .pred p;\n.reg .b64 da, db;\nsetp.ne.b32 p, %12, 0;\n"    \
      "mov.b64 da, {%8, %9};\nmov.b64 db, {%10, %11};\n"                 \
      "wgmma.mma_async.sync.aligned." KIND                               \
      " {%0, %1, %2, %3, %4, %5, %6, %7}, da, db, p, 1, 1" TAIL ";\n}\n" \
      : MLA_ACC8(0)                                                      \
      : "r"(a.lo), "r"(a.hi), "r"(b.lo), "r"(b.hi), "r"(accumulate))
#define MLA_WGMMA_SS_N32(KIND, TAIL)                                                         \
  asm volatile(                                                                              \
      "{\n.reg .pred p;\n.reg .b64 da, db;\nsetp.ne.b32 p, %20, 0;\n"                        \
      "mov.b64 da, {%16, %17};\nmov.b64 db, {%18, %19};\n"                                   \
      "wgmma.mma_async.sync.aligned." KIND                                                   \
      " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, da, db, p, " \
      "1, 1" TAIL ";\n}\n"                                                                   \
      : MLA_ACC8(0), MLA_ACC8(8)                                                             \
      : "r"(a.lo), "r"(a.hi), "r"(b.lo), "r"(b.hi), "r"(accumulate))

#define MLA_WGMMA_SS_N256(TYPE)                                                               \
  asm volatile(                                                                               \
      "{\n.reg .pred p;\n.reg .b64 da, db;\nsetp.ne.b32 p, %132, 0;\n"                        \
      "mov.b64 da, {%128, %129};\nmov.b64 db, {%130, %131};\n"                                \
      "wgmma.mma_async.sync.aligned.m64n256k16.f32." TYPE "." TYPE " {" MLA_WGMMA_SS_REGS_128 \
      "}, da, db, p, 1, 1, 0, 1;\n}\n"                                                        \
      : MLA_ACC8(0), MLA_ACC8(8), MLA_ACC8(16), MLA_ACC8(24), MLA_ACC8(32), MLA_ACC8(40),     \
        MLA_ACC8(48), MLA_ACC8(56), MLA_ACC8(64), MLA_ACC8(72), MLA_ACC8(80), MLA_ACC8(88),   \
        MLA_ACC8(96), MLA_ACC8(104), MLA_ACC8(112), MLA_ACC8(120)                             \
      : "r"(a.lo), "r"(a.hi), "r"(b.lo), "r"(b.hi), "r"(accumulate))

template <bool BF16>
MLA_INLINE void SsM64N64K16(float (&d)[32], Desc a, Desc b, int accumulate) {
  if (BF16) {
    MLA_WGMMA_SS_N64("bf16");
  } else {
    MLA_WGMMA_SS_N64("f16");
  }
}

// d (+)= A . B for one m64 x NN x k32 step of e4m3 operands; NN = 16, 32, 64
// (NN / 2 accumulators at d).
template <int NN>
MLA_INLINE void SsE4m3(float* d, Desc a, Desc b, int accumulate) {
  static_assert(NN == 16 || NN == 32 || NN == 64, "wgmma N of the e4m3 product");
  if (NN == 16) {
    MLA_WGMMA_SS_N16("m64n16k32.f32.e4m3.e4m3", "");
  } else if (NN == 32) {
    MLA_WGMMA_SS_N32("m64n32k32.f32.e4m3.e4m3", "");
  } else {
    MLA_WGMMA_SS_N64_E4M3;
  }
}

// d (+)= A . B for one m64 x NN x k16 step of bf16 operands, NN = 16, 32
// (NN / 2 accumulators at d).
template <int NN>
MLA_INLINE void SsBf16(float* d, Desc a, Desc b, int accumulate) {
  static_assert(NN == 16 || NN == 32, "wgmma N of the swap-AB bf16 product");
  if (NN == 16) {
    MLA_WGMMA_SS_N16("m64n16k16.f32.bf16.bf16", ", 0, 0");
  } else {
    MLA_WGMMA_SS_N32("m64n32k16.f32.bf16.bf16", ", 0, 0");
  }
}

template <bool BF16>
MLA_INLINE void SsM64N256K16(float (&d)[128], Desc a, Desc b, int accumulate) {
  if (BF16) {
    MLA_WGMMA_SS_N256("bf16");
  } else {
    MLA_WGMMA_SS_N256("f16");
  }
}

// A from registers: the fragment layout of mma.sync's m16n8k16 per warp
// (rows 16 w + r and + 8, k columns 2 quad (+1) and 2 quad + 8 (+9)).
MLA_INLINE void RsM64N64K16(float (&d)[32], const u32 (&a)[4], Desc b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\n.reg .b64 db;\nsetp.ne.b32 p, %38, 0;\n"
      "mov.b64 db, {%36, %37};\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {" MLA_WGMMA_SS_REGS_32
      "}, {%32, %33, %34, %35}, db, p, 1, 1, 0;\n}\n"
      : MLA_ACC8(0), MLA_ACC8(8), MLA_ACC8(16), MLA_ACC8(24)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b.lo), "r"(b.hi), "r"(accumulate));
}

// A from registers (bf16, the fragment layout above), B MN-major through the
// transpose bit: O [64 x 256] (+)= P [64 x 16] . V [16 x 256] with this
// warpgroup's own P (the seesaw schedule of mla_decode_wgmma_rows_seesaw.cuh).
// The registers of `a` are read asynchronously: keep them until the wait.
MLA_INLINE void RsM64N256K16Bf16(float (&d)[128], const u32 (&a)[4], Desc b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\n.reg .b64 db;\nsetp.ne.b32 p, %134, 0;\n"
      "mov.b64 db, {%132, %133};\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {" MLA_WGMMA_SS_REGS_128
      "}, {%128, %129, %130, %131}, db, p, 1, 1, 1;\n}\n"
      : MLA_ACC8(0), MLA_ACC8(8), MLA_ACC8(16), MLA_ACC8(24), MLA_ACC8(32), MLA_ACC8(40),
        MLA_ACC8(48), MLA_ACC8(56), MLA_ACC8(64), MLA_ACC8(72), MLA_ACC8(80), MLA_ACC8(88),
        MLA_ACC8(96), MLA_ACC8(104), MLA_ACC8(112), MLA_ACC8(120)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b.lo), "r"(b.hi), "r"(accumulate));
}

#undef MLA_WGMMA_SS_N64
#undef MLA_WGMMA_SS_N64_E4M3
#undef MLA_WGMMA_SS_N16
#undef MLA_WGMMA_SS_N32
#undef MLA_WGMMA_SS_N256
#undef MLA_WGMMA_SS_REGS_32
#undef MLA_WGMMA_SS_REGS_128
#undef MLA_ACC8

}  // namespace mla_wgmma_ss

#endif  // MLAJIT_KERNEL_TEMPLATES_MLA_WGMMA_SS_CUH_
