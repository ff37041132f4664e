// Reading the node's configuration sources on a booted node (the thin edge around
// nodeconfig.h): the config area, QEMU's fw_cfg and the kernel command line.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "nodeconfig/nodeconfig.h"

namespace sprout {

// SystemPaths says where the sources are; tests point them at plain files.
struct SystemPaths {
  std::filesystem::path cmdline = "/proc/cmdline";
  std::filesystem::path fw_cfg = "/sys/firmware/qemu_fw_cfg/by_name/opt/sprout/config/raw";
  std::filesystem::path by_partuuid = "/dev/disk/by-partuuid";
};

// LoadedConfig is the merged configuration plus what went wrong on the way; a broken
// source is reported and skipped, so one bad fw_cfg file does not stop the node.
struct LoadedConfig {
  NodeConfig config;
  std::vector<std::string> problems;
};

// LoadNodeConfig reads the config area named by sprout.config=PARTUUID=... on the
// kernel command line, then fw_cfg, then the command line itself, and merges them in
// that order of precedence (command line highest).
LoadedConfig LoadNodeConfig(const SystemPaths& paths = {});

}  // namespace sprout
