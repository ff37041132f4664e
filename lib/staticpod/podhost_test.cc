#include "staticpod/podhost.h"

#include <catch2/catch.hpp>

#include "util/fs.h"

namespace sprout {
namespace {

TEST_CASE("Unit names escape manifest paths as systemd-escape --path does") {
  CHECK(SystemdEscapePath("/etc/kubernetes/manifests/etcd.yaml") == "etc-kubernetes-manifests-etcd.yaml");
  CHECK(SystemdEscapePath("/etc/kubernetes/manifests/kube-apiserver.yaml") ==
        "etc-kubernetes-manifests-kube\\x2dapiserver.yaml");
  CHECK(SystemdEscapePath("//a//b/") == "a-b");
  CHECK(SystemdEscapePath("/") == "-");
  CHECK(SystemdEscapePath("/.hidden") == "\\x2ehidden");
  CHECK(PodmanKubeUnit("/etc/kubernetes/manifests/etcd.yaml") ==
        "podman-kube@etc-kubernetes-manifests-etcd.yaml.service");
}

TEST_CASE("A node renders the templates whose images it has, for podman, and says which it skipped") {
  TempDir dir("/tmp", "podhost-test");
  const std::filesystem::path templates = std::string(SPROUT_SOURCE_DIR) + "/staticpods";
  StaticPodInput in;
  in.node_name = "node-1";
  in.node_ip = "198.18.0.11";
  in.cluster_name = "plant";
  in.pods_cidr = "10.244.0.0/16";
  in.services_cidr = "10.96.0.0/12";
  in.etcd_members = {{"node-1", "198.18.0.11"}};
  in.etcd_cluster_token = "plant-1";
  in.images["etcd"] = "localhost/sprout/etcd:3.4.23@sha256:" + std::string(64, 'e');
  auto out = WriteNodeManifests(templates, dir.path() / "manifests", in, true);
  REQUIRE(out.ok());
  REQUIRE(out->written.size() == 1);
  CHECK(out->written[0].name == "etcd");
  auto text = ReadFile(out->written[0].manifest);
  REQUIRE(text.ok());
  CHECK(text->find("--initial-cluster=node-1=https://198.18.0.11:2380") != std::string::npos);
  CHECK(text->find("livenessProbe") == std::string::npos);
  CHECK((std::filesystem::status(out->written[0].manifest).permissions() & std::filesystem::perms::others_read) ==
        std::filesystem::perms::none);
  REQUIRE(out->skipped.size() == 3);
  CHECK(out->skipped[0] == "kube-apiserver: no preloaded image (image_kube_apiserver)");

  auto only = WriteNodeManifests(templates, dir.path() / "only", in, false, {"kube-scheduler"});
  REQUIRE(only.ok());
  CHECK(only->written.empty());
  CHECK(only->skipped.size() == 1);
}

}  // namespace
}  // namespace sprout
