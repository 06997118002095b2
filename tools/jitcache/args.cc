#include "tools/jitcache/args.h"

#include <algorithm>

namespace mlajit::tools {

const std::vector<CommandSpec>& Commands() {
  static const auto* commands = new std::vector<CommandSpec>{
      {"list", "list", "Lists every entry: key, template, arch, size, last use and spec.\n", {}, {}, 0, 0},
      {"show", "show KEY",
       "Shows one entry with its metadata and key fields. KEY is 32 hex digits or a\n"
       "unique prefix of at least 6.\n",
       {}, {}, 1, 1},
      {"verify", "verify",
       "Reads every entry and checks its format, checksum and key. Exits 1 and names\n"
       "each bad entry if there is one (the library treats them as misses).\n",
       {}, {}, 0, 0},
      {"stats", "stats", "Entries, bytes, hits, misses and compiles, by arch and by template.\n", {}, {}, 0, 0},
      {"tuning", "tuning",
       "Lists the autotuner's records (mlajit_tune): batch class, chosen tile shape,\n"
       "its time and the default shape's. Records of other library versions are\n"
       "marked stale: plans do not use them.\n",
       {}, {}, 0, 0},
      {"prune", "prune (--max-bytes N | --older-than DURATION | --stale)...",
       "Removes entries: --stale those of other cache formats or library versions and\n"
       "invalid files; --older-than those unused for DURATION (e.g. 90m, 12h, 7d, 2w);\n"
       "--max-bytes the least recently used until the cache holds at most N bytes\n"
       "(suffixes K, M, G, T in powers of 1024, e.g. 500M). Applied in that order.\n",
       {"--max-bytes", "--older-than"}, {"--stale"}, 0, 0},
      {"clear", "clear", "Removes every entry.\n", {}, {}, 0, 0},
      {"warm", "warm [--manifest FILE] [--arch ARCH] [--jobs N]",
       "Compiles every kernel spec of a manifest into the cache; needs no GPU.\n"
       "--manifest defaults to the DeepSeek-V3 manifest shipped with mlajit; --arch\n"
       "overrides each spec's target (sm_80, sm_86, sm_89, sm_90, sm_90a, sm_100a,\n"
       "gfx90a, gfx908, gfx942, gfx950); --jobs sets compile threads (default: cores).\n"
       "Progress goes to stderr: one updating line on a terminal, else a line per spec.\n",
       {"--manifest", "--arch", "--jobs"}, {}, 0, 0},
      {"export", "export --out BUNDLE [--manifest FILE]",
       "Packs every valid entry into one bundle file: a manifest of (key, payload\n"
       "SHA-256, entry size, spec) lines, the autotuner's records (tuning.jsonl), then\n"
       "the entries. --manifest also writes the manifest alone, which is a pins file\n"
       "(MLAJIT_CACHE_PINS, import --expect-manifest). Invalid entries are left out\n"
       "and counted.\n",
       {"--out", "--manifest"}, {}, 0, 0},
      {"import", "import BUNDLE [--expect-manifest PINS]",
       "Checks every entry of a bundle (format, checksums, the key and SHA-256 its\n"
       "manifest line names, and with --expect-manifest that the key and digest are\n"
       "listed in PINS) and every tuning record it carries, then installs the entries\n"
       "into the cache and merges the records into its tuning.jsonl (a bundle's\n"
       "record replaces one of the same class). One bad entry or record installs\n"
       "nothing and is named; exit 1.\n",
       {"--expect-manifest"}, {}, 1, 1},
      {"explain", "explain KEY_A KEY_B",
       "Says which key fields (source, header:NAME, options, compiler, arch, ...) and\n"
       "which spec fields differ between two entries.\n",
       {}, {}, 2, 2},
  };
  return *commands;
}

const CommandSpec* FindCommand(const std::string& name) {
  for (const CommandSpec& c : Commands()) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

std::string GeneralHelp() {
  std::string s =
      "usage: jitcache [--cache-dir DIR] [--json] COMMAND [ARGS]\n\n"
      "Inspects, maintains and warms the mlajit kernel cache.\n\n"
      "commands:\n";
  for (const CommandSpec& c : Commands()) s += "  " + std::string(c.synopsis) + "\n";
  s +=
      "\noptions (anywhere on the line):\n"
      "  --cache-dir DIR  the cache to use (default: $MLAJIT_CACHE_DIR, else\n"
      "                   $XDG_CACHE_HOME/mlajit, else ~/.cache/mlajit)\n"
      "  --json           print the library's JSON instead of text, for scripts\n"
      "  --help, -h       this text; `jitcache COMMAND --help` for a command\n\n"
      "exit status: 0 success, 1 the operation failed or verify found bad entries,\n"
      "2 usage error.\n";
  return s;
}

std::string CommandHelp(const CommandSpec& c) {
  return "usage: jitcache [--cache-dir DIR] [--json] " + std::string(c.synopsis) + "\n\n" + c.help;
}

bool ParseArgs(int argc, char** argv, ParsedArgs* out, std::string* error) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto contains = [](const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  bool only_positional = false;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    if (only_positional || a.size() < 2 || a[0] != '-') {
      if (out->command == nullptr) {
        out->command = FindCommand(a);
        if (out->command == nullptr) {
          *error = "unknown command '" + a + "'; expected one of list, show, verify, stats, tuning, prune, clear, warm, export, import, explain";
          return false;
        }
      } else {
        out->positional.push_back(a);
      }
      continue;
    }
    if (a == "--") {
      only_positional = true;
      continue;
    }
    std::string value;
    bool has_value = false;
    size_t eq = a.find('=');
    if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
      has_value = true;
    }
    auto take_value = [&](std::string* v) {
      if (has_value) {
        *v = value;
        return true;
      }
      if (i + 1 >= args.size()) {
        *error = "option " + a + " needs a value";
        return false;
      }
      *v = args[++i];
      return true;
    };
    if (a == "--help" || a == "-h") {
      out->help = true;
    } else if (a == "--json") {
      out->json = true;
    } else if (a == "--cache-dir") {
      std::string v;
      if (!take_value(&v)) return false;
      if (v.empty()) {
        *error = "--cache-dir='': expected a folder";
        return false;
      }
      out->cache_dir = v;
    } else if (out->command != nullptr && contains(out->command->value_flags, a)) {
      std::string v;
      if (!take_value(&v)) return false;
      if (out->values.count(a)) {
        *error = "option " + a + " given twice";
        return false;
      }
      out->values[a] = v;
    } else if (out->command != nullptr && contains(out->command->bool_flags, a)) {
      if (has_value) {
        *error = "option " + a + " takes no value";
        return false;
      }
      out->switches[a] = true;
    } else {
      *error = out->command != nullptr
                   ? "unknown option " + a + " for '" + out->command->name + "'"
                   : "unknown option " + a + " (command options follow the command)";
      return false;
    }
  }
  if (out->help) return true;
  if (out->command == nullptr) {
    *error = "no command given";
    return false;
  }
  int n = static_cast<int>(out->positional.size());
  if (n < out->command->min_positional || n > out->command->max_positional) {
    *error = "'" + std::string(out->command->name) + "' takes " +
             (out->command->max_positional == 0
                  ? std::string("no arguments")
                  : std::to_string(out->command->max_positional) + " argument(s)") +
             ", got " + std::to_string(n);
    return false;
  }
  return true;
}

}  // namespace mlajit::tools
