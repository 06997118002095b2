// Fuzzes the template renderer (src/jit/renderer.h): placeholder substitution
// and include resolution over an in-memory template tree, with fuzzed template
// text, headers and bindings. Templates ship with the library, but
// MLAJIT_TEMPLATE_DIR lets a user point the renderer at any folder.
//
// Input: sections separated by NUL bytes.
//   0: bindings, one "name=value" per line (the value may be empty)
//   1: the template, stored as "t.cu.in"
//   2…: more files of the tree, each "path\ncontents"
//
// Oracle: no crash; errors are kInternal (template defect) or kInvalidArgument
// (bindings); text without "{{" renders to itself; RenderTemplate's source is
// SubstitutePlaceholders' result and its headers are files of the tree, each
// name once.
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "fuzz/fuzz_check.h"
#include "src/jit/renderer.h"
#include "src/jit/template_store.h"

namespace {

bool ExpectedCode(const absl::Status& s) {
  return s.code() == absl::StatusCode::kInternal ||
         s.code() == absl::StatusCode::kInvalidArgument;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using mlajit::jit::Bindings;
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<absl::string_view> sections = absl::StrSplit(input, '\0');
  if (sections.size() < 2) return 0;

  Bindings bindings;
  for (absl::string_view line : absl::StrSplit(sections[0], '\n', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits('=', 1));
    bindings.push_back(std::move(kv));
  }
  const std::string text(sections[1]);
  std::map<std::string, std::string> files = {{"t.cu.in", text}};
  for (size_t i = 2; i < sections.size(); ++i) {
    std::pair<std::string, std::string> f = absl::StrSplit(sections[i], absl::MaxSplits('\n', 1));
    files.insert(std::move(f));  // the first file of a name wins, as with t.cu.in
  }

  absl::StatusOr<std::string> substituted =
      mlajit::jit::SubstitutePlaceholders(text, "t.cu.in", bindings);
  if (!substituted.ok()) {
    FUZZ_CHECK(ExpectedCode(substituted.status()));
  } else if (text.find("{{") == std::string::npos) {
    FUZZ_CHECK(*substituted == text);
  }

  auto store = mlajit::jit::TemplateStore::FromFiles(files);
  absl::StatusOr<mlajit::jit::RenderedSource> r = mlajit::jit::RenderTemplate(*store, "t", bindings);
  if (!r.ok()) {
    FUZZ_CHECK(ExpectedCode(r.status()));
    return 0;
  }
  FUZZ_CHECK(substituted.ok() && r->source == *substituted);
  std::set<std::string> names;
  for (const mlajit::jit::HeaderFile& h : r->headers) {
    FUZZ_CHECK(names.insert(h.name).second);
    bool in_tree = false;
    for (const auto& [path, contents] : files) in_tree |= contents == h.contents;
    FUZZ_CHECK(in_tree);
  }
  return 0;
}
