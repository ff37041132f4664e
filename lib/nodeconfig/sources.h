// Reading the node's configuration sources on a booted node (the thin edge around
// nodeconfig.h): the config area (and its copy kept in the encrypted state), QEMU's
// fw_cfg and the kernel command line.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "nodeconfig/nodeconfig.h"

namespace sprout {

// SystemPaths says where the sources are; tests point them at plain files.
struct SystemPaths {
  std::filesystem::path cmdline = "/proc/cmdline";
  std::filesystem::path fw_cfg = "/sys/firmware/qemu_fw_cfg/by_name/opt/sprout/config/raw";
  std::filesystem::path by_partuuid = "/dev/disk/by-partuuid";
  std::filesystem::path sys_class_block = "/sys/class/block";  // to find a partition by its GPT name
  std::filesystem::path dev = "/dev";
  // The config area's contents as the initrd kept them in the encrypted state before it
  // wiped the area (docs/secure-boot.md); absent on a node whose state is plain.
  std::filesystem::path saved_area = "/var/lib/sprout/config-area";
};

// LoadedConfig is the merged configuration plus what went wrong on the way; a broken
// source is reported and skipped, so one bad fw_cfg file does not stop the node.
struct LoadedConfig {
  NodeConfig config;
  std::vector<std::string> problems;
};

// PartitionOnRootDisk is the device node of the partition whose GPT name is name on the
// disk that holds the verity root (the data partition of sprout.verity.data=PARTUUID=
// on cmdline), found through sysfs; nullopt when there is none. Partitions of the same
// name on other disks are never taken.
std::optional<std::filesystem::path> PartitionOnRootDisk(const SystemPaths& paths, const std::string& cmdline,
                                                         const std::string& name);

// LoadNodeConfig reads the config area's copy kept in the encrypted state (if there is
// one), the config area named by sprout.config= on the kernel command line
// (PARTLABEL=NAME on the root's disk, or PARTUUID=... as older images wrote),
// then fw_cfg, then the command line itself, and merges them in that order of
// precedence (command line highest): a config area personalized again after the copy
// was kept overrides it, and a wiped area (all zeros) sets nothing.
LoadedConfig LoadNodeConfig(const SystemPaths& paths = {});

}  // namespace sprout
