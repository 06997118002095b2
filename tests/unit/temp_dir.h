// A private temporary directory for one test, removed with everything in it
// when it goes out of scope (write permission is given back first, since tests
// make folders read-only on purpose).
//
//   TempDir dir;
//   CacheOptions o;  o.cache_dir = dir.Sub("cache");
#ifndef MLAJIT_TESTS_UNIT_TEMP_DIR_H_
#define MLAJIT_TESTS_UNIT_TEMP_DIR_H_

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace mlajit::test_support {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "mlajit_test.XXXXXX").string();
    path_ = mkdtemp(tmpl.data()) ? tmpl : "";
  }
  ~TempDir() {
    if (path_.empty()) return;
    namespace fs = std::filesystem;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(path_, ec);
         it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_directory(ec)) chmod(it->path().c_str(), 0700);
    }
    chmod(path_.c_str(), 0700);
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string Sub(absl::string_view name) const { return absl::StrCat(path_, "/", name); }

 private:
  std::string path_;
};

}  // namespace mlajit::test_support

#endif  // MLAJIT_TESTS_UNIT_TEMP_DIR_H_
