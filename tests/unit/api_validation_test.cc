// Every C ABI argument check that needs no device, one test per rule
// (docs/VALIDATION.md): the plan config, plan_create's inputs and the decode
// arguments, each with the exact status and the message naming the argument.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/api/validation.h"

namespace mlajit::api_internal {
namespace {

using ::testing::HasSubstr;

void ExpectInvalid(const absl::Status& s, const std::string& pattern) {
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(pattern));
}

mlajit_plan_config_t GoodConfig() {
  mlajit_plan_config_t c = MLAJIT_PLAN_CONFIG_INIT;
  c.num_heads = 16;
  c.sm_scale = 0.07f;
  return c;
}

TEST(PlanConfigValidation, AcceptsAGoodConfig) {
  const mlajit_plan_config_t c = GoodConfig();
  EXPECT_TRUE(ValidatePlanConfig(&c).ok());
}

TEST(PlanConfigValidation, NullAndStructSize) {
  ExpectInvalid(ValidatePlanConfig(nullptr), "config is null");
  mlajit_plan_config_t c = GoodConfig();
  c.struct_size = 8;
  ExpectInvalid(ValidatePlanConfig(&c), "config->struct_size=8: expected >=");
}

TEST(PlanConfigValidation, EachField) {
  mlajit_plan_config_t c = GoodConfig();
  c.num_heads = 0;
  ExpectInvalid(ValidatePlanConfig(&c), "config.num_heads=0: must be in 1..128");
  c = GoodConfig();
  c.num_heads = 129;
  ExpectInvalid(ValidatePlanConfig(&c), "config.num_heads=129");
  c = GoodConfig();
  c.kv_format = static_cast<mlajit_kv_format_t>(3);
  ExpectInvalid(ValidatePlanConfig(&c), "config.kv_format=3: must be 0 (bf16), 1 (fp8_e4m3) or 2 (mxfp4)");
  c = GoodConfig();
  c.q_mode = static_cast<mlajit_q_mode_t>(-1);
  ExpectInvalid(ValidatePlanConfig(&c), "config.q_mode=-1: must be 0 (bf16) or 1 (fp8)");
  c = GoodConfig();
  c.causal = 2;
  ExpectInvalid(ValidatePlanConfig(&c), "config.causal=2: must be 0 or 1");
  c = GoodConfig();
  c.write_lse = 5;
  ExpectInvalid(ValidatePlanConfig(&c), "config.write_lse=5: must be 0 or 1");
  for (float bad : {0.0f, -1.0f, NAN, INFINITY}) {
    c = GoodConfig();
    c.sm_scale = bad;
    ExpectInvalid(ValidatePlanConfig(&c), "config.sm_scale=");
  }
  c = GoodConfig();
  c.page_size = 8;
  ExpectInvalid(ValidatePlanConfig(&c), "config.page_size=8: must be 0 (flat), 1, 16, 32, 64 or 128");
}

TEST(PlanInputValidation, BatchArraysAndKvLens) {
  const mlajit_plan_config_t c = GoodConfig();
  const int32_t qo[] = {0, 1}, kv[] = {0, 5}, lens[] = {5};
  EXPECT_TRUE(ValidatePlanInputs(c, 1, qo, kv, nullptr).ok());
  ExpectInvalid(ValidatePlanInputs(c, -1, qo, kv, nullptr), "batch_size=-1: must be >= 0");
  ExpectInvalid(ValidatePlanInputs(c, 1, nullptr, kv, nullptr), "qo_indptr is null");
  ExpectInvalid(ValidatePlanInputs(c, 1, qo, nullptr, nullptr), "kv_indptr is null");
  ExpectInvalid(ValidatePlanInputs(c, 1, qo, kv, lens), "kv_lens given with config.page_size=0");
  mlajit_plan_config_t paged = c;
  paged.page_size = 16;
  EXPECT_TRUE(ValidatePlanInputs(paged, 1, qo, kv, lens).ok());
}

TEST(PlanLimitsValidation, EachField) {
  mlajit_plan_limits_t l = MLAJIT_PLAN_LIMITS_INIT;
  l.max_batch_size = 64;
  EXPECT_TRUE(ValidatePlanLimits(&l).ok());
  ExpectInvalid(ValidatePlanLimits(nullptr), "limits is null");
  mlajit_plan_limits_t bad = l;
  bad.struct_size = 4;
  ExpectInvalid(ValidatePlanLimits(&bad), "limits->struct_size=4");
  bad = l;
  bad.max_batch_size = 0;
  ExpectInvalid(ValidatePlanLimits(&bad), "limits.max_batch_size=0: must be in 1..1048576");
  bad.max_batch_size = (1 << 20) + 1;
  ExpectInvalid(ValidatePlanLimits(&bad), "limits.max_batch_size=1048577");
  bad = l;
  bad.max_q_len = 9;
  ExpectInvalid(ValidatePlanLimits(&bad), "limits.max_q_len=9: must be in 1..8");
  bad.max_q_len = 0;
  ExpectInvalid(ValidatePlanLimits(&bad), "limits.max_q_len=0");
  bad = l;
  bad.kv_len_hint = -1;
  ExpectInvalid(ValidatePlanLimits(&bad),
                "limits.kv_len_hint=-1: must be 0 (no hint) or a length in tokens");
  mlajit_plan_limits_t hinted = l;
  hinted.kv_len_hint = 4096;
  absl::StatusOr<mlajit_plan_limits_t> read = ReadPlanLimits(&hinted);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->kv_len_hint, 4096);
  EXPECT_EQ(read->max_batch_size, 64);
  EXPECT_EQ(read->struct_size, sizeof(mlajit_plan_limits_t));
}

// A caller built against a header without kv_len_hint passes a struct_size
// that ends before it: accepted, and whatever lies past its struct (here a
// hint the caller never wrote) is not read.
TEST(PlanLimitsValidation, OlderStructTakesNoHint) {
  mlajit_plan_limits_t l = MLAJIT_PLAN_LIMITS_INIT;
  l.max_batch_size = 8;
  l.max_q_len = 2;
  l.kv_len_hint = 1024;
  l.struct_size = offsetof(mlajit_plan_limits_t, kv_len_hint);
  absl::StatusOr<mlajit_plan_limits_t> read = ReadPlanLimits(&l);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->kv_len_hint, 0);
  EXPECT_EQ(read->max_batch_size, 8);
  EXPECT_EQ(read->max_q_len, 2);
  l.kv_len_hint = -5;  // not the caller's field: not validated either
  EXPECT_TRUE(ValidatePlanLimits(&l).ok());
  l.struct_size = offsetof(mlajit_plan_limits_t, kv_len_hint) - 1;
  ExpectInvalid(ValidatePlanLimits(&l), "limits->struct_size=11: expected >= 12");
}

// Device arrays are only checked for null and alignment, never read here.
TEST(PlanUpdateValidation, BatchArraysAndKvLens) {
  const mlajit_plan_config_t c = GoodConfig();
  mlajit_plan_limits_t l = MLAJIT_PLAN_LIMITS_INIT;
  l.max_batch_size = 8;
  const auto* qo = reinterpret_cast<const int32_t*>(0x1000);
  const auto* kv = reinterpret_cast<const int32_t*>(0x2000);
  const auto* lens = reinterpret_cast<const int32_t*>(0x3000);
  EXPECT_TRUE(ValidatePlanUpdate(c, l, 8, qo, kv, nullptr).ok());
  EXPECT_TRUE(ValidatePlanUpdate(c, l, 0, qo, kv, nullptr).ok());
  ExpectInvalid(ValidatePlanUpdate(c, l, 9, qo, kv, nullptr),
                "batch_size=9: must be in 0..8 (the plan's limits.max_batch_size)");
  ExpectInvalid(ValidatePlanUpdate(c, l, -1, qo, kv, nullptr), "batch_size=-1");
  ExpectInvalid(ValidatePlanUpdate(c, l, 1, nullptr, kv, nullptr), "qo_indptr is null");
  ExpectInvalid(ValidatePlanUpdate(c, l, 1, qo, nullptr, nullptr), "kv_indptr is null");
  ExpectInvalid(ValidatePlanUpdate(c, l, 1, qo, kv, lens), "kv_lens given with config.page_size=0");
  ExpectInvalid(ValidatePlanUpdate(c, l, 1, reinterpret_cast<const int32_t*>(0x1002), kv, nullptr),
                "qo_indptr=0x1002: must be 4-byte aligned");
  mlajit_plan_config_t paged = c;
  paged.page_size = 64;
  EXPECT_TRUE(ValidatePlanUpdate(paged, l, 1, qo, kv, lens).ok());
}

// Device pointers are only compared and checked for alignment, never
// dereferenced, so fake addresses exercise every rule.
mlajit_decode_args_t GoodArgs() {
  mlajit_decode_args_t a = MLAJIT_DECODE_ARGS_INIT;
  a.q = reinterpret_cast<const void*>(0x10000);
  a.kv = reinterpret_cast<const void*>(0x20000);
  a.out = reinterpret_cast<void*>(0x30000);
  a.kv_scale = 0.5f;
  return a;
}

TEST(DecodeArgsValidation, AcceptsGoodArgs) {
  const mlajit_decode_args_t a = GoodArgs();
  EXPECT_TRUE(ValidateDecodeArgs(&a, GoodConfig(), 4, 100).ok());
}

TEST(DecodeArgsValidation, NullAndStructSize) {
  ExpectInvalid(ValidateDecodeArgs(nullptr, GoodConfig(), 4, 100), "args is null");
  mlajit_decode_args_t a = GoodArgs();
  a.struct_size = 4;
  ExpectInvalid(ValidateDecodeArgs(&a, GoodConfig(), 4, 100), "args->struct_size=4");
}

TEST(DecodeArgsValidation, RequiredPointers) {
  mlajit_decode_args_t a = GoodArgs();
  a.q = nullptr;
  ExpectInvalid(ValidateDecodeArgs(&a, GoodConfig(), 4, 100), "args.q is null");
  a = GoodArgs();
  a.out = nullptr;
  ExpectInvalid(ValidateDecodeArgs(&a, GoodConfig(), 4, 100), "args.out is null");
  a = GoodArgs();
  a.kv = nullptr;
  ExpectInvalid(ValidateDecodeArgs(&a, GoodConfig(), 4, 100), "args.kv is null");
  // A batch without query rows launches nothing and needs no pointers.
  const mlajit_decode_args_t empty = MLAJIT_DECODE_ARGS_INIT;
  EXPECT_TRUE(ValidateDecodeArgs(&empty, GoodConfig(), 0, 0).ok());
}

TEST(DecodeArgsValidation, Alignment) {
  mlajit_decode_args_t a = GoodArgs();
  a.q = reinterpret_cast<const void*>(0x10008);
  ExpectInvalid(ValidateDecodeArgs(&a, GoodConfig(), 4, 100), "args.q=0x10008: must be 16-byte aligned");
  a = GoodArgs();
  a.out = reinterpret_cast<void*>(0x30004);
  ExpectInvalid(ValidateDecodeArgs(&a, GoodConfig(), 4, 100), "args.out=0x30004: must be 16-byte aligned");
  a = GoodArgs();
  a.kv = reinterpret_cast<const void*>(0x20002);
  ExpectInvalid(ValidateDecodeArgs(&a, GoodConfig(), 4, 100), "args.kv=0x20002: must be 16-byte aligned");
  mlajit_plan_config_t mx = GoodConfig();
  mx.kv_format = MLAJIT_KV_FORMAT_MXFP4;
  EXPECT_TRUE(ValidateDecodeArgs(&a, mx, 4, 100).ok()) << "MXFP4 tokens are 2-byte aligned";
  a.kv = reinterpret_cast<const void*>(0x20001);
  ExpectInvalid(ValidateDecodeArgs(&a, mx, 4, 100), "must be 2-byte aligned");
}

TEST(DecodeArgsValidation, LseMustMatchThePlan) {
  mlajit_plan_config_t with_lse = GoodConfig();
  with_lse.write_lse = 1;
  mlajit_decode_args_t a = GoodArgs();
  ExpectInvalid(ValidateDecodeArgs(&a, with_lse, 4, 100), "args.lse is null but the plan was built with config.write_lse=1");
  a.lse = reinterpret_cast<float*>(0x40000);
  ExpectInvalid(ValidateDecodeArgs(&a, GoodConfig(), 4, 100), "args.lse is set but the plan was built with config.write_lse=0");
  a.lse = reinterpret_cast<float*>(0x40002);
  ExpectInvalid(ValidateDecodeArgs(&a, with_lse, 4, 100), "args.lse=0x40002: must be 4-byte aligned");
}

TEST(DecodeArgsValidation, PageTableMustMatchThePlan) {
  mlajit_plan_config_t paged = GoodConfig();
  paged.page_size = 64;
  mlajit_decode_args_t a = GoodArgs();
  ExpectInvalid(ValidateDecodeArgs(&a, paged, 4, 0), "args.kv_indices is null but the plan is paged (page_size=64)");
  a.kv_indices = reinterpret_cast<const int32_t*>(0x50000);
  EXPECT_TRUE(ValidateDecodeArgs(&a, paged, 4, 0).ok());
  ExpectInvalid(ValidateDecodeArgs(&a, GoodConfig(), 4, 100), "args.kv_indices is set but the plan is flat (page_size=0)");
}

TEST(DecodeArgsValidation, Fp8ScaleAndKvBytes) {
  for (float bad : {0.0f, -2.0f, NAN, INFINITY}) {
    mlajit_decode_args_t a = GoodArgs();
    a.kv_scale = bad;
    ExpectInvalid(ValidateDecodeArgs(&a, GoodConfig(), 4, 100), "args.kv_scale=");
  }
  mlajit_plan_config_t bf16 = GoodConfig();
  bf16.kv_format = MLAJIT_KV_FORMAT_BF16;
  mlajit_decode_args_t a = GoodArgs();
  a.kv_scale = -2.0f;
  EXPECT_TRUE(ValidateDecodeArgs(&a, bf16, 4, 100).ok()) << "kv_scale is ignored for bf16 KV";
  a = GoodArgs();
  a.kv_bytes = 100 * 576;  // exactly the 100 fp8 tokens the plan addresses
  EXPECT_TRUE(ValidateDecodeArgs(&a, GoodConfig(), 4, 100).ok());
  a.kv_bytes = 100 * 576 - 1;
  ExpectInvalid(ValidateDecodeArgs(&a, GoodConfig(), 4, 100), "args.kv_bytes=57599: the plan addresses 100 tokens of 576 bytes");
}

TEST(TuneOptionsValidation, EachField) {
  EXPECT_TRUE(ValidateTuneOptions(nullptr).ok());
  mlajit_tune_options_t o = MLAJIT_TUNE_OPTIONS_INIT;
  EXPECT_TRUE(ValidateTuneOptions(&o).ok());
  auto rejects = [](const mlajit_tune_options_t& t, const std::string& pattern) {
    absl::Status s = ValidateTuneOptions(&t);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << pattern;
    EXPECT_THAT(std::string(s.message()), HasSubstr(pattern));
  };
  mlajit_tune_options_t t = o;
  t.struct_size = 4;
  rejects(t, "options->struct_size=4");
  t = o;
  t.warmup_calls = -1;
  rejects(t, "options.warmup_calls=-1: must be in 0..1000");
  t = o;
  t.timed_calls = 0;
  rejects(t, "options.timed_calls=0: must be in 1..10000");
  t = o;
  t.timed_calls = 10001;
  rejects(t, "options.timed_calls=10001");
  t = o;
  t.persist = 2;
  rejects(t, "options.persist=2: must be 0 or 1");
  t = o;
  t.device_plans = -1;
  rejects(t, "options.device_plans=-1: must be 0 or 1");
  t = o;
  t.warmup_calls = 0;
  t.persist = 0;
  t.device_plans = 1;
  EXPECT_TRUE(ValidateTuneOptions(&t).ok());
}

}  // namespace
}  // namespace mlajit::api_internal
