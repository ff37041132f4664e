// The kubelet pod host: its configuration file and systemd unit.
#pragma once

#include <string>

#include "util/result.h"

namespace sprout {

// KubeletConfigYaml renders the KubeletConfiguration sprout bakes into kubelet images:
// staticPodPath /etc/kubernetes/manifests, containerd's CRI socket, the systemd cgroup
// driver, webhook authn/authz with the cluster CA. overrides_yaml (the profile's
// kubelet.config mapping) replaces top-level fields; an invalid mapping is an error.
Result<std::string> KubeletConfigYaml(const std::string& overrides_yaml);

// KubeletUnit is the systemd unit that runs /usr/bin/kubelet with that configuration.
std::string KubeletUnit();

}  // namespace sprout
