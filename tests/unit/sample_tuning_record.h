// A tuning record as mlajit_tune writes one (H200, fp8, page size 64), for the
// tests of the tuning table and of bundles that carry records.
#ifndef MLAJIT_TESTS_UNIT_SAMPLE_TUNING_RECORD_H_
#define MLAJIT_TESTS_UNIT_SAMPLE_TUNING_RECORD_H_

#include <string>

#include "src/tune/tuning_table.h"

namespace mlajit::testing_util {

// Class (rows, work_bucket); tile shape block_m x 64, 4 warps, 3 stages.
inline tune::TuningRecord SampleTuningRecord(int rows, int bucket,
                                             const std::string& library_version,
                                             int block_m = 16) {
  tune::TuningRecord r;
  r.key.device = "NVIDIA H200";
  r.key.arch = "sm_90a";
  r.key.sm_count = 132;
  r.key.kv_format = 1;
  r.key.q_mode = 0;
  r.key.page_size = 64;
  r.key.rows = rows;
  r.key.work_bucket = bucket;
  r.shape.block_m = block_m;
  r.shape.block_n = 64;
  r.shape.num_warps = 4;
  r.shape.num_stages = 3;
  r.shape.ctas_per_sm = 1;
  r.shape.min_split_cost = 256;
  r.median_ns = 15070;
  r.default_ns = 15800;
  r.candidates = 7;
  r.unix_s = 1796000000;
  r.library_version = library_version;
  return r;
}

}  // namespace mlajit::testing_util

#endif  // MLAJIT_TESTS_UNIT_SAMPLE_TUNING_RECORD_H_
