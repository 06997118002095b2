#include "src/cache/stats_log.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/cache/file_lock.h"
#include "src/cache/fs_util.h"

namespace mlajit::cache::cache_internal {
namespace {

constexpr uint64_t kCompactAboveBytes = 16 << 10;
constexpr uint64_t kMaxStatsFileBytes = 4 << 20;
// Counter flushes wait briefly at most: losing a flush only delays the counts.
constexpr double kStatsLockTimeoutS = 2.0;

Counters Sum(absl::string_view text) {
  Counters c;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
    uint64_t h, m, k;
    if (parts.size() != 3 || !absl::SimpleAtoi(parts[0], &h) ||
        !absl::SimpleAtoi(parts[1], &m) || !absl::SimpleAtoi(parts[2], &k)) {
      continue;
    }
    c.hits += h;
    c.misses += m;
    c.compiles += k;
  }
  return c;
}

std::string Line(const Counters& c) { return absl::StrCat(c.hits, " ", c.misses, " ", c.compiles, "\n"); }

}  // namespace

StatsLog::StatsLog(std::string dir)
    : dir_(std::move(dir)), path_(JoinPath(dir_, "stats.log")),
      lock_path_(JoinPath(dir_, "stats.lock")) {}

absl::StatusOr<Counters> StatsLog::Read() const {
  absl::StatusOr<FileData> data = ReadFileBounded(path_, kMaxStatsFileBytes);
  if (!data.ok()) {
    if (absl::IsNotFound(data.status())) return Counters{};
    return data.status();
  }
  return Sum(data->bytes);
}

absl::Status StatsLog::Append(const Counters& delta) {
  if (delta.empty()) return absl::OkStatus();
  absl::Status s = MakeDirs(dir_, 0700);
  if (!s.ok()) return s;
  absl::StatusOr<FileLock> lock = FileLock::Acquire(lock_path_, kStatsLockTimeoutS);
  if (!lock.ok()) return lock.status();
  struct stat st;
  if (stat(path_.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) > kCompactAboveBytes) {
    absl::StatusOr<Counters> total = Read();
    Counters c = total.ok() ? *total : Counters{};  // an unreadable log restarts
    c.hits += delta.hits;
    c.misses += delta.misses;
    c.compiles += delta.compiles;
    return WriteFileAtomic(dir_, "stats.log", Line(c), nullptr);
  }
  int fd = open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return ErrnoStatus(errno, "opening", path_);
  std::string line = Line(delta);
  ssize_t w = write(fd, line.data(), line.size());
  int err = errno;
  close(fd);
  if (w != static_cast<ssize_t>(line.size())) {
    return ErrnoStatus(w < 0 ? err : ENOSPC, "appending to", path_);
  }
  return absl::OkStatus();
}

}  // namespace mlajit::cache::cache_internal
