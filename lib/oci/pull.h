// Pulling the images a profile lists into the cache, and writing them into the root
// as one OCI image layout.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "oci/cache.h"
#include "oci/manifest.h"
#include "util/result.h"

namespace sprout::oci {

// ImageSpec is one entry of a profile's `images:` list.
struct ImageSpec {
  std::string ref;                    // full reference, e.g. localhost/sprout/etcd:3.4
  std::string source;                 // "" = the registry; or recipe:DIR, oci:DIR, oci-archive:TAR, docker-archive:TAR
  std::filesystem::path credentials;  // docker-style config.json to read credentials from
  std::string platform;               // "" = the build host's, e.g. linux/arm64
};

// PreloadedImage is what the build put into the root, for the manifest and for whoever
// renders pod specs: reference, the digest its tag resolved to, and the digest of the
// platform manifest actually stored (the same unless the reference names an index).
struct PreloadedImage {
  std::string reference;
  std::string digest;
  std::string manifest_digest;
  std::string platform;
  std::uint64_t size = 0;  // manifest + config + layers, in bytes
};

// PullOptions are shared by every image of one pull.
struct PullOptions {
  std::filesystem::path cache_dir;
  bool offline = false;             // any need of the network is an error
  std::filesystem::path ca_bundle;  // extra CA bundle for registries
  int parallel = 6;
  bool tty = false;  // draw progress bars
};

// RecipeKey digests an image recipe (a folder with build.sh): the names and contents of
// its files, and of the folder `lib` beside it, where recipes keep the helpers they
// source (images/lib). A change to either gives a new key, so the image is built again.
Result<std::string> RecipeKey(const std::filesystem::path& dir);

// PullImages makes sure every image and all its blobs are in the cache and returns them
// in order. With offline set, an image missing from the cache is an error naming it.
Result<std::vector<PreloadedImage>> PullImages(const std::vector<ImageSpec>& specs, const PullOptions& options);

// WriteLayout writes one OCI image layout holding every image into dir (which must not
// exist): oci-layout, index.json (one entry per image, annotated with its reference)
// and blobs/sha256/, each blob once. Files are hard-linked from the cache when possible.
Status WriteLayout(const std::vector<PreloadedImage>& images, const Cache& cache, const std::filesystem::path& dir);

// LayoutIndex renders the layout's index.json: one entry per image, annotated with
// org.opencontainers.image.ref.name = its full reference.
Result<std::string> LayoutIndex(const std::vector<PreloadedImage>& images, const Cache& cache);

// LayoutBlobs lists the digests of an image's manifest, config and layers (from cache).
Result<std::vector<std::string>> ImageBlobs(const Cache& cache, const std::string& manifest_digest);

// ComponentOf is the component an image reference is for: the last element of its
// repository (localhost/sprout/etcd:3.4 and .../etcd@sha256:... -> etcd).
std::string ComponentOf(const std::string& reference);

// WorkerImages: the preloaded images a worker node imports at boot. A worker runs no
// control-plane pod, so it leaves out the images of etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler (by ComponentOf); all others, in order.
std::vector<PreloadedImage> WorkerImages(const std::vector<PreloadedImage>& images);

// ImagesJson renders the manifest.json "images" array.
std::string ImagesJson(const std::vector<PreloadedImage>& images);

}  // namespace sprout::oci
