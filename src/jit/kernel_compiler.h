// The JIT pipeline: KernelSpec -> validated -> rendered -> keyed -> cached binary
// (compiled on a miss, under the cache's per-key lock).
//
//   MLAJIT_ASSIGN_OR_RETURN(auto cache, cache::KernelCache::Open(options));
//   MLAJIT_ASSIGN_OR_RETURN(auto kc, KernelCompiler::Create(std::move(cache)));
//   MLAJIT_ASSIGN_OR_RETURN(auto entry, kc->GetBinary(spec));
//   backend->LoadModule(device, entry->payload);
//   backend->GetFunction(module, KernelCompiler::EntryPoint(spec));  // "<template>_kernel"
//
//   // Deployment: fill a cache without a GPU.
//   kc->WarmManifest("cache/manifests/deepseek_v3.jsonl", "sm_90a", /*jobs=*/8, nullptr);
//
// Entry point convention: every template defines
//   extern "C" __global__ void {{template_name}}_kernel(...)
// Errors: spec problems kInvalidArgument / kUnimplemented (ValidateSpec, or a
// target the installed compiler cannot build); no compiler kFailedPrecondition;
// disable-JIT miss kFailedPrecondition; our template failing to compile kInternal
// with the log, the options and the path of the saved rendered source.
#ifndef MLAJIT_SRC_JIT_KERNEL_COMPILER_H_
#define MLAJIT_SRC_JIT_KERNEL_COMPILER_H_

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "src/cache/kernel_cache.h"
#include "src/jit/compiler.h"
#include "src/jit/kernel_spec.h"
#include "src/jit/renderer.h"
#include "src/jit/template_store.h"

namespace mlajit::jit {

struct KernelCompilerOptions {
  std::shared_ptr<const TemplateStore> templates;  // null: TemplateStore::Default()
  // Used for every arch instead of NVRTC / hiprtc (tests). Not owned; must
  // outlive the KernelCompiler.
  Compiler* compiler = nullptr;
  // Where rendered sources of failed compiles are written; empty:
  // $TMPDIR (else /tmp) /mlajit-<uid>/failed.
  std::string failed_source_dir;
};

// Everything GetBinary derives from a spec before asking the cache.
struct PreparedKernel {
  KernelSpec spec;
  RenderedSource source;
  Compiler* compiler = nullptr;
  std::vector<std::string> options;
  cache::CacheKey key;
  std::vector<cache::KeyField> fields;
  cache::EntryMetadata metadata;
};

struct WarmProgress {
  int done = 0;       // specs finished (ok or failed)
  int total = 0;
  int compiled = 0;   // of done: compiled now (the rest were already cached)
  int failed = 0;
  double elapsed_s = 0;
  std::string name;   // SpecName of the spec just finished
  std::string key;    // its key (hex); empty if it failed before keying
  absl::Status status;
};
// Called once per finished spec, from worker threads but never concurrently.
using WarmProgressFn = std::function<void(const WarmProgress&)>;

struct WarmSummary {
  int total = 0, compiled = 0, cached = 0, failed = 0;
  double elapsed_s = 0;
};

class KernelCompiler {
 public:
  static absl::StatusOr<std::unique_ptr<KernelCompiler>> Create(
      std::shared_ptr<cache::KernelCache> cache, KernelCompilerOptions options = {});

  // The process-wide compiler for these cache options: every caller with equal
  // options (all fields but the test hooks) gets the same instance while one is
  // alive, so runtimes of several devices share one memory tier and one
  // single-flight (a spec compiles once for all of them). Opens the cache on
  // first use; the instance goes away with its last holder.
  static absl::StatusOr<std::shared_ptr<KernelCompiler>> Shared(
      const cache::CacheOptions& options);

  // Thread-safe. Concurrent calls for one spec compile once (the cache's
  // single-flight); with an immutable template store, results are memoised per spec.
  absl::StatusOr<std::shared_ptr<const cache::CacheEntry>> GetBinary(const KernelSpec& spec);

  // Validation, rendering and keying without touching the cache.
  absl::StatusOr<PreparedKernel> Prepare(const KernelSpec& spec);

  // Compiles every spec of a manifest (arch overridden when non-empty) on `jobs`
  // threads (<= 0: one per core). Every spec is attempted; the result is the
  // first failure with a count of all failures. Needs no GPU.
  absl::Status WarmManifest(const std::string& manifest_path, const std::string& arch, int jobs,
                            const WarmProgressFn& progress, WarmSummary* summary = nullptr);

  static std::string EntryPoint(const KernelSpec& spec) { return spec.template_name + "_kernel"; }
  // The merge kernel of `lane_columns` (4, 8 or 16) columns a lane, for
  // host-built plans, or (0) the one that picks the width itself
  // (kernel_templates/mla_decode.cu.in).
  static std::string MergeEntryPoint(int lane_columns) {
    return lane_columns == 0 ? "mla_combine_kernel"
                             : "mla_combine_kernel_w" + std::to_string(lane_columns);
  }
  static std::string PlanEntryPoint() { return "mla_plan_kernel"; }
  // Every kernel the runtime loads from a module of `spec`, in this order:
  // the decode, the merges (picking, then of widths 4, 8, 16) and the device
  // planner.
  static std::array<std::string, 6> ModuleEntryPoints(const KernelSpec& spec) {
    return {EntryPoint(spec),   MergeEntryPoint(0),  MergeEntryPoint(4),
            MergeEntryPoint(8), MergeEntryPoint(16), PlanEntryPoint()};
  }

  // Whether kernels prepared now stamp a timeline (MLAJIT_TIMELINE=N, N >= 1:
  // kernel_templates/mla_timeline.cuh), which their merge kernel prints, so
  // that a call runs it even where nothing is split.
  static bool StampsTimelines();

  cache::KernelCache& cache() const { return *cache_; }
  const TemplateStore& templates() const { return *templates_; }

 private:
  KernelCompiler(std::shared_ptr<cache::KernelCache> cache, KernelCompilerOptions options);

  absl::StatusOr<Compiler*> CompilerFor(const std::string& arch);
  // Writes the rendered source and its headers for a failed compile; returns the
  // path of the main file, or a note on why nothing was saved.
  std::string SaveFailedSource(const PreparedKernel& p);

  std::shared_ptr<cache::KernelCache> cache_;
  std::shared_ptr<const TemplateStore> templates_;
  KernelCompilerOptions options_;
  absl::Mutex mu_;
  absl::flat_hash_map<KernelSpec, std::shared_ptr<const cache::CacheEntry>> memo_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace mlajit::jit

#endif  // MLAJIT_SRC_JIT_KERNEL_COMPILER_H_
