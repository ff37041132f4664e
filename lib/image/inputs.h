// What a build is made from, recorded by content: the text the seed digests and
// manifest.json's "inputs". Paths never enter it; what they name does.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "profile/profile.h"
#include "util/result.h"

namespace sprout {

// DigestFn gives the content digest of a file or a folder tree (util/fs.h's
// ContentDigest; tests pass a fake).
using DigestFn = std::function<Result<std::string>(const std::filesystem::path&)>;

// InputsJson renders the build's inputs by content: the resolved profile's settings
// (ProfileToJson, with the epoch the build uses) with every path replaced by what it
// names: the base by its identity (base_id: a recipe's key or a digest), overlays,
// source files, static-pod folders, image and kubelet recipes and workloads (charts,
// manifests, values files) by their digests, the Shoot by its parsed fields; the
// `extends` chain and registry credentials are left out
// (their effect is already in the merged settings, or in the pulled images' digests).
// Equal contents give equal text, wherever the checkout, the profile or the working
// directory sit.
Result<std::string> InputsJson(const Profile& profile, std::int64_t epoch, const std::string& base_id,
                               const DigestFn& digest);

}  // namespace sprout
