// A benchmark case named on the command line instead of taken from a suite:
//
//   mlajit_bench --case 128,2,8192,16,mxfp4 --case 64,1,4096,128,fp8_e4m3,64,a8
//
// "BATCH,Q_LEN,KV_LEN,HEADS[,FORMAT[,PAGE[,a8]]]": fixed lengths, FORMAT one
// of bf16, fp8_e4m3 (or fp8), mxfp4 (default fp8_e4m3), PAGE 0 (flat, the
// default), 1, 16, 32, 64 or 128, and a8 to quantise Q to fp8 per call.
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
