// The media beyond the raw disk (hybrid ISO, PXE bundle), the output directory's
// life cycle (work-directory locks, stale-work cleanup, publishing), and the
// `keygen`, `verify` and `inspect` commands.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "image/plan.h"
#include "profile/profile.h"
#include "util/result.h"

namespace sprout::cli {

// MediaInputs is what every live medium is made of: the one root and its hash tree,
// and the boot files the raw disk's ESP holds.
struct MediaInputs {
  const Profile* profile = nullptr;
  const DiskPlan* plan = nullptr;
  std::string seed;
  std::filesystem::path work;  // the build's work directory; outputs are written here
  std::filesystem::path root_img, verity_img;
  std::string kernel, initrd, bootloader;  // file contents
  std::string metadata;                    // sprout/image.json
  std::int64_t epoch = 0;
};

// ImageMetadata renders sprout/image.json: what `sprout inspect` reports about an image.
std::string ImageMetadata(const std::string& profile_json, const std::string& root_hash, const std::string& kernel,
                          const std::string& seed, const std::string& images_json);

// MakeIso writes NAME.iso into the work directory and returns its file name.
Result<std::string> MakeIso(const MediaInputs& in);

// MakePxe writes pxe/{vmlinuz,initrd.img,boot.ipxe} into the work directory and
// returns their names relative to it.
Result<std::vector<std::string>> MakePxe(const MediaInputs& in);

// WorkDirLock marks a work directory as in use (an flock held while the build runs)
// after removing work directories that builds killed earlier left in the same place.
class WorkDirLock {
 public:
  static Result<WorkDirLock> Claim(const std::filesystem::path& out_dir, const std::filesystem::path& work);
  WorkDirLock(WorkDirLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
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

// SignManifest writes manifest.json.sig beside manifest.json in dir.
Status SignManifest(const std::filesystem::path& dir, const std::filesystem::path& private_key);

// Publish moves names (files, or pxe/... as one directory) from work into out_dir.
Status Publish(const std::filesystem::path& work, const std::filesystem::path& out_dir,
               const std::vector<std::string>& names);

int Keygen(const std::filesystem::path& prefix);
int Verify(const std::filesystem::path& dir, const std::filesystem::path& public_key);
int Inspect(const std::filesystem::path& image, bool json);

}  // namespace sprout::cli
