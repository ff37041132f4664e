// The node's persistent first-boot state, kept under /var/lib/sprout. The formation
// protocol's own durable state (votes, the chosen founding) is formation.state beside
// it (lib/formation/daemon.h); state.json is the human-facing view `status` prints.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "util/result.h"

namespace sprout {

// NodeState is what a node remembers across reboots, and what it last reported.
struct NodeState {
  std::string phase = "discovering";  // formation phase (PhaseName), or "disabled"
  int boots = 0;                      // how often sprout-firstboot run started
  std::string name;                   // node name
  std::string address;                // node address
  int expected = 0;                   // expected control-plane count
  int up_peers = 0;                   // control-plane peers heard recently
  std::vector<std::string> peers_up;  // names of every peer ever heard this run
  std::string cluster_token;          // the founded cluster's token, once known
  std::string founder;                // who founded it
  std::vector<std::string> members;   // the founding member set
  int etcd_pid = -1;                  // the local etcd, while running
  std::string warning;                // formation.ElectorateWarning, "" when none
};

// LoadNodeState reads dir/state.json; a missing file is a fresh node.
Result<NodeState> LoadNodeState(const std::filesystem::path& dir);

// SaveNodeState writes dir/state.json atomically.
Status SaveNodeState(const std::filesystem::path& dir, const NodeState& state);

// NodeStateJson renders the state as the JSON object stored in state.json.
std::string NodeStateJson(const NodeState& state);

}  // namespace sprout
