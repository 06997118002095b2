// One-line log events, filtered by MLAJIT_LOG (error|warn|info|debug; default
// warn) and optionally routed to the host application.
//
//   MLAJIT_LOG_WARN("cache dir ", dir, " is read-only; continuing in memory");
//   SetLogSink([](LogLevel l, std::string_view line, void* u) { ... }, user);
#ifndef MLAJIT_SRC_BASE_LOG_H_
#define MLAJIT_SRC_BASE_LOG_H_

#include <string_view>

#include "absl/strings/str_cat.h"

namespace mlajit {

// Values match the public C enum mlajit_log_level_t.
enum class LogLevel : int { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

using LogSinkFn = void (*)(LogLevel level, std::string_view line, void* user);

// Routes every emitted line to `sink` (nullptr restores stderr). Thread-safe.
void SetLogSink(LogSinkFn sink, void* user);
// The level read once from MLAJIT_LOG, unless overridden by SetLogLevel.
LogLevel CurrentLogLevel();
void SetLogLevel(LogLevel level);
bool LogEnabled(LogLevel level);
void EmitLog(LogLevel level, std::string_view line);

}  // namespace mlajit

#define MLAJIT_LOG_AT_(level, ...)                                         \
  do {                                                                     \
    if (::mlajit::LogEnabled(level))                                       \
      ::mlajit::EmitLog(level, ::absl::StrCat(__VA_ARGS__));               \
  } while (0)
#define MLAJIT_LOG_ERROR(...) MLAJIT_LOG_AT_(::mlajit::LogLevel::kError, __VA_ARGS__)
#define MLAJIT_LOG_WARN(...) MLAJIT_LOG_AT_(::mlajit::LogLevel::kWarn, __VA_ARGS__)
#define MLAJIT_LOG_INFO(...) MLAJIT_LOG_AT_(::mlajit::LogLevel::kInfo, __VA_ARGS__)
#define MLAJIT_LOG_DEBUG(...) MLAJIT_LOG_AT_(::mlajit::LogLevel::kDebug, __VA_ARGS__)

#endif  // MLAJIT_SRC_BASE_LOG_H_
