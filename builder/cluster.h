// The cluster parts of a build: fetched files, static-pod templates, the Shoot's record.
#pragma once

#include <filesystem>
#include <vector>

#include "image/rootfs.h"
#include "profile/profile.h"
#include "util/result.h"

namespace sprout {

// FetchProfileFiles fetches every `url` file of the profile (and the kubelet binary) into
// the cache, checks every sha256 (also of `source` files that give one), and points the
// entries at the verified copies.
Status FetchProfileFiles(Profile& p, const std::filesystem::path& cache_dir);

// AddClusterFiles adds the static-pod templates (sprout's, then the profile's overrides
// and additions, each checked by rendering it with sample values), the Shoot's
// cluster.json, the /etc/kubernetes link into the state partition and, for the kubelet
// pod host, the kubelet binary, configuration and unit.
Status AddClusterFiles(const Profile& p, const std::filesystem::path& data_dir, std::vector<RootEntry>& add);

}  // namespace sprout
