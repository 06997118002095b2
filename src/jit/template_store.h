// Where kernel templates come from: the table embedded in the library (the
// default), a directory named by MLAJIT_TEMPLATE_DIR (for kernel developers:
// edits apply without rebuilding the library), or an in-memory map (tests).
//
//   std::shared_ptr<const TemplateStore> store = TemplateStore::Default();
//   MLAJIT_ASSIGN_OR_RETURN(std::string text, store->Read("mla_decode.cu.in"));
//   for (const std::string& name : store->TemplateNames()) ...   // "mla_decode", "probe"
#ifndef MLAJIT_SRC_JIT_TEMPLATE_STORE_H_
#define MLAJIT_SRC_JIT_TEMPLATE_STORE_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mlajit::jit {

// Templates are "<name>.cu.in" at the root of the tree; everything else is a
// header they may include.
inline constexpr absl::string_view kTemplateSuffix = ".cu.in";

class TemplateStore {
 public:
  virtual ~TemplateStore() = default;

  // MLAJIT_TEMPLATE_DIR when set and non-empty, else the embedded table.
  static std::shared_ptr<const TemplateStore> Default();
  static std::shared_ptr<const TemplateStore> Embedded();
  static std::shared_ptr<const TemplateStore> FromDirectory(std::string dir);
  static std::shared_ptr<const TemplateStore> FromFiles(std::map<std::string, std::string> files);

  // `path` is relative to the tree's root. kNotFound when absent.
  virtual absl::StatusOr<std::string> Read(absl::string_view path) const = 0;
  // Names of the templates at the root ("<name>.cu.in" -> "<name>"), sorted.
  virtual std::vector<std::string> TemplateNames() const = 0;
  // "embedded", "directory /path" or "in-memory": for error messages.
  virtual std::string Describe() const = 0;
  // True when contents never change during the process (results may be memoised).
  virtual bool immutable() const = 0;
};

}  // namespace mlajit::jit

#endif  // MLAJIT_SRC_JIT_TEMPLATE_STORE_H_
