#include "formationd/status.h"

#include <systemd/sd-daemon.h>

#include "formationd/journal.h"

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

std::string ElectorateWarning(const StatusSnapshot& s) {
  if (s.cluster) return "";
  if (s.refuses_to_found)
    return "not founding: neither a static peer list (--peers, sprout.peers) nor a control-plane maximum "
           "(--max-control-planes, the Shoot's controlPlane.maximum) was given, so no quorum is known to be safe; give "
           "one of them (this node still joins a cluster that others found)";
  if (s.beyond_electorate)
    return "more control-plane nodes are up than the maximum " + std::to_string(s.electorate) +
           ": one cluster is guaranteed only while at most " + std::to_string(s.electorate) +
           " take part; raise --max-control-planes (the Shoot's controlPlane.maximum) or give a static peer list "
           "(--peers)";
  return "";
}

std::string StatusText(const StatusSnapshot& s, int expected) {
  if (s.promoted) return "member";
  if (s.worker_done) return "worker: credentials saved";
  std::string line = StatusLine(s.phase, s.up_peers, expected);
  if (s.phase == Phase::kDiscovering && s.refuses_to_found && !s.cluster) line += " (not founding: no --peers, no M)";
  if (s.beyond_electorate && !s.cluster) line += " (more than the maximum " + std::to_string(s.electorate) + " up)";
  return line;
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
  base.warning = ElectorateWarning(s);
  return base;
}

void StatusReporter::Report(std::uint64_t now, const StatusSnapshot& s) {
  std::string line = StatusText(s, self_.expected);
  if (line != line_) {
    sd_notifyf(0, "STATUS=%s", line.c_str());
    Journal(LOG_INFO, line, {{"PHASE", PhaseName(s.phase)}});
    line_ = line;
  }
  if (std::string warning = ElectorateWarning(s); warning != warning_) {
    if (!warning.empty()) Journal(LOG_WARNING, warning, {{"PHASE", PhaseName(s.phase)}, {"ELECTORATE_WARNING", "1"}});
    warning_ = warning;
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
