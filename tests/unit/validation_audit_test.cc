// One test per row of docs/VALIDATION.md that needs no GPU: each bad argument
// of the public C ABI (and of the plan layout checks plan_create runs) gives the
// documented status and a message naming the argument and the value. Rows that
// need a runtime are marked in the table with the GPU test covering them.
#include <cstddef>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mlajit/mlajit.h"
#include "mlajit/mlajit.hpp"
#include "src/plan/scheduler.h"

namespace mlajit {
namespace {

using ::testing::HasSubstr;

// Status and last error of one call.
struct Outcome {
  mlajit_status_t status;
  std::string message;
};
Outcome Last(mlajit_status_t s) { return {s, mlajit_last_error()}; }

#define EXPECT_REJECTS(call, code, pattern)          \
  do {                                               \
    Outcome o_ = Last(call);                         \
    EXPECT_EQ(o_.status, code) << o_.message;        \
    EXPECT_THAT(o_.message, HasSubstr(pattern));     \
  } while (0)

mlajit_cache_t MemoryCache() {
  mlajit_cache_options_t o = MLAJIT_CACHE_OPTIONS_INIT;
  o.memory_only = 1;
  mlajit_cache_t c = nullptr;
  EXPECT_EQ(mlajit_cache_open(&o, &c), MLAJIT_STATUS_OK) << mlajit_last_error();
  return c;
}

// ---- runtime options / runtime_create ---------------------------------------

TEST(ValidationAudit, RuntimeCreateOutputNull) {
  EXPECT_REJECTS(mlajit_runtime_create(nullptr, nullptr), MLAJIT_STATUS_INVALID_ARGUMENT,
                 "runtime (output) is null");
}

TEST(ValidationAudit, RuntimeOptionsStructSize) {
  mlajit_runtime_options_t o = MLAJIT_RUNTIME_OPTIONS_INIT;
  o.struct_size = 3;
  mlajit_runtime_t rt = nullptr;
  EXPECT_REJECTS(mlajit_runtime_create(&o, &rt), MLAJIT_STATUS_INVALID_ARGUMENT,
                 "options->struct_size=3: expected >= ");
}

// ---- cache options (mlajit_cache_open, and runtime options.cache) ----------

TEST(ValidationAudit, CacheOpenOutputNull) {
  EXPECT_REJECTS(mlajit_cache_open(nullptr, nullptr), MLAJIT_STATUS_INVALID_ARGUMENT,
                 "mlajit_cache_open: cache=NULL");
}

TEST(ValidationAudit, CacheOptionsStructSize) {
  mlajit_cache_options_t o = MLAJIT_CACHE_OPTIONS_INIT;
  o.struct_size = 8;
  mlajit_cache_t c = nullptr;
  EXPECT_REJECTS(mlajit_cache_open(&o, &c), MLAJIT_STATUS_INVALID_ARGUMENT,
                 "mlajit_cache_open: options->struct_size=8: expected sizeof(mlajit_cache_options_t)=");
  EXPECT_EQ(c, nullptr);
}

TEST(ValidationAudit, CacheOptionsEmptyCacheDir) {
  mlajit_cache_options_t o = MLAJIT_CACHE_OPTIONS_INIT;
  o.cache_dir = "";
  mlajit_cache_t c = nullptr;
  EXPECT_REJECTS(mlajit_cache_open(&o, &c), MLAJIT_STATUS_INVALID_ARGUMENT,
                 "options->cache_dir=\"\": expected a folder path or NULL");
}

TEST(ValidationAudit, CacheOptionsEmptyPinsFile) {
  mlajit_cache_options_t o = MLAJIT_CACHE_OPTIONS_INIT;
  o.memory_only = 1;
  o.pins_file = "";
  mlajit_cache_t c = nullptr;
  EXPECT_REJECTS(mlajit_cache_open(&o, &c), MLAJIT_STATUS_INVALID_ARGUMENT,
                 "options->pins_file=\"\": expected a file path or NULL");
}

TEST(ValidationAudit, CacheOptionsUnreadablePinsFile) {
  mlajit_cache_options_t o = MLAJIT_CACHE_OPTIONS_INIT;
  o.memory_only = 1;
  o.pins_file = "/nonexistent/mlajit-pins.txt";
  mlajit_cache_t c = nullptr;
  EXPECT_REJECTS(mlajit_cache_open(&o, &c), MLAJIT_STATUS_NOT_FOUND,
                 "pins_file (MLAJIT_CACHE_PINS): pins file /nonexistent/mlajit-pins.txt");
}

TEST(ValidationAudit, RuntimeCacheOptionsAreCheckedBeforeTheDevice) {
  // options.cache goes through the same resolution; without a GPU the backend
  // fails first, so only the device-independent order is asserted here.
  mlajit_cache_options_t co = MLAJIT_CACHE_OPTIONS_INIT;
  co.struct_size = 8;
  mlajit_runtime_options_t o = MLAJIT_RUNTIME_OPTIONS_INIT;
  o.cache = &co;
  mlajit_runtime_t rt = nullptr;
  mlajit_status_t s = mlajit_runtime_create(&o, &rt);
  EXPECT_NE(s, MLAJIT_STATUS_OK);
  EXPECT_TRUE(s == MLAJIT_STATUS_FAILED_PRECONDITION || s == MLAJIT_STATUS_INVALID_ARGUMENT)
      << mlajit_last_error();
  if (s == MLAJIT_STATUS_INVALID_ARGUMENT) {
    EXPECT_THAT(mlajit_last_error(), HasSubstr("mlajit_runtime_create: options->struct_size=8"));
  }
}

// ---- plan_create: handles and arrays reachable without a runtime ------------

TEST(ValidationAudit, PlanCreateOutputNull) {
  EXPECT_REJECTS(mlajit_plan_create(nullptr, nullptr, 0, nullptr, nullptr, nullptr, nullptr),
                 MLAJIT_STATUS_INVALID_ARGUMENT, "plan (output) is null");
}

TEST(ValidationAudit, PlanCreateRuntimeNull) {
  mlajit_plan_t p = reinterpret_cast<mlajit_plan_t>(0x1);
  EXPECT_REJECTS(mlajit_plan_create(nullptr, nullptr, 0, nullptr, nullptr, nullptr, &p),
                 MLAJIT_STATUS_INVALID_ARGUMENT, "runtime is null");
  EXPECT_EQ(p, nullptr);
}

TEST(ValidationAudit, DecodePlanNull) {
  EXPECT_REJECTS(mlajit_decode(nullptr, nullptr, nullptr), MLAJIT_STATUS_INVALID_ARGUMENT,
                 "plan is null");
}

TEST(ValidationAudit, DevicePlanCreateOutputAndRuntimeNull) {
  mlajit_plan_config_t config = MLAJIT_PLAN_CONFIG_INIT;
  mlajit_plan_limits_t limits = MLAJIT_PLAN_LIMITS_INIT;
  EXPECT_REJECTS(mlajit_plan_create_device(nullptr, &config, &limits, nullptr),
                 MLAJIT_STATUS_INVALID_ARGUMENT, "plan (output) is null");
  mlajit_plan_t plan = reinterpret_cast<mlajit_plan_t>(0x1);
  EXPECT_REJECTS(mlajit_plan_create_device(nullptr, &config, &limits, &plan),
                 MLAJIT_STATUS_INVALID_ARGUMENT, "runtime is null");
  EXPECT_EQ(plan, nullptr) << "the output is cleared before a check can fail";
}

TEST(ValidationAudit, DevicePlanUpdateAndCheckPlanNull) {
  EXPECT_REJECTS(mlajit_plan_update_async(nullptr, 1, nullptr, nullptr, nullptr, nullptr),
                 MLAJIT_STATUS_INVALID_ARGUMENT, "plan is null");
  EXPECT_REJECTS(mlajit_plan_check_update(nullptr, nullptr), MLAJIT_STATUS_INVALID_ARGUMENT,
                 "plan is null");
  // The C++ layer passes the same errors through.
  const mlajit::Plan empty;
  EXPECT_EQ(empty.UpdateAsync(1, nullptr, nullptr, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(empty.CheckUpdate().code(), absl::StatusCode::kInvalidArgument);
}

// ---- plan layout (plan::ValidateLayout, run by plan_create) ----------------

struct LayoutCase {
  std::vector<int32_t> qo{}, kv{}, lens{};
  int heads = 16, page = 0;
};
absl::Status Check(const LayoutCase& c) {
  plan::LayoutView v;
  v.num_heads = c.heads;
  v.page_size = c.page;
  v.qo_indptr = c.qo;
  v.kv_indptr = c.kv;
  v.kv_lens = c.lens;
  return plan::ValidateLayout(v);
}
void ExpectLayoutError(const LayoutCase& c, const std::string& pattern) {
  absl::Status s = Check(c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(pattern));
}

TEST(ValidationAudit, LayoutControlCaseIsAccepted) {
  EXPECT_TRUE(Check({{0, 1, 3}, {0, 40, 90}}).ok());
  EXPECT_TRUE(Check({{0, 1, 3}, {0, 2, 3}, {100, 16}, 16, 64}).ok());
}
TEST(ValidationAudit, LayoutNumHeads) {
  ExpectLayoutError({{0, 1}, {0, 4}, {}, 0}, "num_heads=0: must be in 1..128");
  ExpectLayoutError({{0, 1}, {0, 4}, {}, 129}, "num_heads=129: must be in 1..128");
}
TEST(ValidationAudit, LayoutPageSize) {
  ExpectLayoutError({{0, 1}, {0, 4}, {}, 16, 8}, "page_size=8: must be 0 (flat), 1, 16, 32, 64 or 128");
}
TEST(ValidationAudit, LayoutIndptrEmpty) {
  ExpectLayoutError({{}, {0}}, "qo_indptr is empty: expected batch_size + 1 entries");
}
TEST(ValidationAudit, LayoutIndptrStartsAtZero) {
  ExpectLayoutError({{1, 2}, {0, 4}}, "qo_indptr[0]=1: must be 0");
  ExpectLayoutError({{0, 1}, {3, 4}}, "kv_indptr[0]=3: must be 0");
}
TEST(ValidationAudit, LayoutIndptrNonDecreasing) {
  ExpectLayoutError({{0, 1, 2}, {0, 40, 17}}, "kv_indptr[2]=17 < kv_indptr[1]=40: must be non-decreasing");
  ExpectLayoutError({{0, 2, 1}, {0, 4, 5}}, "qo_indptr[2]=1 < qo_indptr[1]=2");
}
TEST(ValidationAudit, LayoutIndptrLengthsAgree) {
  ExpectLayoutError({{0, 1}, {0, 4, 5}}, "kv_indptr has 3 entries: expected 2");
}
TEST(ValidationAudit, LayoutQLen) {
  ExpectLayoutError({{0, 9}, {0, 40}}, "q_len of sequence 0 = 9 (qo_indptr[1] - qo_indptr[0]): must be at most 8");
}
TEST(ValidationAudit, LayoutKvLensOnFlat) {
  ExpectLayoutError({{0, 1}, {0, 4}, {4}, 16, 0}, "kv_lens given for a flat layout");
}
TEST(ValidationAudit, LayoutKvLensCount) {
  ExpectLayoutError({{0, 1, 2}, {0, 1, 2}, {5}, 16, 16}, "kv_lens has 1 entries: expected batch_size=2");
}
TEST(ValidationAudit, LayoutKvLensRange) {
  ExpectLayoutError({{0, 1}, {0, 4}, {65}, 16, 16}, "kv_lens[0]=65: must be in 0..64 (4 pages of 16)");
  ExpectLayoutError({{0, 1}, {0, 4}, {-1}, 16, 16}, "kv_lens[0]=-1");
}
TEST(ValidationAudit, ScheduleConfigPositive) {
  plan::LayoutView v;
  v.num_heads = 16;
  std::vector<int32_t> qo = {0, 1}, kv = {0, 4};
  v.qo_indptr = qo;
  v.kv_indptr = kv;
  absl::StatusOr<plan::Schedule> s = plan::BuildSchedule(v, {0, 64, 32});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("num_ctas=0"));
}

// ---- cache calls ------------------------------------------------------------

TEST(ValidationAudit, CacheCallsRejectNullHandle) {
  char* json = nullptr;
  int bad = 0;
  uint64_t removed = 0;
  mlajit_cache_prune_options_t po = MLAJIT_CACHE_PRUNE_OPTIONS_INIT;
  EXPECT_REJECTS(mlajit_cache_list_json(nullptr, &json), MLAJIT_STATUS_INVALID_ARGUMENT, "mlajit_cache_list_json: cache=NULL");
  EXPECT_REJECTS(mlajit_cache_show_json(nullptr, "00", &json), MLAJIT_STATUS_INVALID_ARGUMENT, "mlajit_cache_show_json: cache=NULL");
  EXPECT_REJECTS(mlajit_cache_verify_json(nullptr, &bad, &json), MLAJIT_STATUS_INVALID_ARGUMENT, "mlajit_cache_verify_json: cache=NULL");
  EXPECT_REJECTS(mlajit_cache_stats_json(nullptr, &json), MLAJIT_STATUS_INVALID_ARGUMENT, "mlajit_cache_stats_json: cache=NULL");
  EXPECT_REJECTS(mlajit_cache_tuning_json(nullptr, &json), MLAJIT_STATUS_INVALID_ARGUMENT, "mlajit_cache_tuning_json: cache=NULL");
  EXPECT_REJECTS(mlajit_cache_explain_json(nullptr, "a", "b", &json), MLAJIT_STATUS_INVALID_ARGUMENT, "mlajit_cache_explain_json: cache=NULL");
  EXPECT_REJECTS(mlajit_cache_prune_json(nullptr, &po, &json), MLAJIT_STATUS_INVALID_ARGUMENT, "mlajit_cache_prune_json: cache=NULL");
  EXPECT_REJECTS(mlajit_cache_clear(nullptr, &removed), MLAJIT_STATUS_INVALID_ARGUMENT, "mlajit_cache_clear: cache=NULL");
  EXPECT_REJECTS(mlajit_cache_warm(nullptr, "m", "", 1, nullptr, nullptr, &json), MLAJIT_STATUS_INVALID_ARGUMENT, "mlajit_cache_warm: cache=NULL");
  EXPECT_REJECTS(mlajit_cache_export(nullptr, "b", nullptr, &json), MLAJIT_STATUS_INVALID_ARGUMENT, "mlajit_cache_export: cache=NULL");
  EXPECT_REJECTS(mlajit_cache_import(nullptr, "b", nullptr, &json), MLAJIT_STATUS_INVALID_ARGUMENT, "mlajit_cache_import: cache=NULL");
}

TEST(ValidationAudit, CacheJsonOutputNull) {
  mlajit_cache_t c = MemoryCache();
  ASSERT_NE(c, nullptr);
  EXPECT_REJECTS(mlajit_cache_list_json(c, nullptr), MLAJIT_STATUS_INVALID_ARGUMENT, "mlajit_cache_list_json: json=NULL");
  EXPECT_REJECTS(mlajit_cache_stats_json(c, nullptr), MLAJIT_STATUS_INVALID_ARGUMENT, "mlajit_cache_stats_json: json=NULL");
  EXPECT_REJECTS(mlajit_cache_tuning_json(c, nullptr), MLAJIT_STATUS_INVALID_ARGUMENT, "mlajit_cache_tuning_json: json=NULL");
  EXPECT_REJECTS(mlajit_cache_show_json(c, "0123456789abcdef0123456789abcdef", nullptr), MLAJIT_STATUS_INVALID_ARGUMENT, "mlajit_cache_show_json: json=NULL");
  EXPECT_REJECTS(mlajit_cache_explain_json(c, "a", "b", nullptr), MLAJIT_STATUS_INVALID_ARGUMENT, "mlajit_cache_explain_json: json=NULL");
  mlajit_cache_close(c);
}

TEST(ValidationAudit, CacheKeyArguments) {
  mlajit_cache_t c = MemoryCache();
  ASSERT_NE(c, nullptr);
  char* json = nullptr;
  EXPECT_REJECTS(mlajit_cache_show_json(c, nullptr, &json), MLAJIT_STATUS_INVALID_ARGUMENT, "mlajit_cache_show_json: key=NULL: expected 32 hex digits");
  EXPECT_REJECTS(mlajit_cache_show_json(c, "xyz", &json), MLAJIT_STATUS_INVALID_ARGUMENT, "mlajit_cache_show_json: key=\"xyz\": expected 32 hex digits");
  EXPECT_REJECTS(mlajit_cache_explain_json(c, "0123456789abcdef0123456789abcdef", "nothex", &json),
                 MLAJIT_STATUS_NOT_FOUND, "key_a=0123456789abcdef0123456789abcdef");
  EXPECT_REJECTS(mlajit_cache_show_json(c, "0123456789abcdef0123456789abcdef", &json), MLAJIT_STATUS_NOT_FOUND,
                 "mlajit_cache_show_json: key=0123456789abcdef0123456789abcdef: kernel");
  mlajit_cache_close(c);
}

TEST(ValidationAudit, CachePruneOptions) {
  mlajit_cache_t c = MemoryCache();
  ASSERT_NE(c, nullptr);
  EXPECT_REJECTS(mlajit_cache_prune_json(c, nullptr, nullptr), MLAJIT_STATUS_INVALID_ARGUMENT, "options=NULL");
  mlajit_cache_prune_options_t po = MLAJIT_CACHE_PRUNE_OPTIONS_INIT;
  po.struct_size = 4;
  EXPECT_REJECTS(mlajit_cache_prune_json(c, &po, nullptr), MLAJIT_STATUS_INVALID_ARGUMENT, "options->struct_size=4");
  po = MLAJIT_CACHE_PRUNE_OPTIONS_INIT;
  po.max_bytes = -2;
  EXPECT_REJECTS(mlajit_cache_prune_json(c, &po, nullptr), MLAJIT_STATUS_INVALID_ARGUMENT, "max_bytes=-2, older_than_s=-1: each must be >= 0, or -1 for off");
  po = MLAJIT_CACHE_PRUNE_OPTIONS_INIT;
  po.older_than_s = -5;
  EXPECT_REJECTS(mlajit_cache_prune_json(c, &po, nullptr), MLAJIT_STATUS_INVALID_ARGUMENT, "older_than_s=-5");
  po = MLAJIT_CACHE_PRUNE_OPTIONS_INIT;
  EXPECT_REJECTS(mlajit_cache_prune_json(c, &po, nullptr), MLAJIT_STATUS_INVALID_ARGUMENT, "nothing to do: set max_bytes, older_than_s or stale");
  mlajit_cache_close(c);
}

TEST(ValidationAudit, CacheWarmManifestPath) {
  mlajit_cache_t c = MemoryCache();
  ASSERT_NE(c, nullptr);
  EXPECT_REJECTS(mlajit_cache_warm(c, nullptr, "", 1, nullptr, nullptr, nullptr), MLAJIT_STATUS_INVALID_ARGUMENT, "manifest_path=NULL: expected the path of a manifest");
  EXPECT_REJECTS(mlajit_cache_warm(c, "", "", 1, nullptr, nullptr, nullptr), MLAJIT_STATUS_INVALID_ARGUMENT, "manifest_path=\"\"");
  mlajit_cache_close(c);
}

TEST(ValidationAudit, CacheExportImportPaths) {
  mlajit_cache_t c = MemoryCache();
  ASSERT_NE(c, nullptr);
  EXPECT_REJECTS(mlajit_cache_export(c, nullptr, nullptr, nullptr), MLAJIT_STATUS_INVALID_ARGUMENT, "mlajit_cache_export: bundle_path=NULL: expected a file path");
  EXPECT_REJECTS(mlajit_cache_export(c, "b", "", nullptr), MLAJIT_STATUS_INVALID_ARGUMENT, "mlajit_cache_export: manifest_path=\"\"");
  EXPECT_REJECTS(mlajit_cache_import(c, "", nullptr, nullptr), MLAJIT_STATUS_INVALID_ARGUMENT, "mlajit_cache_import: bundle_path=\"\"");
  EXPECT_REJECTS(mlajit_cache_import(c, "b", "", nullptr), MLAJIT_STATUS_INVALID_ARGUMENT, "mlajit_cache_import: expect_pins_path=\"\"");
  EXPECT_REJECTS(mlajit_cache_import(c, "/nonexistent/x.bundle", nullptr, nullptr), MLAJIT_STATUS_NOT_FOUND, "bundle /nonexistent/x.bundle");
  mlajit_cache_close(c);
}

TEST(ValidationAudit, TuneRuntimeNull) {
  mlajit_plan_config_t c = MLAJIT_PLAN_CONFIG_INIT;
  const int32_t qo[] = {0, 1}, kv[] = {0, 64};
  char* json = reinterpret_cast<char*>(&c);  // must be cleared
  EXPECT_REJECTS(mlajit_tune(nullptr, &c, 1, qo, kv, nullptr, nullptr, &json),
                 MLAJIT_STATUS_INVALID_ARGUMENT, "runtime is null");
  EXPECT_EQ(json, nullptr);
}

TEST(ValidationAudit, PlanDescribeNulls) {
  EXPECT_REJECTS(mlajit_plan_describe_json(nullptr, nullptr), MLAJIT_STATUS_INVALID_ARGUMENT,
                 "json (output) is null");
  char* json = reinterpret_cast<char*>(&json);  // must be cleared
  EXPECT_REJECTS(mlajit_plan_describe_json(nullptr, &json), MLAJIT_STATUS_INVALID_ARGUMENT,
                 "plan is null");
  EXPECT_EQ(json, nullptr);
}

}  // namespace
}  // namespace mlajit
