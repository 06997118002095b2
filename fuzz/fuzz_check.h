// FUZZ_CHECK: an invariant of the code under test, checked inside a fuzz target.
// A failure prints the condition and aborts, which libFuzzer records as a crash
// with its input (plain assert would vanish in the release builds we fuzz).
//
//   FUZZ_CHECK(reparsed.ok());
#ifndef MLAJIT_FUZZ_FUZZ_CHECK_H_
#define MLAJIT_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond)                                                              \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                   \
    }                                                                                 \
  } while (0)

#endif  // MLAJIT_FUZZ_FUZZ_CHECK_H_
