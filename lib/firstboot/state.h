// The node's persistent first-boot state, kept under /var/lib/sprout.
#pragma once

#include <filesystem>
#include <string>

#include "util/result.h"

namespace sprout {

// NodeState is what a node remembers across reboots.
struct NodeState {
  std::string phase = "discovering";
  int boots = 0;
};

// LoadNodeState reads dir/state.json; a missing file is a fresh node.
Result<NodeState> LoadNodeState(const std::filesystem::path& dir);

// SaveNodeState writes dir/state.json atomically.
Status SaveNodeState(const std::filesystem::path& dir, const NodeState& state);

}  // namespace sprout
