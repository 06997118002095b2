// Several GPUs in one process, as a tensor-parallel engine drives them: one
// runtime per device, DeepSeek-R1's 128 heads split evenly over the devices,
// every shard decoded concurrently from its own thread and checked against the
// CPU reference, one disk cache shared by all of them (each spec compiled once),
// and the calling thread's device binding left as the caller had it.
//
// With one device the same shards run on that device from their own threads;
// the test says so on stdout, and the cross-device checks skip.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/barrier.h"
#include "gtest/gtest.h"
#include "mlajit/mlajit.h"
#include "src/base/mla_types.h"
#include "src/gpu/backend.h"
#include "tests/unit/temp_dir.h"
#include "tools/harness/decode_harness.h"

namespace mlajit {
namespace {

using harness::CaseOptions;
using harness::DecodeHarness;
using harness::FreshSeed;
using reference::Batch;
using reference::BatchConfig;
using reference::LengthDistribution;

constexpr int kModelHeads = 128;  // DeepSeek-V3/R1

// The decode steps each shard runs: plain decode, speculative (q_len 2) on a
// paged cache, and a8 (fp8 Q) on single-token pages; different specs each.
std::vector<BatchConfig> Steps() {
  std::vector<BatchConfig> steps(3);
  steps[0].batch_size = 24;
  steps[0].kv_len = 4096;
  steps[0].lengths = LengthDistribution::kUniform;
  steps[1].batch_size = 12;
  steps[1].q_len = 2;
  steps[1].kv_len = 3000;
  steps[1].lengths = LengthDistribution::kUniform;
  steps[1].page_size = 64;
  steps[2].batch_size = 16;
  steps[2].kv_len = 1500;
  steps[2].lengths = LengthDistribution::kSkewed;
  steps[2].zero_length_fraction = 0.1;
  steps[2].q_mode = QMode::kFp8;
  steps[2].page_size = 1;
  for (BatchConfig& c : steps) {
    c.num_heads = kModelHeads;
    c.kv_format = KvFormat::kFp8E4m3;
    c.seed = FreshSeed();
  }
  return steps;
}

// Heads [shard * H / shards, (shard + 1) * H / shards) of every query token; the
// KV cache (MLA's latent cache is replicated on every tensor-parallel rank)
// unchanged.
Batch HeadShard(const Batch& full, int shard, int shards) {
  Batch b = full;
  const int heads = full.config.num_heads / shards;
  b.config.num_heads = heads;
  b.q.assign(static_cast<size_t>(full.total_q()) * heads * kHeadDimQk, 0);
  for (int t = 0; t < full.total_q(); ++t) {
    const uint16_t* src =
        full.q.data() + (static_cast<size_t>(t) * full.config.num_heads + shard * heads) * kHeadDimQk;
    std::copy(src, src + static_cast<size_t>(heads) * kHeadDimQk,
              b.q.data() + static_cast<size_t>(t) * heads * kHeadDimQk);
  }
  return b;
}

// A small JSON field reader for the cache's stats document: "name":<integer>.
int64_t JsonInt(const std::string& json, const std::string& name) {
  const std::string needle = absl::StrCat("\"", name, "\":");
  size_t at = json.find(needle);
  if (at == std::string::npos) return -1;
  at += needle.size();
  size_t end = json.find_first_not_of("-0123456789", at);
  int64_t v = -1;
  return absl::SimpleAtoi(json.substr(at, end - at), &v) ? v : -1;
}

class MultiDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto b = gpu::DefaultBackend();
    if (!b.ok()) GTEST_SKIP() << "no GPU: " << b.status().message();
    backend_ = *b;
    auto n = backend_->DeviceCount();
    ASSERT_TRUE(n.ok()) << n.status();
    devices_ = *n;
  }

  gpu::Backend* backend_ = nullptr;
  int devices_ = 0;
};

TEST_F(MultiDeviceTest, TensorParallelShardsMatchTheReferenceAndCompileOnce) {
  // Every device, or two shards on the only one (so the concurrency and the
  // shared cache are still exercised).
  const int shards = (devices_ >= 2 && kModelHeads % devices_ == 0) ? devices_ : 2;
  if (devices_ < 2) {
    std::printf("[ NOTE     ] only %d device visible: ran %d tensor-parallel shards on device 0; "
                "more than one device was not tested\n", devices_, shards);
  } else {
    std::printf("[ NOTE     ] %d devices: one shard of %d heads per device\n", devices_,
                kModelHeads / shards);
  }
  test_support::TempDir dir;
  const std::string cache_dir = dir.Sub("cache");
  mlajit_cache_options_t co = MLAJIT_CACHE_OPTIONS_INIT;
  co.cache_dir = cache_dir.c_str();

  std::vector<Batch> full;
  for (const BatchConfig& c : Steps()) full.push_back(reference::GenerateBatch(c));

  std::vector<std::string> archs(shards), failures(shards);
  absl::Barrier* start = new absl::Barrier(shards);  // Block() deletes it after the last thread
  std::vector<std::thread> threads;
  for (int s = 0; s < shards; ++s) {
    threads.emplace_back([&, s] {
      const int device = s % devices_;
      const bool last = start->Block();
      if (last) delete start;
      // Created concurrently: every shard asks for the same specs at once.
      auto h = DecodeHarness::Create(device, &co);
      if (!h.ok()) {
        failures[s] = absl::StrCat("runtime on device ", device, ": ", h.status().message());
        return;
      }
      archs[s] = mlajit_runtime_arch((*h)->runtime());
      for (size_t step = 0; step < full.size(); ++step) {
        auto db = (*h)->UploadBatch(HeadShard(full[step], s, shards), /*write_lse=*/true);
        if (!db.ok()) {
          failures[s] += absl::StrCat("step ", step, ": ", db.status().message(), "\n");
          continue;
        }
        CaseOptions o;
        o.calls = 2;
        auto r = (*h)->Check(**db, o);
        if (!r.ok()) {
          failures[s] += absl::StrCat("step ", step, ": ", r.status().message(), "\n");
        } else if (!r->out.Passes(1e-2) || !r->lse.Passes(1e-3)) {
          failures[s] += absl::StrCat("step ", step, " shard ", s, " on device ", device, " (",
                                      r->spec, "):\n  out: ", r->out.ToString(),
                                      "\n  lse: ", r->lse.ToString(), "\n");
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int s = 0; s < shards; ++s) EXPECT_EQ(failures[s], "") << "shard " << s;

  // Every runtime is gone, so the cache's counters are on disk.
  mlajit_cache_t cache = nullptr;
  ASSERT_EQ(mlajit_cache_open(&co, &cache), MLAJIT_STATUS_OK) << mlajit_last_error();
  char* json = nullptr;
  ASSERT_EQ(mlajit_cache_stats_json(cache, &json), MLAJIT_STATUS_OK) << mlajit_last_error();
  const std::string stats = json;
  mlajit_free(json);
  mlajit_cache_close(cache);
  const std::set<std::string> distinct_archs(archs.begin(), archs.end());
  const int64_t specs = static_cast<int64_t>(full.size() * distinct_archs.size());
  EXPECT_EQ(JsonInt(stats, "compiles"), specs) << stats;
  EXPECT_EQ(JsonInt(stats, "entries"), specs) << stats;
}

TEST_F(MultiDeviceTest, CallsLeaveTheCallersDeviceBindingAlone) {
  std::vector<std::unique_ptr<DecodeHarness>> harnesses;
  for (int d = 0; d < std::min(devices_, 2); ++d) {
    auto h = DecodeHarness::Create(d);
    ASSERT_TRUE(h.ok()) << h.status();
    harnesses.push_back(std::move(*h));
  }
  BatchConfig c;
  c.batch_size = 3;
  c.num_heads = 16;
  c.kv_len = 700;
  std::vector<std::unique_ptr<harness::DeviceBatch>> batches;
  for (auto& h : harnesses) {
    c.seed = FreshSeed();
    auto db = h->Upload(c, true);
    ASSERT_TRUE(db.ok()) << db.status();
    batches.push_back(std::move(*db));
  }
  // One thread alternating between the devices, with the binding set to the
  // last device or to nothing before each call: every call must run on its own
  // device and put the binding back.
  const int bound = devices_ - 1;
  for (int i = 0; i < 8; ++i) {
    const size_t k = i % harnesses.size();
    if (i % 4 < 2) {
      ASSERT_TRUE(backend_->SetCurrentDevice(bound).ok());
    } else {
      backend_->RestoreCurrent(0);  // CUDA: no current context
    }
    const uintptr_t before = backend_->SaveCurrent();
    ASSERT_EQ(mlajit_decode(batches[k]->plan, &batches[k]->args, nullptr), MLAJIT_STATUS_OK)
        << mlajit_last_error();
    EXPECT_EQ(backend_->SaveCurrent(), before) << "call " << i << " on device " << k;
    auto r = harnesses[k]->Check(*batches[k], {});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->out.Passes(1e-2)) << r->spec << "\n  " << r->out.ToString();
  }
}

TEST_F(MultiDeviceTest, BuffersAndStreamsOfAnotherDeviceAreRejected) {
  if (devices_ < 2) GTEST_SKIP() << "needs 2 devices, " << devices_ << " visible";
  auto h0 = DecodeHarness::Create(0);
  ASSERT_TRUE(h0.ok()) << h0.status();
  BatchConfig c;
  c.batch_size = 2;
  c.kv_len = 300;
  c.seed = FreshSeed();
  auto db = (*h0)->Upload(c, true);
  ASSERT_TRUE(db.ok()) << db.status();
  auto other = harness::DeviceBuffer::Allocate(backend_, 1, (*db)->out.bytes());
  ASSERT_TRUE(other.ok()) << other.status();

  mlajit_decode_args_t a = (*db)->args;
  a.out = other->get();
  EXPECT_EQ(mlajit_decode((*db)->plan, &a, nullptr), MLAJIT_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(mlajit_last_error()).find("args.out"), std::string::npos)
      << mlajit_last_error();
  a = (*db)->args;
  a.kv = other->get();
  EXPECT_EQ(mlajit_decode((*db)->plan, &a, nullptr), MLAJIT_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(mlajit_last_error()).find("memory of device 1"), std::string::npos)
      << mlajit_last_error();

  auto stream1 = backend_->CreateStream(1);
  ASSERT_TRUE(stream1.ok()) << stream1.status();
  EXPECT_EQ(mlajit_decode((*db)->plan, &(*db)->args, *stream1), MLAJIT_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(mlajit_last_error()).find("belongs to device 1"), std::string::npos)
      << mlajit_last_error();
  ASSERT_TRUE(backend_->DestroyStream(1, *stream1).ok());

  // The rejected calls left nothing behind: the next good call is correct.
  auto r = (*h0)->Check(**db, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->out.Passes(1e-2)) << r->spec << "\n  " << r->out.ToString();
}

}  // namespace
}  // namespace mlajit
