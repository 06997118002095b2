// The benchmark's named suites: the 8-case decode suite of DESIGN.md §4 in
// each KV format and Q mode, and the extra suites (128 heads, pages, skewed
// lengths). Pure host code, so the CPU tests check what each suite holds.
//
//   for (const Case& c : SuiteCases("bf16")) ...   // empty for an unknown name
#ifndef MLAJIT_TOOLS_BENCH_SUITES_H_
#define MLAJIT_TOOLS_BENCH_SUITES_H_

#include <string>
#include <vector>

#include "tools/bench/bench_report.h"

namespace mlajit::bench {

// The suites `--suite all` runs, in order.
inline constexpr const char* kAllSuites = "default,bf16,a8,mxfp4,paged64,paged1,heads128,skewed";

// The cases of suite `name` ("default" or "fp8", "bf16", "a8", "mxfp4",
// "paged64", "paged1", "heads128", "skewed"), each tagged with `name`; empty
// for any other name.
std::vector<Case> SuiteCases(const std::string& name);

}  // namespace mlajit::bench

#endif  // MLAJIT_TOOLS_BENCH_SUITES_H_
