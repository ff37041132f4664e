#include "staticpod/kubelet.h"

#include <yaml-cpp/yaml.h>

#include <charconv>

#include "util/text.h"

namespace sprout {

namespace {

// VersionParts reads "vMAJOR.MINOR[.PATCH...]" into major and minor.
bool VersionParts(std::string_view v, int& major, int& minor) {
  if (!v.starts_with('v')) return false;
  v.remove_prefix(1);
  const auto dot = v.find('.');
  if (dot == std::string_view::npos) return false;
  auto rest = v.substr(dot + 1);
  const auto end = rest.find_first_not_of("0123456789");
  auto minor_text = rest.substr(0, end);
  if (end != std::string_view::npos && rest[end] != '.' && rest[end] != '-') return false;
  auto a = std::from_chars(v.data(), v.data() + dot, major);
  auto b = std::from_chars(minor_text.data(), minor_text.data() + minor_text.size(), minor);
  return a.ec == std::errc() && a.ptr == v.data() + dot && b.ec == std::errc() && !minor_text.empty() &&
         b.ptr == minor_text.data() + minor_text.size();
}

}  // namespace

Result<Stack> ParseStackVersions(const std::string& text) {
  Stack stack;
  int line_no = 0;
  for (const auto& raw : Split(text, '\n')) {
    ++line_no;
    const std::string_view line = Trim(raw);
    if (line.empty() || line.starts_with('#')) continue;
    const auto space = line.find(' ');
    const std::string component(line.substr(0, space));
    const std::string version(space == std::string_view::npos ? "" : Trim(line.substr(space + 1)));
    if (component != "kubernetes" && component != "containerd") continue;
    int major = 0, minor = 0;
    if (!VersionParts(version, major, minor)) {
      return Fail("line " + std::to_string(line_no) + ": the " + component + " version '" + version +
                  "' is not vMAJOR.MINOR.PATCH");
    }
    if (component == "kubernetes") {
      if (major != 1) return Fail("line " + std::to_string(line_no) + ": Kubernetes " + version + " is not 1.x");
      stack.kubernetes_minor = minor;
      stack.kubernetes = version;
    } else {
      stack.containerd_major = major;
      stack.containerd_minor = minor;
      stack.containerd = version;
    }
  }
  return stack;
}

Result<std::string> KubeletConfigYaml(const std::string& overrides_yaml, const std::string& cluster_dns,
                                      const Stack& stack) {
  YAML::Node config = YAML::Load(R"(apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: /etc/kubernetes/manifests
cgroupDriver: systemd
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: /etc/kubernetes/pki/ca.crt
authorization:
  mode: Webhook
clusterDomain: cluster.local
rotateCertificates: true
serverTLSBootstrap: true
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 50Mi
  nodefs.available: 5%
  imagefs.available: 5%
)");
  if (stack.kubernetes_minor >= 24) {
    // The CRI socket is a field since the --container-runtime flags went (1.24-1.27).
    config["containerRuntimeEndpoint"] = "unix:///run/containerd/containerd.sock";
    // 1.35+ refuses cgroup v1 by default. Booted nodes run cgroup v2; a container node
    // shares its host's cgroups, which may be v1 (docs/container-nodes.md).
    config["failCgroupV1"] = false;
  }
  if (!cluster_dns.empty()) config["clusterDNS"].push_back(cluster_dns);
  if (!overrides_yaml.empty()) {
    YAML::Node extra;
    try {
      extra = YAML::Load(overrides_yaml);
    } catch (const YAML::Exception& e) {
      return Fail("kubelet.config is not valid YAML: " + e.msg);
    }
    if (!extra.IsMap()) return Fail("kubelet.config must be a mapping of KubeletConfiguration fields");
    for (auto it = extra.begin(); it != extra.end(); ++it) {
      const std::string key = it->first.Scalar();
      if (key == "apiVersion" || key == "kind") {
        return Fail("kubelet.config must not set '" + key + "'; sprout writes it");
      }
      config[key] = it->second;
    }
  }
  YAML::Emitter out;
  out << config;
  return std::string(out.c_str()) + "\n";
}

std::string KubeletUnit(const Stack& stack) {
  // Container stats every 30 s, not 10 s: on a slow node the kubelet's housekeeping
  // costs as much CPU as the apiserver (1.36 still has no field for it).
  // At first boot neither kubeconfig exists yet and the unit is skipped; sprout-firstboot
  // writes one and starts it. Later boots start it at once, so static pods come back
  // without waiting for formation.
  // 1.20 takes the CRI socket as flags; from 1.24 it is the configuration's
  // containerRuntimeEndpoint, and 1.27 removed --container-runtime.
  const std::string runtime =
      stack.kubernetes_minor >= 24
          ? ""
          : " --container-runtime=remote --container-runtime-endpoint=unix:///run/containerd/containerd.sock";
  return R"([Unit]
Description=kubelet: runs this node's pods (configured by sprout)
Documentation=file:/usr/share/doc/sprout/control-plane.md
After=containerd.service sprout-images.service
Requires=containerd.service
ConditionPathExists=|/etc/kubernetes/kubelet.conf
ConditionPathExists=|/etc/kubernetes/bootstrap-kubelet.conf

[Service]
EnvironmentFile=-/etc/kubernetes/kubelet.env
ExecStart=/usr/bin/kubelet --config=/usr/lib/sprout/kubelet/config.yaml --kubeconfig=/etc/kubernetes/kubelet.conf --bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf)" +
         runtime + R"( --housekeeping-interval=30s $KUBELET_ARGS
Restart=always
RestartSec=5

[Install]
WantedBy=multi-user.target
)";
}

std::string KubeletEnv(const std::string& node_name, const std::string& node_ip, bool control_plane) {
  std::string args = "--node-ip=" + node_ip + " --hostname-override=" + node_name;
  if (control_plane) args += " --register-with-taints=node-role.kubernetes.io/control-plane=:NoSchedule";
  return "# written by sprout-firstboot: this node's kubelet and kube-proxy arguments\nKUBELET_ARGS=\"" + args +
         "\"\nKUBE_PROXY_ARGS=\"--hostname-override=" + node_name + " --bind-address=" + node_ip + "\"\n";
}

std::string KubeProxyConfigYaml(const std::string& cluster_cidr, const Stack& stack) {
  // conntrack maxPerCore 0: kube-proxy leaves the kernel's conntrack table size alone
  // (it would otherwise write sysctls a read-only or constrained node may refuse).
  std::string out = R"(apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: )" + std::string(KubeProxyMode(stack)) +
                    R"(
clientConnection:
  kubeconfig: /etc/kubernetes/kubelet.conf
conntrack:
  maxPerCore: 0
)";
  if (!cluster_cidr.empty()) out += "clusterCIDR: " + cluster_cidr + "\n";
  return out;
}

const char* KubeProxyMode(const Stack& stack) { return stack.kubernetes_minor >= 33 ? "nftables" : "iptables"; }

std::string KubeProxyUnit() {
  return R"([Unit]
Description=kube-proxy: this node's Service ClusterIPs, in the kernel's packet filter (configured by sprout)
Documentation=file:/usr/share/doc/sprout/control-plane.md
After=kubelet.service
ConditionPathExists=/etc/kubernetes/kubelet.conf

[Service]
EnvironmentFile=-/etc/kubernetes/kubelet.env
ExecStart=/usr/bin/kube-proxy --config=/usr/lib/sprout/kube-proxy/config.yaml $KUBE_PROXY_ARGS
Restart=always
RestartSec=5

[Install]
WantedBy=multi-user.target
)";
}

std::string KubeProxyModules() {
  return "# written by sprout: bridged pod traffic passes iptables (kube-proxy)\nbr_netfilter\n";
}

std::string KubeProxySysctl() {
  return "# written by sprout: kube-proxy's rules see bridged pod traffic, and the node forwards\n"
         "net.bridge.bridge-nf-call-iptables = 1\n"
         "net.ipv4.ip_forward = 1\n";
}

std::string ContainerdConfig(const std::string& sandbox_image, const Stack& stack) {
  if (stack.containerd_major >= 2) {
    // containerd 2's file (version 3; 4 from 2.3): the CRI plugin is split into cri.v1.images (the
    // sandbox image is a pinned image, never collected) and cri.v1.runtime; the opt
    // plugin of 1.x is gone.
    return R"(# containerd 2 for the kubelet, written by sprout: the pod sandbox is the preloaded
# pause image (pinned: nothing is ever pulled for it, and it is never collected), cgroups
# through systemd as the kubelet's, the image's CNI plugins, and the network
# configuration on the writable state partition. A site's own registry is configured at
# run time, with no restart, by a hosts.toml in /var/lib/sprout/registries/HOST[:PORT]/
# on the state partition (docs/control-plane.md).
# No pod's oom_score_adj goes below containerd's own: a no-op on a node, where containerd
# runs at -999, below every pod's; on a host that withholds CAP_SYS_RESOURCE from
# containers (a container node, docs/container-nodes.md) it keeps runc from failing on
# the sandbox's -998.
version = )" +
           std::string(stack.containerd_major > 2 || stack.containerd_minor >= 3 ? "4" : "3") +
           R"(

[plugins."io.containerd.cri.v1.images".pinned_images]
  sandbox = ")" +
           sandbox_image + R"("

[plugins."io.containerd.cri.v1.images".registry]
  config_path = "/etc/containerd/certs.d:/var/lib/sprout/registries"

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true

[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
  SystemdCgroup = true

[plugins."io.containerd.cri.v1.runtime".cni]
  bin_dirs = ["/usr/lib/cni"]
  conf_dir = "/etc/kubernetes/cni/net.d"
)";
  }
  return R"(# containerd for the kubelet, written by sprout: the pod sandbox is the preloaded pause
# image (nothing is ever pulled for it), cgroups through systemd as the kubelet's,
# Debian's CNI plugins, and the network configuration on the writable state partition.
# A site's own registry is configured at run time, with no restart, by a hosts.toml in
# /var/lib/sprout/registries/HOST[:PORT]/ on the state partition (docs/control-plane.md).
# No pod's oom_score_adj goes below containerd's own: a no-op on a node, where containerd
# runs at -999, below every pod's; on a host that withholds CAP_SYS_RESOURCE from
# containers (a container node, docs/container-nodes.md) it keeps runc from failing on
# the sandbox's -998.
version = 2

[plugins."io.containerd.internal.v1.opt"]
  path = "/var/lib/containerd/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = ")" +
         sandbox_image + R"("
  restrict_oom_score_adj = true

[plugins."io.containerd.grpc.v1.cri".registry]
  config_path = "/etc/containerd/certs.d:/var/lib/sprout/registries"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = true

[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = "/usr/lib/cni"
  conf_dir = "/etc/kubernetes/cni/net.d"
)";
}

}  // namespace sprout
