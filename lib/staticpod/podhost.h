// The node side of static pods: render the baked templates into the manifest folder and
// name the systemd units that run them on a podman host.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "staticpod/staticpod.h"
#include "util/result.h"

namespace sprout {

// SystemdEscapePath escapes a path as `systemd-escape --path` does, for unit instances.
std::string SystemdEscapePath(std::string_view path);

// PodmanKubeUnit is the podman-kube@.service instance that runs one manifest.
std::string PodmanKubeUnit(const std::filesystem::path& manifest);

// RenderedPod is one manifest written for this node.
struct RenderedPod {
  std::string name;                // template name without .yaml
  std::filesystem::path manifest;  // where it was written
};

// NodeManifests says what WriteNodeManifests wrote and what it left out, and why.
struct NodeManifests {
  std::vector<RenderedPod> written;
  std::vector<std::string> skipped;  // "kube-apiserver: no preloaded image (image_kube_apiserver)"
  std::vector<std::string> changed;  // names whose manifest is new or differs from what was there
};

// WriteNodeManifests renders every NAME.yaml in templates_dir (or only the names listed)
// into out_dir/NAME.yaml, atomically, adapted for podman when for_podman. A template
// whose image is not preloaded on this node is skipped with the reason; any other
// rendering problem is an error.
Result<NodeManifests> WriteNodeManifests(const std::filesystem::path& templates_dir,
                                         const std::filesystem::path& out_dir, const StaticPodInput& in,
                                         bool for_podman, const std::vector<std::string>& only = {});

}  // namespace sprout
