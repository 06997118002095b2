#include "tools/bench/roofline.h"

#include <algorithm>

namespace mlajit::bench {

CaseFloors RooflineFloors(const CaseWork& work, KvFormat kv, QMode q, const Ceilings& ceilings) {
  const double read_s = work.bytes / ceilings.read.value;
  const double bf16 = ceilings.bf16.value, fp8 = ceilings.fp8.value;
  const double kv_rate = kv == KvFormat::kBf16 ? bf16 : fp8;
  const bool e4m3_s = kv != KvFormat::kBf16 && q == QMode::kFp8;
  const double contract_s = work.s_flops / (e4m3_s ? fp8 : bf16) + work.pv_flops / bf16;
  CaseFloors f;
  f.floor_us = std::max(read_s, (work.s_flops + work.pv_flops) / kv_rate) * 1e6;
  f.contract_floor_us = std::max(read_s, contract_s) * 1e6;
  return f;
}

}  // namespace mlajit::bench
