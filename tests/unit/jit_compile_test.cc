// Real compiles: every template of kernel_templates/ with NVRTC (sm_90a) and with
// hiprtc (gfx90a) where they are installed; compile failures, unsupported
// targets, and the disable-JIT mode over a disk cache.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/cache/elf_functions.h"
#include "src/cache/kernel_cache.h"
#include "src/jit/compiler.h"
#include "src/jit/kernel_compiler.h"
#include "src/jit/template_store.h"
#include "src/plan/tile_policy.h"
#include "tests/unit/scoped_env.h"
#include "tests/unit/temp_dir.h"

namespace mlajit::jit {
namespace {

using test_support::ScopedEnv;
using test_support::TempDir;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsSupersetOf;
using ::testing::Not;

std::shared_ptr<cache::KernelCache> MemoryCache() {
  cache::CacheOptions o;
  o.memory_only = true;
  auto c = cache::KernelCache::Open(o);
  EXPECT_TRUE(c.ok()) << c.status();
  return std::shared_ptr<cache::KernelCache>(std::move(*c));
}

std::shared_ptr<cache::KernelCache> DiskCache(const std::string& dir, bool disable_jit) {
  cache::CacheOptions o;
  o.cache_dir = dir;
  o.disable_jit = disable_jit;
  auto c = cache::KernelCache::Open(o);
  EXPECT_TRUE(c.ok()) << c.status();
  return std::shared_ptr<cache::KernelCache>(std::move(*c));
}

// Skips the calling test when the compiler for `arch` cannot be loaded here.
#define REQUIRE_COMPILER(arch)                                                       \
  do {                                                                               \
    auto c_ = CompilerForArch(arch);                                                 \
    if (!c_.ok()) GTEST_SKIP() << "no compiler for " << arch << ": " << c_.status(); \
  } while (0)

bool IsElf(const std::string& b) {
  return b.size() > 4 && b.compare(0, 4,
                                   "\x7f"
                                   "ELF") == 0;
}

void CompileEveryTemplate(const std::string& arch) {
  auto kc = KernelCompiler::Create(MemoryCache());
  ASSERT_TRUE(kc.ok()) << kc.status();
  std::vector<std::string> names = TemplateStore::Embedded()->TemplateNames();
  ASSERT_FALSE(names.empty());
  for (const std::string& name : names) {
    KernelSpec spec;
    spec.template_name = name;
    spec.arch = arch;
    auto start = std::chrono::steady_clock::now();
    auto entry = (*kc)->GetBinary(spec);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ASSERT_TRUE(entry.ok()) << name << " for " << arch << ": " << entry.status();
    EXPECT_TRUE(IsElf((*entry)->payload)) << name;
    EXPECT_EQ((*entry)->source, cache::CacheEntry::Source::kCompiled);
    EXPECT_EQ((*entry)->metadata.spec, SpecToJson(spec));
    EXPECT_EQ((*entry)->metadata.template_name, name);
    EXPECT_EQ((*entry)->metadata.arch, arch);
    // The binary defines the entry point named by the convention and, for the
    // decode template, every kernel the runtime loads from its module (which
    // only a GPU would otherwise find missing), each with code.
    auto functions = cache::ListElfFunctions((*entry)->payload);
    ASSERT_TRUE(functions.ok()) << name << " for " << arch << ": " << functions.status();
    std::vector<std::string> kernels;
    for (const cache::ElfFunction& f : *functions) {
      if (f.code_bytes > 0) kernels.push_back(f.name);
    }
    EXPECT_THAT(kernels, Contains(KernelCompiler::EntryPoint(spec))) << name << " for " << arch;
    if (name == "mla_decode") {
      EXPECT_THAT(kernels, IsSupersetOf(KernelCompiler::ModuleEntryPoints(spec))) << arch;
    }
    std::printf("  %s for %s: %.2f s, %zu bytes\n", name.c_str(), arch.c_str(), s,
                (*entry)->payload.size());
  }
}

// Runtimes of several devices share the compiler of equal cache options: one
// instance while any holder lives, one compile for concurrent requests of a
// spec, a separate instance for other options, a fresh one after the last
// holder let go.
TEST(JitCompile, SharedCompilerIsOnePerCacheConfiguration) {
  REQUIRE_COMPILER("sm_90a");
  cache::CacheOptions a;
  TempDir dir_a, dir_b;
  a.cache_dir = dir_a.path();
  cache::CacheOptions b = a;
  b.cache_dir = dir_b.path();
  auto first = KernelCompiler::Shared(a);
  ASSERT_TRUE(first.ok()) << first.status();
  auto again = KernelCompiler::Shared(a);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(first->get(), again->get());
  auto other = KernelCompiler::Shared(b);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE(first->get(), other->get());

  KernelSpec spec;
  spec.template_name = "probe";
  spec.arch = "sm_90a";
  std::vector<std::thread> threads;
  std::vector<absl::Status> results(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto c = KernelCompiler::Shared(a);  // each "device" asks for itself
      results[t] = c.ok() ? (*c)->GetBinary(spec).status() : c.status();
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;
  auto stats = (*first)->cache().Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->compiles, 1u) << "four concurrent requests, one compile";

  std::weak_ptr<KernelCompiler> gone = *first;
  first->reset();
  again->reset();
  EXPECT_TRUE(gone.expired()) << "the registry holds no compiler alive";
  auto fresh = KernelCompiler::Shared(a);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_TRUE(gone.expired());
  EXPECT_NE(*fresh, nullptr);
}

TEST(JitCompile, EveryTemplateCompilesWithNvrtcForSm90a) {
  REQUIRE_COMPILER("sm_90a");
  CompileEveryTemplate("sm_90a");
}

// An sm_90a spec with the tile shape the policy picks, ready to compile.
KernelSpec Sm90aSpec(int heads, int q_len, KvFormat kv, QMode q_mode, int page_size,
                     const plan::TileShape& t) {
  KernelSpec spec;
  spec.num_heads = heads;
  spec.max_q_len = q_len;
  spec.kv_format = kv;
  spec.q_mode = q_mode;
  spec.page_size = page_size;
  spec.block_m = t.block_m;
  spec.block_n = t.block_n;
  spec.num_warps = t.num_warps;
  spec.num_stages = t.num_stages;
  spec.arch = "sm_90a";
  return spec;
}

// A swap-AB tile shape of `block_m` rows by 64 tokens, two stages.
plan::TileShape SwapAbTiles(int block_m, int num_warps) {
  plan::TileShape t;
  t.block_m = block_m;
  t.block_n = 64;
  t.num_warps = num_warps;
  t.num_stages = 2;
  return t;
}

// ptxas's resource line for entry point `kernel` ("N bytes stack frame, N
// bytes spill stores, ..."), from a log compiled with --ptxas-options=-v;
// empty when there is none.
std::string KernelResources(const std::string& log, const std::string& kernel) {
  const size_t entry = log.find("entry function '" + kernel + "'");
  if (entry == std::string::npos) return "";
  const size_t line = log.find("bytes stack frame", entry);
  if (line == std::string::npos) return "";
  const size_t begin = log.rfind('\n', line) + 1;  // npos + 1 == 0
  return log.substr(begin, log.find('\n', line) - begin);
}

// Compiles `spec` and checks the compiler log too. ptxas serializes every
// wgmma of a kernel when it cannot prove a branch around them warp-uniform
// (info C7520) or when a warpgroup's registers cannot hold the operands of
// the MMAs in flight (C7512, "insufficient register resources"; the first
// warp-specialised 64-row kernel hit it): "wgmma.mma_async instructions are
// serialized". The kernel still computes the right result, about 2x slower,
// so only the log tells.
// With `no_spills`, the decode kernel must also keep everything in registers:
// the 64-row path runs at 249-255 of them, where a small change can spill.
// The merge kernels must always: their launch bounds leave 128 registers or
// more, and a batch of 16 splits' loads in flight takes most of them (a spill
// would put local memory on the merge's one dependent round trip).
void ExpectCompiles(KernelCompiler& kc, const KernelSpec& spec, bool no_spills = false) {
  auto p = kc.Prepare(spec);
  ASSERT_TRUE(p.ok()) << SpecToJson(spec) << ": " << p.status();
  std::vector<std::string> options = p->options;
  options.push_back("--ptxas-options=-v");
  auto b = p->compiler->Compile(p->source, options, spec.arch);
  ASSERT_TRUE(b.ok()) << SpecToJson(spec) << ": " << b.status();
  EXPECT_TRUE(IsElf(b->binary)) << SpecToJson(spec);
  EXPECT_THAT(b->log, Not(HasSubstr("instructions are serialized"))) << SpecToJson(spec) << "\n"
                                                                     << b->log;
  // (Timeline builds print their stamps from the merge: printf's stack frame.)
  const bool timeline = std::any_of(options.begin(), options.end(), [](const std::string& o) {
    return o.find("MLA_TIMELINE") != std::string::npos;
  });
  for (const std::string& merge :
       {KernelCompiler::MergeEntryPoint(0), KernelCompiler::MergeEntryPoint(4),
        KernelCompiler::MergeEntryPoint(8), KernelCompiler::MergeEntryPoint(16)}) {
    const std::string resources = KernelResources(b->log, merge);
    ASSERT_FALSE(resources.empty()) << merge << " " << SpecToJson(spec) << "\n" << b->log;
    EXPECT_THAT(resources, HasSubstr(" 0 bytes spill stores, 0 bytes spill loads"))
        << merge << " " << SpecToJson(spec);
    if (!timeline) {
      EXPECT_THAT(resources, HasSubstr(" 0 bytes stack frame")) << merge << " " << SpecToJson(spec);
    }
  }
  if (no_spills) {
    const std::string resources = KernelResources(b->log, "mla_decode_kernel");
    ASSERT_FALSE(resources.empty()) << SpecToJson(spec) << "\n" << b->log;
    EXPECT_THAT(resources, HasSubstr(" 0 bytes stack frame, 0 bytes spill stores"))
        << SpecToJson(spec);
  }
}

// The sm_90a warpgroup-MMA path (mla_decode_wgmma.cuh) only compiles for the
// shapes the tile policy picks on sm_90a: compile each of them here, so that a
// CPU-only build catches a break in it (its inline wgmma PTX included).
TEST(JitCompile, WarpgroupMmaShapesCompileForSm90a) {
  REQUIRE_COMPILER("sm_90a");
  auto kc = KernelCompiler::Create(MemoryCache());
  ASSERT_TRUE(kc.ok()) << kc.status();
  int compiled = 0;
  for (KvFormat kv : {KvFormat::kFp8E4m3, KvFormat::kBf16}) {
    for (int heads : {16, 32}) {
      for (int page_size : {0, 64}) {
        for (QMode q_mode : {QMode::kBf16, QMode::kFp8}) {
          if (q_mode == QMode::kFp8 && (kv != KvFormat::kFp8E4m3 || page_size != 0)) continue;
          const plan::TileShape t = plan::ChooseTiles("sm_90a", heads, kv);
          ASSERT_TRUE(plan::RunsWgmmaPath("sm_90a", kv, t.block_m, t.block_n, t.num_warps));
          // 32 rows with 16 heads: two q positions. Everything in registers
          // (bf16's 32-row tiles are two warpgroups of 16 rows).
          ExpectCompiles(**kc, Sm90aSpec(heads, heads == 16 ? 2 : 1, kv, q_mode, page_size, t),
                         /*no_spills=*/true);
          ++compiled;
        }
      }
    }
  }
  // The 16-row tiles the policy takes for small batches of one q position,
  // whose fp8 kernels load Q ahead of the item's barrier: nothing spills.
  for (KvFormat kv : {KvFormat::kFp8E4m3, KvFormat::kBf16}) {
    for (int page_size : {0, 64}) {
      const plan::TileShape t = SwapAbTiles(16, 4);
      ASSERT_TRUE(plan::RunsWgmmaPath("sm_90a", kv, t.block_m, t.block_n, t.num_warps));
      ExpectCompiles(**kc, Sm90aSpec(32, 1, kv, QMode::kBf16, page_size, t), /*no_spills=*/true);
      ++compiled;
    }
  }
  // fp8's 16-row tiles for small batches of 33-128 rows a sequence (several
  // row tiles a sequence): 4 causal q positions of 16 and of 32 heads and
  // 128 heads of one, both Q modes, flat and paged: nothing spills.
  for (const auto& [heads, q_len, q_mode, page_size] :
       {std::tuple{16, 4, QMode::kBf16, 0}, std::tuple{32, 4, QMode::kFp8, 1},
        std::tuple{128, 1, QMode::kBf16, 64}}) {
    const plan::BatchWork small{1, 132};
    const plan::TileShape t =
        plan::ChooseTiles("sm_90a", heads * q_len, KvFormat::kFp8E4m3, &small, page_size);
    ASSERT_EQ(t.block_m, 16);
    ASSERT_TRUE(
        plan::RunsWgmmaPath("sm_90a", KvFormat::kFp8E4m3, t.block_m, t.block_n, t.num_warps));
    KernelSpec spec = Sm90aSpec(heads, q_len, KvFormat::kFp8E4m3, q_mode, page_size, t);
    spec.causal = q_len > 1;
    ExpectCompiles(**kc, spec, /*no_spills=*/true);
    ++compiled;
  }
  // bf16 tiles of 32 rows as two warpgroups of 16 rows (8 warps, the
  // policy's), one q position and two (causal): nothing spills.
  for (int q_len : {1, 2}) {
    for (int page_size : {0, 64}) {
      const plan::TileShape t = SwapAbTiles(32, 8);
      ASSERT_TRUE(
          plan::RunsWgmmaPath("sm_90a", KvFormat::kBf16, t.block_m, t.block_n, t.num_warps));
      KernelSpec spec = Sm90aSpec(32 / q_len, q_len, KvFormat::kBf16, QMode::kBf16, page_size, t);
      spec.causal = q_len > 1;
      ExpectCompiles(**kc, spec, /*no_spills=*/true);
      ++compiled;
    }
  }
  EXPECT_EQ(compiled, 21);
}

// The sm_90a 64-row paths, likewise: the policy's (mla_decode_wgmma_rows_ws.cuh
// for fp8, mla_decode_wgmma_rows.cuh for bf16) and fp8 on the two-warpgroup
// one (a tuner candidate); every Q mode, flat and paged (page sizes 64 and
// 1, whose copies look pages up), causal and not. The warp-specialised
// kernels must keep everything in registers too: setmaxnreg gives each role
// a fixed budget (120 and 192), and a schedule change can spill inside it.
TEST(JitCompile, SixtyFourRowWgmmaShapesCompileForSm90a) {
  REQUIRE_COMPILER("sm_90a");
  auto kc = KernelCompiler::Create(MemoryCache());
  ASSERT_TRUE(kc.ok()) << kc.status();
  int compiled = 0;
  for (int warps : {0, 8}) {  // 0: the policy's
    for (KvFormat kv : {KvFormat::kFp8E4m3, KvFormat::kBf16}) {
      if (warps == 8 && kv != KvFormat::kFp8E4m3) continue;
      for (QMode q_mode : {QMode::kBf16, QMode::kFp8}) {
        for (int page_size : {0, 64, 1}) {
          const int heads = page_size == 0 ? 16 : page_size == 64 ? 128 : 32;
          const int q_len = page_size == 64 ? 1 : 4;
          plan::TileShape t = plan::ChooseTiles("sm_90a", heads * q_len, kv);
          if (warps == 8) {
            t.num_warps = 8;
            t.num_stages = 2;
          }
          const bool ws = kv == KvFormat::kFp8E4m3 && warps == 0;
          ASSERT_EQ(plan::RunsWgmmaRowsWsPath("sm_90a", kv, t.block_m, t.block_n, t.num_warps), ws);
          ASSERT_EQ(plan::RunsWgmmaRowsPath("sm_90a", kv, t.block_m, t.block_n, t.num_warps), !ws);
          KernelSpec spec = Sm90aSpec(heads, q_len, kv, q_mode, page_size, t);
          spec.causal = page_size != 64;
          // bf16 (the two-stage and seesaw schedules in one kernel) too.
          ExpectCompiles(**kc, spec,
                         /*no_spills=*/ws || kv == KvFormat::kBf16 || t.block_m == 16 ||
                             t.block_n == 32);
          ++compiled;
        }
      }
    }
  }
  EXPECT_EQ(compiled, 18);
}

// MLAJIT_TIMELINE (kernel_templates/mla_timeline.cuh): the warp-specialised
// kernel with its stamps compiled in still issues its wgmmas unserialized, the
// swap-AB one compiles without spills,
// (the stamps are predicated stores, not branches), and the define is a
// compile option, so the binary has a key of its own. A value that is not a
// launch number is refused by name before anything is compiled.
TEST(JitCompile, TimelineBuildsKeepTheirWgmmasAndKeys) {
  REQUIRE_COMPILER("sm_90a");
  auto kc = KernelCompiler::Create(MemoryCache());
  ASSERT_TRUE(kc.ok()) << kc.status();
  const plan::TileShape t = plan::ChooseTiles("sm_90a", 64, KvFormat::kFp8E4m3);
  ASSERT_TRUE(plan::RunsWgmmaRowsWsPath("sm_90a", KvFormat::kFp8E4m3, t.block_m, t.block_n,
                                        t.num_warps));
  const KernelSpec spec = Sm90aSpec(16, 4, KvFormat::kFp8E4m3, QMode::kBf16, 0, t);
  auto plain = (*kc)->Prepare(spec);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(KernelCompiler::StampsTimelines());
  {
    ScopedEnv env("MLAJIT_TIMELINE", "151");
    EXPECT_TRUE(KernelCompiler::StampsTimelines());  // the runtime then runs every merge kernel
    auto stamped = (*kc)->Prepare(spec);
    ASSERT_TRUE(stamped.ok()) << stamped.status();
    EXPECT_THAT(stamped->options, Contains("-DMLA_TIMELINE=151"));
    EXPECT_THAT(plain->options, Not(Contains(HasSubstr("MLA_TIMELINE"))));
    EXPECT_NE(stamped->key.Hex(), plain->key.Hex());
    ExpectCompiles(**kc, spec);
    // The swap-AB path (16-row tiles, q_len 1) stamps its tiles and items too.
    const plan::TileShape swap = plan::ChooseTiles("sm_90a", 16, KvFormat::kFp8E4m3);
    ASSERT_EQ(swap.block_m, 16);
    ExpectCompiles(**kc, Sm90aSpec(16, 1, KvFormat::kFp8E4m3, QMode::kBf16, 0, swap),
                   /*no_spills=*/true);
    // The bf16 64-row kernel, whose seesaw stamps its pairs of tiles and its
    // two-stage schedule its tiles.
    const plan::TileShape rows = plan::ChooseTiles("sm_90a", 128, KvFormat::kBf16);
    ASSERT_TRUE(plan::RunsWgmmaRowsPath("sm_90a", KvFormat::kBf16, rows.block_m, rows.block_n,
                                        rows.num_warps));
    ExpectCompiles(**kc, Sm90aSpec(32, 4, KvFormat::kBf16, QMode::kBf16, 0, rows),
                   /*no_spills=*/true);
  }
  for (const char* bad : {"0", "-3", "soon"}) {
    ScopedEnv env("MLAJIT_TIMELINE", bad);
    EXPECT_FALSE(KernelCompiler::StampsTimelines()) << bad;
    auto p = (*kc)->Prepare(spec);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(p.status().message()), HasSubstr("MLAJIT_TIMELINE"));
    EXPECT_THAT(std::string(p.status().message()), HasSubstr(bad));
  }
}

// MLAJIT_KERNEL_DEFINES reaches the compile as -D options and the key, so a
// variant under measurement has binaries of its own; the ablations (timing
// only) compile in both 64-row paths, the swap-AB tiles and the merge, and
// the code-size probe (MLA_DECODE_PAD) where it applies. Malformed entries
// are refused by name before anything is compiled.
TEST(JitCompile, KernelDefinesReachTheCompileAndTheKey) {
  REQUIRE_COMPILER("sm_90a");
  auto kc = KernelCompiler::Create(MemoryCache());
  ASSERT_TRUE(kc.ok()) << kc.status();
  const plan::TileShape rows = plan::ChooseTiles("sm_90a", 128, KvFormat::kBf16);
  ASSERT_TRUE(plan::RunsWgmmaRowsPath("sm_90a", KvFormat::kBf16, rows.block_m, rows.block_n,
                                      rows.num_warps));
  const KernelSpec spec = Sm90aSpec(32, 4, KvFormat::kBf16, QMode::kBf16, 0, rows);
  auto plain = (*kc)->Prepare(spec);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_THAT(plain->options, Not(Contains(HasSubstr("-DMLA_"))));
  {
    ScopedEnv env("MLAJIT_KERNEL_DEFINES", "MLA_ABLATE_MERGE=1, MLA_UNUSED_SWITCH");
    auto both = (*kc)->Prepare(spec);
    ASSERT_TRUE(both.ok()) << both.status();
    EXPECT_THAT(both->options, IsSupersetOf({"-DMLA_ABLATE_MERGE=1", "-DMLA_UNUSED_SWITCH"}));
    EXPECT_NE(both->key.Hex(), plain->key.Hex());
  }
  {
    // The ablations (timing only) compile in the 64-row paths and the merge.
    ScopedEnv ablate("MLAJIT_KERNEL_DEFINES",
                     "MLA_ABLATE_ROWS_PARTIALS=1,MLA_ABLATE_MERGE=1,MLA_ABLATE_PROXY_FENCES=1,"
                     "MLA_ABLATE_MERGE_WAIT_LAST=1,MLA_ABLATE_MATH=1");
    ExpectCompiles(**kc, spec);
    const plan::TileShape ws = plan::ChooseTiles("sm_90a", 64, KvFormat::kFp8E4m3);
    ASSERT_TRUE(plan::RunsWgmmaRowsWsPath("sm_90a", KvFormat::kFp8E4m3, ws.block_m, ws.block_n,
                                          ws.num_warps));
    ExpectCompiles(**kc, Sm90aSpec(16, 4, KvFormat::kFp8E4m3, QMode::kBf16, 0, ws));
    // MLA_ABLATE_MATH also reaches the swap-AB tiles of both formats, bf16's
    // 32-row pair of warpgroups included.
    for (const KvFormat kv : {KvFormat::kBf16, KvFormat::kFp8E4m3}) {
      for (const int heads : {16, 32}) {
        ExpectCompiles(
            **kc, Sm90aSpec(heads, 1, kv, QMode::kBf16, 0, plan::ChooseTiles("sm_90a", heads, kv)));
      }
    }
  }
  {
    // The code-size probe (timing only) in the swap-AB and bf16 64-row
    // kernels, with no warning (ExpectCompiles: no serialised products).
    ScopedEnv pad("MLAJIT_KERNEL_DEFINES", "MLA_DECODE_PAD=64");
    ExpectCompiles(**kc, spec);
    ExpectCompiles(**kc, Sm90aSpec(16, 1, KvFormat::kFp8E4m3, QMode::kBf16, 0,
                                   plan::ChooseTiles("sm_90a", 16, KvFormat::kFp8E4m3)));
  }
  for (const char* bad :
       {"TWO_STAGE=1", "MLA_=1", "MLA_X=", "MLA_X=a b=c", "MLA_x=1", "MLA_X=$(id)"}) {
    ScopedEnv bad_env("MLAJIT_KERNEL_DEFINES", bad);
    auto p = (*kc)->Prepare(spec);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(p.status().message()), HasSubstr("MLAJIT_KERNEL_DEFINES")) << bad;
  }
}

// MXFP4 on sm_90a: the swap-AB path's converting warpgroups (16-row tiles
// with two, 16- and 32-row tiles with one) and the mma.sync path's tiles (a
// tuner candidate), for each way a tile's records are copied: one run (flat,
// pages of 64), record by record (pages of 1 and 16). Everything stays in
// registers except, today, in 32-row swap-AB tiles (a 112-byte stack frame
// with bf16 Q: the product warpgroup's 32 columns of O and S) and in 16-row
// ones with two converting warpgroups (144 registers each) and pages of 16
// (8 bytes).
TEST(JitCompile, Mxfp4ShapesCompileForSm90a) {
  REQUIRE_COMPILER("sm_90a");
  auto kc = KernelCompiler::Create(MemoryCache());
  ASSERT_TRUE(kc.ok()) << kc.status();
  struct Tiles {
    int block_m, block_n, warps, stages;
  };
  int compiled = 0;
  for (const Tiles& t : {Tiles{16, 64, 12, 2}, Tiles{16, 64, 8, 3}, Tiles{32, 64, 8, 2},
                         Tiles{32, 32, 8, 2}}) {
    for (int page_size : {0, 64, 1, 16}) {
      const QMode q_mode = page_size == 16 ? QMode::kFp8 : QMode::kBf16;
      plan::TileShape shape;
      shape.block_m = t.block_m;
      shape.block_n = t.block_n;
      shape.num_warps = t.warps;
      shape.num_stages = t.stages;
      ASSERT_EQ(plan::RunsWgmmaPath("sm_90a", KvFormat::kMxfp4, t.block_m, t.block_n, t.warps),
                t.block_n == 64);
      ExpectCompiles(**kc, Sm90aSpec(t.block_m == 16 ? 16 : 32, 1, KvFormat::kMxfp4, q_mode,
                                     page_size, shape),
                     /*no_spills=*/t.block_n == 32 ||
                         (t.block_m == 16 && (t.warps == 8 || page_size != 16)));
      ++compiled;
    }
  }
  EXPECT_EQ(compiled, 16);
}

TEST(JitCompile, EveryTemplateCompilesWithHiprtcForGfx90a) {
  REQUIRE_COMPILER("gfx90a");
  auto c = HiprtcCompiler();
  if (!(*c)->CheckArch("gfx90a").ok()) GTEST_SKIP() << (*c)->CheckArch("gfx90a");
  CompileEveryTemplate("gfx90a");
}

TEST(JitCompile, CompilerIdentityNamesVersionAndBuild) {
  REQUIRE_COMPILER("sm_90a");
  Compiler* c = *NvrtcCompiler();
  EXPECT_THAT(c->Identity(),
              ::testing::MatchesRegex("nvrtc [0-9]+\\.[0-9]+ \\(.*probe [0-9a-f]{16}\\)"));
  EXPECT_TRUE(c->CheckArch("sm_90a").ok());
  EXPECT_TRUE(c->CheckArch("sm_80").ok());
  EXPECT_EQ(c->CheckArch("sm_42").code(), absl::StatusCode::kUnimplemented);
  std::vector<std::string> opts = c->Options("sm_90a");
  EXPECT_NE(std::find(opts.begin(), opts.end(), "--gpu-architecture=sm_90a"), opts.end());
}

// HIP 5.2's hiprtc aborts the process on targets it does not know; the check
// must refuse them first. This test surviving is the point.
TEST(JitCompile, HiprtcRefusesTargetsItsCompilerDoesNotKnow) {
  REQUIRE_COMPILER("gfx90a");
  Compiler* c = *HiprtcCompiler();
  EXPECT_THAT(c->Identity(), HasSubstr("hiprtc "));
  EXPECT_EQ(c->CheckArch("gfx9999").code(), absl::StatusCode::kUnimplemented);
  RenderedSource src;
  src.program_name = "x.hip";
  src.source = "extern \"C\" __global__ void k() {}\n";
  auto r = c->Compile(src, {"--offload-arch=gfx9999"}, "gfx90a");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented) << r.status();
  // Through the pipeline: a known arch this hiprtc may lack is refused, not aborted.
  if (!c->CheckArch("gfx942").ok()) {
    auto kc = KernelCompiler::Create(MemoryCache());
    KernelSpec spec;
    spec.template_name = "probe";
    spec.arch = "gfx942";
    auto e = (*kc)->GetBinary(spec);
    EXPECT_EQ(e.status().code(), absl::StatusCode::kUnimplemented) << e.status();
    EXPECT_THAT(std::string(e.status().message()), HasSubstr("gfx942"));
  }
}

TEST(JitCompile, BrokenTemplateIsInternalWithLogOptionsAndSavedSource) {
  REQUIRE_COMPILER("sm_90a");
  TempDir saved_dir;
  const std::string& saved = saved_dir.path();
  KernelCompilerOptions o;
  o.templates = TemplateStore::FromFiles(
      {{"broken.cu.in",
        "#include \"helper.cuh\"\nextern \"C\" __global__ void {{template_name}}_kernel() {\n"
        "  int x = undeclared_identifier_{{num_heads}};\n}\n"},
       {"helper.cuh", "#pragma once\nconstexpr int kHelper = 1;\n"}});
  o.failed_source_dir = saved;
  auto kc = KernelCompiler::Create(MemoryCache(), o);
  KernelSpec spec;
  spec.template_name = "broken";
  auto e = (*kc)->GetBinary(spec);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInternal);
  std::string msg(e.status().message());
  EXPECT_THAT(msg, HasSubstr("undeclared_identifier_16"));   // the compiler log
  EXPECT_THAT(msg, HasSubstr("broken.cu(3)"));               // with the template's line
  EXPECT_THAT(msg, HasSubstr("--gpu-architecture=sm_90a"));  // the options
  EXPECT_THAT(msg, HasSubstr(SpecName(spec)));
  size_t at = msg.find("rendered source saved to ");
  ASSERT_NE(at, std::string::npos) << msg;
  std::string path = msg.substr(at + 25, msg.find('\n', at) - at - 25);
  EXPECT_EQ(path.rfind(saved, 0), 0u) << path;
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_THAT(ss.str(), HasSubstr("undeclared_identifier_16"));
  std::ifstream header(path.substr(0, path.rfind('/')) + "/helper.cuh");
  EXPECT_TRUE(header.good()) << "headers are saved beside the source";
}

TEST(JitCompile, DisabledJitFailsOnAMissAndServesAHit) {
  REQUIRE_COMPILER("sm_90a");
  TempDir temp;
  const std::string& dir = temp.path();
  KernelSpec warm;
  warm.template_name = "probe";
  KernelSpec cold = warm;
  cold.num_heads = 32;

  auto locked = KernelCompiler::Create(DiskCache(dir, /*disable_jit=*/true));
  auto miss = (*locked)->GetBinary(warm);
  ASSERT_FALSE(miss.ok());
  EXPECT_EQ(miss.status().code(), absl::StatusCode::kFailedPrecondition) << miss.status();

  auto jit = KernelCompiler::Create(DiskCache(dir, /*disable_jit=*/false));
  auto compiled = (*jit)->GetBinary(warm);
  ASSERT_TRUE(compiled.ok()) << compiled.status();

  auto locked2 = KernelCompiler::Create(DiskCache(dir, /*disable_jit=*/true));
  auto hit = (*locked2)->GetBinary(warm);
  ASSERT_TRUE(hit.ok()) << hit.status();
  EXPECT_EQ((*hit)->source, cache::CacheEntry::Source::kDisk);
  EXPECT_EQ((*hit)->payload, (*compiled)->payload);
  EXPECT_EQ((*hit)->key, (*compiled)->key);
  EXPECT_EQ((*locked2)->GetBinary(cold).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(JitCompile, SpecErrorsSurfaceBeforeAnyCompile) {
  auto kc = KernelCompiler::Create(MemoryCache());
  KernelSpec bad;
  bad.num_heads = 0;
  EXPECT_EQ((*kc)->GetBinary(bad).status().code(), absl::StatusCode::kInvalidArgument);
  KernelSpec unknown_arch;
  unknown_arch.arch = "sm_75";
  EXPECT_EQ((*kc)->GetBinary(unknown_arch).status().code(), absl::StatusCode::kUnimplemented);
  KernelSpec no_template;
  no_template.template_name = "no_such_template";
  no_template.arch = "sm_90a";
  auto e = (*kc)->GetBinary(no_template);
  if (CompilerForArch("sm_90a").ok()) {
    EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument) << e.status();
    EXPECT_THAT(std::string(e.status().message()), HasSubstr("no_such_template"));
  }
  EXPECT_EQ(KernelCompiler::Create(nullptr).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mlajit::jit
