#include "tools/harness/decode_harness.h"

#include <atomic>
#include <chrono>
#include <random>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/base/mla_types.h"
#include "src/base/status_macros.h"
#include "src/reference/mla_reference.h"

namespace mlajit::harness {

absl::Status FromC(mlajit_status_t s) {
  if (s == MLAJIT_STATUS_OK) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s), mlajit_last_error());
}

mlajit_plan_config_t PlanConfigFor(const reference::BatchConfig& config, float sm_scale,
                                   bool write_lse) {
  mlajit_plan_config_t pc = MLAJIT_PLAN_CONFIG_INIT;
  pc.num_heads = config.num_heads;
  pc.kv_format = static_cast<mlajit_kv_format_t>(config.kv_format);
  pc.q_mode = static_cast<mlajit_q_mode_t>(config.q_mode);
  pc.causal = config.causal ? 1 : 0;
  pc.sm_scale = sm_scale;
  pc.page_size = config.page_size;
  pc.write_lse = write_lse ? 1 : 0;
  return pc;
}

double OutputTolerance(const reference::BatchConfig& config) {
  return config.kv_format == KvFormat::kBf16 && config.q_mode == QMode::kBf16 ? 5e-3 : 1e-2;
}

uint64_t FreshSeed() {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t base = static_cast<uint64_t>(std::random_device{}()) << 20;
  return base + counter.fetch_add(1);
}

absl::StatusOr<DeviceBuffer> DeviceBuffer::Allocate(gpu::Backend* b, int device, size_t bytes) {
  DeviceBuffer d;
  d.backend_ = b;
  d.device_ = device;
  d.bytes_ = bytes;
  MLAJIT_ASSIGN_OR_RETURN(d.ptr_, b->Malloc(device, bytes == 0 ? 16 : bytes));
  return d;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    this->~DeviceBuffer();
    backend_ = o.backend_;
    device_ = o.device_;
    ptr_ = std::exchange(o.ptr_, 0);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_ != 0) (void)backend_->Free(device_, ptr_);
  ptr_ = 0;
}

absl::StatusOr<std::unique_ptr<DecodeHarness>> DecodeHarness::Create(
    int device, const mlajit_cache_options_t* cache) {
  auto h = std::make_unique<DecodeHarness>();
  MLAJIT_ASSIGN_OR_RETURN(h->backend_, gpu::DefaultBackend());
  h->device_ = device;
  mlajit_runtime_options_t ro = MLAJIT_RUNTIME_OPTIONS_INIT;
  ro.device_index = device;
  ro.cache = cache;
  MLAJIT_RETURN_IF_ERROR(FromC(mlajit_runtime_create(&ro, &h->runtime_)));
  return h;
}

DecodeHarness::~DecodeHarness() { mlajit_runtime_free(runtime_); }

namespace {

template <typename T>
absl::StatusOr<DeviceBuffer> UploadVector(gpu::Backend* b, int device, const std::vector<T>& v) {
  MLAJIT_ASSIGN_OR_RETURN(DeviceBuffer d, DeviceBuffer::Allocate(b, device, v.size() * sizeof(T)));
  if (!v.empty()) MLAJIT_RETURN_IF_ERROR(b->MemcpyHtoD(device, d.ptr(), v.data(), v.size() * sizeof(T), nullptr));
  return d;
}

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceBatch>> DecodeHarness::Upload(
    const reference::BatchConfig& config, bool write_lse) {
  return UploadBatch(reference::GenerateBatch(config), write_lse);
}

absl::StatusOr<std::unique_ptr<DeviceBatch>> DecodeHarness::UploadBatch(reference::Batch batch,
                                                                         bool write_lse) {
  auto db = std::make_unique<DeviceBatch>();
  db->batch = std::move(batch);
  const reference::Batch& b = db->batch;
  const reference::BatchConfig& config = b.config;
  const size_t rows = static_cast<size_t>(b.total_q()) * config.num_heads;
  MLAJIT_ASSIGN_OR_RETURN(db->q, UploadVector(backend_, device_, b.q));
  MLAJIT_ASSIGN_OR_RETURN(db->kv, UploadVector(backend_, device_, b.kv));
  if (config.page_size > 0) {
    MLAJIT_ASSIGN_OR_RETURN(db->kv_indices, UploadVector(backend_, device_, b.kv_indices));
  }
  MLAJIT_ASSIGN_OR_RETURN(db->out, DeviceBuffer::Allocate(backend_, device_, rows * kHeadDimV * 2));
  MLAJIT_ASSIGN_OR_RETURN(db->lse, DeviceBuffer::Allocate(backend_, device_, rows * sizeof(float)));
  MLAJIT_RETURN_IF_ERROR(backend_->StreamSynchronize(device_, nullptr));

  const mlajit_plan_config_t pc = PlanConfigFor(config, b.sm_scale, write_lse);
  const int batch_size = static_cast<int>(b.qo_indptr.size()) - 1;
  MLAJIT_RETURN_IF_ERROR(FromC(mlajit_plan_create(
      runtime_, &pc, batch_size, b.qo_indptr.data(), b.kv_indptr.data(),
      config.page_size > 0 && !b.kv_lens.empty() ? b.kv_lens.data() : nullptr, &db->plan)));
  db->args.q = db->q.get();
  db->args.kv = db->kv.get();
  db->args.kv_bytes = b.kv.size();
  db->args.kv_scale = b.kv_scale;
  db->args.kv_indices = config.page_size > 0 ? static_cast<const int32_t*>(db->kv_indices.get()) : nullptr;
  db->args.out = db->out.get();
  db->args.lse = write_lse ? static_cast<float*>(db->lse.get()) : nullptr;
  return db;
}

absl::StatusOr<CaseResult> DecodeHarness::Check(DeviceBatch& db, const CaseOptions& options) {
  const reference::Batch& b = db.batch;
  const size_t rows = static_cast<size_t>(b.total_q()) * b.config.num_heads;
  if (db.ref_out.size() != rows * kHeadDimV) {
    db.ref_out.assign(rows * kHeadDimV, 0.0f);
    db.ref_lse.assign(rows, 0.0f);
    const auto t0 = std::chrono::steady_clock::now();
    MLAJIT_RETURN_IF_ERROR(reference::ReferenceDecode(b.problem(), absl::MakeSpan(db.ref_out),
                                                      absl::MakeSpan(db.ref_lse)));
    db.reference_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  std::vector<uint16_t> out(rows * kHeadDimV, reference::kPoisonBf16);
  std::vector<uint32_t> lse_bits(rows, reference::kPoisonF32);
  for (int call = 0; call < options.calls; ++call) {
    // Poison before every call so that a call which writes nothing cannot pass
    // on the previous call's results.
    MLAJIT_RETURN_IF_ERROR(backend_->MemcpyHtoD(device_, db.out.ptr(), out.data(),
                                                out.size() * 2, options.stream));
    MLAJIT_RETURN_IF_ERROR(backend_->MemcpyHtoD(device_, db.lse.ptr(), lse_bits.data(),
                                                lse_bits.size() * 4, options.stream));
    MLAJIT_RETURN_IF_ERROR(FromC(mlajit_decode(db.plan, &db.args, options.stream)));
  }
  MLAJIT_RETURN_IF_ERROR(backend_->MemcpyDtoH(device_, out.data(), db.out.ptr(), out.size() * 2,
                                              options.stream));
  std::vector<float> lse(rows);
  MLAJIT_RETURN_IF_ERROR(
      backend_->MemcpyDtoH(device_, lse.data(), db.lse.ptr(), rows * 4, options.stream));
  MLAJIT_RETURN_IF_ERROR(backend_->StreamSynchronize(device_, options.stream));
  CaseResult r;
  r.reference_ms = db.reference_ms;
  r.out = reference::CompareBf16(out, db.ref_out);
  if (db.args.lse != nullptr) r.lse = reference::CompareF32(lse, db.ref_lse);
  const auto& c = b.config;
  r.spec = absl::StrCat("batch=", c.batch_size, " heads=", c.num_heads, " q_len=", c.q_len,
                        " kv_len=", c.kv_len, " kv=", std::string(KvFormatName(c.kv_format)),
                        " q=", std::string(QModeName(c.q_mode)), " causal=", c.causal, " page=", c.page_size,
                        " seed=", c.seed);
  return r;
}

absl::StatusOr<CaseResult> DecodeHarness::RunCase(const reference::BatchConfig& config,
                                                  const CaseOptions& options) {
  MLAJIT_ASSIGN_OR_RETURN(std::unique_ptr<DeviceBatch> db, Upload(config, options.write_lse));
  return Check(*db, options);
}

}  // namespace mlajit::harness
