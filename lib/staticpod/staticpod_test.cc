#include "staticpod/staticpod.h"

#include <yaml-cpp/yaml.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>

#include "shoot/shoot.h"
#include "tests/golden.h"
#include "util/fs.h"

namespace sprout {
namespace {

namespace fs = std::filesystem;

const std::string kSource = SPROUT_SOURCE_DIR;

std::map<std::string, std::string> FakeImages() {
  // Fixed digests stand in for the preloaded images the build records.
  return {
      {"etcd", "localhost/sprout/etcd:3.4.23@sha256:" + std::string(64, 'e')},
      {"kube-apiserver", "localhost/sprout/kube-apiserver:v1.31.1@sha256:" + std::string(64, 'a')},
      {"kube-controller-manager", "localhost/sprout/kube-controller-manager:v1.31.1@sha256:" + std::string(64, 'c')},
      {"kube-scheduler", "localhost/sprout/kube-scheduler:v1.31.1@sha256:" + std::string(64, '5')}};
}

StaticPodInput InputFor(const std::string& shoot_file, int nodes) {
  Diagnostics d;
  auto shoot = LoadShoot(kSource + "/tests/shoots/" + shoot_file, d);
  REQUIRE(shoot);
  StaticPodInput in;
  in.cluster_name = shoot->name;
  in.kubernetes_version = shoot->kubernetes_version;
  in.pods_cidr = shoot->pods_cidr;
  in.services_cidr = shoot->services_cidr;
  for (int i = 1; i <= nodes; ++i) {
    in.etcd_members.push_back({"node-" + std::to_string(i), "198.18.0." + std::to_string(10 + i)});
  }
  const auto& me = in.etcd_members[nodes > 1 ? 1 : 0];  // the 3-node case renders node-2's view
  in.node_name = me.name;
  in.node_ip = me.ip;
  in.etcd_cluster_token = shoot->name + "-1f2e3d4c";
  in.images = FakeImages();
  return in;
}

// Golden compares a rendered manifest with tests/golden/staticpods/CASE/COMPONENT.yaml;
// SPROUT_UPDATE_GOLDEN=1 rewrites the golden files instead.
void Golden(const std::string& which, const std::string& component, const std::string& rendered) {
  sprout::testing::CheckGolden("staticpods/" + which + "/" + component + ".yaml", rendered);
}

void RenderAll(const std::string& which, const StaticPodInput& in) {
  for (const auto& component : ControlPlaneComponents()) {
    auto tmpl = ReadFile(kSource + "/staticpods/" + component + ".yaml");
    REQUIRE(tmpl.ok());
    auto out = RenderStaticPod(*tmpl, in, component + ".yaml");
    INFO(component << ": " << (out.ok() ? "" : out.error()));
    REQUIRE(out.ok());
    CHECK(out->find("{{") == std::string::npos);
    Golden(which, component, *out);
  }
}

TEST_CASE("Golden: the four control-plane manifests of a one-node Shoot") {
  auto in = InputFor("one-node.yaml", 1);
  RenderAll("one-node", in);
}

TEST_CASE("Golden: the four control-plane manifests of node-2 in a three-node Shoot") {
  auto in = InputFor("three-node.yaml", 3);
  RenderAll("three-node", in);
}

// Command is the rendered component's first container command, and Probes its probes.
YAML::Node Container(const std::string& component) {
  auto tmpl = ReadFile(kSource + "/staticpods/" + component + ".yaml");
  REQUIRE(tmpl.ok());
  auto pod = RenderStaticPod(*tmpl, InputFor("three-node.yaml", 3), component + ".yaml");
  REQUIRE(pod.ok());
  return YAML::Load(*pod)["spec"]["containers"][0];
}

bool HasArg(const YAML::Node& container, const std::string& arg) {
  for (const auto& a : container["command"]) {
    if (a.Scalar() == arg) return true;
  }
  return false;
}

TEST_CASE("No component serves plain HTTP: insecure ports off, profiling off, probes on the secure ports") {
  // kube-controller-manager and kube-scheduler 1.20 serve /healthz, /metrics, /configz
  // and pprof without authentication on 10252 and 10251 unless --port=0.
  const std::pair<const char*, int> secure[] = {{"kube-controller-manager", 10257}, {"kube-scheduler", 10259}};
  for (const auto& [component, port] : secure) {
    INFO(component);
    auto c = Container(component);
    CHECK(HasArg(c, "--port=0"));
    CHECK(HasArg(c, "--profiling=false"));
    CHECK(HasArg(c, "--bind-address=127.0.0.1"));
    for (const char* probe : {"livenessProbe", "startupProbe"}) {
      INFO(probe);
      CHECK(c[probe]["httpGet"]["port"].as<int>() == port);
      CHECK(c[probe]["httpGet"]["scheme"].Scalar() == "HTTPS");
    }
  }
  auto apiserver = Container("kube-apiserver");
  CHECK(HasArg(apiserver, "--insecure-port=0"));
  CHECK(HasArg(apiserver, "--profiling=false"));
  CHECK(HasArg(apiserver, "--encryption-provider-config=/etc/kubernetes/pki/encryption-config.yaml"));
  CHECK(HasArg(apiserver, "--audit-policy-file=/etc/kubernetes/audit-policy.yaml"));
  CHECK(HasArg(apiserver, "--audit-log-path=/var/log/kubernetes/audit/audit.log"));
}

TEST_CASE("The etcd initial cluster and servers list every member with https URLs") {
  auto in = InputFor("three-node.yaml", 3);
  auto v = TemplateValues(in);
  CHECK(v["etcd_initial_cluster"] ==
        "node-1=https://198.18.0.11:2380,node-2=https://198.18.0.12:2380,node-3=https://198.18.0.13:2380");
  CHECK(v["etcd_servers"] == "https://198.18.0.11:2379,https://198.18.0.12:2379,https://198.18.0.13:2379");
  in.etcd_members = {{"v6", "fd00::5"}};
  CHECK(TemplateValues(in)["etcd_initial_cluster"] == "v6=https://[fd00::5]:2380");
}

TEST_CASE("Rendering names the template line of an unknown placeholder and a missing image") {
  std::map<std::string, std::string> values = {{"node_name", "n1"}};
  auto r = RenderTemplate("a: {{node_name}}\nb: {{node_nme}}\nc: {{image_etcd}}\n", values, "t.yaml");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().find("t.yaml:2: unknown placeholder '{{node_nme}}' (did you mean 'node_name'?)") !=
        std::string::npos);
  CHECK(r.error().find("t.yaml:3: unknown placeholder '{{image_etcd}}' (no preloaded image") != std::string::npos);
  auto open = RenderTemplate("x: {{node_name\n", values, "u.yaml");
  REQUIRE_FALSE(open.ok());
  CHECK(open.error().find("u.yaml:1: '{{' without a closing") != std::string::npos);
  CHECK(RenderTemplate("plain: {{ node_name }}", values, "v").value() == "plain: n1");
}

TEST_CASE("Pod validation finds missing fields, duplicate containers and undefined volumes") {
  Diagnostics ok;
  ValidatePod(R"(apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
    - {name: a, image: x, volumeMounts: [{name: data, mountPath: /d}]}
  volumes:
    - {name: data, hostPath: {path: /d}}
)",
              "ok.yaml", ok);
  CHECK(ok.all().empty());

  Diagnostics bad;
  ValidatePod(R"(apiVersion: v2
kind: Deployment
metadata: {}
spec:
  containers:
    - {name: a, image: x, volumeMounts: [{name: nowhere, mountPath: /d}]}
    - {name: a}
)",
              "bad.yaml", bad);
  std::string all;
  for (const auto& x : bad.all()) all += std::to_string(x.where.line) + ":" + x.message + "\n";
  INFO(all);
  CHECK(all.find("apiVersion must be 'v1'") != std::string::npos);
  CHECK(all.find("kind must be 'Pod'") != std::string::npos);
  CHECK(all.find("metadata.name is missing") != std::string::npos);
  CHECK(all.find("6:container 'a' mounts volume 'nowhere', which is not defined") != std::string::npos);
  CHECK(all.find("7:container name 'a' is used twice") != std::string::npos);
  CHECK(all.find("container 'a' has no image") != std::string::npos);

  Diagnostics empty;
  ValidatePod("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: []}\n", "e.yaml", empty);
  CHECK(empty.has_errors());
}

TEST_CASE("Manifests adapted for podman keep everything but the HTTP probes") {
  auto in = InputFor("one-node.yaml", 1);
  auto tmpl = ReadFile(kSource + "/staticpods/kube-apiserver.yaml");
  REQUIRE(tmpl.ok());
  auto pod = RenderStaticPod(*tmpl, in, "kube-apiserver.yaml");
  REQUIRE(pod.ok());
  for (const char* probe : {"livenessProbe", "readinessProbe", "startupProbe"}) {
    CHECK(pod->find(probe) != std::string::npos);
  }
  auto adapted = ForPodman(*pod);
  REQUIRE(adapted.ok());
  for (const char* probe : {"livenessProbe", "readinessProbe", "startupProbe"}) {
    CHECK(adapted->find(probe) == std::string::npos);
  }
  CHECK(adapted->find("--etcd-servers=https://198.18.0.11:2379") != std::string::npos);
  Diagnostics d;
  ValidatePod(*adapted, "kube-apiserver.yaml", d);
  CHECK(d.all().empty());
}

}  // namespace
}  // namespace sprout
