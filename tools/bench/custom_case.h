// A benchmark case named on the command line instead of taken from a suite:
//
//   mlajit_bench --case 128,2,8192,16,mxfp4 --case 64,1,4096,128,fp8_e4m3,64,a8
//   mlajit_bench --case 64,1,48,16,fp8,0,uniform   # KV lengths uniform in 1..48
//
// "BATCH,Q_LEN,KV_LEN,HEADS[,FORMAT[,PAGE[,a8][,uniform|skewed]]]": FORMAT one
// of bf16, fp8_e4m3 (or fp8), mxfp4 (default fp8_e4m3), PAGE 0 (flat, the
// default), 1, 16, 32, 64 or 128; then, in either order, a8 to quantise Q to
// fp8 per call, and the KV lengths: fixed at KV_LEN (default), uniform in
// 1..KV_LEN, or skewed (one sequence of KV_LEN, the others uniform in
// 1..KV_LEN/16), as the suites' generator makes them.
#ifndef MLAJIT_TOOLS_BENCH_CUSTOM_CASE_H_
#define MLAJIT_TOOLS_BENCH_CUSTOM_CASE_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/reference/batch_generator.h"

namespace mlajit::bench {

// kInvalidArgument naming the field, its value and what was expected.
absl::StatusOr<reference::BatchConfig> ParseCustomCase(absl::string_view spec);

}  // namespace mlajit::bench

#endif  // MLAJIT_TOOLS_BENCH_CUSTOM_CASE_H_
