// The output directory's life cycle: a build works in a hidden work directory inside
// -o DIR (locked while it runs; those of killed builds are removed), signs the
// manifest there, and publishes by renaming, so DIR never holds a half-written build.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "util/fs.h"
#include "util/result.h"

namespace sprout::cli {

// WorkDirLock marks a work directory as in use (an flock held while the build runs)
// after removing work directories that builds killed earlier left in the same place.
class WorkDirLock {
 public:
  static Result<WorkDirLock> Claim(const std::filesystem::path& out_dir, const std::filesystem::path& work);
  WorkDirLock(WorkDirLock&& o) noexcept : fd_(o.fd_), removed_(o.removed_) { o.fd_ = -1; }
  WorkDirLock& operator=(WorkDirLock&&) = delete;
  WorkDirLock(const WorkDirLock&) = delete;
  WorkDirLock& operator=(const WorkDirLock&) = delete;
  ~WorkDirLock();
  int removed() const { return removed_; }

 private:
  explicit WorkDirLock(int fd, int removed) : fd_(fd), removed_(removed) {}
  int fd_ = -1;
  int removed_ = 0;
};

// Workspace is a build's locked work directory inside the output directory; it is
// removed with everything left in it when the build ends.
struct Workspace {
  explicit Workspace(const std::filesystem::path& dir) : out_dir(dir), work(dir, ".sprout-build") {}
  const std::filesystem::path& path() const { return work.path(); }

  std::filesystem::path out_dir;
  TempDir work;
  std::optional<WorkDirLock> lock;
};

// OpenWorkspace makes the output directory and a locked work directory in it. It also
// checks that the signing key (when one is given) exists, before any long step runs.
Result<std::unique_ptr<Workspace>> OpenWorkspace(const std::filesystem::path& out_dir,
                                                 const std::filesystem::path& sign_key);

// SignManifest writes manifest.json.sig beside manifest.json in dir.
Status SignManifest(const std::filesystem::path& dir, const std::filesystem::path& private_key);

// Publish moves names (files, or pxe/... as one directory) from work into out_dir, in
// order; the caller lists sha256sums last, so a reader that sees it sees everything it
// lists. A signature left by an earlier signed build is removed when names has none.
Status Publish(const std::filesystem::path& work, const std::filesystem::path& out_dir,
               const std::vector<std::string>& names);

}  // namespace sprout::cli
