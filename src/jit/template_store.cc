#include "src/jit/template_store.h"

#include <dirent.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/jit/embedded_templates.h"

namespace mlajit::jit {
namespace {

std::vector<std::string> NamesFromPaths(const std::vector<std::string>& paths) {
  std::vector<std::string> names;
  for (const std::string& p : paths) {
    if (p.find('/') == std::string::npos && absl::EndsWith(p, kTemplateSuffix) &&
        p.size() > kTemplateSuffix.size()) {
      names.push_back(p.substr(0, p.size() - kTemplateSuffix.size()));
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Rejects absolute paths and "..", so a template cannot read outside its tree.
bool IsTreePath(absl::string_view path) {
  if (path.empty() || path[0] == '/') return false;
  return !absl::StrContains(absl::StrCat("/", path, "/"), "/../");
}

class EmbeddedStore final : public TemplateStore {
 public:
  absl::StatusOr<std::string> Read(absl::string_view path) const override {
    for (const jit_internal::EmbeddedFile& f : jit_internal::EmbeddedTemplateFiles()) {
      if (f.path == path) return std::string(f.contents);
    }
    return absl::NotFoundError(absl::StrCat("template file \"", path, "\" is not in the embedded kernel_templates/"));
  }
  std::vector<std::string> TemplateNames() const override {
    std::vector<std::string> paths;
    for (const jit_internal::EmbeddedFile& f : jit_internal::EmbeddedTemplateFiles()) {
      paths.emplace_back(f.path);
    }
    return NamesFromPaths(paths);
  }
  std::string Describe() const override { return "embedded kernel_templates/"; }
  bool immutable() const override { return true; }
};

class DirectoryStore final : public TemplateStore {
 public:
  explicit DirectoryStore(std::string dir) : dir_(std::move(dir)) {}

  absl::StatusOr<std::string> Read(absl::string_view path) const override {
    if (!IsTreePath(path)) {
      return absl::NotFoundError(absl::StrCat("template path \"", path, "\" leaves ", dir_));
    }
    std::string full = absl::StrCat(dir_, "/", path);
    std::ifstream in(full, std::ios::binary);
    if (!in) return absl::NotFoundError(absl::StrCat("template file ", full, " cannot be read"));
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  std::vector<std::string> TemplateNames() const override {
    std::vector<std::string> paths;
    if (DIR* d = opendir(dir_.c_str())) {
      while (dirent* e = readdir(d)) paths.emplace_back(e->d_name);
      closedir(d);
    }
    return NamesFromPaths(paths);
  }
  std::string Describe() const override { return absl::StrCat("directory ", dir_); }
  bool immutable() const override { return false; }

 private:
  std::string dir_;
};

class MapStore final : public TemplateStore {
 public:
  explicit MapStore(std::map<std::string, std::string> files) : files_(std::move(files)) {}

  absl::StatusOr<std::string> Read(absl::string_view path) const override {
    auto it = files_.find(std::string(path));
    if (it == files_.end()) {
      return absl::NotFoundError(absl::StrCat("template file \"", path, "\" is not in the in-memory tree"));
    }
    return it->second;
  }
  std::vector<std::string> TemplateNames() const override {
    std::vector<std::string> paths;
    for (const auto& [p, unused] : files_) paths.push_back(p);
    return NamesFromPaths(paths);
  }
  std::string Describe() const override { return "in-memory templates"; }
  bool immutable() const override { return true; }

 private:
  std::map<std::string, std::string> files_;
};

}  // namespace

std::shared_ptr<const TemplateStore> TemplateStore::Default() {
  const char* dir = std::getenv("MLAJIT_TEMPLATE_DIR");
  if (dir != nullptr && dir[0] != '\0') return FromDirectory(dir);
  return Embedded();
}

std::shared_ptr<const TemplateStore> TemplateStore::Embedded() {
  static const auto* store = new std::shared_ptr<const TemplateStore>(std::make_shared<EmbeddedStore>());
  return *store;
}

std::shared_ptr<const TemplateStore> TemplateStore::FromDirectory(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return std::make_shared<DirectoryStore>(std::move(dir));
}

std::shared_ptr<const TemplateStore> TemplateStore::FromFiles(std::map<std::string, std::string> files) {
  return std::make_shared<MapStore>(std::move(files));
}

}  // namespace mlajit::jit
