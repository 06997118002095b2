#include "src/jit/kernel_compiler.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "src/base/log.h"
#include "src/base/status_macros.h"
#include "src/jit/key.h"
#include "src/jit/manifest.h"

namespace mlajit::jit {
namespace {

// mkdir -p; true when the folder exists afterwards.
bool MakeDirs(const std::string& path, mode_t mode) {
  std::string partial;
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    partial += std::string(part);
    if (!partial.empty() && mkdir(partial.c_str(), mode) != 0 && errno != EEXIST) return false;
    partial += "/";
  }
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << contents;
  return static_cast<bool>(out);
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// MLAJIT_TIMELINE=N (kernel development): kernels stamp a timeline of one CTA
// on their N-th launch (kernel_templates/mla_timeline.cuh). The define is a
// compile option, so such binaries have keys of their own in the cache.
// TimelineLaunch: the launch it names, 0 when unset or empty, -1 when malformed.
int TimelineLaunch(const char* value) {
  if (value == nullptr || value[0] == '\0') return 0;
  int launch = 0;
  return absl::SimpleAtoi(value, &launch) && launch >= 1 ? launch : -1;
}

absl::Status AddTimelineOption(std::vector<std::string>& options) {
  const char* value = std::getenv("MLAJIT_TIMELINE");
  const int launch = TimelineLaunch(value);
  if (launch == 0) return absl::OkStatus();
  if (launch < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MLAJIT_TIMELINE is '", value, "': expected the launch to stamp, an integer >= 1"));
  }
  options.push_back(absl::StrCat("-DMLA_TIMELINE=", launch));
  return absl::OkStatus();
}

// MLAJIT_KERNEL_DEFINES (kernel development): extra preprocessor definitions
// for every kernel compiled, NAME or NAME=VALUE separated by commas or
// spaces. The templates read such switches for variants under measurement
// and ablations (e.g. MLA_ABLATE_MERGE=1), so that one build can time both sides of an
// A/B. NAME must start with MLA_, so that no definition reaches the compiler's
// or CUDA's own macros; like the timeline's, the definitions are compile
// options, so their binaries have keys of their own.
absl::Status AddKernelDefines(std::vector<std::string>& options) {
  const char* value = std::getenv("MLAJIT_KERNEL_DEFINES");
  if (value == nullptr) return absl::OkStatus();
  auto is_name_char = [](char c) {
    return absl::ascii_isupper(c) || absl::ascii_isdigit(c) || c == '_';
  };
  auto is_value_char = [](char c) {
    return absl::ascii_isalnum(c) || c == '_' || c == '.' || c == '+' || c == '-';
  };
  for (absl::string_view entry : absl::StrSplit(value, absl::ByAnyChar(", "), absl::SkipEmpty())) {
    const size_t eq = entry.find('=');
    const absl::string_view name = entry.substr(0, eq);
    const absl::string_view val = eq == absl::string_view::npos ? "" : entry.substr(eq + 1);
    const bool ok = absl::StartsWith(name, "MLA_") && name.size() > 4 &&
                    std::all_of(name.begin(), name.end(), is_name_char) &&
                    (eq == absl::string_view::npos ||
                     (!val.empty() && std::all_of(val.begin(), val.end(), is_value_char)));
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          "MLAJIT_KERNEL_DEFINES entry '", entry,
          "': expected NAME or NAME=VALUE, NAME of A-Z, 0-9 and _ starting with MLA_, VALUE of "
          "letters, digits and _ . + -"));
    }
    if (absl::StartsWith(entry, "MLA_ABLATE_")) {
      MLAJIT_LOG_WARN("MLAJIT_KERNEL_DEFINES has ", entry,
                      ": an ablation, for timing only; this kernel's results are wrong");
    }
    options.push_back(absl::StrCat("-D", entry));
  }
  return absl::OkStatus();
}

}  // namespace

bool KernelCompiler::StampsTimelines() { return TimelineLaunch(std::getenv("MLAJIT_TIMELINE")) > 0; }

KernelCompiler::KernelCompiler(std::shared_ptr<cache::KernelCache> cache,
                               KernelCompilerOptions options)
    : cache_(std::move(cache)), options_(std::move(options)) {
  templates_ = options_.templates != nullptr ? options_.templates : TemplateStore::Default();
}

absl::StatusOr<std::unique_ptr<KernelCompiler>> KernelCompiler::Create(
    std::shared_ptr<cache::KernelCache> cache, KernelCompilerOptions options) {
  if (cache == nullptr) return absl::InvalidArgumentError("KernelCompiler::Create: cache is null");
  // Compilers are opened lazily, per target: a CUDA-only host can still serve
  // hits and warm sm_* targets without hiprtc, and vice versa.
  return std::unique_ptr<KernelCompiler>(new KernelCompiler(std::move(cache), std::move(options)));
}

absl::StatusOr<std::shared_ptr<KernelCompiler>> KernelCompiler::Shared(
    const cache::CacheOptions& o) {
  // Weak entries: the registry never keeps a compiler (and its memory tier)
  // alive by itself.
  static absl::Mutex mu(absl::kConstInit);
  static auto* registry = new absl::flat_hash_map<std::string, std::weak_ptr<KernelCompiler>>();
  const std::string key = absl::StrJoin(
      {o.cache_dir, o.prebuilt_dir, o.record_manifest, o.pins_file, o.library_version,
       absl::StrCat(o.memory_only, o.disable_jit, o.save_source, o.trust_cache_dir),
       absl::StrCat(o.max_bytes), absl::StrCat(o.lock_timeout_s),
       absl::StrCat(o.use_record_interval_s)},
      "\x1f");
  absl::MutexLock lock(&mu);
  if (auto it = registry->find(key); it != registry->end()) {
    if (std::shared_ptr<KernelCompiler> live = it->second.lock()) return live;
  }
  MLAJIT_ASSIGN_OR_RETURN(std::unique_ptr<cache::KernelCache> cache, cache::KernelCache::Open(o));
  MLAJIT_ASSIGN_OR_RETURN(std::unique_ptr<KernelCompiler> compiler, Create(std::move(cache)));
  std::shared_ptr<KernelCompiler> shared(std::move(compiler));
  absl::erase_if(*registry, [](const auto& entry) { return entry.second.expired(); });
  (*registry)[key] = shared;
  return shared;
}

absl::StatusOr<Compiler*> KernelCompiler::CompilerFor(const std::string& arch) {
  Compiler* c = options_.compiler;
  if (c == nullptr) {
    MLAJIT_ASSIGN_OR_RETURN(c, CompilerForArch(arch));
  }
  MLAJIT_RETURN_IF_ERROR(c->CheckArch(arch));
  return c;
}


absl::StatusOr<PreparedKernel> KernelCompiler::Prepare(const KernelSpec& spec) {
  MLAJIT_RETURN_IF_ERROR(ValidateSpec(spec));
  PreparedKernel p;
  p.spec = spec;
  MLAJIT_ASSIGN_OR_RETURN(p.compiler, CompilerFor(spec.arch));
  MLAJIT_ASSIGN_OR_RETURN(p.source,
                          RenderTemplate(*templates_, spec.template_name, SpecBindings(spec)));
  p.options = p.compiler->Options(spec.arch);
  MLAJIT_RETURN_IF_ERROR(AddTimelineOption(p.options));
  MLAJIT_RETURN_IF_ERROR(AddKernelDefines(p.options));
  KeyInputs in;
  in.source = &p.source;
  in.options = p.options;
  in.arch = spec.arch;
  in.compiler_identity = p.compiler->Identity();
  in.compiler_extra = p.compiler->ExtraKeyFields();
  DerivedKey k = DeriveKey(in);
  p.key = k.key;
  p.fields = std::move(k.fields);
  p.metadata.template_name = spec.template_name;
  p.metadata.arch = spec.arch;
  p.metadata.spec = SpecToJson(spec);
  p.metadata.compiler = in.compiler_identity;
  p.metadata.library_version = in.library_version;
  return p;
}

absl::StatusOr<std::shared_ptr<const cache::CacheEntry>> KernelCompiler::GetBinary(
    const KernelSpec& spec) {
  const bool memoise = templates_->immutable();
  if (memoise) {
    absl::MutexLock lock(&mu_);
    auto it = memo_.find(spec);
    if (it != memo_.end()) return it->second;
  }
  MLAJIT_ASSIGN_OR_RETURN(PreparedKernel p, Prepare(spec));
  const bool keep_source = cache_->options().save_source;
  cache::CompileFn compile = [&]() -> absl::StatusOr<cache::CompileResult> {
    absl::StatusOr<CompiledBinary> b = p.compiler->Compile(p.source, p.options, spec.arch);
    if (!b.ok()) {
      if (b.status().code() != absl::StatusCode::kInternal) return b.status();
      return absl::InternalError(absl::StrCat("kernel ", SpecName(spec), " (key ", p.key.Hex(),
                                              "): rendered source saved to ",
                                              SaveFailedSource(p), "\n", b.status().message()));
    }
    if (!b->log.empty()) {
      MLAJIT_LOG_INFO("compiled ", SpecName(spec), " with diagnostics: ", b->log);
    }
    MLAJIT_LOG_INFO("compiled ", SpecName(spec), " key ", p.key.Hex(), " in ",
                    static_cast<int64_t>(b->compile_ms), " ms (", p.compiler->Identity(), ")");
    cache::CompileResult r;
    r.payload = std::move(b->binary);
    r.compile_ms = b->compile_ms;
    if (keep_source) r.source = p.source.source;
    return r;
  };
  MLAJIT_ASSIGN_OR_RETURN(std::shared_ptr<const cache::CacheEntry> entry,
                          cache_->GetOrCompile(p.key, p.fields, p.metadata, compile));
  if (entry->source != cache::CacheEntry::Source::kCompiled) {
    MLAJIT_LOG_DEBUG("cache hit ", SpecName(spec), " key ", p.key.Hex(), " from ",
                     entry->path.empty() ? std::string("memory") : entry->path);
  }
  if (memoise) {
    absl::MutexLock lock(&mu_);
    memo_.emplace(spec, entry);
  }
  return entry;
}

std::string KernelCompiler::SaveFailedSource(const PreparedKernel& p) {
  std::string root = options_.failed_source_dir;
  if (root.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    // Per-user folder, private: sources may be proprietary.
    std::string base = absl::StrCat(tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp", "/mlajit-",
                                    static_cast<unsigned long>(getuid()));
    if (!MakeDirs(base, 0700)) return absl::StrCat("(not saved: cannot create ", base, ")");
    root = base + "/failed";
  }
  std::string dir = absl::StrCat(root, "/", SpecName(p.spec), "-", p.key.Hex().substr(0, 16));
  if (!MakeDirs(dir, 0755)) return absl::StrCat("(not saved: cannot create ", dir, ")");
  std::string main = absl::StrCat(dir, "/", p.source.program_name);
  if (!WriteFile(main, p.source.source)) return absl::StrCat("(not saved: cannot write ", main, ")");
  // Headers too, under their include names, so `nvcc -I<dir>` reproduces the failure.
  for (const HeaderFile& h : p.source.headers) {
    std::string path = absl::StrCat(dir, "/", h.name);
    size_t slash = path.rfind('/');
    if (h.name.find("..") != std::string::npos || !MakeDirs(path.substr(0, slash), 0755) ||
        !WriteFile(path, h.contents)) {
      MLAJIT_LOG_WARN("could not save header ", h.name, " of a failed compile under ", dir);
    }
  }
  return main;
}

absl::Status KernelCompiler::WarmManifest(const std::string& manifest_path,
                                          const std::string& arch, int jobs,
                                          const WarmProgressFn& progress, WarmSummary* summary) {
  auto start = std::chrono::steady_clock::now();
  MLAJIT_ASSIGN_OR_RETURN(std::vector<ManifestEntry> entries, ReadManifest(manifest_path));
  // Check everything before compiling anything: a bad line should not cost a
  // long warm-up first.
  std::vector<ManifestEntry> work;
  absl::flat_hash_set<KernelSpec> seen;
  for (ManifestEntry& e : entries) {
    if (!arch.empty()) e.spec.arch = arch;
    absl::Status s = ValidateSpec(e.spec);
    if (s.ok()) s = CompilerFor(e.spec.arch).status();
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat(manifest_path, " line ", e.line, ": ", s.message()));
    }
    if (seen.insert(e.spec).second) work.push_back(std::move(e));
  }

  WarmSummary sum;
  sum.total = static_cast<int>(work.size());
  absl::Mutex mu;
  absl::Status first_error;
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < work.size(); i = next++) {
      const ManifestEntry& e = work[i];
      absl::StatusOr<std::shared_ptr<const cache::CacheEntry>> r = GetBinary(e.spec);
      absl::MutexLock lock(&mu);
      WarmProgress p;
      p.name = SpecName(e.spec);
      if (r.ok()) {
        p.key = (*r)->key.Hex();
        ((*r)->source == cache::CacheEntry::Source::kCompiled ? sum.compiled : sum.cached)++;
      } else {
        ++sum.failed;
        p.status = absl::Status(r.status().code(),
                                absl::StrCat(manifest_path, " line ", e.line, " (", p.name,
                                             "): ", r.status().message()));
        if (first_error.ok()) first_error = p.status;
      }
      p.done = sum.compiled + sum.cached + sum.failed;
      p.total = sum.total;
      p.compiled = sum.compiled;
      p.failed = sum.failed;
      p.elapsed_s = SecondsSince(start);
      if (progress) progress(p);
    }
  };
  int threads = jobs > 0 ? jobs : static_cast<int>(std::thread::hardware_concurrency());
  threads = std::max(1, std::min<int>(threads, std::max<int>(1, sum.total)));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();

  sum.elapsed_s = SecondsSince(start);
  if (summary != nullptr) *summary = sum;
  if (!first_error.ok()) {
    return absl::Status(first_error.code(),
                        absl::StrCat(sum.failed, " of ", sum.total, " specs failed; first: ",
                                     first_error.message()));
  }
  return absl::OkStatus();
}

}  // namespace mlajit::jit
