// What a build says about itself: sprout/image.json on the ESP (read by `sprout
// inspect`), manifest.json and sha256sums in the output directory, and the SBOM's
// document namespace. Pure renderings of plain structs: equal inputs, equal bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "image/media.h"
#include "image/plan.h"
#include "profile/profile.h"
#include "util/extent.h"

namespace sprout {

// BuildIdentity is what an updating node compares between the build it runs and the
// one it is given (docs/updates.md; lib/update/identity.h reads it back): manifest.json
// and image.json record it as "update".
struct BuildIdentity {
  std::int64_t serial = 0;  // grows with every release; an update must raise it
  std::string profile;      // the profile whose nodes the build updates
  std::string role;         // "control-plane" or "worker": the overlay and first-boot role baked in
  std::string cluster;      // the cluster name its nodes form under: the Shoot's name, else "sprout"
};

// kDefaultClusterName is the cluster name of an image whose profile names no Shoot
// (sprout-firstboot's default, lib/settings).
inline constexpr const char* kDefaultClusterName = "sprout";

// IdentityOfBuild is the identity of a build of p with the given epoch: update.serial,
// else the epoch (so a build with a later epoch has a higher serial); update.profile,
// else p's name; p's role; its Shoot's name, else kDefaultClusterName.
BuildIdentity IdentityOfBuild(const Profile& p, std::int64_t epoch);

// ImageMetadata renders sprout/image.json: what `sprout inspect` reports about an image,
// and what an updating node reads of the build it runs. workloads_json is the index of
// the workloads in the root (docs/workloads.md); "" (no workloads) leaves it out.
std::string ImageMetadata(const std::string& profile_json, const BuildIdentity& identity, const std::string& root_hash,
                          const std::string& kernel, const std::string& seed, const std::string& images_json,
                          const std::string& workloads_json = "");

// SbomNamespace is the SPDX document namespace of a build: unique per profile and seed.
std::string SbomNamespace(const std::string& profile_name, const std::string& seed);

// OutputFile is one file of the output directory as the manifest lists it.
struct OutputFile {
  std::string file;  // relative to the output directory, such as "pxe/initrd.img"
  std::uint64_t size = 0;
  std::string sha256;
  std::uint64_t data_bytes =
      0;  // a raw disk's non-zero 4 KiB blocks, what a sparse download of it takes; 0: not recorded
  std::vector<DataExtent> extents;  // a raw disk's: the runs that hold its data (fetch.h SparseMap)
};

// ManifestInputs is everything manifest.json records.
struct ManifestInputs {
  std::string profile_json;  // the resolved profile
  BuildIdentity identity;    // what an updating node compares
  std::string base_id;
  std::string kernel_version;
  std::string seed;
  const DiskPlan* plan = nullptr;  // identifiers and the root hash
  std::string images_json;         // the preloaded images (oci::ImagesJson)
  std::string sbom_file;
  std::size_t sbom_packages = 0;
  std::string sbom_sha256;
  std::vector<OutputFile> outputs;  // the media, in the order they were made
  std::string inputs_json;          // the inputs by content (image/inputs.h), which the seed digests
};

// ManifestJson renders manifest.json.
std::string ManifestJson(const ManifestInputs& in);

// RenderSha256Sums renders a sha256sums file, one "HEX  NAME" line per entry, in order.
std::string RenderSha256Sums(const std::vector<SumLine>& lines);

}  // namespace sprout
