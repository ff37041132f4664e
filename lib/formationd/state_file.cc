#include "formationd/state_file.h"

#include <nlohmann/json.hpp>

#include "util/fs.h"

namespace sprout {

Result<NodeState> LoadNodeState(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::path file = dir / "state.json";
  if (!std::filesystem::exists(file, ec)) return NodeState{};
  auto text = ReadFile(file);
  if (!text) return Fail(text.error());
  try {
    auto j = nlohmann::json::parse(*text);
    NodeState s;
    s.phase = j.value("phase", s.phase);
    s.boots = j.value("boots", 0);
    s.name = j.value("name", "");
    s.address = j.value("address", "");
    s.expected = j.value("expected", 0);
    s.up_peers = j.value("up_peers", 0);
    s.peers_up = j.value("peers_seen", std::vector<std::string>{});
    s.cluster_token = j.value("cluster_token", "");
    s.founder = j.value("founder", "");
    s.members = j.value("members", std::vector<std::string>{});
    s.etcd_pid = j.value("etcd_pid", -1);
    s.warning = j.value("warning", "");
    return s;
  } catch (const std::exception& e) {
    return Fail(file.string() + " is not valid state JSON (" + e.what() + "); move it away to start the node afresh");
  }
}

std::string NodeStateJson(const NodeState& s) {
  nlohmann::json j{{"phase", s.phase},         {"boots", s.boots},
                   {"name", s.name},           {"address", s.address},
                   {"expected", s.expected},   {"up_peers", s.up_peers},
                   {"peers_seen", s.peers_up}, {"cluster_token", s.cluster_token},
                   {"founder", s.founder},     {"members", s.members},
                   {"etcd_pid", s.etcd_pid}};
  if (!s.warning.empty()) j["warning"] = s.warning;
  return j.dump(2) + "\n";
}

Status SaveNodeState(const std::filesystem::path& dir, const NodeState& state) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Fail("cannot create " + dir.string() + ": " + ec.message());
  return WriteFileAtomic(dir / "state.json", NodeStateJson(state), std::filesystem::perms(0600));
}

}  // namespace sprout
