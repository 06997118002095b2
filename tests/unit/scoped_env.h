// Sets an environment variable for one scope and puts back what was there
// (its old value, or unset). Plans read MLAJIT_TILES, MLAJIT_SPLIT_MIN_COST
// and MLAJIT_TUNED when they are built.
//
//   { ScopedEnv env("MLAJIT_TILES", "32,64,4,2,1");  /* plans built here */ }
#ifndef MLAJIT_TESTS_UNIT_SCOPED_ENV_H_
#define MLAJIT_TESTS_UNIT_SCOPED_ENV_H_

#include <stdlib.h>

#include <optional>
#include <string>

namespace mlajit::test_support {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_.has_value()) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace mlajit::test_support

#endif  // MLAJIT_TESTS_UNIT_SCOPED_ENV_H_
