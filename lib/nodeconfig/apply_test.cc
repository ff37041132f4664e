#include "nodeconfig/apply.h"

#include <catch2/catch.hpp>

#include "util/fs.h"

using namespace sprout;

TEST_CASE("ApplyNodeConfig writes the network unit and authorized_keys once", "[nodeconfig]") {
  TempDir t(fs::temp_directory_path(), "apply");
  ApplyPaths p{t.path() / "ssh", t.path() / "network", false};
  NodeConfig c;
  c.address = "198.18.0.10/24";
  c.gateway = "198.18.0.1";
  c.ssh_authorized_key = "ssh-ed25519 AAAAC3Nza me@laptop";
  auto r = ApplyNodeConfig(c, p);
  CHECK(r.problems.empty());
  CHECK(r.done.size() == 2);
  auto unit = ReadFile(p.network_dir / "10-sprout-static.network");
  REQUIRE(unit.ok());
  CHECK_THAT(*unit, Catch::Contains("Address=198.18.0.10/24\nGateway=198.18.0.1\n"));
  // Physical links only: a veth or bridge (a pod's network) must not get the node's address.
  CHECK_THAT(*unit, Catch::Contains("[Match]\nType=ether\n"));
  CHECK_THAT(*unit, Catch::Contains("\nKind=!*\n"));
  auto keys = ReadFile(p.ssh_dir / "authorized_keys");
  REQUIRE(keys.ok());
  CHECK(*keys == "ssh-ed25519 AAAAC3Nza me@laptop\n");
  CHECK((fs::status(p.ssh_dir / "authorized_keys").permissions() & fs::perms::others_read) == fs::perms::none);
  // A second run with the same settings changes nothing.
  CHECK(ApplyNodeConfig(c, p).done.empty());
  CHECK(NetworkUnit(NodeConfig{}).empty());
}
