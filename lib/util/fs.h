// File-system helpers: whole-file reads, atomic writes, and temporary directories.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "util/result.h"

namespace sprout {

namespace fs = std::filesystem;

// ReadFile returns a file's whole contents.
Result<std::string> ReadFile(const fs::path& path);

// SyncPath fsyncs a file or a directory (a directory: its entries, after a rename).
Status SyncPath(const fs::path& path);

// WriteFileAtomic writes contents to a temporary file beside path and renames it into
// place, so readers never see a half-written file.
Status WriteFileAtomic(const fs::path& path, std::string_view contents, fs::perms mode = fs::perms(0644));

// TempDir is a directory removed with everything in it when the object dies, unless
// Keep() was called.
class TempDir {
 public:
  // TempDir creates a fresh directory named prefix-XXXXXX inside parent.
  explicit TempDir(const fs::path& parent, const std::string& prefix = "sprout");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const fs::path& path() const { return path_; }
  // Keep leaves the directory on disk when the object dies.
  void Keep() { keep_ = true; }

 private:
  fs::path path_;
  bool keep_ = false;
};

// ContentDigest is "sha256:HEX" of what path holds, whatever its name or place: a
// file's bytes, a symlink's target, or a folder's tree (every entry's name relative to
// the folder, its kind, whether its owner may run it, and its content, in name order).
// Other mode bits are left out, as sprout's copies of trees leave them out.
Result<std::string> ContentDigest(const fs::path& path);

// UserCacheDir is $XDG_CACHE_HOME/sprout or ~/.cache/sprout.
fs::path UserCacheDir();

}  // namespace sprout
