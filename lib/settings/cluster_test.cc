#include "settings/cluster.h"

#include <catch2/catch.hpp>

namespace sprout {
namespace {

TEST_CASE("The cluster record gives the name, the control-plane count and the component images") {
  auto r = ParseClusterRecord(R"({"name": "plant", "namespace": "garden", "controlPlane": {"pool": "cp",
    "minimum": 3, "maximum": 5}, "images": {"etcd": "localhost/sprout/etcd@sha256:abc"}})");
  REQUIRE(r.ok());
  CHECK(r->name == "plant");
  CHECK(r->expected_control_planes == 3);
  CHECK(r->images.at("etcd") == "localhost/sprout/etcd@sha256:abc");
  auto bare = ParseClusterRecord(R"({"images": {}})");
  REQUIRE(bare.ok());
  CHECK(bare->name.empty());
  CHECK(bare->expected_control_planes == 0);
  CHECK_FALSE(ParseClusterRecord("[1]").ok());
  CHECK_FALSE(ParseClusterRecord("{").ok());
}

TEST_CASE("The cluster record gives the Shoot's Kubernetes version and networks") {
  auto r = ParseClusterRecord(R"({"name": "plant", "kubernetesVersion": "1.20.2",
    "networking": {"pods": "10.244.0.0/16", "services": "10.96.0.0/12", "nodes": "198.18.0.0/24"}})");
  REQUIRE(r.ok());
  CHECK(r->kubernetes_version == "1.20.2");
  CHECK(r->pods_cidr == "10.244.0.0/16");
  CHECK(r->services_cidr == "10.96.0.0/12");
  auto bare = ParseClusterRecord(R"({"images": {}})");
  REQUIRE(bare.ok());
  CHECK(bare->services_cidr.empty());
}

TEST_CASE("The cluster record says what runs the static pods; podman when it does not say") {
  auto kubelet = ParseClusterRecord(R"({"podHost": "kubelet", "images": {}})");
  REQUIRE(kubelet.ok());
  CHECK(kubelet->pod_host == "kubelet");
  auto old = ParseClusterRecord(R"({"images": {}})");
  REQUIRE(old.ok());
  CHECK(old->pod_host == "podman");
  auto bad = ParseClusterRecord(R"({"podHost": "docker"})");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().find("docker") != std::string::npos);
}

}  // namespace
}  // namespace sprout
