#include "image/manifest.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace sprout;

TEST_CASE("ManifestJson records the build's inputs, identifiers, SBOM and outputs", "[manifest]") {
  Profile p;
  p.name = std::string("n");  // not "n": GCC 12 warns wrongly (-Wrestrict) on that assignment here
  DiskPlan plan = PlanDisk(p, "seed");
  plan.root_hash = std::string(64, 'a');
  ManifestInputs in{
      R"({"name":"n","role":"worker"})",
      {1700000001, "m", "worker", "crimson-dawn"},
      "dir:/base",
      "6.1",
      "seed",
      &plan,
      "[]",
      "sbom.spdx.json",
      3,
      std::string(64, 'b'),
      {{"n.raw", 8192, std::string(64, 'c'), 4096, {{4096, 4096}}}, {"pxe/vmlinuz", 5, std::string(64, 'd')}}};
  std::string text = ManifestJson(in);
  CHECK(text.ends_with("}\n"));
  CHECK(text == ManifestJson(in));
  auto m = nlohmann::ordered_json::parse(text);
  std::vector<std::string> keys;
  for (const auto& [k, v] : m.items()) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"sprout", "profile", "update", "base", "kernel", "seed", "rootHash", "disk",
                                         "images", "sbom", "outputs"});
  CHECK(m["update"].dump() == R"({"serial":1700000001,"profile":"m","role":"worker","cluster":"crimson-dawn"})");
  CHECK(m["profile"]["role"] == "worker");
  CHECK(m["disk"]["diskGuid"] == plan.disk_guid.ToString());
  CHECK(m["sbom"]["packages"] == 3);
  CHECK(m["outputs"][1]["file"] == "pxe/vmlinuz");
  CHECK(m["outputs"][1]["size"] == 5);
  // A raw disk's data: its count and its map, [offset, length] pairs; other files have neither.
  CHECK(m["outputs"][0]["dataBytes"] == 4096);
  CHECK(m["outputs"][0]["dataExtents"].dump() == "[[4096,4096]]");
  CHECK_FALSE(m["outputs"][1].contains("dataExtents"));
}

TEST_CASE("ImageMetadata is what inspect reads; no images is an empty list", "[manifest]") {
  auto j = nlohmann::ordered_json::parse(
      ImageMetadata(R"({"name":"n"})", {7, "n", "control-plane", "sprout"}, "hash", "6.1", "seed", ""));
  CHECK(j["update"].dump() == R"({"serial":7,"profile":"n","role":"control-plane","cluster":"sprout"})");
  CHECK(j["rootHash"] == "hash");
  CHECK(j["kernel"] == "6.1");
  CHECK(j["images"].is_array());
  CHECK(j["images"].empty());
}

TEST_CASE("RenderSha256Sums writes sha256sum's format, in order", "[manifest]") {
  CHECK(RenderSha256Sums({{"ab", "x.raw"}, {"cd", "pxe/vmlinuz"}}) == "ab  x.raw\ncd  pxe/vmlinuz\n");
  auto parsed = ParseSha256Sums(RenderSha256Sums({{std::string(64, 'e'), "m.json"}}));
  REQUIRE(parsed);
  CHECK(parsed->at(0).file == "m.json");
}

TEST_CASE("SbomNamespace is unique per profile and seed", "[manifest]") {
  CHECK(SbomNamespace("n", "s") == "https://sprout.invalid/spdx/n/s");
}

TEST_CASE("IdentityOfBuild: update.serial else the epoch, update.profile else the name, the Shoot's name",
          "[manifest][update]") {
  Profile p;
  p.name = std::string("default-b");
  auto id = IdentityOfBuild(p, 1700000000);
  CHECK(id.serial == 1700000000);  // the epoch: a later epoch, a higher serial
  CHECK(id.profile == "default-b");
  CHECK(id.role == "control-plane");
  CHECK(id.cluster == "sprout");  // no Shoot: sprout-firstboot's default cluster name
  p.update_serial = 5;
  p.update_profile = "default";
  p.role = Role::kWorker;
  p.shoot = Shoot{};
  p.shoot->name = "crimson-dawn";
  id = IdentityOfBuild(p, 1700000000);
  CHECK(id.serial == 5);
  CHECK(id.profile == "default");
  CHECK(id.role == "worker");
  CHECK(id.cluster == "crimson-dawn");
}
