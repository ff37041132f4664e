#include "node/cluster.h"

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

}  // namespace
}  // namespace sprout
