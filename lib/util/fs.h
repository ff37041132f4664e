// File-system helpers: whole-file reads, atomic writes, and temporary directories.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace sprout {

namespace fs = std::filesystem;

// ReadFile returns a file's whole contents.
Result<std::string> ReadFile(const fs::path& path);

// SyncPath fsyncs a file or a directory (a directory: its entries, after a rename).
Status SyncPath(const fs::path& path);

// WriteFileAtomic writes contents to a temporary file beside path and renames it into
// place, so readers never see a half-written file. The temporary file is hidden
// (.NAME.tmp.PID): a program that takes every file of a folder, as the kubelet takes
// every file of its static-pod folder but the hidden ones, never sees it. (A visible one
// was a second static pod of the same name for a moment, and the 1.36 kubelet then never
// mounted the real pod's volumes.)
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

// RegularFilesUnder lists the regular files in dir's tree, sorted; the error is the
// file system's reason alone, for the caller to say what dir was.
Result<std::vector<fs::path>> RegularFilesUnder(const fs::path& dir);

// UserCacheDir is $XDG_CACHE_HOME/sprout or ~/.cache/sprout.
fs::path UserCacheDir();

// SystemCacheDir is the cache root and ./quickstart fill: /var/cache/sprout.
fs::path SystemCacheDir();

// CacheFacts are what the default cache depends on, gathered by DefaultCacheDir.
struct CacheFacts {
  std::string env;               // $SPROUT_CACHE_DIR, empty when unset
  bool root = false;             // running as root
  bool system_writable = false;  // the system cache exists and this user may write it
  fs::path system;               // SystemCacheDir()
  fs::path user;                 // UserCacheDir()
};

// ChooseCacheDir is the rule for the cache used without --cache-dir, one cache that
// root and the quickstart's user share (docs/images.md): $SPROUT_CACHE_DIR if set;
// else the system cache for root, or for a user who may write it; else the user's own.
fs::path ChooseCacheDir(const CacheFacts& facts);

// DefaultCacheDir is ChooseCacheDir over this process's facts.
fs::path DefaultCacheDir();

// SharedCaches are the caches read, never written, after cache_dir: the system cache
// when cache_dir is another one, so a user whose own cache lacks a base finds the one
// root built.
std::vector<fs::path> SharedCaches(const fs::path& cache_dir);

}  // namespace sprout
