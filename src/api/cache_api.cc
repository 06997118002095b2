// The kernel cache part of the C ABI: open/close, the JSON inspection calls,
// maintenance and warm-up. The JSON shapes are documented in cache/README.md.
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "mlajit/mlajit.h"
#include "src/api/c_api_internal.h"
#include "src/base/log.h"
#include "src/base/status_macros.h"
#include "src/cache/bundle.h"
#include "src/cache/elf_functions.h"
#include "src/cache/fs_util.h"
#include "src/cache/kernel_cache.h"
#include "src/cache/pins.h"
#include "src/jit/explain.h"
#include "src/jit/json_util.h"
#include "src/jit/kernel_compiler.h"
#include "src/jit/kernel_spec.h"
#include "src/tune/candidates.h"
#include "src/tune/tuning_table.h"

// Defined in c_api.cc: stores the message in the thread-local last error.

struct mlajit_cache {
  std::shared_ptr<mlajit::cache::KernelCache> cache;
  absl::Mutex mu;  // guards compiler creation
  std::unique_ptr<mlajit::jit::KernelCompiler> compiler ABSL_GUARDED_BY(mu);
};

namespace mlajit::api_internal {
namespace {

using jit::jit_internal::JsonQuote;

const char* SourceName(cache::CacheEntry::Source s) {
  switch (s) {
    case cache::CacheEntry::Source::kMemory: return "memory";
    case cache::CacheEntry::Source::kPrebuilt: return "prebuilt";
    case cache::CacheEntry::Source::kDisk: return "disk";
    case cache::CacheEntry::Source::kCompiled: return "compiled";
  }
  return "unknown";
}

// The spec as a JSON object when it is one of ours, else as a string, so that
// a foreign or damaged entry cannot break the document.
std::string SpecJson(const std::string& spec) {
  if (jit::SpecFromJson(spec).ok()) return spec;
  return JsonQuote(spec);
}

std::string MetadataJson(const cache::EntryMetadata& m) {
  return absl::StrCat("\"template\":", JsonQuote(m.template_name), ",\"arch\":", JsonQuote(m.arch),
                      ",\"spec\":", SpecJson(m.spec), ",\"compiler\":", JsonQuote(m.compiler),
                      ",\"library_version\":", JsonQuote(m.library_version),
                      ",\"compile_ms\":", m.compile_ms);
}

std::string InfoJson(const cache::EntryInfo& e) {
  return absl::StrCat("{\"key\":", JsonQuote(e.key.Hex()), ",", MetadataJson(e.metadata),
                      ",\"path\":", JsonQuote(e.path), ",\"bytes\":", e.file_bytes,
                      ",\"last_use_unix_s\":", e.last_use_unix_s,
                      ",\"valid\":", e.valid ? "true" : "false",
                      ",\"problem\":", JsonQuote(e.problem), "}");
}

absl::Status Emit(const std::string& s, char** out) { return EmitString(s, out); }

absl::Status CheckHandle(const mlajit_cache* c, const char* fn) {
  if (c == nullptr) return absl::InvalidArgumentError(absl::StrCat(fn, ": cache=NULL: pass a handle from mlajit_cache_open"));
  return absl::OkStatus();
}

absl::Status CheckOut(const void* out, const char* fn, const char* name) {
  if (out == nullptr) return absl::InvalidArgumentError(absl::StrCat(fn, ": ", name, "=NULL: must point to storage for the result"));
  return absl::OkStatus();
}

absl::StatusOr<cache::CacheKey> ParseKey(const char* hex, const char* fn, const char* name) {
  if (hex == nullptr) return absl::InvalidArgumentError(absl::StrCat(fn, ": ", name, "=NULL: expected 32 hex digits"));
  absl::StatusOr<cache::CacheKey> k = cache::CacheKey::FromHex(hex);
  if (!k.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(fn, ": ", name, "=\"", hex, "\": expected 32 hex digits (", k.status().message(), ")"));
  }
  return k;
}

absl::StatusOr<std::shared_ptr<const cache::CacheEntry>> ReadEntry(mlajit_cache* c, const char* hex, const char* fn, const char* name) {
  MLAJIT_ASSIGN_OR_RETURN(cache::CacheKey key, ParseKey(hex, fn, name));
  absl::StatusOr<std::shared_ptr<const cache::CacheEntry>> e = c->cache->Read(key);
  if (!e.ok()) {
    return absl::Status(e.status().code(), absl::StrCat(fn, ": ", name, "=", key.Hex(), ": ", e.status().message()));
  }
  return e;
}

absl::Status Open(const mlajit_cache_options_t* options, mlajit_cache_t* out) {
  MLAJIT_RETURN_IF_ERROR(CheckOut(out, "mlajit_cache_open", "cache"));
  *out = nullptr;
  MLAJIT_ASSIGN_OR_RETURN(cache::CacheOptions opts, ResolveCacheOptions(options, "mlajit_cache_open"));
  MLAJIT_ASSIGN_OR_RETURN(std::unique_ptr<cache::KernelCache> kc, cache::KernelCache::Open(opts));
  auto* c = new mlajit_cache;
  c->cache = std::move(kc);
  *out = c;
  return absl::OkStatus();
}

absl::Status List(mlajit_cache* c, char** json) {
  MLAJIT_RETURN_IF_ERROR(CheckHandle(c, "mlajit_cache_list_json"));
  MLAJIT_RETURN_IF_ERROR(CheckOut(json, "mlajit_cache_list_json", "json"));
  MLAJIT_ASSIGN_OR_RETURN(std::vector<cache::EntryInfo> entries, c->cache->List());
  std::vector<std::string> items;
  for (const cache::EntryInfo& e : entries) items.push_back(InfoJson(e));
  return Emit(absl::StrCat("{\"cache_dir\":", JsonQuote(c->cache->options().cache_dir),
                           ",\"entries\":[", absl::StrJoin(items, ","), "]}"),
              json);
}

absl::Status Show(mlajit_cache* c, const char* key_hex, char** json) {
  MLAJIT_RETURN_IF_ERROR(CheckHandle(c, "mlajit_cache_show_json"));
  MLAJIT_RETURN_IF_ERROR(CheckOut(json, "mlajit_cache_show_json", "json"));
  MLAJIT_ASSIGN_OR_RETURN(auto e, ReadEntry(c, key_hex, "mlajit_cache_show_json", "key"));
  std::vector<std::string> fields;
  for (const cache::KeyField& f : e->fields) {
    fields.push_back(absl::StrCat("{\"name\":", JsonQuote(f.name), ",\"value\":", JsonQuote(f.value_preview),
                                  ",\"hash\":", JsonQuote(f.value_hash), "}"));
  }
  // The binary's functions (kernels and the device functions they call) with
  // their code sizes; an entry whose binary's symbols cannot be read still
  // shows, with the reason.
  std::string functions;
  if (absl::StatusOr<std::vector<cache::ElfFunction>> fns = cache::ListElfFunctions(e->payload);
      fns.ok()) {
    std::vector<std::string> items;
    for (const cache::ElfFunction& f : *fns) {
      items.push_back(
          absl::StrCat("{\"name\":", JsonQuote(f.name), ",\"code_bytes\":", f.code_bytes, "}"));
    }
    functions = absl::StrCat(",\"functions\":[", absl::StrJoin(items, ","), "]");
  } else {
    functions = absl::StrCat(",\"functions_error\":", JsonQuote(fns.status().message()));
  }
  return Emit(absl::StrCat("{\"key\":", JsonQuote(e->key.Hex()), ",", MetadataJson(e->metadata),
                           ",\"path\":", JsonQuote(e->path),
                           ",\"source\":", JsonQuote(SourceName(e->source)),
                           ",\"payload_bytes\":", e->payload.size(), ",\"entry_point\":",
                           JsonQuote(absl::StrCat(e->metadata.template_name, "_kernel")), functions,
                           ",\"fields\":[", absl::StrJoin(fields, ","), "]}"),
              json);
}

absl::Status Verify(mlajit_cache* c, int* num_bad, char** json) {
  MLAJIT_RETURN_IF_ERROR(CheckHandle(c, "mlajit_cache_verify_json"));
  MLAJIT_ASSIGN_OR_RETURN(std::vector<cache::EntryInfo> bad, c->cache->Verify());
  MLAJIT_ASSIGN_OR_RETURN(std::vector<cache::EntryInfo> all, c->cache->List());
  std::vector<std::string> items;
  for (const cache::EntryInfo& e : bad) items.push_back(InfoJson(e));
  if (num_bad != nullptr) *num_bad = static_cast<int>(bad.size());
  return Emit(absl::StrCat("{\"cache_dir\":", JsonQuote(c->cache->options().cache_dir),
                           ",\"checked\":", all.size(), ",\"bad\":[", absl::StrJoin(items, ","), "]}"),
              json);
}

// Every line of tuning.jsonl in the cache directory and the prebuilt layer.
absl::Status Tuning(mlajit_cache* c, char** json) {
  MLAJIT_RETURN_IF_ERROR(CheckHandle(c, "mlajit_cache_tuning_json"));
  MLAJIT_RETURN_IF_ERROR(CheckOut(json, "mlajit_cache_tuning_json", "json"));
  const cache::CacheOptions& o = c->cache->options();
  std::vector<std::string> records;
  int malformed = 0;
  for (const std::string& dir : {o.prebuilt_dir, o.memory_only ? std::string() : o.cache_dir}) {
    if (dir.empty()) continue;
    std::string path;
    MLAJIT_ASSIGN_OR_RETURN(std::vector<tune::TuningFileLine> lines,
                            tune::ReadTuningFile(dir, &path));
    for (const tune::TuningFileLine& line : lines) {
      const absl::StatusOr<tune::TuningRecord>& r = line.record;
      if (!r.ok()) {
        ++malformed;
        continue;
      }
      // The record's own line, with where it came from and a readable class.
      records.push_back(absl::StrCat(
          "{\"file\":", JsonQuote(path),
          ",\"current\":", r->library_version == o.library_version ? "true" : "false",
          ",\"class\":", JsonQuote(tune::KeyName(r->key)),
          ",\"shape\":", JsonQuote(tune::ShapeName(r->shape)), ",",
          absl::string_view(line.text).substr(1)));
    }
  }
  return Emit(absl::StrCat("{\"records\":[", absl::StrJoin(records, ","),
                           "],\"malformed\":", malformed, "}"),
              json);
}

absl::Status Stats(mlajit_cache* c, char** json) {
  MLAJIT_RETURN_IF_ERROR(CheckHandle(c, "mlajit_cache_stats_json"));
  MLAJIT_RETURN_IF_ERROR(CheckOut(json, "mlajit_cache_stats_json", "json"));
  MLAJIT_ASSIGN_OR_RETURN(cache::CacheStats s, c->cache->Stats());
  MLAJIT_ASSIGN_OR_RETURN(std::vector<cache::EntryInfo> entries, c->cache->List());
  struct Tally {
    uint64_t entries = 0, bytes = 0;
  };
  std::map<std::string, Tally> by_arch, by_template;
  uint64_t invalid = 0;
  for (const cache::EntryInfo& e : entries) {
    if (!e.valid) {
      ++invalid;
      continue;
    }
    for (auto* m : {&by_arch[e.metadata.arch], &by_template[e.metadata.template_name]}) {
      ++m->entries;
      m->bytes += e.file_bytes;
    }
  }
  auto group = [](const std::map<std::string, Tally>& m) {
    std::vector<std::string> parts;
    for (const auto& [name, t] : m) {
      parts.push_back(absl::StrCat(JsonQuote(name), ":{\"entries\":", t.entries, ",\"bytes\":", t.bytes, "}"));
    }
    return absl::StrCat("{", absl::StrJoin(parts, ","), "}");
  };
  return Emit(absl::StrCat("{\"cache_dir\":", JsonQuote(c->cache->options().cache_dir),
                           ",\"entries\":", s.entries, ",\"bytes\":", s.bytes, ",\"invalid\":", invalid,
                           ",\"hits\":", s.hits, ",\"misses\":", s.misses, ",\"compiles\":", s.compiles,
                           ",\"by_arch\":", group(by_arch), ",\"by_template\":", group(by_template), "}"),
              json);
}

absl::Status Explain(mlajit_cache* c, const char* key_a, const char* key_b, char** json) {
  MLAJIT_RETURN_IF_ERROR(CheckHandle(c, "mlajit_cache_explain_json"));
  MLAJIT_RETURN_IF_ERROR(CheckOut(json, "mlajit_cache_explain_json", "json"));
  MLAJIT_ASSIGN_OR_RETURN(auto a, ReadEntry(c, key_a, "mlajit_cache_explain_json", "key_a"));
  MLAJIT_ASSIGN_OR_RETURN(auto b, ReadEntry(c, key_b, "mlajit_cache_explain_json", "key_b"));
  jit::KeyExplanation x = jit::ExplainEntries(*a, *b);
  std::vector<std::string> fields, spec;
  for (const jit::FieldDifference& d : x.fields) {
    fields.push_back(absl::StrCat(
        "{\"name\":", JsonQuote(d.name), ",\"in_a\":", d.in_a ? "true" : "false",
        ",\"in_b\":", d.in_b ? "true" : "false", ",\"a\":", JsonQuote(d.a_preview),
        ",\"b\":", JsonQuote(d.b_preview), ",\"a_hash\":", JsonQuote(d.a_hash),
        ",\"b_hash\":", JsonQuote(d.b_hash), "}"));
  }
  for (const jit::SpecDifference& d : x.spec) {
    spec.push_back(absl::StrCat("{\"field\":", JsonQuote(d.field), ",\"a\":", JsonQuote(d.a),
                                ",\"b\":", JsonQuote(d.b), "}"));
  }
  return Emit(absl::StrCat("{\"a\":", JsonQuote(a->key.Hex()), ",\"b\":", JsonQuote(b->key.Hex()),
                           ",\"same_fields\":", x.same_fields, ",\"fields\":[", absl::StrJoin(fields, ","),
                           "],\"spec\":[", absl::StrJoin(spec, ","), "]}"),
              json);
}

absl::Status Prune(mlajit_cache* c, const mlajit_cache_prune_options_t* o, char** json) {
  constexpr const char* kFn = "mlajit_cache_prune_json";
  MLAJIT_RETURN_IF_ERROR(CheckHandle(c, kFn));
  if (o == nullptr) return absl::InvalidArgumentError(absl::StrCat(kFn, ": options=NULL: expected MLAJIT_CACHE_PRUNE_OPTIONS_INIT with a field set"));
  if (o->struct_size < sizeof(mlajit_cache_prune_options_t)) {
    return absl::InvalidArgumentError(absl::StrCat(kFn, ": options->struct_size=", o->struct_size, ": expected ",
                                                   sizeof(mlajit_cache_prune_options_t)));
  }
  if (o->max_bytes < -1 || o->older_than_s < -1) {
    return absl::InvalidArgumentError(absl::StrCat(kFn, ": max_bytes=", o->max_bytes, ", older_than_s=", o->older_than_s,
                                                   ": each must be >= 0, or -1 for off"));
  }
  if (o->max_bytes < 0 && o->older_than_s < 0 && !o->stale) {
    return absl::InvalidArgumentError(absl::StrCat(kFn, ": nothing to do: set max_bytes, older_than_s or stale"));
  }
  uint64_t stale = 0, old = 0, size = 0;
  if (o->stale) {
    MLAJIT_ASSIGN_OR_RETURN(stale, c->cache->PruneStale());
  }
  if (o->older_than_s >= 0) {
    MLAJIT_ASSIGN_OR_RETURN(old, c->cache->PruneOlderThan(o->older_than_s));
  }
  if (o->max_bytes >= 0) {
    MLAJIT_ASSIGN_OR_RETURN(size, c->cache->PruneToBytes(static_cast<uint64_t>(o->max_bytes)));
  }
  return Emit(absl::StrCat("{\"removed\":", stale + old + size, ",\"stale\":", stale,
                           ",\"older_than\":", old, ",\"max_bytes\":", size, "}"),
              json);
}

absl::Status Clear(mlajit_cache* c, uint64_t* removed) {
  MLAJIT_RETURN_IF_ERROR(CheckHandle(c, "mlajit_cache_clear"));
  MLAJIT_ASSIGN_OR_RETURN(uint64_t n, c->cache->Clear());
  if (removed != nullptr) *removed = n;
  return absl::OkStatus();
}

absl::Status Warm(mlajit_cache* c, const char* manifest, const char* arch, int jobs,
                  mlajit_warm_callback_t progress, void* user, char** summary_json) {
  constexpr const char* kFn = "mlajit_cache_warm";
  MLAJIT_RETURN_IF_ERROR(CheckHandle(c, kFn));
  if (summary_json != nullptr) *summary_json = nullptr;
  if (manifest == nullptr || manifest[0] == '\0') {
    return absl::InvalidArgumentError(absl::StrCat(kFn, ": manifest_path=", manifest == nullptr ? "NULL" : "\"\"",
                                                   ": expected the path of a manifest"));
  }
  jit::KernelCompiler* kc;
  {
    absl::MutexLock lock(&c->mu);
    if (c->compiler == nullptr) {
      MLAJIT_ASSIGN_OR_RETURN(c->compiler, jit::KernelCompiler::Create(c->cache));
    }
    kc = c->compiler.get();
  }
  jit::WarmProgressFn fn;
  if (progress != nullptr) {
    fn = [progress, user](const jit::WarmProgress& p) {
      std::string error(p.status.message());
      mlajit_warm_progress_t info{};
      info.struct_size = sizeof(info);
      info.done = p.done;
      info.total = p.total;
      info.compiled = p.compiled;
      info.failed = p.failed;
      info.elapsed_s = p.elapsed_s;
      info.spec_name = p.name.c_str();
      info.key_hex = p.key.c_str();
      info.status = static_cast<mlajit_status_t>(p.status.code());
      info.error = error.c_str();
      progress(&info, user);
    };
  }
  jit::WarmSummary sum;
  MLAJIT_RETURN_IF_ERROR(kc->WarmManifest(manifest, arch != nullptr ? arch : "", jobs, fn, &sum));
  return Emit(absl::StrCat("{\"total\":", sum.total, ",\"compiled\":", sum.compiled,
                           ",\"cached\":", sum.cached, ",\"failed\":", sum.failed,
                           ",\"elapsed_s\":", sum.elapsed_s, "}"),
              summary_json);
}

absl::Status CheckPath(const char* path, const char* fn, const char* name) {
  if (path == nullptr || path[0] == '\0') {
    return absl::InvalidArgumentError(absl::StrCat(fn, ": ", name, "=", path == nullptr ? "NULL" : "\"\"",
                                                   ": expected a file path"));
  }
  return absl::OkStatus();
}

// Where the autotuner keeps this cache's records: its directory, as for the
// runtime (Runtime::tuning_dir); "" for a memory-only cache.
std::string TuningDir(const cache::CacheOptions& o) {
  return o.memory_only ? std::string() : o.cache_dir;
}

// The lines of <dir>/tuning.jsonl that a TuningTable keeps when it rewrites the
// file (every well-formed record, of any library version), trimmed. Save
// replaces the file by a rename, so an unlocked read sees one whole version.
absl::StatusOr<std::vector<std::string>> TuningLinesToExport(const std::string& dir) {
  std::vector<std::string> lines;
  if (dir.empty()) return lines;
  std::string path;
  absl::StatusOr<std::vector<tune::TuningFileLine>> file = tune::ReadTuningFile(dir, &path);
  if (!file.ok()) {
    return absl::Status(file.status().code(),
                        absl::StrCat("tuning records ", path, ": ", file.status().message()));
  }
  for (const tune::TuningFileLine& l : *file) {
    const absl::string_view line = absl::StripAsciiWhitespace(l.text);
    if (line.empty()) continue;
    absl::StatusOr<tune::TuningRecord> r = tune::ParseJsonLine(line);
    if (!r.ok() || line.find('\r') != absl::string_view::npos) {
      MLAJIT_LOG_WARN(path, ":", l.number, ": malformed tuning record left out of the bundle: ",
                      r.ok() ? "a line break inside the line" : r.status().message());
      continue;
    }
    lines.emplace_back(line);
  }
  return lines;
}

// The records a verified bundle carries, all parsed before anything is
// installed: kDataLoss naming the first line that is not one.
absl::StatusOr<std::vector<tune::TuningRecord>> BundleTuningRecords(
    const cache::cache_internal::VerifiedBundle& b) {
  std::vector<tune::TuningRecord> records;
  const size_t n = b.tuning_lines.size();
  for (size_t i = 0; i < n; ++i) {
    absl::StatusOr<tune::TuningRecord> r = tune::ParseJsonLine(b.tuning_lines[i]);
    if (!r.ok()) {
      return absl::DataLossError(absl::StrCat(
          "bundle ", b.path, ": tuning line ", i + 1, " of ", n, " (line ", b.TuningLineNumber(i),
          " of the bundle) is not a tuning record, nothing installed: ", r.status().message()));
    }
    records.push_back(*std::move(r));
  }
  return records;
}

// Merges records into <dir>/tuning.jsonl through one TuningTable per library
// version: a table rewrites the lines of its own version (under tuning.lock,
// atomically, its records replacing those of the same class) and keeps the
// others as they are, so a record only ever replaces one of its own class and
// version, never a record this library uses with one it would ignore.
absl::Status MergeTuningRecords(const std::vector<tune::TuningRecord>& records,
                                const std::string& dir) {
  std::map<std::string, std::vector<const tune::TuningRecord*>> by_version;
  for (const tune::TuningRecord& r : records) by_version[r.library_version].push_back(&r);
  for (const auto& [version, group] : by_version) {
    tune::TuningTable table(version);
    for (const tune::TuningRecord* r : group) table.Put(*r);
    MLAJIT_RETURN_IF_ERROR(table.Save(dir));
  }
  return absl::OkStatus();
}

absl::Status Export(mlajit_cache* c, const char* bundle, const char* manifest, char** json) {
  constexpr const char* kFn = "mlajit_cache_export";
  MLAJIT_RETURN_IF_ERROR(CheckHandle(c, kFn));
  if (json != nullptr) *json = nullptr;
  MLAJIT_RETURN_IF_ERROR(CheckPath(bundle, kFn, "bundle_path"));
  if (manifest != nullptr) MLAJIT_RETURN_IF_ERROR(CheckPath(manifest, kFn, "manifest_path"));
  MLAJIT_ASSIGN_OR_RETURN(std::vector<std::string> tuning,
                          TuningLinesToExport(TuningDir(c->cache->options())));
  MLAJIT_ASSIGN_OR_RETURN(cache::cache_internal::BundleSummary sum,
                          cache::cache_internal::ExportBundle(
                              *c->cache, bundle, manifest != nullptr ? manifest : "", tuning));
  return Emit(absl::StrCat("{\"bundle\":", JsonQuote(bundle), ",\"entries\":", sum.entries,
                           ",\"bytes\":", sum.bytes, ",\"skipped\":", sum.skipped,
                           ",\"tuning_records\":", sum.tuning_lines, "}"),
              json);
}

absl::Status Import(mlajit_cache* c, const char* bundle, const char* pins_path, char** json) {
  constexpr const char* kFn = "mlajit_cache_import";
  namespace ci = cache::cache_internal;
  MLAJIT_RETURN_IF_ERROR(CheckHandle(c, kFn));
  if (json != nullptr) *json = nullptr;
  MLAJIT_RETURN_IF_ERROR(CheckPath(bundle, kFn, "bundle_path"));
  std::optional<ci::PinSet> pins;
  if (pins_path != nullptr) {
    MLAJIT_RETURN_IF_ERROR(CheckPath(pins_path, kFn, "expect_pins_path"));
    MLAJIT_ASSIGN_OR_RETURN(pins, ci::PinSet::Load(pins_path));
  }
  // Everything is checked before anything is installed: entries, then records.
  MLAJIT_ASSIGN_OR_RETURN(ci::VerifiedBundle b, ci::ReadBundle(bundle, pins ? &*pins : nullptr));
  MLAJIT_ASSIGN_OR_RETURN(std::vector<tune::TuningRecord> records, BundleTuningRecords(b));
  const std::string tuning_dir = TuningDir(c->cache->options());
  if (!records.empty() && tuning_dir.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(kFn, ": bundle ", bundle, " carries ", records.size(),
                     " tuning records and the cache is memory only: nothing installed"));
  }
  MLAJIT_ASSIGN_OR_RETURN(ci::BundleSummary sum, ci::InstallBundle(*c->cache, b));
  if (absl::Status s = MergeTuningRecords(records, tuning_dir); !s.ok()) {
    return absl::Status(
        s.code(), absl::StrCat("bundle ", bundle, ": ", sum.entries, " entries installed, but its ",
                               records.size(), " tuning records were not merged into ",
                               ci::JoinPath(tuning_dir, tune::kTuningFileName), ": ", s.message()));
  }
  return Emit(absl::StrCat("{\"bundle\":", JsonQuote(bundle), ",\"installed\":", sum.entries,
                           ",\"bytes\":", sum.bytes, ",\"tuning_records\":", records.size(), "}"),
              json);
}

}  // namespace
}  // namespace mlajit::api_internal

namespace api = mlajit::api_internal;

extern "C" {

mlajit_status_t mlajit_cache_open(const mlajit_cache_options_t* options, mlajit_cache_t* cache) {
  return api::ToC(api::Open(options, cache));
}

void mlajit_cache_close(mlajit_cache_t cache) { delete cache; }

mlajit_status_t mlajit_cache_list_json(mlajit_cache_t cache, char** json) {
  return api::ToC(api::List(cache, json));
}

mlajit_status_t mlajit_cache_show_json(mlajit_cache_t cache, const char* key_hex, char** json) {
  return api::ToC(api::Show(cache, key_hex, json));
}

mlajit_status_t mlajit_cache_verify_json(mlajit_cache_t cache, int* num_bad, char** json) {
  return api::ToC(api::Verify(cache, num_bad, json));
}

mlajit_status_t mlajit_cache_stats_json(mlajit_cache_t cache, char** json) {
  return api::ToC(api::Stats(cache, json));
}

mlajit_status_t mlajit_cache_tuning_json(mlajit_cache_t cache, char** json) {
  return api::ToC(api::Tuning(cache, json));
}

mlajit_status_t mlajit_cache_explain_json(mlajit_cache_t cache, const char* key_a,
                                          const char* key_b, char** json) {
  return api::ToC(api::Explain(cache, key_a, key_b, json));
}

mlajit_status_t mlajit_cache_prune_json(mlajit_cache_t cache,
                                        const mlajit_cache_prune_options_t* options, char** json) {
  return api::ToC(api::Prune(cache, options, json));
}

mlajit_status_t mlajit_cache_clear(mlajit_cache_t cache, uint64_t* removed) {
  return api::ToC(api::Clear(cache, removed));
}

mlajit_status_t mlajit_cache_warm(mlajit_cache_t cache, const char* manifest_path,
                                  const char* arch, int jobs, mlajit_warm_callback_t progress,
                                  void* user, char** summary_json) {
  return api::ToC(api::Warm(cache, manifest_path, arch, jobs, progress, user, summary_json));
}

mlajit_status_t mlajit_cache_export(mlajit_cache_t cache, const char* bundle_path,
                                    const char* manifest_path, char** summary_json) {
  return api::ToC(api::Export(cache, bundle_path, manifest_path, summary_json));
}

mlajit_status_t mlajit_cache_import(mlajit_cache_t cache, const char* bundle_path,
                                    const char* expect_pins_path, char** summary_json) {
  return api::ToC(api::Import(cache, bundle_path, expect_pins_path, summary_json));
}

}  // extern "C"
