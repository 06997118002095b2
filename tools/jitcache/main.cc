// jitcache: inspects, maintains and warms the mlajit kernel cache through the
// library's public C ABI only (libmlajit.so + mlajit.h).
//
//   jitcache warm --manifest cache/manifests/deepseek_v3.jsonl --arch sm_90a --jobs 8
//   jitcache --cache-dir /srv/kernels verify
//   jitcache stats --json
//   jitcache export --out kernels.bundle --manifest kernels.pins
//   jitcache --cache-dir /srv/kernels import kernels.bundle --expect-manifest kernels.pins
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "mlajit/mlajit.h"
#include "tools/jitcache/args.h"
#include "tools/jitcache/json_value.h"
#include "tools/jitcache/units.h"

namespace mlajit::tools {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

int UsageError(const std::string& message, const CommandSpec* command) {
  std::fprintf(stderr, "jitcache: %s\n", message.c_str());
  std::fprintf(stderr, "run 'jitcache %s--help' for usage\n",
               command != nullptr ? (std::string(command->name) + " ").c_str() : "");
  return kExitUsage;
}

int Failed(const char* command, mlajit_status_t status) {
  std::fprintf(stderr, "jitcache %s: %s (status %d)\n", command, mlajit_last_error(), static_cast<int>(status));
  return kExitFailed;
}

// Owns a string returned by the library.
struct LibString {
  char* p = nullptr;
  ~LibString() { mlajit_free(p); }
  std::string str() const { return p != nullptr ? p : ""; }
};

std::optional<JsonValue> ParseOrComplain(const LibString& s) {
  std::string error;
  std::optional<JsonValue> v = ParseJson(s.str(), &error);
  if (!v) std::fprintf(stderr, "jitcache: the library returned malformed JSON: %s\n", error.c_str());
  return v;
}

// "h16 q1 fp8_e4m3 a16 flat causal m64n64w8s2" from a spec object.
std::string SpecSummary(const JsonValue& s) {
  if (s.type() != JsonValue::Type::kObject) return s.str();
  std::string page = s["page_size"].integer() == 0 ? "flat" : "p" + s["page_size"].str();
  return "h" + s["num_heads"].str() + " q" + s["max_q_len"].str() + " " + s["kv_format"].str() +
         (s["q_mode"].str() == "fp8" ? " a8 " : " a16 ") + page +
         (s["causal"].boolean() ? " causal" : " noncausal") + (s["write_lse"].boolean() ? " lse" : "") +
         " m" + s["block_m"].str() + "n" + s["block_n"].str() + "w" + s["num_warps"].str() + "s" +
         s["num_stages"].str();
}

// Multi-line key values (the options, one per line) shown on one line.
std::string OneLine(std::string s) {
  for (char& c : s) {
    if (c == '\n') c = ' ';
  }
  return s;
}

// Expands a unique key prefix (>= 6 hex digits) to the full key.
bool ResolveKey(mlajit_cache_t cache, const std::string& text, std::string* key) {
  if (text.size() == 32 || text.size() < 6) {
    *key = text;  // the library validates it
    return true;
  }
  LibString json;
  if (mlajit_cache_list_json(cache, &json.p) != MLAJIT_STATUS_OK) return false;
  std::optional<JsonValue> v = ParseOrComplain(json);
  if (!v) return false;
  std::vector<std::string> matches;
  for (const JsonValue& e : (*v)["entries"].items()) {
    if (e["key"].str().rfind(text, 0) == 0) matches.push_back(e["key"].str());
  }
  if (matches.size() != 1) {
    std::fprintf(stderr, "jitcache: key prefix '%s' matches %zu entries; give more digits\n",
                 text.c_str(), matches.size());
    return false;
  }
  *key = matches[0];
  return true;
}

int List(mlajit_cache_t cache, const ParsedArgs& a) {
  LibString json;
  if (mlajit_status_t s = mlajit_cache_list_json(cache, &json.p); s != MLAJIT_STATUS_OK) return Failed("list", s);
  if (a.json) return std::printf("%s\n", json.p), kExitOk;
  std::optional<JsonValue> v = ParseOrComplain(json);
  if (!v) return kExitFailed;
  const auto& entries = (*v)["entries"].items();
  if (entries.empty()) {
    std::printf("no entries in %s\n", (*v)["cache_dir"].str().c_str());
    return kExitOk;
  }
  std::printf("%-32s  %-12s %-8s %9s  %-16s  %s\n", "KEY", "TEMPLATE", "ARCH", "SIZE", "LAST USE", "SPEC");
  for (const JsonValue& e : entries) {
    std::string spec = e["valid"].boolean() ? SpecSummary(e["spec"]) : "INVALID: " + e["problem"].str();
    std::printf("%-32s  %-12s %-8s %9s  %-16s  %s\n", e["key"].str().c_str(), e["template"].str().c_str(),
                e["arch"].str().c_str(), FormatBytes(e["bytes"].integer()).c_str(),
                FormatUnixTime(e["last_use_unix_s"].integer()).c_str(), spec.c_str());
  }
  return kExitOk;
}

int Show(mlajit_cache_t cache, const ParsedArgs& a) {
  std::string key;
  if (!ResolveKey(cache, a.positional[0], &key)) return kExitFailed;
  LibString json;
  if (mlajit_status_t s = mlajit_cache_show_json(cache, key.c_str(), &json.p); s != MLAJIT_STATUS_OK) {
    return Failed("show", s);
  }
  if (a.json) return std::printf("%s\n", json.p), kExitOk;
  std::optional<JsonValue> v = ParseOrComplain(json);
  if (!v) return kExitFailed;
  const JsonValue& e = *v;
  std::printf("key              %s\n", e["key"].str().c_str());
  std::printf("file             %s\n", e["path"].str().c_str());
  std::printf("template         %s (entry point %s)\n", e["template"].str().c_str(), e["entry_point"].str().c_str());
  std::printf("arch             %s\n", e["arch"].str().c_str());
  std::printf("spec             %s\n", SpecSummary(e["spec"]).c_str());
  std::printf("compiler         %s\n", e["compiler"].str().c_str());
  std::printf("library version  %s\n", e["library_version"].str().c_str());
  std::printf("compile time     %.0f ms\n", e["compile_ms"].number());
  std::printf("binary           %s\n", FormatBytes(e["payload_bytes"].integer()).c_str());
  if (e.has("functions_error")) {
    std::printf("functions        unreadable: %s\n", e["functions_error"].str().c_str());
  } else {
    std::printf("functions (bytes of code):\n");
    for (const JsonValue& f : e["functions"].items()) {
      std::printf("  %-48s %9lld\n", f["name"].str().c_str(),
                  static_cast<long long>(f["code_bytes"].integer()));
    }
  }
  std::printf("key fields:\n");
  for (const JsonValue& f : e["fields"].items()) {
    std::printf("  %-32s %s  %s\n", f["name"].str().c_str(), f["hash"].str().c_str(),
                OneLine(f["value"].str()).c_str());
  }
  return kExitOk;
}

int Verify(mlajit_cache_t cache, const ParsedArgs& a) {
  LibString json;
  int bad = 0;
  if (mlajit_status_t s = mlajit_cache_verify_json(cache, &bad, &json.p); s != MLAJIT_STATUS_OK) {
    return Failed("verify", s);
  }
  if (a.json) {
    std::printf("%s\n", json.p);
    return bad == 0 ? kExitOk : kExitFailed;
  }
  std::optional<JsonValue> v = ParseOrComplain(json);
  if (!v) return kExitFailed;
  for (const JsonValue& e : (*v)["bad"].items()) {
    std::printf("bad entry %s (%s): %s\n", e["key"].str().c_str(), e["path"].str().c_str(),
                e["problem"].str().c_str());
  }
  std::printf("%lld entries checked, %d bad\n", static_cast<long long>((*v)["checked"].integer()), bad);
  return bad == 0 ? kExitOk : kExitFailed;
}

int Tuning(mlajit_cache_t cache, const ParsedArgs& a) {
  LibString json;
  if (mlajit_status_t s = mlajit_cache_tuning_json(cache, &json.p); s != MLAJIT_STATUS_OK) {
    return Failed("tuning", s);
  }
  if (a.json) return std::printf("%s\n", json.p), kExitOk;
  std::optional<JsonValue> v = ParseOrComplain(json);
  if (!v) return kExitFailed;
  const auto& records = (*v)["records"].items();
  if (records.empty()) {
    std::printf("no tuning records\n");
  } else {
    std::printf("%-58s  %-26s %9s %9s %5s  %s\n", "CLASS", "SHAPE", "TUNED_US", "DEFAULT", "TRIED",
                "VERSION");
  }
  for (const JsonValue& r : records) {
    std::printf("%-58s  %-26s %9.2f %9.2f %5lld  %s%s\n", r["class"].str().c_str(),
                r["shape"].str().c_str(), r["median_ns"].integer() / 1000.0,
                r["default_ns"].integer() / 1000.0, static_cast<long long>(r["candidates"].integer()),
                r["library_version"].str().c_str(), r["current"].boolean() ? "" : " (stale)");
  }
  if ((*v)["malformed"].integer() > 0) {
    std::printf("%lld malformed lines skipped\n", static_cast<long long>((*v)["malformed"].integer()));
  }
  return kExitOk;
}

int Stats(mlajit_cache_t cache, const ParsedArgs& a) {
  LibString json;
  if (mlajit_status_t s = mlajit_cache_stats_json(cache, &json.p); s != MLAJIT_STATUS_OK) return Failed("stats", s);
  if (a.json) return std::printf("%s\n", json.p), kExitOk;
  std::optional<JsonValue> v = ParseOrComplain(json);
  if (!v) return kExitFailed;
  const JsonValue& s = *v;
  std::printf("cache dir  %s\n", s["cache_dir"].str().c_str());
  std::printf("entries    %lld (%lld invalid)\n", static_cast<long long>(s["entries"].integer()),
              static_cast<long long>(s["invalid"].integer()));
  std::printf("size       %s\n", FormatBytes(s["bytes"].integer()).c_str());
  std::printf("hits       %lld\nmisses     %lld\ncompiles   %lld\n", static_cast<long long>(s["hits"].integer()),
              static_cast<long long>(s["misses"].integer()), static_cast<long long>(s["compiles"].integer()));
  for (const char* group : {"by_arch", "by_template"}) {
    std::printf("%s:\n", group[3] == 'a' ? "by arch" : "by template");
    for (const auto& [name, t] : s[group].members()) {
      std::printf("  %-14s %6lld entries  %10s\n", name.c_str(), static_cast<long long>(t["entries"].integer()),
                  FormatBytes(t["bytes"].integer()).c_str());
    }
  }
  return kExitOk;
}

int Prune(mlajit_cache_t cache, const ParsedArgs& a) {
  const CommandSpec* cmd = a.command;
  mlajit_cache_prune_options_t o = MLAJIT_CACHE_PRUNE_OPTIONS_INIT;
  if (auto it = a.values.find("--max-bytes"); it != a.values.end()) {
    std::optional<uint64_t> b = ParseBytes(it->second);
    if (!b || *b > static_cast<uint64_t>(INT64_MAX)) {
      return UsageError("--max-bytes=" + it->second + ": expected a size such as 1073741824, 500M or 2G", cmd);
    }
    o.max_bytes = static_cast<int64_t>(*b);
  }
  if (auto it = a.values.find("--older-than"); it != a.values.end()) {
    std::optional<int64_t> d = ParseDuration(it->second);
    if (!d) return UsageError("--older-than=" + it->second + ": expected a duration such as 3600, 90m, 12h or 7d", cmd);
    o.older_than_s = *d;
  }
  o.stale = a.switches.count("--stale") ? 1 : 0;
  if (o.max_bytes < 0 && o.older_than_s < 0 && !o.stale) {
    return UsageError("prune needs --max-bytes, --older-than or --stale", cmd);
  }
  LibString json;
  if (mlajit_status_t s = mlajit_cache_prune_json(cache, &o, &json.p); s != MLAJIT_STATUS_OK) return Failed("prune", s);
  if (a.json) return std::printf("%s\n", json.p), kExitOk;
  std::optional<JsonValue> v = ParseOrComplain(json);
  if (!v) return kExitFailed;
  std::printf("removed %lld entries (stale %lld, unused too long %lld, over the size cap %lld)\n",
              static_cast<long long>((*v)["removed"].integer()), static_cast<long long>((*v)["stale"].integer()),
              static_cast<long long>((*v)["older_than"].integer()),
              static_cast<long long>((*v)["max_bytes"].integer()));
  return kExitOk;
}

int Clear(mlajit_cache_t cache, const ParsedArgs& a) {
  uint64_t removed = 0;
  if (mlajit_status_t s = mlajit_cache_clear(cache, &removed); s != MLAJIT_STATUS_OK) return Failed("clear", s);
  if (a.json) {
    std::printf("{\"removed\":%llu}\n", static_cast<unsigned long long>(removed));
  } else {
    std::printf("removed %llu entries\n", static_cast<unsigned long long>(removed));
  }
  return kExitOk;
}

struct WarmDisplay {
  bool tty = false;
  bool line_open = false;  // a \r progress line is on screen
};

void OnWarmProgress(const mlajit_warm_progress_t* p, void* user) {
  auto* d = static_cast<WarmDisplay*>(user);
  double rate = p->elapsed_s > 0 ? p->done / p->elapsed_s : 0;
  std::string eta = rate > 0 ? FormatSeconds((p->total - p->done) / rate) : "?";
  if (p->status != MLAJIT_STATUS_OK) {
    if (d->line_open) std::fputs("\r\033[K", stderr);
    std::fprintf(stderr, "[%d/%d] FAILED %s: %s\n", p->done, p->total, p->spec_name, p->error);
    d->line_open = false;
  }
  if (d->tty) {
    std::fprintf(stderr, "\r\033[K[%d/%d] %3d%%  %.2f specs/s  ETA %s  %s", p->done, p->total,
                 p->total > 0 ? 100 * p->done / p->total : 100, rate, eta.c_str(), p->spec_name);
    d->line_open = true;
    if (p->done == p->total) {
      std::fputs("\n", stderr);
      d->line_open = false;
    }
  } else if (p->status == MLAJIT_STATUS_OK) {
    std::fprintf(stderr, "[%d/%d] %s %s (%.2f specs/s, ETA %s)\n", p->done, p->total, p->spec_name,
                 p->key_hex, rate, eta.c_str());
  }
  std::fflush(stderr);
}

// The folder of this executable ("" when /proc/self/exe cannot be read).
std::string ExecutableDir() {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return "";
  path[n] = '\0';
  std::string dir(path);
  const size_t slash = dir.rfind('/');
  return slash == std::string::npos ? "" : dir.substr(0, slash);
}

std::string DefaultManifest() {
  const std::string exe_dir = ExecutableDir();
  std::vector<std::string> candidates;
  if (!exe_dir.empty()) candidates.push_back(exe_dir + "/" + MLAJIT_RELATIVE_MANIFEST);
  candidates.push_back(MLAJIT_INSTALLED_MANIFEST);
  candidates.push_back(MLAJIT_SOURCE_MANIFEST);
  for (const std::string& candidate : candidates) {
    if (access(candidate.c_str(), R_OK) != 0) continue;
    // Canonical, so messages name <prefix>/share/... rather than bin/../share.
    char resolved[PATH_MAX];
    return realpath(candidate.c_str(), resolved) != nullptr ? std::string(resolved) : candidate;
  }
  return candidates.front();
}

int Warm(mlajit_cache_t cache, const ParsedArgs& a) {
  std::string manifest = a.values.count("--manifest") ? a.values.at("--manifest") : DefaultManifest();
  std::string arch = a.values.count("--arch") ? a.values.at("--arch") : "";
  int jobs = 0;
  if (auto it = a.values.find("--jobs"); it != a.values.end()) {
    char* end = nullptr;
    long n = std::strtol(it->second.c_str(), &end, 10);
    if (it->second.empty() || *end != '\0' || n < 1 || n > 1024) {
      return UsageError("--jobs=" + it->second + ": expected a whole number in 1..1024", a.command);
    }
    jobs = static_cast<int>(n);
  }
  WarmDisplay display;
  display.tty = isatty(fileno(stderr)) != 0;
  LibString json;
  mlajit_status_t s = mlajit_cache_warm(cache, manifest.c_str(), arch.c_str(), jobs, OnWarmProgress,
                                        &display, &json.p);
  if (display.line_open) std::fputs("\n", stderr);
  if (s != MLAJIT_STATUS_OK) return Failed("warm", s);
  if (a.json) return std::printf("%s\n", json.p), kExitOk;
  std::optional<JsonValue> v = ParseOrComplain(json);
  if (!v) return kExitFailed;
  std::printf("warmed %lld specs from %s: %lld compiled, %lld already cached, in %s\n",
              static_cast<long long>((*v)["total"].integer()), manifest.c_str(),
              static_cast<long long>((*v)["compiled"].integer()), static_cast<long long>((*v)["cached"].integer()),
              FormatSeconds((*v)["elapsed_s"].number()).c_str());
  return kExitOk;
}

int Explain(mlajit_cache_t cache, const ParsedArgs& a) {
  std::string ka, kb;
  if (!ResolveKey(cache, a.positional[0], &ka) || !ResolveKey(cache, a.positional[1], &kb)) return kExitFailed;
  LibString json;
  if (mlajit_status_t s = mlajit_cache_explain_json(cache, ka.c_str(), kb.c_str(), &json.p); s != MLAJIT_STATUS_OK) {
    return Failed("explain", s);
  }
  if (a.json) return std::printf("%s\n", json.p), kExitOk;
  std::optional<JsonValue> v = ParseOrComplain(json);
  if (!v) return kExitFailed;
  const auto& fields = (*v)["fields"].items();
  std::printf("a  %s\nb  %s\n", (*v)["a"].str().c_str(), (*v)["b"].str().c_str());
  if (fields.empty()) {
    std::printf("all %lld key fields are equal\n", static_cast<long long>((*v)["same_fields"].integer()));
  } else {
    std::printf("key fields that differ (%zu; %lld equal):\n", fields.size(),
                static_cast<long long>((*v)["same_fields"].integer()));
    for (const JsonValue& f : fields) {
      std::string av = f["in_a"].boolean() ? OneLine(f["a"].str()) + " [" + f["a_hash"].str() + "]" : "(absent)";
      std::string bv = f["in_b"].boolean() ? OneLine(f["b"].str()) + " [" + f["b_hash"].str() + "]" : "(absent)";
      std::printf("  %-32s a: %s\n  %-32s b: %s\n", f["name"].str().c_str(), av.c_str(), "", bv.c_str());
    }
  }
  const auto& spec = (*v)["spec"].items();
  if (!spec.empty()) {
    std::printf("spec fields that differ:\n");
    for (const JsonValue& d : spec) {
      std::printf("  %-14s %s -> %s\n", d["field"].str().c_str(), d["a"].str().c_str(), d["b"].str().c_str());
    }
  }
  return kExitOk;
}

// " and N tuning records" when a bundle carries any, else "".
std::string TuningRecordsNote(long long n) {
  if (n <= 0) return "";
  return " and " + std::to_string(n) + (n == 1 ? " tuning record" : " tuning records");
}

int Export(mlajit_cache_t cache, const ParsedArgs& a) {
  const std::string out = a.values.at("--out");
  auto m = a.values.find("--manifest");
  LibString json;
  if (mlajit_status_t s = mlajit_cache_export(cache, out.c_str(), m != a.values.end() ? m->second.c_str() : nullptr,
                                              &json.p);
      s != MLAJIT_STATUS_OK) {
    return Failed("export", s);
  }
  if (a.json) return std::printf("%s\n", json.p), kExitOk;
  std::optional<JsonValue> v = ParseOrComplain(json);
  if (!v) return kExitFailed;
  std::printf("exported %lld entries (%s)%s to %s",
              static_cast<long long>((*v)["entries"].integer()),
              FormatBytes((*v)["bytes"].integer()).c_str(),
              TuningRecordsNote((*v)["tuning_records"].integer()).c_str(), out.c_str());
  if (m != a.values.end()) std::printf(", manifest %s", m->second.c_str());
  std::printf("\n");
  if ((*v)["skipped"].integer() > 0) {
    std::fprintf(stderr, "jitcache export: %lld invalid entries left out (see jitcache verify)\n",
                 static_cast<long long>((*v)["skipped"].integer()));
  }
  return kExitOk;
}

int Import(mlajit_cache_t cache, const ParsedArgs& a) {
  const std::string& bundle = a.positional[0];
  auto pins = a.values.find("--expect-manifest");
  LibString json;
  if (mlajit_status_t s = mlajit_cache_import(cache, bundle.c_str(),
                                              pins != a.values.end() ? pins->second.c_str() : nullptr, &json.p);
      s != MLAJIT_STATUS_OK) {
    return Failed("import", s);
  }
  if (a.json) return std::printf("%s\n", json.p), kExitOk;
  std::optional<JsonValue> v = ParseOrComplain(json);
  if (!v) return kExitFailed;
  std::printf("installed %lld entries (%s)%s from %s%s\n",
              static_cast<long long>((*v)["installed"].integer()),
              FormatBytes((*v)["bytes"].integer()).c_str(),
              TuningRecordsNote((*v)["tuning_records"].integer()).c_str(), bundle.c_str(),
              pins != a.values.end() ? ", every entry pinned" : "");
  return kExitOk;
}

int Run(int argc, char** argv) {
  ParsedArgs a;
  std::string error;
  if (!ParseArgs(argc, argv, &a, &error)) return UsageError(error, a.command);
  if (a.help) {
    std::fputs(a.command != nullptr ? CommandHelp(*a.command).c_str() : GeneralHelp().c_str(), stdout);
    return kExitOk;
  }
  // Usage errors first: they should not depend on the state of the cache.
  if (a.command == FindCommand("prune") && a.values.empty() && a.switches.empty()) {
    return UsageError("prune needs --max-bytes, --older-than or --stale", a.command);
  }
  if (a.command == FindCommand("export") && !a.values.count("--out")) {
    return UsageError("export needs --out BUNDLE", a.command);
  }
  mlajit_cache_options_t o = MLAJIT_CACHE_OPTIONS_INIT;
  if (a.cache_dir) o.cache_dir = a.cache_dir->c_str();
  mlajit_cache_t cache = nullptr;
  if (mlajit_status_t s = mlajit_cache_open(&o, &cache); s != MLAJIT_STATUS_OK) return Failed(a.command->name, s);
  std::unique_ptr<mlajit_cache, void (*)(mlajit_cache_t)> guard(cache, mlajit_cache_close);
  const std::string cmd = a.command->name;
  if (cmd == "list") return List(cache, a);
  if (cmd == "show") return Show(cache, a);
  if (cmd == "verify") return Verify(cache, a);
  if (cmd == "stats") return Stats(cache, a);
  if (cmd == "tuning") return Tuning(cache, a);
  if (cmd == "prune") return Prune(cache, a);
  if (cmd == "clear") return Clear(cache, a);
  if (cmd == "warm") return Warm(cache, a);
  if (cmd == "export") return Export(cache, a);
  if (cmd == "import") return Import(cache, a);
  return Explain(cache, a);
}

}  // namespace
}  // namespace mlajit::tools

int main(int argc, char** argv) { return mlajit::tools::Run(argc, argv); }
