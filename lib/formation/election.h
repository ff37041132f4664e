// The founder election as a pure state machine: messages and ticks in, messages and
// actions out. No sockets, clocks, files or randomness inside; docs/formation.md has
// the protocol and the argument why at most one founding is ever chosen.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "formation/wire.h"
#include "util/result.h"

namespace sprout::formation {

// Timing holds the protocol's timer lengths in milliseconds of the caller's clock.
struct Timing {
  std::uint64_t beacon_interval = 500;      // how often an undecided node says it is up
  std::uint64_t peer_timeout = 2000;        // a peer unheard for this long is not counted as up
  std::uint64_t election_min = 150;         // random wait before a candidacy, lower bound
  std::uint64_t election_max = 600;         // and upper bound (grows with failed attempts)
  std::uint64_t resend = 200;               // a candidate repeats its request this often
  std::uint64_t phase_timeout = 1500;       // a candidacy that has not finished by then is dropped
  std::uint64_t founding_grace = 250;       // after a majority, wait this long for the other votes
  std::uint64_t advertise_interval = 1000;  // how often a node that knows the cluster says so
};

// NodeConfig is everything a node knows about itself before it hears anyone.
struct NodeConfig {
  std::string name;                 // unique node name, also its etcd member name
  std::string peer_url;             // its etcd peer URL
  std::string cluster_name;         // the cluster identity it belongs to
  int expected_control_plane = 3;   // N: the profile's control-plane count
  int electorate = 0;               // M: the most control-plane nodes that may take part at once
                                    // (the Shoot's maximum); 0 means N. Quorums are majorities of M.
  bool control_plane = true;        // workers never vote and never found
  bool may_found = true;            // false: never a candidate (no static list and no M were
                                    // given, so no safe quorum is known); it still grants,
                                    // accepts, learns the founding and joins
  std::vector<std::string> voters;  // if set, the peer URLs of the only nodes that vote (a static
                                    // peer list); a node not on it never votes or runs
  Timing timing;                    // timer lengths
};

// PersistedState is what a node must keep across restarts; the caller saves it
// (EncodeState) before it sends any message of the same Output.
struct PersistedState {
  std::uint64_t incarnation = 0;     // boot number; grows with every Node built
  Ballot promised;                   // the ballot this node's vote is given to
  Ballot accepted_ballot;            // the ballot of the founding it accepted (zero: none)
  std::optional<Founding> accepted;  // the founding it accepted
  std::uint64_t max_round = 0;       // the highest round it ever ran as candidate
  std::optional<Founding> cluster;   // the chosen founding, once known

  // operator== compares every field.
  bool operator==(const PersistedState&) const = default;
};

// EncodeState renders PersistedState in the wire encoding, versioned.
std::vector<std::uint8_t> EncodeState(const PersistedState& s);
// DecodeState reads what EncodeState wrote.
Result<PersistedState> DecodeState(std::span<const std::uint8_t> bytes);

// Outbound is one message to send; an empty `to` means every peer (multicast).
struct Outbound {
  std::string to;   // peer name, or empty for everyone
  Message message;  // what to send
};

// PersistState asks the caller to save state durably before sending anything.
struct PersistState {
  PersistedState state;  // the whole state to save
};
// StartEtcdNew asks the caller to start etcd with --initial-cluster-state=new.
struct StartEtcdNew {
  std::string initial_cluster;  // --initial-cluster
  std::string token;            // --initial-cluster-token
  Founding founding;            // the chosen founding these flags come from
};
// JoinAsLearner asks the caller to join the founded cluster as an etcd learner.
struct JoinAsLearner {
  std::string token;  // the cluster to join
  Founding founding;  // its members run the join endpoints
};
// JoinAsWorker asks a worker node to fetch its join credentials from the cluster.
struct JoinAsWorker {
  std::string token;  // the cluster to join
  Founding founding;  // its members run the join endpoints
};
// Action is anything but a message that the caller must do, in order.
using Action = std::variant<PersistState, StartEtcdNew, JoinAsLearner, JoinAsWorker>;

// Output is the result of one step: do the actions in order, then send the messages.
struct Output {
  std::vector<Action> actions;     // in order; PersistState always first
  std::vector<Outbound> messages;  // after the actions
};

// Phase is where a node stands in formation.
enum class Phase { kDiscovering, kCandidate, kProposing, kMember, kLearner, kWorker };

// PhaseName names a phase for logs and status ("discovering", ...).
const char* PhaseName(Phase p);

// MakeToken derives the etcd cluster token of a founding: unique per cluster and ballot.
std::string MakeToken(const std::string& cluster_name, const Ballot& ballot);

// Node is one node's formation state machine.
class Node {
 public:
  // Node resumes from state (a fresh node passes {}); seed drives its random back-off.
  Node(NodeConfig config, PersistedState state, std::uint64_t seed);

  // OnTick advances the clock to now (milliseconds, monotonic) and runs the timers.
  Output OnTick(std::uint64_t now);
  // OnMessage handles one authenticated message from peer `from` at the last tick's time.
  Output OnMessage(const std::string& from, const Message& message);

  // phase is the node's current phase.
  Phase phase() const { return phase_; }
  // state is the node's persistent state as of the last step.
  const PersistedState& state() const { return state_; }
  // config is the node's configuration.
  const NodeConfig& config() const { return config_; }
  // UpPeers counts control-plane peers heard within the peer timeout, not counting itself.
  int UpPeers() const;
  // Electorate is how many control-plane nodes may vote as far as this node must assume:
  // the static list's size, else the largest of N, M and the nodes up now.
  int Electorate() const;
  // Quorum is the number of votes (and acceptances) a founding needs: a strict majority
  // of the electorate, so that any two quorums share a node.
  int Quorum() const { return Electorate() / 2 + 1; }
  // Votes says whether this node takes part in the election (a control-plane node on
  // the static list, or any control-plane node when there is none).
  bool Votes() const { return config_.control_plane && IsVoter(config_.name); }
  // BeyondElectorate says whether this node hears more control-plane nodes up (itself
  // included) than the M it was given, with no static list: one cluster is then
  // guaranteed only while the ones it cannot hear do not found on their own.
  bool BeyondElectorate() const {
    return config_.voters.empty() && config_.control_plane && config_.electorate > 0 &&
           UpPeers() + 1 > config_.electorate;
  }
  // conflicts counts advertisements of a different founding (never expected; logged).
  std::uint64_t conflicts() const { return conflicts_; }

 private:
  struct Peer {
    std::string peer_url;
    std::uint64_t last_seen = 0;
    bool control_plane = true;
  };

  bool IsVoter(const std::string& name) const;
  std::uint64_t Random(std::uint64_t lo, std::uint64_t hi);
  void ScheduleElection();
  void StartCandidacy(Output& out);
  void Propose(Output& out);
  void GiveUp(std::uint64_t seen_round);
  void StepDown(const Ballot& higher);
  void Defer();
  std::uint64_t PhaseTimeout() const;
  void Learn(const Founding& f, Output& out);
  void Act(Output& out);
  void Broadcast(Output& out, Message m);
  void Send(Output& out, const std::string& to, Message m);
  VoteGrant GrantFor(const Ballot& b, bool granted) const;
  Output Finish(Output out);

  NodeConfig config_;
  PersistedState state_;
  std::uint64_t rng_;
  bool dirty_ = true;  // a new incarnation must be saved before the first send
  bool started_ = false;
  bool need_act_ = false;
  std::uint64_t now_ = 0;
  Phase phase_ = Phase::kDiscovering;
  std::map<std::string, Peer> peers_;
  std::uint64_t highest_round_seen_ = 0;
  std::uint64_t election_at_ = 0;
  int attempts_ = 0;
  std::uint64_t next_beacon_ = 0;
  std::uint64_t next_advert_ = 0;
  // The current candidacy, valid in kCandidate and kProposing.
  Ballot ballot_;
  std::map<std::string, VoteGrant> grants_;
  std::optional<std::uint64_t> majority_at_;
  Founding proposal_;
  std::set<std::string> accepts_;
  std::uint64_t phase_started_ = 0;
  std::uint64_t last_send_ = 0;
  std::uint64_t conflicts_ = 0;
};

}  // namespace sprout::formation
