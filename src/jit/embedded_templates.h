// The kernel template tree (kernel_templates/), compiled into the library by
// cmake/mlajitEmbedFiles.cmake, so that deployments need no template path.
//
//   for (const EmbeddedFile& f : EmbeddedTemplateFiles())
//     if (f.path == "mla_decode.cu.in") Render(f.contents, ...);
#ifndef MLAJIT_SRC_JIT_EMBEDDED_TEMPLATES_H_
#define MLAJIT_SRC_JIT_EMBEDDED_TEMPLATES_H_

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace mlajit::jit::jit_internal {

struct EmbeddedFile {
  absl::string_view path;      // relative to kernel_templates/, '/'-separated
  absl::string_view contents;  // the file's bytes
};

// Sorted by path; generated at build time (embedded_templates_data.cc).
absl::Span<const EmbeddedFile> EmbeddedTemplateFiles();

}  // namespace mlajit::jit::jit_internal

#endif  // MLAJIT_SRC_JIT_EMBEDDED_TEMPLATES_H_
