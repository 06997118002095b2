// Device-built plans: the schedule built on the GPU from device-resident
// layouts matches the host planner's bit for bit (same outputs), a captured
// update + decode step replays correctly while lengths and page tables change
// between replays, padded slots (length 0, page id -1) read nothing, and a
// layout the planner rejects leaves an empty schedule and a clear error.
// Every output is poisoned first and checked against the CPU reference.
#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "mlajit/mlajit.h"
#include "src/base/mla_types.h"
#include "src/reference/mla_reference.h"
#include "tests/gpu/harness_suite.h"
#include "tools/harness/decode_harness.h"

namespace mlajit {
namespace {

using harness::FreshSeed;
using harness::OutputTolerance;
using harness::DeviceBuffer;
using harness::FromC;
using reference::Batch;
using reference::BatchConfig;
using reference::LengthDistribution;

// Device buffers sized for the largest batch a config can generate, refilled
// for every step: what an engine's captured graph reads.
class StepBuffers {
 public:
  static absl::StatusOr<StepBuffers> Allocate(gpu::Backend* b, int device, const BatchConfig& c) {
    StepBuffers s;
    s.backend_ = b;
    s.device_ = device;
    const int64_t rows = int64_t{c.batch_size} * c.q_len * c.num_heads;
    int64_t slots = int64_t{c.batch_size} * c.kv_len, pages = 1;
    if (c.page_size > 0) {
      pages = int64_t{c.batch_size} * ((c.kv_len + c.page_size - 1) / c.page_size);
      slots = (pages + pages / 8 + 2) * c.page_size;  // the generator's spare pages
    }
    auto alloc = [&](DeviceBuffer* d, int64_t bytes) -> absl::Status {
      auto r = DeviceBuffer::Allocate(b, device, static_cast<size_t>(std::max<int64_t>(bytes, 16)));
      if (!r.ok()) return r.status();
      *d = std::move(*r);
      return absl::OkStatus();
    };
    const int64_t n = c.batch_size + 1;
    for (auto [buf, bytes] : {std::pair{&s.qo, n * 4}, {&s.kv_indptr, n * 4}, {&s.kv_lens, n * 4},
                              {&s.kv_indices, pages * 4}, {&s.q, rows * kHeadDimQk * 2},
                              {&s.kv, slots * KvBytesPerToken(c.kv_format)},
                              {&s.out, rows * kHeadDimV * 2}, {&s.lse, rows * 4}}) {
      if (auto st = alloc(buf, bytes); !st.ok()) return st;
    }
    return s;
  }

  // Copies a batch's layout and tensors in (asynchronously on `stream`; the
  // host vectors must live until the stream has run) and poisons the outputs.
  absl::Status Fill(const Batch& b, const std::vector<int32_t>& page_ids,
                    const std::vector<uint16_t>& out_poison, const std::vector<uint32_t>& lse_poison,
                    gpu::StreamHandle stream) {
    auto put = [&](const DeviceBuffer& d, const void* src, size_t bytes) -> absl::Status {
      if (bytes > d.bytes()) {
        return absl::InternalError(absl::StrCat("test buffer too small: ", bytes, " > ", d.bytes()));
      }
      return bytes == 0 ? absl::OkStatus() : backend_->MemcpyHtoD(device_, d.ptr(), src, bytes, stream);
    };
    absl::Status s = put(qo, b.qo_indptr.data(), b.qo_indptr.size() * 4);
    if (s.ok()) s = put(kv_indptr, b.kv_indptr.data(), b.kv_indptr.size() * 4);
    if (s.ok()) s = put(kv_lens, b.kv_lens.data(), b.kv_lens.size() * 4);
    if (s.ok()) s = put(kv_indices, page_ids.data(), page_ids.size() * 4);
    if (s.ok()) s = put(q, b.q.data(), b.q.size() * 2);
    if (s.ok()) s = put(kv, b.kv.data(), b.kv.size());
    if (s.ok()) s = put(out, out_poison.data(), out_poison.size() * 2);
    if (s.ok()) s = put(lse, lse_poison.data(), lse_poison.size() * 4);
    return s;
  }

  mlajit_decode_args_t Args(const Batch& b) const {
    mlajit_decode_args_t a = MLAJIT_DECODE_ARGS_INIT;
    a.q = q.get();
    a.kv = kv.get();
    a.kv_scale = b.kv_scale;
    a.kv_indices = b.config.page_size > 0 ? static_cast<const int32_t*>(kv_indices.get()) : nullptr;
    a.out = out.get();
    a.lse = static_cast<float*>(lse.get());
    return a;
  }
  const int32_t* kv_lens_or_null(const Batch& b) const {
    return b.config.page_size > 0 ? static_cast<const int32_t*>(kv_lens.get()) : nullptr;
  }

  DeviceBuffer qo, kv_indptr, kv_lens, kv_indices, q, kv, out, lse;

 private:
  gpu::Backend* backend_ = nullptr;
  int device_ = 0;
};

struct Outputs {
  std::vector<uint16_t> out;
  std::vector<float> lse;
};

absl::StatusOr<Outputs> ReadBack(gpu::Backend* b, int device, const StepBuffers& s, int64_t rows,
                                 gpu::StreamHandle stream) {
  Outputs o;
  o.out.resize(rows * kHeadDimV);
  o.lse.resize(rows);
  absl::Status st = b->MemcpyDtoH(device, o.out.data(), s.out.ptr(), o.out.size() * 2, stream);
  if (st.ok()) st = b->MemcpyDtoH(device, o.lse.data(), s.lse.ptr(), o.lse.size() * 4, stream);
  if (st.ok()) st = b->StreamSynchronize(device, stream);
  if (!st.ok()) return st;
  return o;
}

// Marks about a quarter of the non-empty sequences of a paged batch as padded
// slots: page ids -1 on the device, and length 0 for the reference.
std::vector<int32_t> PadSomeSlots(Batch* reference_batch, uint64_t seed) {
  std::vector<int32_t> ids = reference_batch->kv_indices;
  std::mt19937_64 rng(seed);
  const int batch = static_cast<int>(reference_batch->kv_lens.size());
  for (int b = 0; b < batch; ++b) {
    const int first = reference_batch->kv_indptr[b], last = reference_batch->kv_indptr[b + 1];
    if (last > first && rng() % 4 == 0) {
      std::fill(ids.begin() + first, ids.begin() + last, -1);
      reference_batch->kv_lens[b] = 0;
    }
  }
  return ids;
}

class DevicePlanTest : public HarnessSuite {
 protected:
  void SetUp() override {
    HarnessSuite::SetUp();
    if (IsSkipped()) return;
    backend_ = harness_->backend();
    device_ = harness_->device();
    auto st = backend_->CreateStream(device_);
    ASSERT_TRUE(st.ok()) << st.status();
    stream_ = *st;
  }
  void TearDown() override {
    if (stream_ != nullptr) (void)backend_->DestroyStream(device_, stream_);
  }

  // The reference's outputs for `b`, compared with the device's.
  void ExpectMatchesReference(const Batch& b, const Outputs& got, const std::string& what) {
    const size_t rows = static_cast<size_t>(b.total_q()) * b.config.num_heads;
    std::vector<float> ref_out(rows * kHeadDimV), ref_lse(rows);
    ASSERT_TRUE(reference::ReferenceDecode(b.problem(), absl::MakeSpan(ref_out),
                                           absl::MakeSpan(ref_lse)).ok());
    auto out = reference::CompareBf16(absl::MakeSpan(got.out).subspan(0, rows * kHeadDimV), ref_out);
    auto lse = reference::CompareF32(absl::MakeSpan(got.lse).subspan(0, rows), ref_lse);
    EXPECT_TRUE(out.Passes(OutputTolerance(b.config))) << what << "\n  out: " << out.ToString();
    EXPECT_TRUE(lse.Passes(1e-3)) << what << "\n  lse: " << lse.ToString();
  }

  // Decodes batch `c` with a host-built plan (through the harness) and with a
  // device-built plan of limits (c.batch_size, c.q_len, kv_len_hint) over the
  // same layout, and expects the same bits from both, the reference's values,
  // and `block_m`-row tiles in the device plan (0: any).
  void ExpectDevicePlanMatchesHostPlan(const BatchConfig& c, int kv_len_hint, int block_m) {
    // Host plan, through the harness.
    auto db = harness_->Upload(c, true);
    ASSERT_TRUE(db.ok()) << db.status();
    harness::CaseOptions o;
    o.stream = stream_;
    auto host = harness_->Check(**db, o);
    ASSERT_TRUE(host.ok()) << host.status();
    EXPECT_TRUE(host->out.Passes(OutputTolerance(c))) << host->out.ToString();
    const Batch& b = (*db)->batch;
    const int64_t rows = int64_t{b.total_q()} * c.num_heads;
    std::vector<uint16_t> host_out(rows * kHeadDimV);
    std::vector<float> host_lse(rows);
    ASSERT_TRUE(
        backend_
            ->MemcpyDtoH(device_, host_out.data(), (*db)->out.ptr(), host_out.size() * 2, stream_)
            .ok());
    ASSERT_TRUE(
        backend_
            ->MemcpyDtoH(device_, host_lse.data(), (*db)->lse.ptr(), host_lse.size() * 4, stream_)
            .ok());

    // Device plan over the same layout.
    Outputs dev;
    std::string described;
    DecodeWithDevicePlan(c, b, kv_len_hint, &dev, &described);
    if (HasFatalFailure()) return;
    // One schedule, one summation order: the very same bits.
    EXPECT_EQ(std::memcmp(dev.out.data(), host_out.data(), host_out.size() * 2), 0)
        << "outputs of the device-built and host-built plans differ";
    EXPECT_EQ(std::memcmp(dev.lse.data(), host_lse.data(), host_lse.size() * 4), 0);
    ExpectMatchesReference(b, dev, "device plan");
    if (block_m > 0) {
      EXPECT_NE(described.find(absl::StrCat("\"block_m\":", block_m, ",")), std::string::npos)
          << described;
    }
  }

  // Decodes batch `b` (of config `c`) with a device-built plan of limits
  // (c.batch_size, c.q_len, kv_len_hint), its outputs poisoned first, into
  // `got`; `described` receives the plan's description.
  void DecodeWithDevicePlan(const BatchConfig& c, const Batch& b, int kv_len_hint, Outputs* got,
                            std::string* described) {
    const int64_t rows = int64_t{b.total_q()} * c.num_heads;
    mlajit_plan_config_t pc = harness::PlanConfigFor(c, b.sm_scale, true);
    mlajit_plan_limits_t lim = MLAJIT_PLAN_LIMITS_INIT;
    lim.max_batch_size = c.batch_size;
    lim.max_q_len = c.q_len;
    lim.kv_len_hint = kv_len_hint;
    mlajit_plan_t plan = nullptr;
    ASSERT_EQ(mlajit_plan_create_device(harness_->runtime(), &pc, &lim, &plan), MLAJIT_STATUS_OK)
        << mlajit_last_error();
    struct PlanFree {
      mlajit_plan_t p;
      ~PlanFree() { mlajit_plan_free(p); }
    } plan_free{plan};
    char* json = nullptr;
    ASSERT_EQ(mlajit_plan_describe_json(plan, &json), MLAJIT_STATUS_OK) << mlajit_last_error();
    *described = json;
    mlajit_free(json);
    auto bufs = StepBuffers::Allocate(backend_, device_, c);
    ASSERT_TRUE(bufs.ok()) << bufs.status();
    std::vector<uint16_t> poison(rows * kHeadDimV, reference::kPoisonBf16);
    std::vector<uint32_t> lse_poison(rows, reference::kPoisonF32);
    ASSERT_TRUE(bufs->Fill(b, b.kv_indices, poison, lse_poison, stream_).ok());
    ASSERT_EQ(
        mlajit_plan_update_async(plan, c.batch_size, static_cast<const int32_t*>(bufs->qo.get()),
                                 static_cast<const int32_t*>(bufs->kv_indptr.get()),
                                 bufs->kv_lens_or_null(b), stream_),
        MLAJIT_STATUS_OK)
        << mlajit_last_error();
    mlajit_decode_args_t a = bufs->Args(b);
    ASSERT_EQ(mlajit_decode(plan, &a, stream_), MLAJIT_STATUS_OK) << mlajit_last_error();
    EXPECT_EQ(mlajit_plan_check_update(plan, stream_), MLAJIT_STATUS_OK) << mlajit_last_error();
    auto dev = ReadBack(backend_, device_, *bufs, rows, stream_);
    ASSERT_TRUE(dev.ok()) << dev.status();
    *got = std::move(*dev);
  }

  gpu::Backend* backend_ = nullptr;
  int device_ = 0;
  gpu::StreamHandle stream_ = nullptr;
};

TEST_F(DevicePlanTest, MatchesTheHostPlanBitForBit) {
  // Each batch is large enough (>= 6 wide work units per resident CTA for fp8
  // with up to 32 rows, >= 3 otherwise, see plan::ChooseTiles) that the host
  // plan picks the tiles the device-planned plan, which sees no batch, picks:
  // the same kernel on the same schedule.
  std::vector<BatchConfig> configs(5);
  configs[0].batch_size = 37;
  configs[0].kv_len = 3000;
  configs[0].lengths = LengthDistribution::kUniform;
  configs[1].batch_size = 6;
  configs[1].q_len = 3;
  configs[1].num_heads = 32;
  configs[1].kv_len = 9000;
  configs[1].kv_format = KvFormat::kBf16;
  configs[1].page_size = 64;
  configs[1].lengths = LengthDistribution::kUniform;
  configs[2].batch_size = 9;
  configs[2].num_heads = 128;
  configs[2].kv_len = 20000;
  configs[2].lengths = LengthDistribution::kSkewed;
  configs[2].zero_length_fraction = 0.2;
  configs[2].kv_format = KvFormat::kMxfp4;
  configs[2].page_size = 1;
  configs[3].batch_size = 2;
  configs[3].q_len = 2;
  configs[3].kv_len = 60000;  // 1876 wide units: fp8 takes 32-row tiles from 1584
  configs[3].q_mode = QMode::kFp8;
  configs[3].page_size = 16;
  configs[4].batch_size = 32;  // equal sequences: the aligned-pieces cut rule
  configs[4].kv_len = 4096;
  configs[4].lengths = LengthDistribution::kFixed;
  for (BatchConfig& c : configs) {
    c.seed = FreshSeed();
    SCOPED_TRACE(absl::StrCat("batch=", c.batch_size, " q_len=", c.q_len, " heads=", c.num_heads,
                              " kv=", std::string(KvFormatName(c.kv_format)), " page=", c.page_size, " seed=", c.seed));
    ExpectDevicePlanMatchesHostPlan(c, /*kv_len_hint=*/0, /*block_m=*/0);
  }
}

// A plan given kv_len_hint takes the tiles a host-built plan of its largest
// batch takes: on these small batches 16-row tiles, where the plan without a
// hint takes 32-row ones (plan::ChooseTiles' small-batch rule).
TEST_F(DevicePlanTest, KvLenHintTakesTheSmallBatchTiles) {
  std::vector<BatchConfig> configs(3);
  configs[0].batch_size = 4;  // (4,1,1024,32) fp8: 64 wide units on 132 SMs
  configs[0].num_heads = 32;
  configs[0].kv_len = 1024;
  configs[0].lengths = LengthDistribution::kFixed;
  configs[1].batch_size = 8;  // bf16, paged, lengths below the hint
  configs[1].num_heads = 32;
  configs[1].kv_len = 2000;
  configs[1].kv_format = KvFormat::kBf16;
  configs[1].page_size = 16;
  configs[1].lengths = LengthDistribution::kUniform;
  configs[2].batch_size = 3;  // q_len 2 x 16 heads: 32 rows a sequence
  configs[2].q_len = 2;
  configs[2].kv_len = 700;
  configs[2].lengths = LengthDistribution::kUniform;
  for (BatchConfig& c : configs) {
    c.seed = FreshSeed();
    SCOPED_TRACE(absl::StrCat("batch=", c.batch_size, " q_len=", c.q_len, " heads=", c.num_heads,
                              " kv=", std::string(KvFormatName(c.kv_format)), " page=", c.page_size,
                              " seed=", c.seed));
    ExpectDevicePlanMatchesHostPlan(c, c.kv_len, /*block_m=*/16);
    if (HasFatalFailure()) return;
  }
}

// The hint is not a limit: a plan sized for short sequences decodes longer
// ones exactly (with its small-batch tiles).
TEST_F(DevicePlanTest, KvLenHintIsNotALimit) {
  BatchConfig c;
  c.batch_size = 4;
  c.num_heads = 32;
  c.kv_len = 5000;
  c.lengths = LengthDistribution::kUniform;
  c.seed = FreshSeed();
  const Batch b = reference::GenerateBatch(c);
  Outputs dev;
  std::string described;
  DecodeWithDevicePlan(c, b, /*kv_len_hint=*/256, &dev, &described);
  if (HasFatalFailure()) return;
  EXPECT_NE(described.find("\"block_m\":16,"), std::string::npos) << described;
  ExpectMatchesReference(b, dev, absl::StrCat("seed ", c.seed));
}

TEST_F(DevicePlanTest, CapturedStepReplaysWithChangingLayouts) {
  BatchConfig c;
  c.batch_size = 12;
  c.q_len = 2;
  c.num_heads = 16;
  c.kv_len = 1500;
  c.lengths = LengthDistribution::kUniform;
  c.zero_length_fraction = 0.1;
  c.page_size = 16;
  const float sm_scale = reference::GenerateBatch(c).sm_scale;
  mlajit_plan_config_t pc = harness::PlanConfigFor(c, sm_scale, true);
  mlajit_plan_limits_t lim = MLAJIT_PLAN_LIMITS_INIT;
  lim.max_batch_size = c.batch_size;
  lim.max_q_len = c.q_len;
  mlajit_plan_t plan = nullptr;
  ASSERT_EQ(mlajit_plan_create_device(harness_->runtime(), &pc, &lim, &plan), MLAJIT_STATUS_OK)
      << mlajit_last_error();
  auto bufs = StepBuffers::Allocate(backend_, device_, c);
  ASSERT_TRUE(bufs.ok()) << bufs.status();

  // Capture once: the update and two decodes (two "layers" reading one cache).
  c.seed = FreshSeed();
  Batch first = reference::GenerateBatch(c);
  mlajit_decode_args_t a = bufs->Args(first);  // fp8: the scale is part of the capture
  ASSERT_TRUE(backend_->BeginCapture(device_, stream_).ok());
  mlajit_status_t st = mlajit_plan_update_async(
      plan, c.batch_size, static_cast<const int32_t*>(bufs->qo.get()),
      static_cast<const int32_t*>(bufs->kv_indptr.get()), bufs->kv_lens_or_null(first), stream_);
  std::string error = st == MLAJIT_STATUS_OK ? "" : mlajit_last_error();
  for (int layer = 0; layer < 2 && st == MLAJIT_STATUS_OK; ++layer) {
    st = mlajit_decode(plan, &a, stream_);
    if (st != MLAJIT_STATUS_OK) error = mlajit_last_error();
  }
  auto graph = backend_->EndCapture(device_, stream_);
  ASSERT_EQ(st, MLAJIT_STATUS_OK) << error;
  ASSERT_TRUE(graph.ok()) << graph.status();

  const int64_t rows = int64_t{c.batch_size} * c.q_len * c.num_heads;
  std::vector<uint16_t> poison(rows * kHeadDimV, reference::kPoisonBf16);
  std::vector<uint32_t> lse_poison(rows, reference::kPoisonF32);
  constexpr int kReplays = 120;
  int checked = 0;
  for (int replay = 0; replay < kReplays; ++replay) {
    c.seed = FreshSeed();
    Batch b = reference::GenerateBatch(c);
    // The captured kv_scale stays; give every step's fp8 cache the same one.
    b.kv_scale = first.kv_scale;
    Batch ref = b;
    const std::vector<int32_t> ids = PadSomeSlots(&ref, c.seed);
    ASSERT_TRUE(bufs->Fill(b, ids, poison, lse_poison, stream_).ok());
    ASSERT_TRUE(backend_->LaunchGraph(device_, *graph, stream_).ok());
    auto dev = ReadBack(backend_, device_, *bufs, rows, stream_);
    ASSERT_TRUE(dev.ok()) << dev.status();
    ExpectMatchesReference(ref, *dev, absl::StrCat("replay ", replay, " seed ", c.seed));
    if (HasFailure()) break;
    ++checked;
  }
  EXPECT_EQ(checked, kReplays);
  EXPECT_EQ(mlajit_plan_check_update(plan, stream_), MLAJIT_STATUS_OK) << mlajit_last_error();
  ASSERT_TRUE(backend_->DestroyGraph(device_, *graph).ok());
  mlajit_plan_free(plan);
}

// Device-planned calls merge with the kernel that picks its lane width on the
// device (a host-built plan launches the kernel of the width the host picks).
// The batches of GpuDecodeTest.MergeUnitsOfEveryWidth: 64-row items of 16
// heads by 4 queries whose merges take quarters (4 sequences), one half a
// group (12), whole rows (24) and several halves a group (40), and a skewed
// batch whose long sequence merges more splits a row than one batch of
// loads holds (MergeBatch); the 8-warp (bf16 KV) and 12-warp (fp8) merges.
TEST_F(DevicePlanTest, MergesOfEveryWidthMatchTheReference) {
  for (KvFormat f : {KvFormat::kBf16, KvFormat::kFp8E4m3}) {
    for (int batch : {4, 12, 24, 40, 0}) {
      BatchConfig c;
      c.num_heads = 16;
      c.q_len = 4;
      c.kv_format = f;
      c.batch_size = batch > 0 ? batch : 40;
      c.kv_len = batch > 0 ? 3000 : 60000;
      c.lengths = batch > 0 ? LengthDistribution::kUniform : LengthDistribution::kSkewed;
      c.seed = FreshSeed();
      SCOPED_TRACE(absl::StrCat("batch=", c.batch_size, " kv=", std::string(KvFormatName(f)),
                                " kv_len=", c.kv_len, " seed=", c.seed));
      Batch b = reference::GenerateBatch(c);
      Outputs dev;
      std::string described;
      DecodeWithDevicePlan(c, b, /*kv_len_hint=*/0, &dev, &described);
      if (HasFatalFailure()) return;
      ExpectMatchesReference(b, dev, "device plan");
    }
  }
}

TEST_F(DevicePlanTest, RejectedLayoutLeavesAnEmptyScheduleAndAnError) {
  BatchConfig c;
  c.batch_size = 4;
  c.q_len = 2;
  c.kv_len = 500;
  c.seed = FreshSeed();
  Batch b = reference::GenerateBatch(c);
  mlajit_plan_config_t pc = harness::PlanConfigFor(c, b.sm_scale, true);
  mlajit_plan_limits_t lim = MLAJIT_PLAN_LIMITS_INIT;
  lim.max_batch_size = 4;
  lim.max_q_len = 1;  // the batch's q_len 2 exceeds it
  mlajit_plan_t plan = nullptr;
  ASSERT_EQ(mlajit_plan_create_device(harness_->runtime(), &pc, &lim, &plan), MLAJIT_STATUS_OK)
      << mlajit_last_error();
  c.q_len = 1;  // buffers for the declared limits, with room for q_len 2 rows
  c.num_heads *= 2;
  auto bufs = StepBuffers::Allocate(backend_, device_, c);
  ASSERT_TRUE(bufs.ok()) << bufs.status();
  const int64_t rows = int64_t{b.total_q()} * b.config.num_heads;
  std::vector<uint16_t> poison(rows * kHeadDimV, reference::kPoisonBf16);
  std::vector<uint32_t> lse_poison(rows, reference::kPoisonF32);
  ASSERT_TRUE(bufs->Fill(b, b.kv_indices, poison, lse_poison, stream_).ok());
  ASSERT_EQ(mlajit_plan_update_async(plan, 4, static_cast<const int32_t*>(bufs->qo.get()),
                                     static_cast<const int32_t*>(bufs->kv_indptr.get()), nullptr,
                                     stream_),
            MLAJIT_STATUS_OK);
  mlajit_decode_args_t a = bufs->Args(b);
  ASSERT_EQ(mlajit_decode(plan, &a, stream_), MLAJIT_STATUS_OK) << mlajit_last_error();
  EXPECT_EQ(mlajit_plan_check_update(plan, stream_), MLAJIT_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(mlajit_last_error()).find("q_len of sequence 0 = 2"), std::string::npos)
      << mlajit_last_error();
  auto dev = ReadBack(backend_, device_, *bufs, rows, stream_);
  ASSERT_TRUE(dev.ok()) << dev.status();
  EXPECT_TRUE(std::all_of(dev->out.begin(), dev->out.end(),
                          [](uint16_t v) { return v == reference::kPoisonBf16; }))
      << "an empty schedule writes nothing";

  // Host-built plans have no device planner.
  auto db = harness_->Upload(c, true);
  ASSERT_TRUE(db.ok()) << db.status();
  EXPECT_EQ(mlajit_plan_update_async((*db)->plan, 4, static_cast<const int32_t*>(bufs->qo.get()),
                                     static_cast<const int32_t*>(bufs->kv_indptr.get()), nullptr,
                                     stream_),
            MLAJIT_STATUS_FAILED_PRECONDITION);
  // Batch beyond the limits: rejected on the host.
  EXPECT_EQ(mlajit_plan_update_async(plan, 5, static_cast<const int32_t*>(bufs->qo.get()),
                                     static_cast<const int32_t*>(bufs->kv_indptr.get()), nullptr,
                                     stream_),
            MLAJIT_STATUS_INVALID_ARGUMENT);
  mlajit_plan_free(plan);
}

}  // namespace
}  // namespace mlajit
