// Exclusive advisory lock on a file, used to let one process at a time compile a
// given key. Open-file-description locks (F_OFD_SETLK) are used, with flock() as
// the fallback where the file system refuses them; both are released by the
// kernel when the holder dies, so a crashed compiler never wedges the cache.
// OFD locks also conflict between two opens in one process, unlike POSIX locks.
//
//   MLAJIT_ASSIGN_OR_RETURN(FileLock lock, FileLock::Acquire(dir + "/k.lock", 300));
//   ... compile and publish ...
//   // released by the destructor (or lock.Release())
#ifndef MLAJIT_SRC_CACHE_FILE_LOCK_H_
#define MLAJIT_SRC_CACHE_FILE_LOCK_H_

#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mlajit::cache::cache_internal {

class FileLock {
 public:
  // Opens (creating, mode 0600) `path` and locks it, polling until `timeout_s`
  // has passed: then kUnavailable naming the path. Errors opening the file keep
  // their errno-derived code (see ErrnoStatus).
  static absl::StatusOr<FileLock> Acquire(const std::string& path, double timeout_s);
  // One attempt: nullopt when another holder has it.
  static absl::StatusOr<std::optional<FileLock>> TryAcquire(const std::string& path);

  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

  void Release();
  bool held() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }

 private:
  FileLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::string path_;
};

}  // namespace mlajit::cache::cache_internal

#endif  // MLAJIT_SRC_CACHE_FILE_LOCK_H_
