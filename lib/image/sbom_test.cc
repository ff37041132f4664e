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
