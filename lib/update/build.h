// A build as an update reads it: manifest.json and sha256sums of a `sprout build`
// output directory, and the etcd version rule between two builds. Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "update/identity.h"
#include "util/extent.h"
#include "util/result.h"

namespace sprout::update {

// BuildInfo is what an update needs from a build's manifest.
struct BuildInfo {
  std::string profile;     // the profile's name
  std::string root_hash;   // 64 hex digits
  std::string raw_file;    // the raw image, relative to the build directory
  std::string raw_sha256;  // from the manifest
  std::uint64_t raw_size = 0;
  std::uint64_t raw_data_bytes = 0;     // its non-zero blocks (fetch.h SparseMap); 0 when not recorded
  std::vector<DataExtent> raw_extents;  // the runs that hold its data (dataExtents); empty when not recorded
  RecordedIdentity identity;            // its serial, profile, role and cluster (identity.h)
  std::string etcd_version;             // the preloaded etcd image's tag, "" when none
};

// ParseBuild reads manifest.json and sha256sums: the manifest must list a raw image (its
// dataExtents, when given, must be [offset, length] pairs of unsigned numbers; fetch.h
// CheckExtents judges them where they are used) and a readable identity (ReadIdentity),
// and sha256sums must list the manifest with manifest_sha256 (the digest of the bytes
// read). dir names the build in messages.
Result<BuildInfo> ParseBuild(const std::string& dir, const std::string& manifest_text,
                             const std::string& manifest_sha256, const std::string& sums_text);

// EtcdVersionOfImages is the tag of the image reference whose repository's last part
// is "etcd" in an "images" JSON array (manifest.json, image.json); "" when none.
std::string EtcdVersionOfImages(const std::string& images_json);

// CheckEtcdRule refuses an update that changes etcd's major or minor version (the data
// one version writes the other cannot read, so a rollback would not be safe); a patch
// change is allowed, and so is a build pair without etcd on either side.
Status CheckEtcdRule(const std::string& running, const std::string& next);

}  // namespace sprout::update
