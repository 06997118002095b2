#include "src/jit/key.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#ifndef MLAJIT_VERSION_STRING
#error "MLAJIT_VERSION_STRING must be defined by the build (src/jit/CMakeLists.txt)"
#endif

namespace mlajit::jit {

std::string LibraryVersion() { return MLAJIT_VERSION_STRING; }

DerivedKey DeriveKey(const KeyInputs& in) {
  cache::KeyBuilder kb;
  kb.Add("cache_format", absl::StrCat(in.cache_format_version));
  kb.Add("library_version", in.library_version);
  kb.Add("template_name", in.source->template_name);
  kb.Add("arch", in.arch);
  kb.Add("compiler", in.compiler_identity);
  // One option per line: "-I/a b" and "-I/a", "b" must not collide.
  kb.Add("options", absl::StrJoin(in.options, "\n"));
  for (const auto& [name, value] : in.compiler_extra) kb.Add(name, value);
  kb.Add("source", in.source->source);
  for (const HeaderFile& h : in.source->headers) kb.Add(absl::StrCat("header:", h.name), h.contents);
  DerivedKey out;
  out.key = kb.Finish();
  out.fields = kb.fields();
  return out;
}

}  // namespace mlajit::jit
