// Command-line parsing for jitcache: global options anywhere on the line, one
// command, its own options (--name VALUE or --name=VALUE) and positionals.
//
//   ParsedArgs a;
//   std::string err;
//   if (!ParseArgs(argc, argv, &a, &err)) { Usage(err); return 2; }
#ifndef MLAJIT_TOOLS_JITCACHE_ARGS_H_
#define MLAJIT_TOOLS_JITCACHE_ARGS_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mlajit::tools {

struct CommandSpec {
  const char* name;
  const char* synopsis;    // "prune (--max-bytes N | --older-than DURATION | --stale)"
  const char* help;        // paragraphs after the synopsis
  std::vector<std::string> value_flags;  // take a value: "--manifest"
  std::vector<std::string> bool_flags;   // switches: "--stale"
  int min_positional, max_positional;
};

const std::vector<CommandSpec>& Commands();
const CommandSpec* FindCommand(const std::string& name);

struct ParsedArgs {
  const CommandSpec* command = nullptr;  // null with --help and no command
  std::optional<std::string> cache_dir;
  bool json = false;
  bool help = false;
  std::map<std::string, std::string> values;  // "--manifest" -> "m.jsonl"
  std::map<std::string, bool> switches;
  std::vector<std::string> positional;
};

// False with a message naming the offending argument (a usage error, exit 2).
bool ParseArgs(int argc, char** argv, ParsedArgs* out, std::string* error);

std::string GeneralHelp();
std::string CommandHelp(const CommandSpec& c);

}  // namespace mlajit::tools

#endif  // MLAJIT_TOOLS_JITCACHE_ARGS_H_
