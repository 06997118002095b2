// Renders a kernel template: substitutes {{snake_case}} placeholders from the
// spec's bindings and collects every template-tree header the source includes,
// which the compilers receive as named in-memory headers (so include guards and
// line numbers behave as with files) and which all feed the cache key.
//
//   MLAJIT_ASSIGN_OR_RETURN(RenderedSource r,
//       RenderTemplate(*TemplateStore::Default(), "mla_decode", SpecBindings(spec)));
//   compiler.Compile(r, options, "sm_90a");
//
// Template rules (kernel_templates/<name>.cu.in):
//  - `{{name}}` (optionally `{{ name }}`) with name in [a-z0-9_]+ is a placeholder;
//    any other `{{` is malformed: write `{ {` for nested C++ braces. A lone `}}`
//    is ordinary text.
//  - every placeholder must have a binding with a non-empty value; bindings the
//    template does not use are fine.
//  - `#include "path"` names a file of the tree relative to the including file's
//    folder or to the root; quoted includes not in the tree are left to the
//    compiler, except "*.cuh", which must be in the tree. Headers are not
//    rendered: they are ordinary device code.
//  - every template defines `extern "C" __global__ void {{template_name}}_kernel(...)`.
// Errors name the file, the line and the placeholder: a defect in a template is
// kInternal (the templates ship with the library); bad bindings or an unknown
// template name are kInvalidArgument.
#ifndef MLAJIT_SRC_JIT_RENDERER_H_
#define MLAJIT_SRC_JIT_RENDERER_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/jit/template_store.h"

namespace mlajit::jit {

using Bindings = std::vector<std::pair<std::string, std::string>>;

struct HeaderFile {
  std::string name;      // as written in #include "..." (the compiler matches on it)
  std::string contents;
};

struct RenderedSource {
  std::string template_name;        // "mla_decode"
  std::string program_name;         // "mla_decode.cu": the file name in diagnostics
  std::string source;               // the rendered template
  std::vector<HeaderFile> headers;  // tree headers reached from source, first-seen order
};

// Substitutes the placeholders of `text`; `file_name` only labels errors.
absl::StatusOr<std::string> SubstitutePlaceholders(absl::string_view text,
                                                   absl::string_view file_name,
                                                   const Bindings& bindings);

absl::StatusOr<RenderedSource> RenderTemplate(const TemplateStore& store,
                                              absl::string_view template_name,
                                              const Bindings& bindings);

}  // namespace mlajit::jit

#endif  // MLAJIT_SRC_JIT_RENDERER_H_
