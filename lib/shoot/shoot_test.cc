#include "shoot/shoot.h"

#include <catch2/catch.hpp>

namespace sprout {
namespace {

std::string Fixture(const std::string& name) { return std::string(SPROUT_SOURCE_DIR) + "/tests/shoots/" + name; }

bool HasMessage(const Diagnostics& d, Severity sev, int line, const std::string& part) {
  for (const auto& x : d.all()) {
    if (x.severity == sev && x.where.line == line && x.message.find(part) != std::string::npos) return true;
  }
  return false;
}

TEST_CASE("A one-node Shoot gives its name, version, networks and one control-plane node") {
  Diagnostics d;
  auto s = LoadShoot(Fixture("one-node.yaml"), d);
  REQUIRE(s);
  CHECK(d.all().empty());
  CHECK(s->name == "edge");
  CHECK(s->ns == "garden-plant");
  CHECK(s->kubernetes_version == "1.31.1");
  CHECK(s->pods_cidr == "10.244.0.0/16");
  CHECK(s->services_cidr == "10.96.0.0/12");
  CHECK(s->nodes_cidr == "198.18.0.0/24");
  CHECK(s->ExpectedControlPlanes() == 1);
  CHECK(s->workers.empty());
}

TEST_CASE("A three-node Shoot reads its pools and warns once for each field sprout ignores") {
  Diagnostics d;
  auto s = LoadShoot(Fixture("three-node.yaml"), d);
  REQUIRE(s);
  CHECK_FALSE(d.has_errors());
  CHECK(s->ExpectedControlPlanes() == 3);
  CHECK(s->control_plane.name == "control-plane");
  REQUIRE(s->workers.size() == 1);
  CHECK(s->workers[0].name == "line");
  CHECK(s->workers[0].maximum == 6);
  CHECK(HasMessage(d, Severity::kWarning, 9, "'spec.region'"));
  CHECK(HasMessage(d, Severity::kWarning, 13, "'spec.networking.type'"));
  CHECK(HasMessage(d, Severity::kWarning, 18, "'spec.provider.type'"));
  CHECK(HasMessage(d, Severity::kWarning, 27, "'spec.provider.workers[].machine'"));
  CHECK(d.all().size() == 4);  // labels are metadata sprout ignores quietly
}

TEST_CASE("Every error of a broken Shoot is reported with its line and column in one run") {
  Diagnostics d;
  auto s = LoadShoot(Fixture("broken.yaml"), d);
  INFO(d.Render());
  CHECK_FALSE(s);
  CHECK(HasMessage(d, Severity::kError, 1, "apiVersion is 'core.gardener.cloud/v1alpha1'"));
  CHECK(HasMessage(d, Severity::kError, 4, "metadata has no 'namespace'"));
  CHECK(HasMessage(d, Severity::kError, 4, "metadata.name 'Plant_1' is not a DNS label"));
  CHECK(HasMessage(d, Severity::kError, 7, "'latest' is not a Kubernetes version"));
  CHECK(HasMessage(d, Severity::kError, 10, "services 10.244.128.0/17 overlaps spec.networking.pods"));
  CHECK(HasMessage(d, Severity::kError, 11, "nodes '198.18.0.1/24' is not a network"));
  CHECK(HasMessage(d, Severity::kError, 16, "minimum 4 above its maximum 2"));
  for (const auto& x : d.all()) {
    CHECK(x.where.file == Fixture("broken.yaml"));
    CHECK(x.where.column > 0);
  }
  const std::string text = d.Render();
  CHECK(text.find("broken.yaml:7:14: error:") != std::string::npos);
}

TEST_CASE("An even control-plane count is a warning that explains why odd is safer") {
  Diagnostics d;
  auto s = ParseShoot(R"(apiVersion: core.gardener.cloud/v1beta1
kind: Shoot
metadata: {name: two, namespace: garden}
spec:
  kubernetes: {version: "1.31"}
  networking: {pods: 10.1.0.0/16, services: 10.2.0.0/16, nodes: 10.3.0.0/16}
  provider:
    workers:
      - {name: cp, controlPlane: {}, minimum: 2, maximum: 2}
)",
                      "two.yaml", d);
  REQUIRE(s);
  REQUIRE(d.all().size() == 1);
  CHECK(d.all()[0].severity == Severity::kWarning);
  CHECK(d.all()[0].message.find("no more failures than with 1") != std::string::npos);
  CHECK(d.all()[0].hint == "use an odd count (1, 3 or 5)");
}

TEST_CASE("Invalid YAML and a missing control-plane pool are errors with a place") {
  Diagnostics d;
  CHECK_FALSE(ParseShoot("apiVersion: [\n", "bad.yaml", d));
  REQUIRE(d.has_errors());
  CHECK(d.all()[0].where.line >= 1);
  Diagnostics d2;
  CHECK_FALSE(ParseShoot(R"(apiVersion: core.gardener.cloud/v1beta1
kind: Shoot
metadata: {name: x, namespace: garden}
spec:
  kubernetes: {version: "1.31.1"}
  networking: {pods: 10.1.0.0/16, services: 10.2.0.0/16, nodes: 10.3.0.0/16}
  provider:
    workers:
      - {name: w, minimum: 1, maximum: 2}
)",
                         "nocp.yaml", d2));
  CHECK(HasMessage(d2, Severity::kError, 9, "no worker pool is marked 'controlPlane: {}'"));
}

TEST_CASE("CIDRs parse, overlap and give the service IP") {
  auto a = ParseCidr("10.96.0.0/12");
  REQUIRE(a);
  CHECK(NthAddress(*a, 1) == "10.96.0.1");
  CHECK(NthAddress(*a, 256) == "10.96.1.0");
  auto b = ParseCidr("10.100.0.0/16");
  REQUIRE(b);
  CHECK(CidrsOverlap(*a, *b));
  CHECK_FALSE(CidrsOverlap(*a, *ParseCidr("10.112.0.0/12")));
  auto v6 = ParseCidr("fd00:10::/108");
  REQUIRE(v6);
  CHECK(NthAddress(*v6, 1) == "fd00:10::1");
  CHECK_FALSE(ParseCidr("10.0.0.1/8"));
  CHECK_FALSE(ParseCidr("10.0.0.0/33"));
  CHECK_FALSE(ParseCidr("10.0.0.0"));
  CHECK_FALSE(CidrsOverlap(*a, *v6));
  CHECK(NthAddress(*ParseCidr("10.0.0.0/30"), 4).empty());
}

}  // namespace
}  // namespace sprout
