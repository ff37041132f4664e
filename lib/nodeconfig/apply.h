// Applying node settings on a booted node: the static address (systemd-networkd) and
// the SSH authorized key. The hostname is applied by sprout-firstboot itself.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "nodeconfig/nodeconfig.h"

namespace sprout {

// ApplyPaths says where settings land; tests point them into a temporary directory.
struct ApplyPaths {
  std::filesystem::path ssh_dir = "/var/lib/sprout/ssh";
  std::filesystem::path network_dir = "/run/systemd/network";
  bool reload_networkd = true;  // run `networkctl reload` after a change
};

// ApplyReport lists what was done and what failed (a failure does not stop the rest).
struct ApplyReport {
  std::vector<std::string> done;
  std::vector<std::string> problems;
};

// NetworkUnit renders the systemd-networkd unit for a static address, or "" if none is
// set. It matches every Ethernet link, which suits single-NIC nodes (docs/personalization.md).
std::string NetworkUnit(const NodeConfig& config);

// ApplyNodeConfig writes the network unit and authorized_keys when they differ from
// what is there, and reloads systemd-networkd after a network change.
ApplyReport ApplyNodeConfig(const NodeConfig& config, const ApplyPaths& paths = {});

}  // namespace sprout
