#include "nodeconfig/sources.h"

#include <catch2/catch.hpp>
#include <fstream>

#include "util/fs.h"
#include "util/text.h"

using namespace sprout;

TEST_CASE("LoadNodeConfig merges config area, fw_cfg and command line, and reports bad sources", "[nodeconfig]") {
  TempDir t(fs::temp_directory_path(), "nodeconfig");
  SystemPaths p;
  p.cmdline = t.path() / "cmdline";
  p.fw_cfg = t.path() / "fw_cfg";
  p.by_partuuid = t.path() / "by-partuuid";
  p.saved_area = t.path() / "config-area";  // none: the state is plain
  fs::create_directories(p.by_partuuid);
  std::ofstream(p.cmdline) << "ro sprout.config=PARTUUID=abc sprout.hostname=cmd-host\n";
  std::string area = "hostname=area-host\nrole=worker\naddress=198.18.0.9/24\n";
  area.resize(4096, '\0');
  std::ofstream(p.by_partuuid / "abc", std::ios::binary) << area;
  std::ofstream(p.fw_cfg) << "address=198.18.0.7/24\n";
  auto loaded = LoadNodeConfig(p);
  CHECK(loaded.problems.empty());
  CHECK(*loaded.config.hostname == "cmd-host");
  CHECK(*loaded.config.address == "198.18.0.7/24");
  CHECK(*loaded.config.role == "worker");
  CHECK(loaded.config.origin["role"] == "config area");

  // A secret on the kernel command line is refused, named, and the others still count.
  std::ofstream(p.cmdline) << "ro sprout.config=PARTUUID=abc sprout.cluster-secret=" << std::string(24, 'A') << "\n";
  auto leaked = LoadNodeConfig(p);
  CHECK_FALSE(leaked.config.cluster_secret.has_value());
  REQUIRE(leaked.problems.size() == 1);
  CHECK(
      leaked.problems[0].starts_with("kernel command line: sprout.cluster-secret is ignored: /proc/cmdline is "
                                     "readable by every process"));
  CHECK(*leaked.config.role == "worker");
  // So is a worker secret: it is a secret as well.
  std::ofstream(p.cmdline) << "ro sprout.config=PARTUUID=abc sprout.worker-secret=" << std::string(64, 'a') << "\n";
  auto leaked_worker = LoadNodeConfig(p);
  CHECK_FALSE(leaked_worker.config.worker_secret.has_value());
  REQUIRE(leaked_worker.problems.size() == 1);
  CHECK(
      leaked_worker.problems[0].starts_with("kernel command line: sprout.worker-secret is ignored: /proc/cmdline "
                                            "is readable by every process"));
  CHECK(*leaked_worker.config.role == "worker");

  std::ofstream(p.cmdline) << "ro sprout.config=PARTUUID=abc sprout.hostname=cmd-host\n";
  std::ofstream(p.fw_cfg) << "role=boss\n";
  auto bad = LoadNodeConfig(p);
  REQUIRE(bad.problems.size() == 1);
  CHECK(bad.problems[0] == "fw_cfg:1: role must be 'control-plane' or 'worker'; got 'boss'");
  CHECK(*bad.config.role == "worker");  // the bad source is skipped, the others still count
}

TEST_CASE("LoadNodeConfig: a wiped config area sets nothing, and the copy kept in the encrypted state stands in",
          "[nodeconfig]") {
  TempDir t(fs::temp_directory_path(), "nodeconfig");
  SystemPaths p;
  p.cmdline = t.path() / "cmdline";
  p.fw_cfg = t.path() / "fw_cfg";  // none
  p.by_partuuid = t.path() / "by-partuuid";
  p.saved_area = t.path() / "config-area";
  fs::create_directories(p.by_partuuid);
  std::ofstream(p.cmdline) << "ro sprout.config=PARTUUID=abc sprout.state.encryption=tpm2\n";
  // The initrd overwrote the whole area with zeros: more than the 1 MiB that is read.
  std::ofstream(p.by_partuuid / "abc", std::ios::binary) << std::string((1 << 20) + 4096, '\0');
  auto wiped = LoadNodeConfig(p);
  CHECK(wiped.problems.empty());
  CHECK(wiped.config.origin.empty());
  CHECK_FALSE(wiped.config.role.has_value());
  CHECK_FALSE(wiped.config.cluster_secret.has_value());

  // What the initrd kept of the area before wiping it.
  const std::string secret = Base64Encode(std::string(32, 's'));
  std::ofstream(p.saved_area) << "# sprout node configuration (sprout personalize); key=value per line\n"
                                 "hostname=saved-host\nrole=control-plane\ncluster-secret="
                              << secret << "\n";
  auto kept = LoadNodeConfig(p);
  CHECK(kept.problems.empty());
  CHECK(*kept.config.hostname == "saved-host");
  CHECK(*kept.config.role == "control-plane");
  CHECK(*kept.config.cluster_secret == std::string(32, 's'));
  CHECK(kept.config.origin["cluster-secret"] == "config area (kept in the encrypted state)");
  CHECK(kept.config.origin["role"] == "config area (kept in the encrypted state)");

  // The area personalized again later wins key by key; what it leaves out, the copy keeps.
  std::string area = "role=worker\n";
  area.resize(1 << 20, '\0');
  std::ofstream(p.by_partuuid / "abc", std::ios::binary) << area;
  auto again = LoadNodeConfig(p);
  CHECK(again.problems.empty());
  CHECK(*again.config.role == "worker");
  CHECK(again.config.origin["role"] == "config area");
  CHECK(*again.config.hostname == "saved-host");
  CHECK(again.config.origin["hostname"] == "config area (kept in the encrypted state)");

  // A copy that does not parse is a problem named by its source; the area still counts.
  std::ofstream(p.saved_area) << "role=boss\n";
  auto bad = LoadNodeConfig(p);
  REQUIRE(bad.problems.size() == 1);
  CHECK(bad.problems[0] ==
        "config area (kept in the encrypted state):1: role must be 'control-plane' or 'worker'; got 'boss'");
  CHECK(*bad.config.role == "worker");
}

TEST_CASE("LoadNodeConfig finds sprout.config=PARTLABEL= on the disk that holds the root, not on another",
          "[nodeconfig]") {
  TempDir t(fs::temp_directory_path(), "nodeconfig");
  SystemPaths p;
  p.cmdline = t.path() / "cmdline";
  p.fw_cfg = t.path() / "fw_cfg";
  p.by_partuuid = t.path() / "by-partuuid";
  p.saved_area = t.path() / "config-area";
  p.sys_class_block = t.path() / "sys" / "class" / "block";
  p.dev = t.path() / "dev";
  fs::create_directories(p.by_partuuid);
  fs::create_directories(p.sys_class_block);
  fs::create_directories(p.dev);
  // Laid out as the kernel does: /sys/class/block/NAME links to the partition's folder
  // inside its disk's folder.
  auto part = [&](const std::string& disk, const std::string& name, const std::string& label, const std::string& data) {
    const fs::path dir = t.path() / "sys" / "devices" / disk / name;
    fs::create_directories(dir);
    std::ofstream(dir / "partition") << "1\n";
    std::ofstream(dir / "uevent") << "MAJOR=254\nDEVNAME=" << name << "\nDEVTYPE=partition\nPARTNAME=" << label << "\n";
    fs::create_symlink(dir, p.sys_class_block / name);
    std::ofstream(p.dev / name, std::ios::binary) << data;
  };
  part("vda", "vda2", "sprout-root-a", "");
  part("vda", "vda6", "sprout-config", "role=worker\n");
  part("sdb", "sdb6", "sprout-config", "role=control-plane\n");  // a second sprout disk plugged in
  fs::create_symlink(p.dev / "vda2", p.by_partuuid / "root-uuid");
  std::ofstream(p.cmdline) << "ro sprout.verity.data=PARTUUID=root-uuid sprout.config=PARTLABEL=sprout-config\n";

  CHECK(PartitionOnRootDisk(p, "sprout.verity.data=PARTUUID=root-uuid", "sprout-config") == p.dev / "vda6");
  CHECK_FALSE(PartitionOnRootDisk(p, "sprout.verity.data=PARTUUID=root-uuid", "sprout-state"));
  CHECK_FALSE(PartitionOnRootDisk(p, "ro", "sprout-config"));  // no root named: nothing guessed
  auto loaded = LoadNodeConfig(p);
  CHECK(loaded.problems.empty());
  REQUIRE(loaded.config.role);
  CHECK(*loaded.config.role == "worker");

  std::ofstream(p.cmdline) << "ro sprout.verity.data=PARTUUID=root-uuid sprout.config=PARTLABEL=sprout-cfg\n";
  auto missing = LoadNodeConfig(p);
  REQUIRE(missing.problems.size() == 1);
  CHECK(missing.problems[0] == "config area PARTLABEL=sprout-cfg cannot be read (not found on the root's disk)");
}
