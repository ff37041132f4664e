#include "formation/status.h"

#include <systemd/sd-daemon.h>

#include "formation/journal.h"

namespace sprout::formation {

std::string StatusLine(Phase phase, int up_peers, int expected) {
  switch (phase) {
    case Phase::kDiscovering:
      return "discovering: " + std::to_string(up_peers + 1) + "/" + std::to_string(expected) + " control-plane peers";
    case Phase::kCandidate:
    case Phase::kProposing:
      return "founding";
    case Phase::kMember:
      return "member";
    case Phase::kLearner:
      return "joining as learner";
    case Phase::kWorker:
      return "worker";
  }
  return "unknown";
}

std::string StatusText(const StatusSnapshot& s, int expected) {
  if (s.promoted) return "member";
  if (s.worker_done) return "worker: credentials saved";
  return StatusLine(s.phase, s.up_peers, expected);
}

NodeState WithFormation(NodeState base, const StatusIdentity& self, const StatusSnapshot& s) {
  base.phase = s.promoted ? "member (joined as learner)" : PhaseName(s.phase);
  base.name = self.name;
  base.address = self.address;
  base.expected = self.expected;
  base.peers_up = s.heard;
  base.up_peers = s.up_peers;
  base.members.clear();
  base.cluster_token.clear();
  base.founder.clear();
  if (s.cluster) {
    base.cluster_token = s.cluster->token;
    base.founder = s.cluster->founder;
    for (const auto& m : s.cluster->members) base.members.push_back(m.name);
  }
  base.etcd_pid = s.etcd_pid;
  return base;
}

void StatusReporter::Report(std::uint64_t now, const StatusSnapshot& s) {
  std::string line = StatusText(s, self_.expected);
  if (line != line_) {
    sd_notifyf(0, "STATUS=%s", line.c_str());
    Journal(LOG_INFO, line, {{"PHASE", PhaseName(s.phase)}});
    line_ = line;
  }
  if (now >= next_write_) {
    WriteState(s);
    next_write_ = now + 1000;
  }
}

void StatusReporter::WriteState(const StatusSnapshot& s) {
  // Only this reporter writes state.json while the loop runs, so the file is read once.
  if (!base_) {
    auto st = LoadNodeState(state_dir_);
    base_ = st ? *st : NodeState{};
  }
  NodeState state = WithFormation(*base_, self_, s);
  const std::string text = NodeStateJson(state);
  if (text == written_) return;
  if (auto w = SaveNodeState(state_dir_, state); !w) {
    Journal(LOG_WARNING, w.error());
    return;
  }
  written_ = text;
}

}  // namespace sprout::formation
