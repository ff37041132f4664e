// What the daemon reports: systemd's STATUS= line (logged when it changes) and the
// node's state.json (lib/formation/node_state.h), rewritten once a second. What goes into
// both is computed by pure functions from a snapshot of the loop.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "formation/election.h"
#include "formationd/state_file.h"

namespace sprout::formation {

// StatusLine is the systemd STATUS= text of a phase ("discovering: 2/3 control-plane peers").
std::string StatusLine(Phase phase, int up_peers, int expected);

// StatusSnapshot is what one report is made from.
struct StatusSnapshot {
  Phase phase = Phase::kDiscovering;  // the node's phase
  int up_peers = 0;                   // control-plane peers heard recently
  bool promoted = false;              // joined as a learner and promoted since
  bool worker_done = false;           // a worker whose credentials are saved
  std::vector<std::string> heard;     // every peer heard this run, sorted
  std::optional<Founding> cluster;    // the founded cluster, once known
  int etcd_pid = -1;                  // the local etcd child, or -1
  bool refuses_to_found = false;      // no static list and no M: this node never founds
  bool beyond_electorate = false;     // it hears more control-plane nodes than M (Node::BeyondElectorate)
  int electorate = 0;                 // M as given (0: none)
};

// ElectorateWarning is what a node says, before it knows a cluster, when its electorate
// cannot be trusted: it refuses to found (neither a static list nor M), or it hears
// more control-plane nodes than M (the one-cluster guarantee holds only up to M). ""
// when neither, or once a cluster is known.
std::string ElectorateWarning(const StatusSnapshot& s);

// StatusText is the STATUS= line of a snapshot: "member" once promoted, the worker's
// line once its credentials are saved, else the phase's StatusLine.
std::string StatusText(const StatusSnapshot& s, int expected);

// StatusIdentity is this node as state.json names it.
struct StatusIdentity {
  std::string name;     // node name
  std::string address;  // node address
  int expected = 0;     // expected control-plane count
};

// WithFormation is base (what state.json held) with every formation field replaced
// by the snapshot's; the rest (boots) is kept.
NodeState WithFormation(NodeState base, const StatusIdentity& self, const StatusSnapshot& s);

// StatusReporter keeps STATUS= and <state_dir>/state.json current.
class StatusReporter {
 public:
  // StatusReporter writes state.json in state_dir for self.
  StatusReporter(std::filesystem::path state_dir, StatusIdentity self)
      : state_dir_(std::move(state_dir)), self_(std::move(self)) {}

  // Report sends and logs the STATUS= line when it changed, and writes state.json
  // when a second has passed since the last write and its content changed (a node
  // that has settled writes nothing: flash on edge hardware wears with every write).
  void Report(std::uint64_t now, const StatusSnapshot& s);
  // line is the STATUS= line last sent.
  const std::string& line() const { return line_; }

 private:
  void WriteState(const StatusSnapshot& s);
  std::filesystem::path state_dir_;
  StatusIdentity self_;
  std::string line_;
  std::string warning_;  // the ElectorateWarning last logged
  std::uint64_t next_write_ = 0;
  std::string written_;            // the state.json text last written
  std::optional<NodeState> base_;  // what the run wrote before the loop (boots), read once
};

}  // namespace sprout::formation
