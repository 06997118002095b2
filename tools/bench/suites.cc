#include "tools/bench/suites.h"

#include "src/base/mla_types.h"

namespace mlajit::bench {
namespace {

using reference::BatchConfig;
using reference::LengthDistribution;

BatchConfig Make(int bs, int q_len, int kv_len, int heads, KvFormat f) {
  BatchConfig c;
  c.batch_size = bs;
  c.q_len = q_len;
  c.kv_len = kv_len;
  c.num_heads = heads;
  c.kv_format = f;
  c.lengths = LengthDistribution::kFixed;
  c.seed = 1234;
  return c;
}

// The public 8-case MI355X decode suite: (batch, q_len, kv_len, heads).
const int kSuite[8][4] = {{4, 1, 1024, 32},   {4, 4, 8192, 32},  {32, 1, 8192, 16},
                          {32, 4, 1024, 16},  {32, 1, 1024, 32}, {32, 4, 8192, 32},
                          {128, 1, 8192, 16}, {128, 4, 8192, 16}};

}  // namespace

std::vector<Case> SuiteCases(const std::string& name) {
  std::vector<Case> cases;
  auto add_suite = [&](KvFormat f, int page) {
    for (const auto& s : kSuite) {
      BatchConfig c = Make(s[0], s[1], s[2], s[3], f);
      c.page_size = page;
      cases.push_back({name, c});
    }
  };
  if (name == "default" || name == "fp8") add_suite(KvFormat::kFp8E4m3, 0);
  if (name == "bf16") add_suite(KvFormat::kBf16, 0);
  if (name == "a8") {  // fp8 KV with Q quantised per call to fp8 as well
    add_suite(KvFormat::kFp8E4m3, 0);
    for (Case& c : cases) c.config.q_mode = QMode::kFp8;
  }
  if (name == "mxfp4") add_suite(KvFormat::kMxfp4, 0);
  if (name == "paged64") add_suite(KvFormat::kFp8E4m3, 64);
  if (name == "paged1") add_suite(KvFormat::kFp8E4m3, 1);
  if (name == "heads128") {
    for (KvFormat f : {KvFormat::kFp8E4m3, KvFormat::kBf16}) {
      cases.push_back({name, Make(64, 1, 8192, 128, f)});
      cases.push_back({name, Make(16, 2, 8192, 128, f)});
    }
  }
  if (name == "skewed") {
    for (KvFormat f : {KvFormat::kFp8E4m3, KvFormat::kMxfp4}) {
      BatchConfig c = Make(64, 1, 65536, 16, f);
      c.lengths = LengthDistribution::kSkewed;
      cases.push_back({name, c});
      c = Make(64, 2, 16384, 32, f);
      c.lengths = LengthDistribution::kUniform;
      c.zero_length_fraction = 0.1;
      cases.push_back({name, c});
    }
  }
  return cases;
}

}  // namespace mlajit::bench
