// Template rendering: placeholder substitution and its errors, include
// resolution from the template tree, the embedded table and the directory override.
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/jit/embedded_templates.h"
#include "src/jit/kernel_spec.h"
#include "src/jit/renderer.h"
#include "src/jit/template_store.h"
#include "tests/unit/temp_dir.h"

namespace mlajit::jit {
namespace {

using ::testing::HasSubstr;

const Bindings kBindings = {{"num_heads", "16"}, {"block_m", "64"}, {"empty", ""}};

std::string Message(const absl::Status& s) { return std::string(s.message()); }

TEST(JitRenderer, SubstitutesPlaceholders) {
  absl::StatusOr<std::string> r = SubstitutePlaceholders(
      "constexpr int H = {{num_heads}};\nconstexpr int M = {{ block_m }}; // {{num_heads}}\n"
      "int x[2][2] = { {1, 2}, {3, 4} }; }}\n",
      "t.cu.in", kBindings);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r,
            "constexpr int H = 16;\nconstexpr int M = 64; // 16\n"
            "int x[2][2] = { {1, 2}, {3, 4} }; }}\n");
}

TEST(JitRenderer, UnknownPlaceholderIsAnInternalErrorNamingLineAndName) {
  absl::StatusOr<std::string> r =
      SubstitutePlaceholders("a\nb\nint v = {{num_head}};\n", "mla_x.cu.in", kBindings);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(Message(r.status()), HasSubstr("template mla_x.cu.in line 3: unknown placeholder {{num_head}}"));
  EXPECT_THAT(Message(r.status()), HasSubstr("num_heads, block_m"));
}

TEST(JitRenderer, UnboundPlaceholderIsRejected) {
  absl::StatusOr<std::string> r = SubstitutePlaceholders("x\n{{empty}}", "t.cu.in", kBindings);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(r.status()), HasSubstr("t.cu.in line 2: placeholder {{empty}} is unbound"));
}

TEST(JitRenderer, MalformedBracesAreRejectedWithTheLine) {
  for (const char* text : {"{{num_heads}", "{{num_heads", "{{}}", "{{Num_Heads}}", "{{num-heads}}",
                           "{{{num_heads}}}", "{{num_heads\n}}", "{{1, 2}, {3, 4}}"}) {
    absl::StatusOr<std::string> r =
        SubstitutePlaceholders(std::string("ok\n") + text, "t.cu.in", kBindings);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal) << text;
    EXPECT_THAT(Message(r.status()), HasSubstr("template t.cu.in line 2: malformed placeholder")) << text;
  }
}

TEST(JitRenderer, BadBindingsAreInvalidArguments) {
  EXPECT_EQ(SubstitutePlaceholders("", "t", {{"a", "1"}, {"a", "2"}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SubstitutePlaceholders("", "t", {{"A", "1"}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SubstitutePlaceholders("", "t", {{"a", "1\n2"}}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(JitRenderer, ResolvesIncludesRecursivelyOncePerName) {
  auto store = TemplateStore::FromFiles({
      {"k.cu.in", "#include \"a.cuh\"\n  #  include \"b.cuh\"\n#include <cuda_bf16.h>\n"
                  "#include \"toolkit.h\"\nconstexpr int H = {{num_heads}};\n"},
      {"a.cuh", "#pragma once\n#include \"b.cuh\"\n#include \"sub/c.cuh\"\n"},
      {"b.cuh", "#pragma once\nint b;\n"},
      {"sub/c.cuh", "#pragma once\n#include \"d.cuh\"\n"},  // relative to sub/
      {"sub/d.cuh", "int d;\n"},
      {"unused.cuh", "int unused;\n"},
  });
  absl::StatusOr<RenderedSource> r = RenderTemplate(*store, "k", kBindings);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->template_name, "k");
  EXPECT_EQ(r->program_name, "k.cu");
  EXPECT_THAT(r->source, HasSubstr("constexpr int H = 16;"));
  std::map<std::string, std::string> headers;
  for (const HeaderFile& h : r->headers) EXPECT_TRUE(headers.emplace(h.name, h.contents).second) << h.name;
  EXPECT_EQ(headers.size(), 4u);
  EXPECT_EQ(headers["a.cuh"], "#pragma once\n#include \"b.cuh\"\n#include \"sub/c.cuh\"\n");
  EXPECT_EQ(headers["b.cuh"], "#pragma once\nint b;\n");
  EXPECT_EQ(headers["sub/c.cuh"], "#pragma once\n#include \"d.cuh\"\n");
  EXPECT_EQ(headers["d.cuh"], "int d;\n");
  EXPECT_EQ(headers.count("unused.cuh"), 0u);
  EXPECT_EQ(headers.count("toolkit.h"), 0u);  // not in the tree: left to the compiler
}

TEST(JitRenderer, MissingTreeHeaderIsAnInternalError) {
  auto store = TemplateStore::FromFiles({{"k.cu.in", "\n#include \"a.cuh\"\n"},
                                         {"a.cuh", "// x\n\n#include \"missing.cuh\"\n"}});
  absl::StatusOr<RenderedSource> r = RenderTemplate(*store, "k", kBindings);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(Message(r.status()), HasSubstr("template a.cuh line 3: #include \"missing.cuh\""));
}

TEST(JitRenderer, AmbiguousIncludeNameIsAnInternalError) {
  auto store = TemplateStore::FromFiles({{"k.cu.in", "#include \"x.cuh\"\n#include \"s/y.cuh\"\n"},
                                         {"x.cuh", "int root;\n"},
                                         {"s/y.cuh", "#include \"x.cuh\"\n"},
                                         {"s/x.cuh", "int sub;\n"}});
  absl::StatusOr<RenderedSource> r = RenderTemplate(*store, "k", kBindings);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(Message(r.status()), HasSubstr("#include \"x.cuh\" means s/x.cuh here but x.cuh elsewhere"));
}

TEST(JitRenderer, UnknownTemplateListsTheAvailableOnes) {
  auto store = TemplateStore::FromFiles({{"a.cu.in", ""}, {"b.cu.in", ""}, {"c.cuh", ""}});
  EXPECT_EQ(store->TemplateNames(), (std::vector<std::string>{"a", "b"}));
  absl::StatusOr<RenderedSource> r = RenderTemplate(*store, "zzz", kBindings);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(r.status()), HasSubstr("template_name=\"zzz\": no zzz.cu.in"));
  EXPECT_THAT(Message(r.status()), HasSubstr("available: a, b"));
}

// The build embeds the whole kernel_templates/ folder, byte for byte.
TEST(JitTemplates, EmbeddedTableMatchesTheSourceTree) {
  const char* src = std::getenv("MLAJIT_SOURCE_DIR");
  if (src == nullptr) GTEST_SKIP() << "MLAJIT_SOURCE_DIR not set (run through ctest)";
  auto files = jit_internal::EmbeddedTemplateFiles();
  ASSERT_FALSE(files.empty());
  bool has_probe = false;
  for (const jit_internal::EmbeddedFile& f : files) {
    std::ifstream in(std::string(src) + "/kernel_templates/" + std::string(f.path), std::ios::binary);
    ASSERT_TRUE(in) << f.path;
    std::string disk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(disk, std::string(f.contents)) << f.path << " is stale: rebuild";
    has_probe |= f.path == "probe.cu.in";
  }
  EXPECT_TRUE(has_probe);
  auto names = TemplateStore::Embedded()->TemplateNames();
  EXPECT_NE(std::find(names.begin(), names.end(), "probe"), names.end());
}

// Every embedded template renders with a default spec: no unknown placeholders,
// every include found.
TEST(JitTemplates, EveryEmbeddedTemplateRenders) {
  auto store = TemplateStore::Embedded();
  for (const std::string& name : store->TemplateNames()) {
    KernelSpec spec;
    spec.template_name = name;
    absl::StatusOr<RenderedSource> r = RenderTemplate(*store, name, SpecBindings(spec));
    ASSERT_TRUE(r.ok()) << name << ": " << r.status();
    EXPECT_THAT(r->source, HasSubstr(name + "_kernel")) << "entry point convention";
    EXPECT_EQ(r->source.find("{{"), std::string::npos) << name;
  }
}

TEST(JitTemplates, DirectoryOverrideReadsTheFolder) {
  test_support::TempDir temp;
  ASSERT_FALSE(temp.path().empty());
  const std::string& dir = temp.path();
  std::ofstream(dir + "/mine.cu.in") << "#include \"h.cuh\"\nint v = {{num_heads}};\n";
  std::ofstream(dir + "/h.cuh") << "int h;\n";
  setenv("MLAJIT_TEMPLATE_DIR", dir.c_str(), 1);
  auto store = TemplateStore::Default();
  unsetenv("MLAJIT_TEMPLATE_DIR");
  EXPECT_EQ(store->TemplateNames(), std::vector<std::string>{"mine"});
  EXPECT_FALSE(store->immutable());
  absl::StatusOr<RenderedSource> r = RenderTemplate(*store, "mine", kBindings);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->source, "#include \"h.cuh\"\nint v = 16;\n");
  ASSERT_EQ(r->headers.size(), 1u);
  EXPECT_EQ(r->headers[0].contents, "int h;\n");
  EXPECT_FALSE(store->Read("../etc/passwd").ok());
  EXPECT_TRUE(TemplateStore::Default()->immutable());  // back to the embedded table
}

}  // namespace
}  // namespace mlajit::jit
