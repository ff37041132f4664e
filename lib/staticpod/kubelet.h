// The kubelet pod host: its configuration file and systemd unit.
#pragma once

#include <string>

#include "util/result.h"

namespace sprout {

// Stack is what a kubelet recipe says of the versions it gives (the `versions` file in
// the folder its host.sh prints: "COMPONENT VERSION" lines, docs/stack.md). It decides
// the kubelet's flags and configuration file and containerd's configuration. A recipe
// with no such file (images/kubernetes: Debian's 1.20 with Debian's containerd 1.6) is
// the default.
struct Stack {
  int kubernetes_minor = 20;  // Kubernetes 1.MINOR (the kubelet, kube-proxy)
  int containerd_major = 1;
  int containerd_minor = 6;
  std::string kubernetes = "v1.20";  // the versions as the file gives them, for messages
  std::string containerd = "v1";
};

// ParseStackVersions reads a `versions` file. Unknown components are passed over; a
// kubernetes or containerd line whose version is not vMAJOR.MINOR[.PATCH] is an error
// naming the line. Kubernetes must be 1.x.
Result<Stack> ParseStackVersions(const std::string& text);

// KubeletConfigYaml renders the KubeletConfiguration sprout bakes into kubelet images:
// staticPodPath /etc/kubernetes/manifests, containerd's CRI socket, the systemd cgroup
// driver, webhook authn/authz with the cluster CA. overrides_yaml (the profile's
// kubelet.config mapping) replaces top-level fields; an invalid mapping is an error.
// From Kubernetes 1.24 on the CRI socket is the file's containerRuntimeEndpoint (the
// --container-runtime flags are gone), and the file sets failCgroupV1: false, without
// which the 1.35+ kubelet refuses a cgroup v1 host (a container node on one,
// docs/container-nodes.md).
Result<std::string> KubeletConfigYaml(const std::string& overrides_yaml, const std::string& cluster_dns = "",
                                      const Stack& stack = {});

// KubeletUnit is the systemd unit that runs /usr/bin/kubelet with that configuration and
// containerd's CRI socket; per-node flags come from /etc/kubernetes/kubelet.env.
std::string KubeletUnit(const Stack& stack = {});

// KubeletEnv is /etc/kubernetes/kubelet.env, the node's own kubelet arguments: its name
// (the CN of its certificate) and address, and on a control-plane node the NoSchedule
// taint it registers with; and kube-proxy's (the same name and address).
std::string KubeletEnv(const std::string& node_name, const std::string& node_ip, bool control_plane);

// KubeProxyMode is the mode kube-proxy runs in: nftables from Kubernetes 1.33 on (GA
// there; measured against iptables by bench/kube-proxy-modes, docs/stack.md), iptables
// before (1.20 has no nftables mode).
const char* KubeProxyMode(const Stack& stack);

// KubeProxyConfigYaml is the KubeProxyConfiguration of a node's kube-proxy: the mode of
// KubeProxyMode(stack), the node's own kubelet.conf as its credentials (nodes are
// granted system:node-proxier; lib/kube/bootstrap.h), cluster_cidr (the Shoot's pods
// network; "" leaves it out) for telling pod traffic from outside traffic, and conntrack
// limits left as the kernel has them.
std::string KubeProxyConfigYaml(const std::string& cluster_cidr, const Stack& stack = {});

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
// the preloaded pause image, so no pod ever needs a pull. containerd 1.x gets a version 2
// file (the grpc.v1.cri plugin), containerd 2.x the cri.v1.images and cri.v1.runtime
// plugins, in a version 3 file (2.0-2.2) or 4 (2.3+, its current version: the same
// plugin sections; 4 moved the server's settings, which sprout leaves alone, into plugins).
std::string ContainerdConfig(const std::string& sandbox_image, const Stack& stack = {});

}  // namespace sprout
