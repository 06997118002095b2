// Cache keys: every input field changes the key, included headers are hashed,
// and a fresh process derives the same key for the same spec.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/cache/kernel_cache.h"
#include "src/jit/compiler.h"
#include "src/jit/kernel_compiler.h"
#include "src/jit/key.h"

namespace mlajit::jit {
namespace {

// A compiler whose identity, options and extra inputs the test controls; it
// never compiles anything.
class FakeCompiler final : public Compiler {
 public:
  std::string identity = "fake 1.0 (build 1)";
  std::vector<std::string> options = {"-O3"};
  std::vector<std::pair<std::string, std::string>> extra = {{"toolkit_include", "abc"}};

  std::string Name() const override { return "fake"; }
  std::string Identity() const override { return identity; }
  absl::Status CheckArch(absl::string_view) const override { return absl::OkStatus(); }
  std::vector<std::string> Options(absl::string_view arch) const override {
    std::vector<std::string> o = options;
    o.push_back(absl::StrCat("--arch=", arch));
    return o;
  }
  std::vector<std::pair<std::string, std::string>> ExtraKeyFields() const override { return extra; }
  absl::StatusOr<CompiledBinary> Compile(const RenderedSource&, const std::vector<std::string>&,
                                         const std::string&) override {
    return absl::UnimplementedError("FakeCompiler does not compile");
  }
};

std::shared_ptr<cache::KernelCache> MemoryCache() {
  cache::CacheOptions o;
  o.memory_only = true;
  return std::shared_ptr<cache::KernelCache>(std::move(*cache::KernelCache::Open(o)));
}

std::map<std::string, std::string> Tree(const std::string& header = "constexpr int kOne = 1;\n") {
  const std::string body =
      "#include \"common.cuh\"\nconstexpr int H = {{num_heads}};\n"
      "extern \"C\" __global__ void {{template_name}}_kernel() {}\n";
  return {{"k.cu.in", body}, {"twin.cu.in", body}, {"common.cuh", header}};
}

absl::StatusOr<PreparedKernel> Prepare(FakeCompiler& fc, const KernelSpec& spec,
                                       std::map<std::string, std::string> files = Tree()) {
  KernelCompilerOptions o;
  o.templates = TemplateStore::FromFiles(std::move(files));
  o.compiler = &fc;
  auto kc = KernelCompiler::Create(MemoryCache(), o);
  if (!kc.ok()) return kc.status();
  return (*kc)->Prepare(spec);
}

KernelSpec Spec() {
  KernelSpec s;
  s.template_name = "k";
  return s;
}

std::string KeyOf(const absl::StatusOr<PreparedKernel>& p) {
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? p->key.Hex() : "";
}

TEST(JitKey, FieldsAreNamedAndOrdered) {
  FakeCompiler fc;
  auto p = Prepare(fc, Spec());
  ASSERT_TRUE(p.ok()) << p.status();
  std::vector<std::string> names;
  for (const cache::KeyField& f : p->fields) names.push_back(f.name);
  EXPECT_EQ(names, (std::vector<std::string>{"cache_format", "library_version", "template_name",
                                             "arch", "compiler", "options", "toolkit_include",
                                             "source", "header:common.cuh"}));
  EXPECT_EQ(p->fields[3].value_preview, "sm_90a");
  EXPECT_EQ(p->fields[4].value_preview, "fake 1.0 (build 1)");
  EXPECT_EQ(p->metadata.spec, SpecToJson(Spec()));
  EXPECT_EQ(p->metadata.compiler, "fake 1.0 (build 1)");
  EXPECT_EQ(p->metadata.library_version, LibraryVersion());
  EXPECT_EQ(p->key.Hex().size(), 32u);
}

TEST(JitKey, EveryInputChangesTheKey) {
  FakeCompiler base;
  const std::string k0 = KeyOf(Prepare(base, Spec()));
  EXPECT_EQ(KeyOf(Prepare(base, Spec())), k0) << "deterministic within a process";

  std::map<std::string, std::string> keys;  // what changed -> key
  {
    KernelSpec s = Spec();
    s.num_heads = 32;  // changes the rendered source
    keys["source"] = KeyOf(Prepare(base, s));
  }
  keys["header"] = KeyOf(Prepare(base, Spec(), Tree("constexpr int kOne = 2;\n")));
  {
    KernelSpec s = Spec();
    s.arch = "sm_100a";  // also changes the options
    keys["arch"] = KeyOf(Prepare(base, s));
  }
  {
    FakeCompiler fc;
    fc.identity = "fake 1.0 (build 2)";  // same version, other build
    keys["compiler"] = KeyOf(Prepare(fc, Spec()));
  }
  {
    FakeCompiler fc;
    fc.options = {"-O2"};
    keys["options"] = KeyOf(Prepare(fc, Spec()));
  }
  {
    FakeCompiler fc;
    fc.extra = {{"toolkit_include", "abd"}};
    keys["compiler_extra"] = KeyOf(Prepare(fc, Spec()));
  }
  {
    KernelSpec s = Spec();
    s.template_name = "twin";  // same text; the name is rendered in, and keyed itself
    keys["template_name"] = KeyOf(Prepare(base, s));
  }
  // Library and format versions are build constants: vary them at DeriveKey.
  auto p = Prepare(base, Spec());
  ASSERT_TRUE(p.ok());
  KeyInputs in;
  in.source = &p->source;
  in.options = p->options;
  in.arch = "sm_90a";
  in.compiler_identity = base.Identity();
  in.compiler_extra = base.ExtraKeyFields();
  EXPECT_EQ(DeriveKey(in).key.Hex(), k0);
  KeyInputs v = in;
  v.library_version = "0.0.0-other";
  keys["library_version"] = DeriveKey(v).key.Hex();
  v = in;
  v.cache_format_version = cache::kCacheFormatVersion + 1;
  keys["cache_format"] = DeriveKey(v).key.Hex();
  v = in;
  RenderedSource renamed = p->source;
  renamed.template_name = "other";  // the template_name field alone
  v.source = &renamed;
  keys["template_name_field"] = DeriveKey(v).key.Hex();

  std::set<std::string> distinct = {k0};
  for (const auto& [what, key] : keys) {
    EXPECT_NE(key, k0) << what << " did not change the key";
    EXPECT_TRUE(distinct.insert(key).second) << what << " collided with another change";
  }
}

TEST(JitKey, OnlyIncludedHeadersAreKeyed) {
  FakeCompiler fc;
  auto tree = Tree();
  tree["unrelated.cuh"] = "int a;\n";
  const std::string k1 = KeyOf(Prepare(fc, Spec(), tree));
  tree["unrelated.cuh"] = "int b;\n";
  EXPECT_EQ(KeyOf(Prepare(fc, Spec(), tree)), k1);
}

// The child mode of SameKeyInFreshProcesses: print the key and stop.
constexpr char kChildEnv[] = "MLAJIT_JIT_KEY_TEST_CHILD";

std::string KeyInThisProcess() {
  KernelSpec spec;
  spec.template_name = "probe";
  spec.num_heads = 128;
  auto kc = KernelCompiler::Create(MemoryCache());
  auto p = (*kc)->Prepare(spec);
  if (!p.ok()) return "error: " + std::string(p.status().message());
  return p->key.Hex();
}

TEST(JitKey, SameKeyInFreshProcesses) {
  if (std::getenv(kChildEnv) != nullptr) {
    std::printf("KEY=%s\n", KeyInThisProcess().c_str());
    return;
  }
  if (!CompilerForArch("sm_90a").ok()) GTEST_SKIP() << "NVRTC is not installed";
  const std::string mine = KeyInThisProcess();
  ASSERT_EQ(mine.size(), 32u) << mine;
  for (int run = 0; run < 2; ++run) {
    // /proc/self/exe inside popen's shell would be the shell: name our binary.
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    ASSERT_GT(n, 0);
    self[n] = '\0';
    std::string cmd = std::string(kChildEnv) + "=1 '" + self +
          "' --gtest_filter=JitKey.SameKeyInFreshProcesses 2>&1";
    FILE* f = popen(cmd.c_str(), "r");
    ASSERT_NE(f, nullptr);
    std::string out;
    char buf[512];
    while (fgets(buf, sizeof(buf), f) != nullptr) out += buf;
    ASSERT_EQ(pclose(f), 0) << out;
    size_t at = out.find("KEY=");
    ASSERT_NE(at, std::string::npos) << out;
    EXPECT_EQ(out.substr(at + 4, 32), mine) << "run " << run << ":\n" << out;
  }
}

}  // namespace
}  // namespace mlajit::jit
