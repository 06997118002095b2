#include "src/cache/fs_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace mlajit::cache::cache_internal {
namespace {

int Inject(const FaultHook& hook, absl::string_view step) { return hook ? hook(step) : 0; }

// Closes an fd on scope exit; close errors after fsync carry no extra meaning.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) close(fd_);
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

absl::Status WriteAll(int fd, const char* data, size_t n, const std::string& path) {
  while (n > 0) {
    ssize_t w = write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "writing", path);
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

absl::Status RemoveTreeAt(int parent_fd, const char* name, const std::string& shown,
                          uint64_t* removed_entries) {
  struct stat st;
  if (fstatat(parent_fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return ErrnoStatus(errno, "stat", shown);
  }
  if (S_ISDIR(st.st_mode)) {
    int fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus(errno, "opening directory", shown);
    DIR* d = fdopendir(fd);
    if (d == nullptr) {
      int err = errno;
      close(fd);
      return ErrnoStatus(err, "opening directory", shown);
    }
    absl::Status status;
    while (struct dirent* e = readdir(d)) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      absl::Status s =
          RemoveTreeAt(dirfd(d), e->d_name, JoinPath(shown, e->d_name), removed_entries);
      if (!s.ok() && status.ok()) status = s;
    }
    closedir(d);
    if (!status.ok()) return status;
    if (unlinkat(parent_fd, name, AT_REMOVEDIR) != 0 && errno != ENOENT) {
      return ErrnoStatus(errno, "removing directory", shown);
    }
    return absl::OkStatus();
  }
  if (unlinkat(parent_fd, name, 0) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return ErrnoStatus(errno, "removing", shown);
  }
  if (removed_entries != nullptr && absl::EndsWith(name, ".bin")) ++*removed_entries;
  return absl::OkStatus();
}

}  // namespace

absl::Status ErrnoStatus(int err, absl::string_view what, absl::string_view path) {
  std::string msg = absl::StrCat(what, " ", path, ": ", strerror(err), " (errno ", err, ")");
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(msg);
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::PermissionDeniedError(msg);
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(msg);
    default:
      return absl::InternalError(msg);
  }
}

std::string JoinPath(absl::string_view a, absl::string_view b) {
  if (a.empty()) return std::string(b);
  if (absl::EndsWith(a, "/")) return absl::StrCat(a, b);
  return absl::StrCat(a, "/", b);
}

absl::Status MakeDirs(const std::string& path, mode_t mode, const FaultHook& hook) {
  if (path.empty()) return absl::InvalidArgumentError("directory path is empty");
  if (int err = Inject(hook, "mkdir")) return ErrnoStatus(err, "creating directory", path);
  struct stat st;
  if (stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return absl::OkStatus();
    return ErrnoStatus(ENOTDIR, "creating directory", path);
  }
  // Create each missing component in order, tolerating a concurrent creator.
  for (size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos != path.size() && path[pos] != '/') continue;
    std::string prefix = path.substr(0, pos);
    if (mkdir(prefix.c_str(), mode) != 0 && errno != EEXIST) {
      return ErrnoStatus(errno, "creating directory", prefix);
    }
  }
  if (stat(path.c_str(), &st) != 0) return ErrnoStatus(errno, "creating directory", path);
  if (!S_ISDIR(st.st_mode)) return ErrnoStatus(ENOTDIR, "creating directory", path);
  return absl::OkStatus();
}

absl::StatusOr<FileData> ReadFileBounded(const std::string& path, uint64_t max_bytes) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return ErrnoStatus(errno, "opening", path);
  FdCloser closer(fd);
  FileData out;
  if (fstat(fd, &out.st) != 0) return ErrnoStatus(errno, "stat", path);
  if (!S_ISREG(out.st.st_mode)) {
    return absl::DataLossError(absl::StrCat(path, ": not a regular file (mode ",
                                            absl::Hex(out.st.st_mode), ")"));
  }
  uint64_t size = static_cast<uint64_t>(out.st.st_size);
  if (size > max_bytes) {
    return absl::DataLossError(
        absl::StrCat(path, ": ", size, " bytes, more than the limit of ", max_bytes));
  }
  out.bytes.resize(size);
  size_t got = 0;
  while (got < size) {
    ssize_t r = read(fd, &out.bytes[got], size - got);
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "reading", path);
    }
    if (r == 0) break;  // shrank under us (cannot happen for published entries)
    got += static_cast<size_t>(r);
  }
  out.bytes.resize(got);
  return out;
}

std::string TempFileTarget(absl::string_view file_name) {
  size_t pos = file_name.find(".tmp.");
  if (pos == absl::string_view::npos || pos == 0) return "";
  return std::string(file_name.substr(0, pos));
}

absl::Status FsyncDir(const std::string& dir) {
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "opening directory", dir);
  FdCloser closer(fd);
  if (fsync(fd) != 0 && errno != EINVAL) return ErrnoStatus(errno, "fsync of directory", dir);
  return absl::OkStatus();
}

absl::Status WriteFileAtomic(const std::string& dir, const std::string& name,
                             absl::string_view data, const FaultHook& hook) {
  static std::atomic<uint64_t> counter{0};
  const std::string final_path = JoinPath(dir, name);
  const std::string temp_path =
      absl::StrCat(final_path, ".tmp.", getpid(), ".", counter.fetch_add(1));
  if (int err = Inject(hook, "open_temp")) return ErrnoStatus(err, "creating", temp_path);
  int fd = open(temp_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return ErrnoStatus(errno, "creating", temp_path);
  absl::Status status = [&]() -> absl::Status {
    size_t half = data.size() / 2;
    absl::Status s = WriteAll(fd, data.data(), half, temp_path);
    if (!s.ok()) return s;
    // A test may stop (or kill) the writer here to simulate a crash mid-write.
    if (int err = Inject(hook, "partial_write")) return ErrnoStatus(err, "writing", temp_path);
    s = WriteAll(fd, data.data() + half, data.size() - half, temp_path);
    if (!s.ok()) return s;
    if (int err = Inject(hook, "fsync")) return ErrnoStatus(err, "fsync of", temp_path);
    if (fsync(fd) != 0) return ErrnoStatus(errno, "fsync of", temp_path);
    return absl::OkStatus();
  }();
  if (close(fd) != 0 && status.ok()) status = ErrnoStatus(errno, "closing", temp_path);
  if (status.ok()) {
    if (int err = Inject(hook, "rename")) {
      status = ErrnoStatus(err, "renaming into place", final_path);
    } else if (rename(temp_path.c_str(), final_path.c_str()) != 0) {
      status = ErrnoStatus(errno, "renaming into place", final_path);
    }
  }
  if (!status.ok()) {
    unlink(temp_path.c_str());
    return status;
  }
  // Without this the rename itself may be lost on power failure.
  if (int err = Inject(hook, "fsync_dir")) return ErrnoStatus(err, "fsync of directory", dir);
  return FsyncDir(dir);
}

absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return ErrnoStatus(errno, "listing", dir);
  std::vector<std::string> names;
  while (struct dirent* e = readdir(d)) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    names.emplace_back(e->d_name);
  }
  closedir(d);
  return names;
}

absl::Status RemoveTree(const std::string& path, uint64_t* removed_entries) {
  return RemoveTreeAt(AT_FDCWD, path.c_str(), path, removed_entries);
}

absl::Status RemoveFile(const std::string& path) {
  if (unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoStatus(errno, "removing", path);
  return absl::OkStatus();
}

absl::Status TouchAt(const std::string& path, int64_t unix_s) {
  struct timespec times[2];
  times[0].tv_sec = unix_s;  // atime is set too, but never read: noatime mounts lie
  times[0].tv_nsec = 0;
  times[1] = times[0];
  if (utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW) == 0) return absl::OkStatus();
  if (errno != ENOENT) return ErrnoStatus(errno, "setting the time of", path);
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return ErrnoStatus(errno, "creating", path);
  FdCloser closer(fd);
  if (futimens(fd, times) != 0) return ErrnoStatus(errno, "setting the time of", path);
  return absl::OkStatus();
}

}  // namespace mlajit::cache::cache_internal
