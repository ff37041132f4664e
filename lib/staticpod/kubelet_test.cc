#include "staticpod/kubelet.h"

#include <yaml-cpp/yaml.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>

#include "tests/golden.h"
#include "util/fs.h"

namespace sprout {
namespace {

TEST_CASE("The kubelet configuration points at the static pod folder and containerd, and takes overrides") {
  auto plain = KubeletConfigYaml("");
  REQUIRE(plain.ok());
  auto y = YAML::Load(*plain);
  CHECK(y["kind"].Scalar() == "KubeletConfiguration");
  CHECK(y["staticPodPath"].Scalar() == "/etc/kubernetes/manifests");
  // kubelet 1.20 takes the runtime endpoint as a flag only (the unit passes it).
  CHECK_FALSE(y["containerRuntimeEndpoint"]);
  // Preloaded images must survive image garbage collection.
  CHECK(y["imageGCHighThresholdPercent"].as<int>() == 100);

  auto tuned = KubeletConfigYaml("maxPods: 60\ncgroupDriver: cgroupfs\n");
  REQUIRE(tuned.ok());
  auto t = YAML::Load(*tuned);
  CHECK(t["maxPods"].as<int>() == 60);
  CHECK(t["cgroupDriver"].Scalar() == "cgroupfs");
  CHECK(t["staticPodPath"].Scalar() == "/etc/kubernetes/manifests");

  // Without DNS no clusterDNS; with it, the node-local server, in the cluster domain.
  CHECK_FALSE(y["clusterDNS"]);
  auto with_dns = KubeletConfigYaml("", "169.254.20.10");
  REQUIRE(with_dns.ok());
  auto dns = YAML::Load(*with_dns);
  REQUIRE(dns["clusterDNS"].IsSequence());
  CHECK(dns["clusterDNS"][0].Scalar() == "169.254.20.10");
  CHECK(dns["clusterDomain"].Scalar() == "cluster.local");

  auto bad = KubeletConfigYaml("kind: Other\n");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().find("must not set 'kind'") != std::string::npos);
  CHECK(KubeletUnit().find("--config=/usr/lib/sprout/kubelet/config.yaml") != std::string::npos);
  CHECK(KubeletUnit().find("--container-runtime-endpoint=unix:///run/containerd/containerd.sock") != std::string::npos);
}

TEST_CASE("The kubelet's per-node arguments name the node, its address and the control-plane taint") {
  const std::string cp = KubeletEnv("node-1", "198.18.0.11", true);
  CHECK(cp.find("KUBELET_ARGS=\"--node-ip=198.18.0.11 --hostname-override=node-1 "
                "--register-with-taints=node-role.kubernetes.io/control-plane=:NoSchedule\"") != std::string::npos);
  const std::string worker = KubeletEnv("node-4", "198.18.0.14", false);
  CHECK(worker.find("--register-with-taints") == std::string::npos);
  CHECK(worker.find("--hostname-override=node-4") != std::string::npos);
  CHECK(worker.find("KUBE_PROXY_ARGS=\"--hostname-override=node-4 --bind-address=198.18.0.14\"") != std::string::npos);
}

TEST_CASE("kube-proxy runs in iptables mode on the node's kubelet credentials, once they exist") {
  const std::string c = KubeProxyConfigYaml("10.244.0.0/16");
  CHECK(c.find("kind: KubeProxyConfiguration") != std::string::npos);
  CHECK(c.find("mode: iptables\n") != std::string::npos);
  CHECK(c.find("kubeconfig: /etc/kubernetes/kubelet.conf") != std::string::npos);
  CHECK(c.find("clusterCIDR: 10.244.0.0/16") != std::string::npos);
  CHECK(KubeProxyConfigYaml("").find("clusterCIDR") == std::string::npos);
  const std::string unit = KubeProxyUnit();
  CHECK(unit.find("ConditionPathExists=/etc/kubernetes/kubelet.conf") != std::string::npos);
  CHECK(unit.find("--config=/usr/lib/sprout/kube-proxy/config.yaml $KUBE_PROXY_ARGS") != std::string::npos);
  CHECK(unit.find("EnvironmentFile=-/etc/kubernetes/kubelet.env") != std::string::npos);
  CHECK(KubeProxyModules().find("\nbr_netfilter\n") != std::string::npos);
  CHECK(KubeProxySysctl().find("net.bridge.bridge-nf-call-iptables = 1") != std::string::npos);
}

TEST_CASE("kube-proxy runs in nftables mode from Kubernetes 1.33 on, iptables before") {
  Stack s;
  for (int minor : {20, 32}) {
    s.kubernetes_minor = minor;
    CHECK(std::string(KubeProxyMode(s)) == "iptables");
    CHECK(KubeProxyConfigYaml("10.244.0.0/16", s).find("\nmode: iptables\n") != std::string::npos);
  }
  for (int minor : {33, 36}) {
    s.kubernetes_minor = minor;
    CHECK(std::string(KubeProxyMode(s)) == "nftables");
    const std::string c = KubeProxyConfigYaml("10.244.0.0/16", s);
    CHECK(c.find("\nmode: nftables\n") != std::string::npos);
    CHECK(c.find("clusterCIDR: 10.244.0.0/16") != std::string::npos);
  }
}

TEST_CASE("containerd's sandbox is the preloaded pause image, with systemd cgroups and Debian's CNI plugins") {
  const std::string c = ContainerdConfig("localhost/sprout/pause@sha256:" + std::string(64, 'a'));
  CHECK(c.find("sandbox_image = \"localhost/sprout/pause@sha256:" + std::string(64, 'a') + "\"") != std::string::npos);
  CHECK(c.find("SystemdCgroup = true") != std::string::npos);
  CHECK(c.find("bin_dir = \"/usr/lib/cni\"") != std::string::npos);
  // Registries: hosts.toml files, read at each pull, from the image and the state partition.
  CHECK(c.find("config_path = \"/etc/containerd/certs.d:/var/lib/sprout/registries\"") != std::string::npos);
}

TEST_CASE("A recipe's versions file says which kubelet and containerd the configuration is for") {
  auto none = ParseStackVersions("");
  REQUIRE(none.ok());
  CHECK(none->kubernetes_minor == 20);
  CHECK(none->containerd_major == 1);

  auto stack = ParseStackVersions("kubernetes v1.36.5\netcd v3.6.16\ncontainerd v2.3.7\nrunc v1.5.2\n");
  REQUIRE(stack.ok());
  CHECK(stack->kubernetes_minor == 36);
  CHECK(stack->kubernetes == "v1.36.5");
  CHECK(stack->containerd_major == 2);
  CHECK(stack->containerd == "v2.3.7");

  auto bad = ParseStackVersions("etcd v3.6.16\nkubernetes 1.36\n");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error() == "line 2: the kubernetes version '1.36' is not vMAJOR.MINOR.PATCH");
  auto two = ParseStackVersions("kubernetes v2.0.0\n");
  REQUIRE_FALSE(two.ok());
  CHECK(two.error() == "line 1: Kubernetes v2.0.0 is not 1.x");
  CHECK_FALSE(ParseStackVersions("containerd vX.3\n").ok());
}

TEST_CASE("A 1.36 kubelet gets the CRI socket in its file, no removed flag, and starts on cgroup v1") {
  auto stack = ParseStackVersions("kubernetes v1.36.5\ncontainerd v2.3.7\n");
  REQUIRE(stack.ok());
  auto config = KubeletConfigYaml("", "169.254.20.10", *stack);
  REQUIRE(config.ok());
  auto y = YAML::Load(*config);
  CHECK(y["containerRuntimeEndpoint"].Scalar() == "unix:///run/containerd/containerd.sock");
  CHECK(y["failCgroupV1"].as<bool>() == false);
  CHECK(y["clusterDNS"][0].Scalar() == "169.254.20.10");
  const std::string unit = KubeletUnit(*stack);
  CHECK(unit.find("--container-runtime") == std::string::npos);
  CHECK(unit.find("--config=/usr/lib/sprout/kubelet/config.yaml") != std::string::npos);
  CHECK(unit.find("--housekeeping-interval=30s $KUBELET_ARGS") != std::string::npos);
  // The 1.20 unit keeps its flags.
  CHECK(KubeletUnit().find("--container-runtime=remote --container-runtime-endpoint=") != std::string::npos);
}

TEST_CASE("containerd 2 gets a version 3 file: the pause image pinned, systemd cgroups, the image's CNI plugins") {
  auto stack = ParseStackVersions("kubernetes v1.36.5\ncontainerd v2.3.7\n");
  REQUIRE(stack.ok());
  const std::string pause = "localhost/sprout/pause@sha256:" + std::string(64, 'b');
  const std::string c = ContainerdConfig(pause, *stack);
  CHECK(c.find("\nversion = 4\n") != std::string::npos);  // containerd 2.3's own version
  auto older = ParseStackVersions("containerd v2.1.4\n");
  REQUIRE(older.ok());
  CHECK(ContainerdConfig(pause, *older).find("\nversion = 3\n") != std::string::npos);
  CHECK(c.find("[plugins.\"io.containerd.cri.v1.images\".pinned_images]\n  sandbox = \"" + pause + "\"") !=
        std::string::npos);
  CHECK(c.find("SystemdCgroup = true") != std::string::npos);
  CHECK(c.find("restrict_oom_score_adj = true") != std::string::npos);
  CHECK(c.find("bin_dirs = [\"/usr/lib/cni\"]") != std::string::npos);
  CHECK(c.find("config_path = \"/etc/containerd/certs.d:/var/lib/sprout/registries\"") != std::string::npos);
  // Nothing of the 1.x plugin names is left.
  CHECK(c.find("grpc.v1.cri") == std::string::npos);
  CHECK(c.find("internal.v1.opt") == std::string::npos);
}

// GoldenFile compares text with tests/golden/kubelet/NAME (tests/golden.h).
void GoldenFile(const std::string& name, const std::string& text) {
  sprout::testing::CheckGolden("kubelet/" + name, text);
}

TEST_CASE("Golden: the default image's kubelet configuration, unit and a worker's arguments") {
  // The default profile's kubelet.config overrides, if it has any, as the build applies them.
  auto profile = YAML::LoadFile(std::string(SPROUT_SOURCE_DIR) + "/profiles/default.yaml");
  std::string overrides;
  if (auto config = profile["kubelet"]["config"]) {
    YAML::Emitter e;
    e << config;
    overrides = e.c_str();
  }
  auto config = KubeletConfigYaml(overrides);
  REQUIRE(config.ok());
  GoldenFile("config.yaml", *config);
  GoldenFile("kubelet.service", KubeletUnit());
  GoldenFile("kubelet.env", KubeletEnv("node-4", "198.18.0.14", false));
}

}  // namespace
}  // namespace sprout
