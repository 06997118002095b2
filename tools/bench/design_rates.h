// DESIGN.md §3's H200 figures: the rates the bench assumes where it measures
// none (`--ceilings assumed`, or a ceiling whose measurement failed), and the
// DRAM rate of the CPU-only per-SM bounds (`--schedule`).
//
//   const double us = bytes / kDesignReadBytesPerSecond * 1e6;
#ifndef MLAJIT_TOOLS_BENCH_DESIGN_RATES_H_
#define MLAJIT_TOOLS_BENCH_DESIGN_RATES_H_

namespace mlajit::bench {

inline constexpr double kDesignReadBytesPerSecond = 4.45e12;  // streaming read
inline constexpr double kDesignFp8FlopsPerSecond = 1260e12;   // e4m3 matmul
inline constexpr double kDesignBf16FlopsPerSecond = 680e12;   // bf16 matmul

}  // namespace mlajit::bench

#endif  // MLAJIT_TOOLS_BENCH_DESIGN_RATES_H_
