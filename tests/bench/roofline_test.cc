#include "tools/bench/roofline.h"

#include "gtest/gtest.h"

namespace mlajit::bench {
namespace {

// The ceilings of the standing run of RESULTS.md v40.
Ceilings V40Ceilings() {
  Ceilings c;
  c.read.value = 4.515e12;
  c.fp8.value = 1232e12;
  c.bf16.value = 688e12;
  return c;
}

// bs sequences of q_len tokens, kv tokens each, `heads` heads, every token
// visible to every row; KV of `token_bytes` a token (Q and out left out).
CaseWork Work(int bs, int q_len, int kv, int heads, int token_bytes) {
  const double rows = static_cast<double>(bs) * q_len * heads;
  CaseWork w;
  w.bytes = static_cast<double>(bs) * kv * token_bytes;
  w.s_flops = rows * kv * 2 * 576;
  w.pv_flops = rows * kv * 2 * 512;
  return w;
}

TEST(Roofline, BoundByTheProductsTheContractPricesBothAtTheBf16RateWithBf16Q) {
  // (128,4,8192,16) fp8, bf16 Q: 146 GFLOP. Every FLOP at the fp8 rate is
  // 118.5 us, under the 133.8 us of bytes; both products at the bf16 rate
  // are 212.2 us.
  const CaseWork w = Work(128, 4, 8192, 16, 576);
  const CaseFloors f = RooflineFloors(w, KvFormat::kFp8E4m3, QMode::kBf16, V40Ceilings());
  EXPECT_NEAR(f.floor_us, 133.8, 0.1);
  EXPECT_NEAR(f.contract_floor_us, 212.2, 0.1);
  // MXFP4 KV: fewer bytes, the same products.
  const CaseFloors mx =
      RooflineFloors(Work(128, 4, 8192, 16, 306), KvFormat::kMxfp4, QMode::kBf16, V40Ceilings());
  EXPECT_NEAR(mx.floor_us, 118.5, 0.1);
  EXPECT_NEAR(mx.contract_floor_us, 212.2, 0.1);
}

TEST(Roofline, QuantisedQRunsSAtTheFp8Rate) {
  // a8: S's 77.3 GFLOP at 1232 TFLOP/s, P V's 68.7 at 688.
  const CaseWork w = Work(128, 4, 8192, 16, 576);
  const CaseFloors f = RooflineFloors(w, KvFormat::kFp8E4m3, QMode::kFp8, V40Ceilings());
  EXPECT_NEAR(f.floor_us, 133.8, 0.1);
  EXPECT_NEAR(f.contract_floor_us, 162.6, 0.1);
}

TEST(Roofline, Bf16KvAndByteBoundCasesHaveOneFloor) {
  // bf16 KV: the products already run at the bf16 rate in the floor.
  const CaseWork bf16 = Work(32, 4, 8192, 32, 1152);
  const CaseFloors b = RooflineFloors(bf16, KvFormat::kBf16, QMode::kBf16, V40Ceilings());
  EXPECT_NEAR(b.floor_us, 106.1, 0.1);
  EXPECT_DOUBLE_EQ(b.contract_floor_us, b.floor_us);
  // One q position: the bytes bind both ways.
  const CaseWork fp8 = Work(128, 1, 8192, 16, 576);
  const CaseFloors f = RooflineFloors(fp8, KvFormat::kFp8E4m3, QMode::kBf16, V40Ceilings());
  EXPECT_NEAR(f.floor_us, 133.8, 0.1);
  EXPECT_DOUBLE_EQ(f.contract_floor_us, f.floor_us);
}

}  // namespace
}  // namespace mlajit::bench
