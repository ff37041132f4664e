// Container images in the builder: `sprout pull`, and the preload step of `sprout build`.
#pragma once

#include <filesystem>
#include <optional>
#include <vector>

#include "image/rootfs.h"
#include "oci/pull.h"
#include "profile/profile.h"
#include "util/result.h"

namespace sprout::cli {

// PullCliOptions are the settings of `sprout pull`.
struct PullCliOptions {
  std::filesystem::path profile;
  std::filesystem::path cache_dir;
  std::filesystem::path ca_bundle;
  std::filesystem::path layout;  // if set, also write the images as one OCI layout here
  bool offline = false;
  int parallel = 6;
  std::optional<Arch> arch;  // --arch: overrides the profile's arch
};

// Pull fetches every image of a profile into the cache and prints reference and digest.
int Pull(const PullCliOptions& options);

// kImagesDir is where the one OCI layout of all preloaded images lives in the root.
inline constexpr const char* kImagesDir = "usr/share/sprout/images";
// kWorkerImagesDir holds, for a kubelet image whose preload has control-plane images, a
// worker's part of that layout: index.json with the images a worker runs, and blobs,
// the layout's paths of the blobs those images name, one a line (oci::WorkerImages).
inline constexpr const char* kWorkerImagesDir = "usr/share/sprout/images-worker";

// PreloadImages makes sure the profile's images are cached (pulling unless offline),
// and appends to add the in-root OCI layout (blobs shared between images) plus the
// boot-time import unit. It returns the images for the build manifest.
Result<std::vector<oci::PreloadedImage>> PreloadImages(const Profile& profile, const std::filesystem::path& cache_dir,
                                                       bool offline, const std::filesystem::path& ca_bundle,
                                                       std::vector<RootEntry>& add);

// SpecsOf turns a profile's `images:` into pull specs.
std::vector<oci::ImageSpec> SpecsOf(const Profile& profile);

}  // namespace sprout::cli
