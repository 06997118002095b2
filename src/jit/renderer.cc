#include "src/jit/renderer.h"

#include <deque>
#include <map>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/base/status_macros.h"

namespace mlajit::jit {
namespace {

bool IsNameChar(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; }

bool IsValidName(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!IsNameChar(c)) return false;
  }
  return true;
}

absl::Status CheckBindings(const Bindings& bindings) {
  absl::flat_hash_map<std::string, int> seen;
  for (const auto& [name, value] : bindings) {
    if (!IsValidName(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("binding name \"", absl::CEscape(name), "\": must match [a-z0-9_]+"));
    }
    if (!seen.emplace(name, 0).second) {
      return absl::InvalidArgumentError(absl::StrCat("binding \"", name, "\" is given twice"));
    }
    if (absl::StrContains(value, "\n")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "binding \"", name, "\"=\"", absl::CEscape(value), "\": must be a single line"));
    }
  }
  return absl::OkStatus();
}

std::string BindingNames(const Bindings& bindings) {
  std::vector<std::string> names;
  for (const auto& b : bindings) names.push_back(b.first);
  return absl::StrJoin(names, ", ");
}

// The quoted path of an `#include "..."` line, or empty.
absl::string_view QuotedInclude(absl::string_view line) {
  line = absl::StripLeadingAsciiWhitespace(line);
  if (!absl::ConsumePrefix(&line, "#")) return {};
  line = absl::StripLeadingAsciiWhitespace(line);
  if (!absl::ConsumePrefix(&line, "include")) return {};
  line = absl::StripLeadingAsciiWhitespace(line);
  if (!absl::ConsumePrefix(&line, "\"")) return {};
  size_t end = line.find('"');
  if (end == absl::string_view::npos) return {};
  return line.substr(0, end);
}

std::string DirName(absl::string_view path) {
  size_t slash = path.rfind('/');
  return slash == absl::string_view::npos ? "" : std::string(path.substr(0, slash + 1));
}

}  // namespace

absl::StatusOr<std::string> SubstitutePlaceholders(absl::string_view text,
                                                   absl::string_view file_name,
                                                   const Bindings& bindings) {
  MLAJIT_RETURN_IF_ERROR(CheckBindings(bindings));
  std::string out;
  out.reserve(text.size() + 256);
  int line = 1;
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if (c == '\n') ++line;
    if (c != '{' || i + 1 >= text.size() || text[i + 1] != '{') {
      out.push_back(c);
      ++i;
      continue;
    }
    // A placeholder must open, name and close on one line.
    size_t j = i + 2;
    while (j < text.size() && text[j] == ' ') ++j;
    size_t name_start = j;
    while (j < text.size() && IsNameChar(text[j])) ++j;
    absl::string_view name = text.substr(name_start, j - name_start);
    while (j < text.size() && text[j] == ' ') ++j;
    bool closed = j + 1 < text.size() && text[j] == '}' && text[j + 1] == '}';
    if (name.empty() || !closed) {
      size_t eol = text.find('\n', i);
      absl::string_view snippet = text.substr(i, std::min<size_t>(eol - i, 40));
      return absl::InternalError(absl::StrCat(
          "template ", file_name, " line ", line, ": malformed placeholder at \"",
          absl::CEscape(snippet), "\": expected {{name}} with name in [a-z0-9_]+ "
          "(write \"{ {\" for nested braces)"));
    }
    const std::pair<std::string, std::string>* binding = nullptr;
    for (const auto& b : bindings) {
      if (b.first == name) binding = &b;
    }
    if (binding == nullptr) {
      return absl::InternalError(absl::StrCat("template ", file_name, " line ", line,
                                              ": unknown placeholder {{", name,
                                              "}}; bound names: ", BindingNames(bindings)));
    }
    if (binding->second.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("template ", file_name, " line ", line,
                                                     ": placeholder {{", name,
                                                     "}} is unbound (its binding is empty)"));
    }
    out += binding->second;
    i = j + 2;
  }
  return out;
}

absl::StatusOr<RenderedSource> RenderTemplate(const TemplateStore& store,
                                              absl::string_view template_name,
                                              const Bindings& bindings) {
  RenderedSource r;
  r.template_name = std::string(template_name);
  r.program_name = absl::StrCat(template_name, ".cu");
  const std::string file = absl::StrCat(template_name, kTemplateSuffix);
  absl::StatusOr<std::string> text = store.Read(file);
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("template_name=\"", template_name, "\": no ", file, " in ", store.Describe(),
                     "; available: ", absl::StrJoin(store.TemplateNames(), ", ")));
  }
  MLAJIT_ASSIGN_OR_RETURN(r.source, SubstitutePlaceholders(*text, file, bindings));

  // Breadth-first over includes. `resolved` maps an include name to the tree
  // path it stands for: the compiler sees one header per name, so one name must
  // not mean two files.
  std::map<std::string, std::string> resolved;
  struct Pending {
    std::string path;      // tree path of the file to scan
    std::string contents;
  };
  std::deque<Pending> queue;
  queue.push_back({file, r.source});
  while (!queue.empty()) {
    Pending p = std::move(queue.front());
    queue.pop_front();
    int line_no = 0;
    for (absl::string_view line : absl::StrSplit(p.contents, '\n')) {
      ++line_no;
      absl::string_view name = QuotedInclude(line);
      if (name.empty()) continue;
      std::vector<std::string> candidates;
      std::string dir = DirName(p.path);
      if (!dir.empty()) candidates.push_back(absl::StrCat(dir, name));
      candidates.emplace_back(name);
      std::string found_path;
      absl::StatusOr<std::string> contents = absl::NotFoundError("");
      for (const std::string& c : candidates) {
        contents = store.Read(c);
        if (contents.ok()) {
          found_path = c;
          break;
        }
      }
      if (!contents.ok()) {
        if (absl::EndsWith(name, ".cuh")) {
          return absl::InternalError(absl::StrCat("template ", p.path, " line ", line_no,
                                                  ": #include \"", name, "\" is not in ",
                                                  store.Describe()));
        }
        continue;  // a toolkit header: the compiler's own include path finds it
      }
      auto [it, inserted] = resolved.emplace(std::string(name), found_path);
      if (!inserted) {
        if (it->second != found_path) {
          return absl::InternalError(absl::StrCat(
              "template ", p.path, " line ", line_no, ": #include \"", name, "\" means ",
              found_path, " here but ", it->second, " elsewhere; include it by its tree path"));
        }
        continue;
      }
      r.headers.push_back({std::string(name), *contents});
      queue.push_back({found_path, *std::move(contents)});
    }
  }
  return r;
}

}  // namespace mlajit::jit
