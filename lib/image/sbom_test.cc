#include "image/sbom.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace sprout;

TEST_CASE("dpkg status gives the installed packages, sorted, as SPDX 2.3", "[sbom]") {
  const char* status =
      "Package: zlib1g\nStatus: install ok installed\nArchitecture: amd64\nSource: zlib\n"
      "Version: 1:1.2.13.dfsg-1\nDescription: compression\n continued line: not a key\n\n"
      "Package: removed\nStatus: deinstall ok config-files\nVersion: 1\nArchitecture: amd64\n\n"
      "Package: bash\nStatus: install ok installed\nVersion: 5.2.15-2+b7\nArchitecture: amd64\n";
  auto pkgs = ParseDpkgStatus(status);
  REQUIRE(pkgs.size() == 2);
  CHECK(pkgs[0].name == "bash");
  CHECK(pkgs[1].name == "zlib1g");
  CHECK(pkgs[1].source == "zlib");
  auto doc = nlohmann::json::parse(SpdxJson(pkgs, "img", "https://sprout.invalid/spdx/abc", 1700000000));
  CHECK(doc["spdxVersion"] == "SPDX-2.3");
  CHECK(doc["creationInfo"]["created"] == "2023-11-14T22:13:20Z");
  CHECK(doc["packages"].size() == 2);
  CHECK(doc["packages"][1]["externalRefs"][0]["referenceLocator"] ==
        "pkg:deb/debian/zlib1g@1:1.2.13.dfsg-1?arch=amd64&distro=debian-12");
  CHECK(doc["relationships"].size() == 2);
  CHECK(SpdxJson(pkgs, "img", "ns", 1) == SpdxJson(pkgs, "img", "ns", 1));
}

TEST_CASE("the Go modules of the recipe's binaries are in the SBOM, replaced ones at their replacement", "[sbom]") {
  const char* json = R"js({"sets": [
    {"set": "kubernetes", "goarch": "amd64", "binaries": [
      {"binary": "kubelet", "go": "go1.26.8", "modules": [
        {"path": "k8s.io/api", "version": "v0.0.0", "sum": "",
         "replace": {"Path": "k8s.io/api", "Version": "v0.36.5", "Sum": "h1:api="}},
        {"path": "golang.org/x/sys", "version": "v0.46.0", "sum": "h1:sys=", "replace": null}]},
      {"binary": "kubectl", "go": "go1.26.8", "main": {"Path": "k8s.io/kubernetes", "Version": "v1.36.5",
        "Sum": "h1:k8s="}, "modules": [
        {"path": "golang.org/x/sys", "version": "v0.46.0", "sum": "h1:sys=", "replace": null}]}]},
    {"set": "pause", "goarch": "amd64", "binaries": [{"binary": "pause", "go": "go1.26.8",
      "main": {"Path": "sprout/images/stack/pause", "Version": "(devel)"}, "modules": null}]}]})js";
  auto mods = ParseGoModules(json);
  REQUIRE(mods.ok());
  REQUIRE(mods->size() == 3);
  CHECK((*mods)[0].path == "golang.org/x/sys");
  CHECK((*mods)[0].binaries == std::vector<std::string>{"kubectl", "kubelet"});
  CHECK((*mods)[1].path == "k8s.io/api");
  CHECK((*mods)[1].version == "v0.36.5");
  CHECK((*mods)[1].sum == "h1:api=");
  CHECK((*mods)[2].path == "k8s.io/kubernetes");  // kubectl's main module
  CHECK((*mods)[2].binaries == std::vector<std::string>{"kubectl"});

  auto doc = nlohmann::json::parse(SpdxJson({}, "t", "https://example.invalid/t", 0, *mods));
  REQUIRE(doc["packages"].size() == 3);
  CHECK(doc["packages"][1]["name"] == "k8s.io/api");
  CHECK(doc["packages"][1]["externalRefs"][0]["referenceLocator"] == "pkg:golang/k8s.io/api@v0.36.5");
  CHECK(doc["packages"][1]["comment"] == "go.sum hash h1:api=");
  CHECK(doc["packages"][0]["sourceInfo"] == "Go module linked into kubectl, kubelet");

  CHECK_FALSE(ParseGoModules("[]").ok());
  auto nameless = ParseGoModules(R"({"sets": [{"set": "x", "binaries": [{"modules": []}]}]})");
  REQUIRE_FALSE(nameless.ok());
  CHECK(nameless.error() == "modules.json: a binary without a name in set 'x'");
}
