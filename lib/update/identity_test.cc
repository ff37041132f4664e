#include "update/identity.h"

#include <catch2/catch.hpp>

using namespace sprout::update;

namespace {

RecordedIdentity Id(std::int64_t serial, std::string profile = "default", std::string role = "control-plane",
                    std::string cluster = "crimson-dawn") {
  return {serial, false, std::move(profile), std::move(role), std::move(cluster)};
}

const char* const kSerialFix =
    "; build the new one with a higher serial (update.serial in its profile, or sprout build --serial N; the default "
    "is the build's epoch, reproducible.sourceDateEpoch or SOURCE_DATE_EPOCH), or pass --allow-downgrade to install "
    "it anyway";

}  // namespace

TEST_CASE("identity: read from update, or for a build before serials from its profile", "[update][identity]") {
  auto id = ReadIdentity(
      R"({"profile":{"name":"default-b"},"update":{"serial":42,"profile":"default","role":"worker","cluster":"x"}})",
      "m");
  REQUIRE(id);
  CHECK(id->serial == 42);
  CHECK_FALSE(id->serial_from_epoch);
  CHECK(id->profile == "default");  // update.profile, not the profile's own name
  CHECK(id->role == "worker");
  CHECK(id->cluster == "x");
  // Before serials: the epoch is the serial (the default serial is the epoch), no cluster.
  auto old = ReadIdentity(
      R"({"profile":{"name":"default","role":"control-plane","reproducible":{"sourceDateEpoch":1700000000}}})", "m");
  REQUIRE(old);
  CHECK(old->serial == 1700000000);
  CHECK(old->serial_from_epoch);
  CHECK(old->profile == "default");
  CHECK(old->role == "control-plane");
  CHECK(old->cluster.empty());
  // Nothing recorded: all unknown, which the rules refuse.
  auto none = ReadIdentity(R"({"profile":{"reproducible":{"sourceDateEpoch":"1700000000"}}})", "m");
  REQUIRE(none);
  CHECK_FALSE(none->serial);
  CHECK(none->profile.empty());
}

TEST_CASE("identity: a garbled update is an error naming the file and the field", "[update][identity]") {
  const std::string fix = "; the file is damaged, or was not written by sprout build: build it again";
  auto err = [](const std::string& text) {
    auto r = ReadIdentity(text, "out/manifest.json");
    REQUIRE_FALSE(r);
    return r.error();
  };
  CHECK(err("not json") == "out/manifest.json is not a JSON object; copy the build again");
  CHECK(err(R"({"update":7})") == "out/manifest.json: \"update\" is not an object" + fix);
  CHECK(err(R"({"update":{"profile":"p","role":"worker","cluster":"c"}})") ==
        "out/manifest.json: \"update\" has no serial" + fix);
  CHECK(err(R"({"update":{"serial":-1,"profile":"p","role":"worker","cluster":"c"}})") ==
        "out/manifest.json: update.serial -1 is not a non-negative integer" + fix);
  CHECK(err(R"({"update":{"serial":1.5,"profile":"p","role":"worker","cluster":"c"}})") ==
        "out/manifest.json: update.serial 1.5 is not a non-negative integer" + fix);
  CHECK(err(R"({"update":{"serial":18446744073709551615,"profile":"p","role":"worker","cluster":"c"}})") ==
        "out/manifest.json: update.serial 18446744073709551615 is not a non-negative integer" + fix);
  CHECK(err(R"({"update":{"serial":1,"profile":"","role":"worker","cluster":"c"}})") ==
        "out/manifest.json: update.profile is missing or not a name" + fix);
  CHECK(err(R"({"update":{"serial":1,"profile":"p","role":"worker"}})") ==
        "out/manifest.json: update.cluster is missing or not a name" + fix);
}

TEST_CASE("serial: a higher serial passes; equal, older or unknown are refused unless --allow-downgrade",
          "[update][identity]") {
  auto newer = CheckSerial(Id(1700000000), Id(1700000001), false);
  REQUIRE(newer);
  CHECK(*newer == "the new build's serial is 1700000001, this node's (the running build's) 1700000000: newer");

  auto same = CheckSerial(Id(1700000000), Id(1700000000), false);
  REQUIRE_FALSE(same);
  CHECK(same.error() ==
        std::string("refusing the update: the new build's serial is 1700000000, this node's (the running build's) "
                    "1700000000: the same serial, so the new build is no newer") +
            kSerialFix);

  auto older = CheckSerial(Id(1700000100), Id(1700000000), false);
  REQUIRE_FALSE(older);
  CHECK(older.error() ==
        std::string("refusing a downgrade: the new build's serial is 1700000000, this node's (the running build's) "
                    "1700000100, so the new build is older") +
            kSerialFix);

  for (auto [running, next] : {std::pair{Id(1700000100), Id(1700000000)}, {Id(5), Id(5)}}) {
    auto allowed = CheckSerial(running, next, true);
    REQUIRE(allowed);
    CHECK(allowed->starts_with("--allow-downgrade: the new build's serial is "));
  }

  // A running build before serials: its epoch; a higher serial passes, and the note says where it came from.
  RecordedIdentity epoch_only = Id(1700000000);
  epoch_only.serial_from_epoch = true;
  auto from_epoch = CheckSerial(epoch_only, Id(1700000001), false);
  REQUIRE(from_epoch);
  CHECK(from_epoch->find("1700000000 (its epoch: it was built before serials): newer") != std::string::npos);

  RecordedIdentity unknown;
  auto u = CheckSerial(unknown, Id(1700000001), false);
  REQUIRE_FALSE(u);
  CHECK(u.error() ==
        std::string("refusing the update: the new build's serial is 1700000001, this node's (the running build's) "
                    "unknown, so the new build cannot be shown to be newer") +
            kSerialFix);
  CHECK_FALSE(CheckSerial(Id(1), unknown, false));
  CHECK(CheckSerial(unknown, unknown, true));
}

TEST_CASE("same nodes: another profile, role or cluster is refused, naming each, unless --allow-cross-profile",
          "[update][identity]") {
  auto same = CheckSameNodes(Id(1), Id(2), false);
  REQUIRE(same);
  CHECK(*same == "the build is for this node's profile 'default', role 'control-plane', cluster 'crimson-dawn'");

  auto profile = CheckSameNodes(Id(1), Id(2, "lab"), false);
  REQUIRE_FALSE(profile);
  CHECK(profile.error() ==
        "refusing a build for other nodes: it differs from the running build in its profile 'lab' (this node's: "
        "'default'); a node keeps its profile, role and cluster across updates (its personalization stays), so update "
        "it with a build of its own profile (a variant of that profile says so with update.profile: NAME), or pass "
        "--allow-cross-profile to install it anyway");

  auto all = CheckSameNodes(Id(1), Id(2, "lab", "worker", "other"), false);
  REQUIRE_FALSE(all);
  CHECK(
      all.error().starts_with("refusing a build for other nodes: it differs from the running build in its profile "
                              "'lab' (this node's: 'default'), role 'worker' (this node's: 'control-plane') and "
                              "cluster 'other' (this node's: 'crimson-dawn'); "));

  auto role = CheckSameNodes(Id(1), Id(2, "default", "worker"), false);
  REQUIRE_FALSE(role);
  CHECK(
      role.error().starts_with("refusing a build for other nodes: it differs from the running build in its role "
                               "'worker' (this node's: 'control-plane'); "));

  auto forced = CheckSameNodes(Id(1), Id(2, "lab", "worker"), true);
  REQUIRE(forced);
  CHECK(*forced ==
        "--allow-cross-profile: the new build differs in its profile 'lab' (this node's: 'default') and role 'worker' "
        "(this node's: 'control-plane')");

  // A running build before serials records no cluster: not compared, and the note says so.
  auto old = CheckSameNodes(Id(1, "default", "control-plane", ""), Id(2), false);
  REQUIRE(old);
  CHECK(*old ==
        "the build is for this node's profile 'default', role 'control-plane', cluster not compared (the running build "
        "was made before builds recorded it)");
  // An unknown profile or role is refused: it cannot be shown to be the same.
  auto unknown = CheckSameNodes(RecordedIdentity{}, Id(2), false);
  REQUIRE_FALSE(unknown);
  CHECK(
      unknown.error().starts_with("refusing a build for other nodes: it differs from the running build in its profile "
                                  "'default' (this node's: unknown) and role 'control-plane' (this node's: unknown)"));
}
