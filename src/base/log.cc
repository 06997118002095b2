#include "src/base/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/synchronization/mutex.h"

namespace mlajit {
namespace {

LogLevel LevelFromEnv() {
  const char* v = std::getenv("MLAJIT_LOG");
  if (v == nullptr) return LogLevel::kWarn;
  if (!std::strcmp(v, "error")) return LogLevel::kError;
  if (!std::strcmp(v, "info")) return LogLevel::kInfo;
  if (!std::strcmp(v, "debug")) return LogLevel::kDebug;
  return LogLevel::kWarn;
}

std::atomic<int>& Level() {
  static std::atomic<int> level{static_cast<int>(LevelFromEnv())};
  return level;
}

struct Sink {
  absl::Mutex mu;
  LogSinkFn fn ABSL_GUARDED_BY(mu) = nullptr;
  void* user ABSL_GUARDED_BY(mu) = nullptr;
};
Sink& TheSink() {
  static Sink* sink = new Sink();  // never destroyed: logging may run at exit
  return *sink;
}

const char* LevelName(LogLevel l) {
  switch (l) {
    case LogLevel::kError: return "error";
    case LogLevel::kWarn: return "warn";
    case LogLevel::kInfo: return "info";
    case LogLevel::kDebug: return "debug";
  }
  return "?";
}

}  // namespace

void SetLogSink(LogSinkFn sink, void* user) {
  Sink& s = TheSink();
  absl::MutexLock lock(&s.mu);
  s.fn = sink;
  s.user = user;
}

LogLevel CurrentLogLevel() { return static_cast<LogLevel>(Level().load()); }
void SetLogLevel(LogLevel level) { Level().store(static_cast<int>(level)); }
bool LogEnabled(LogLevel level) { return static_cast<int>(level) <= Level().load(); }

void EmitLog(LogLevel level, std::string_view line) {
  Sink& s = TheSink();
  absl::MutexLock lock(&s.mu);
  if (s.fn != nullptr) {
    s.fn(level, line, s.user);
    return;
  }
  std::fprintf(stderr, "mlajit %s: %.*s\n", LevelName(level), static_cast<int>(line.size()),
               line.data());
}

}  // namespace mlajit
