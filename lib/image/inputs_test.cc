#include "image/inputs.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "image/plan.h"

using namespace sprout;

namespace {

namespace fs = std::filesystem;

// A profile as LoadProfile leaves it, rooted at dir.
Profile Sample(const fs::path& dir) {
  Profile p;
  p.file = dir / "profiles/p.yaml";
  p.chain = {dir / "profiles/parent.yaml", p.file};
  p.name = "p";
  p.base = dir / "images/base";
  p.overlays = {dir / "profiles/overlay"};
  ProfileFile motd;
  motd.path = "/etc/motd";
  motd.source = dir / "profiles/overlay/motd";
  p.files.push_back(motd);
  ProfileFile inline_file;
  inline_file.path = "/etc/issue";
  inline_file.content = "hello\n";
  p.files.push_back(inline_file);
  p.images.push_back({"localhost/sprout/etcd:3.4", "recipe:" + (dir / "images/etcd").string(), {}, "", {}});
  p.images.push_back({"registry.example/app:1", "", dir / "auth.json", "", {}});
  p.static_pods = {dir / "profiles/pods"};
  p.shoot_file = dir / "profiles/shoot.yaml";
  Shoot s;
  s.name = "edge";
  s.kubernetes_version = "1.20.2";
  p.shoot = s;
  return p;
}

// FakeDigest names content by the path's last element, as if every tree with that name
// held the same files wherever it sits.
Result<std::string> FakeDigest(const fs::path& path) { return "sha256:of-" + path.filename().string(); }

}  // namespace

TEST_CASE("InputsJson records content, never where the inputs sit", "[inputs]") {
  auto here = InputsJson(Sample("/work/sprout"), 1700000000, "recipe:k", FakeDigest);
  auto there = InputsJson(Sample("/tmp/x/clone"), 1700000000, "recipe:k", FakeDigest);
  REQUIRE(here);
  REQUIRE(there);
  CHECK(*here == *there);
  CHECK(here->find("/work") == std::string::npos);
  CHECK(here->find("images/") == std::string::npos);  // no relative path either
  auto j = nlohmann::json::parse(*here);
  CHECK(j["base"] == "recipe:k");
  CHECK(j["overlays"][0] == "sha256:of-overlay");
  CHECK(j["files"][0]["sha256"] == "sha256:of-motd");
  CHECK_FALSE(j["files"][0].contains("source"));
  CHECK(j["files"][1]["content"] == "hello\n");
  CHECK(j["images"][0]["source"] == "recipe:sha256:of-etcd");
  CHECK_FALSE(j["images"][1].contains("credentials"));
  CHECK(j["staticPods"][0] == "sha256:of-pods");
  CHECK(j["shoot"]["name"] == "edge");
  CHECK(j["shoot"]["kubernetesVersion"] == "1.20.2");
  CHECK_FALSE(j.contains("extends"));
  CHECK(j["reproducible"]["sourceDateEpoch"] == 1700000000);
}

TEST_CASE("InputsJson changes with the content, the base and the epoch", "[inputs]") {
  const Profile p = Sample("/work/sprout");
  const std::string reference = InputsJson(p, 1700000000, "recipe:k", FakeDigest).value();
  auto changed = [](const fs::path& path) -> Result<std::string> {
    return path.filename() == "overlay" ? std::string("sha256:other") : FakeDigest(path).value();
  };
  CHECK(InputsJson(p, 1700000000, "recipe:k", changed).value() != reference);
  CHECK(InputsJson(p, 1800000000, "recipe:k", FakeDigest).value() != reference);
  CHECK(InputsJson(p, 1700000000, "recipe:other", FakeDigest).value() != reference);
}

TEST_CASE("InputsJson fails when an input cannot be read", "[inputs]") {
  auto broken = [](const fs::path& path) -> Result<std::string> { return Fail("cannot read " + path.string()); };
  auto j = InputsJson(Sample("/w"), 1700000000, "recipe:k", broken);
  REQUIRE_FALSE(j);
  CHECK(j.error().starts_with("cannot digest the build's inputs: cannot read /w/profiles/overlay"));
}

TEST_CASE("InputsJson, and so the seed, differ between amd64 and arm64", "[inputs][arch]") {
  Profile p = Sample("/w");
  const std::string amd64 = InputsJson(p, 1700000000, "recipe:k", FakeDigest).value();
  p.arch = Arch::kArm64;
  const std::string arm64 = InputsJson(p, 1700000000, "recipe:k", FakeDigest).value();
  CHECK(amd64.find("\"arch\": \"amd64\"") != std::string::npos);
  CHECK(arm64.find("\"arch\": \"arm64\"") != std::string::npos);
  CHECK(SeedOf(amd64) != SeedOf(arm64));
}
