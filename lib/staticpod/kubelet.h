// The kubelet pod host: its configuration file and systemd unit.
#pragma once

#include <string>

#include "util/result.h"

namespace sprout {

// KubeletConfigYaml renders the KubeletConfiguration sprout bakes into kubelet images:
// staticPodPath /etc/kubernetes/manifests, containerd's CRI socket, the systemd cgroup
// driver, webhook authn/authz with the cluster CA. overrides_yaml (the profile's
// kubelet.config mapping) replaces top-level fields; an invalid mapping is an error.
Result<std::string> KubeletConfigYaml(const std::string& overrides_yaml, const std::string& cluster_dns = "");

// KubeletUnit is the systemd unit that runs /usr/bin/kubelet with that configuration and
// containerd's CRI socket; per-node flags come from /etc/kubernetes/kubelet.env.
std::string KubeletUnit();

// KubeletEnv is /etc/kubernetes/kubelet.env, the node's own kubelet arguments: its name
// (the CN of its certificate) and address, and on a control-plane node the NoSchedule
// taint it registers with; and kube-proxy's (the same name and address).
std::string KubeletEnv(const std::string& node_name, const std::string& node_ip, bool control_plane);

// KubeProxyConfigYaml is the KubeProxyConfiguration of a node's kube-proxy: iptables
// mode, the node's own kubelet.conf as its credentials (nodes are granted
// system:node-proxier; lib/kube/bootstrap.h), cluster_cidr (the Shoot's pods network; ""
// leaves it out) for telling pod traffic from outside traffic, and conntrack limits left
// as the kernel has them.
std::string KubeProxyConfigYaml(const std::string& cluster_cidr);

// KubeProxyUnit runs /usr/bin/kube-proxy with that configuration once the node has a
// kubelet.conf (at first boot sprout-firstboot's node agent starts it after the pod
// network is set up; later boots start it at once).
std::string KubeProxyUnit();

// KubeProxyKernelSettings are the files that make bridged pod traffic pass iptables
// (br_netfilter, bridge-nf-call-iptables) and let the node forward: a modules-load.d
// and a sysctl.d text.
std::string KubeProxyModules();
std::string KubeProxySysctl();

// ContainerdConfig is /etc/containerd/config.toml for a kubelet node: sandbox_image is
// the preloaded pause image, so no pod ever needs a pull.
std::string ContainerdConfig(const std::string& sandbox_image);

}  // namespace sprout
