// POSIX file helpers for the disk tier: errno-to-Status mapping, directory
// creation, bounded reads, atomic publication (temp + fsync + rename + dir fsync)
// and symlink-safe removal.
//
//   MLAJIT_RETURN_IF_ERROR(MakeDirs("/home/u/.cache/mlajit/v1/ab", 0700));
//   MLAJIT_RETURN_IF_ERROR(WriteFileAtomic(dir, "k.bin", bytes, hook));
//   MLAJIT_ASSIGN_OR_RETURN(FileData d, ReadFileBounded(path, 1 << 30));
#ifndef MLAJIT_SRC_CACHE_FS_UTIL_H_
#define MLAJIT_SRC_CACHE_FS_UTIL_H_

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mlajit::cache::cache_internal {

// See CacheOptions::fault_injection; may be empty.
using FaultHook = std::function<int(absl::string_view step)>;

// "<what> <path>: <strerror> (errno N)" with a code chosen from errno:
// ENOENT kNotFound, EACCES/EPERM/EROFS kPermissionDenied, ENOSPC/EDQUOT
// kResourceExhausted, anything else kInternal.
absl::Status ErrnoStatus(int err, absl::string_view what, absl::string_view path);

// Creates `path` and any missing parents with `mode` (existing ones untouched).
absl::Status MakeDirs(const std::string& path, mode_t mode, const FaultHook& hook = nullptr);

struct FileData {
  std::string bytes;
  struct stat st;
};
// Reads a regular file without following a final symlink. Files larger than
// max_bytes are refused before anything is allocated (kDataLoss).
absl::StatusOr<FileData> ReadFileBounded(const std::string& path, uint64_t max_bytes);

// Publishes `data` as dir/name: a private temp file beside it (O_EXCL, 0600),
// written, fsync'd, renamed over dir/name, then the directory fsync'd, so that a
// reader sees either the old file, the new one or none, never a partial one.
// The temp file is removed on failure.
absl::Status WriteFileAtomic(const std::string& dir, const std::string& name,
                             absl::string_view data, const FaultHook& hook);

// Temp files are named "<name>.tmp.<pid>.<n>"; returns "<name>" for such a file
// name, or empty for any other name.
std::string TempFileTarget(absl::string_view file_name);

absl::Status FsyncDir(const std::string& dir);

// Names in `dir` other than "." and "..". kNotFound if `dir` does not exist.
absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir);

// Removes `path` (file, or directory tree without following symlinks). Missing
// is fine. Counts removed "*.bin" files into *removed_entries when non-null.
absl::Status RemoveTree(const std::string& path, uint64_t* removed_entries = nullptr);

// unlink(), ignoring ENOENT.
absl::Status RemoveFile(const std::string& path);

// Sets the modification time of `path` to `unix_s`, creating it empty (0600) if
// missing.
absl::Status TouchAt(const std::string& path, int64_t unix_s);

std::string JoinPath(absl::string_view a, absl::string_view b);

}  // namespace mlajit::cache::cache_internal

#endif  // MLAJIT_SRC_CACHE_FS_UTIL_H_
