#include "src/cache/file_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/cache/fs_util.h"

namespace mlajit::cache::cache_internal {
namespace {

enum class TryResult { kLocked, kBusy, kError };

TryResult TryLockFd(int fd, int* err) {
  struct flock fl = {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = 0;
  fl.l_len = 0;
  if (fcntl(fd, F_OFD_SETLK, &fl) == 0) return TryResult::kLocked;
  if (errno == EAGAIN || errno == EACCES) return TryResult::kBusy;
  if (errno != EINVAL && errno != ENOLCK && errno != EOPNOTSUPP) {
    *err = errno;
    return TryResult::kError;
  }
  // Some file systems (old kernels, some network mounts) lack OFD locks.
  if (flock(fd, LOCK_EX | LOCK_NB) == 0) return TryResult::kLocked;
  if (errno == EWOULDBLOCK) return TryResult::kBusy;
  *err = errno;
  return TryResult::kError;
}

absl::StatusOr<int> OpenLockFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return ErrnoStatus(errno, "opening lock file", path);
  return fd;
}

}  // namespace

absl::StatusOr<FileLock> FileLock::Acquire(const std::string& path, double timeout_s) {
  absl::StatusOr<int> fd = OpenLockFile(path);
  if (!fd.ok()) return fd.status();
  const auto start = std::chrono::steady_clock::now();
  auto backoff = std::chrono::microseconds(500);
  for (;;) {
    int err = 0;
    switch (TryLockFd(*fd, &err)) {
      case TryResult::kLocked:
        return FileLock(*fd, path);
      case TryResult::kError:
        close(*fd);
        return ErrnoStatus(err, "locking", path);
      case TryResult::kBusy:
        break;
    }
    // Polling rather than F_OFD_SETLKW keeps the wait bounded without signals.
    double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited >= timeout_s) {
      close(*fd);
      return absl::UnavailableError(absl::StrCat(
          "lock ", path, " still held by another compile after ", waited,
          " s (lock_timeout_s=", timeout_s,
          "); raise lock_timeout_s or check for a hung compiler process"));
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::microseconds(50000));
  }
}

absl::StatusOr<std::optional<FileLock>> FileLock::TryAcquire(const std::string& path) {
  absl::StatusOr<int> fd = OpenLockFile(path);
  if (!fd.ok()) return fd.status();
  int err = 0;
  switch (TryLockFd(*fd, &err)) {
    case TryResult::kLocked:
      return std::optional<FileLock>(FileLock(*fd, path));
    case TryResult::kBusy:
      close(*fd);
      return std::optional<FileLock>();
    case TryResult::kError:
      break;
  }
  close(*fd);
  return ErrnoStatus(err, "locking", path);
}

FileLock::FileLock(FileLock&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    Release();
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

FileLock::~FileLock() { Release(); }

void FileLock::Release() {
  // Closing the only descriptor of the open file description drops the lock.
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

}  // namespace mlajit::cache::cache_internal
