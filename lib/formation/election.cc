#include "formation/election.h"

#include <algorithm>
#include <cstring>

#include "util/sha256.h"

namespace sprout::formation {

namespace {

constexpr std::uint8_t kStateMagic[4] = {'S', 'P', 'R', 'S'};
constexpr std::uint8_t kStateVersion = 1;

// SplitMix64: tiny, good enough for back-off jitter, and fully determined by the seed
// so that a simulated schedule replays exactly.
std::uint64_t NextRandom(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

const char* PhaseName(Phase p) {
  switch (p) {
    case Phase::kDiscovering:
      return "discovering";
    case Phase::kCandidate:
      return "candidate";
    case Phase::kProposing:
      return "proposing";
    case Phase::kMember:
      return "founding member";
    case Phase::kLearner:
      return "learner";
    case Phase::kWorker:
      return "worker";
  }
  return "unknown";
}

std::string MakeToken(const std::string& cluster_name, const Ballot& ballot) {
  // Distinct ballots give distinct tokens, so two foundings can never share a token
  // by accident; the cluster name keeps tokens of different clusters apart too.
  std::string h = Sha256Hex(cluster_name + '\0' + ballot.candidate + '\0' + std::to_string(ballot.round));
  return "sprout-" + h.substr(0, 16);
}

std::vector<std::uint8_t> EncodeState(const PersistedState& s) {
  Writer w;
  w.Bytes(kStateMagic);
  w.U8(kStateVersion);
  w.U64(s.incarnation);
  w.BallotField(s.promised);
  w.BallotField(s.accepted_ballot);
  w.U8(s.accepted ? 1 : 0);
  if (s.accepted) w.FoundingField(*s.accepted);
  w.U64(s.max_round);
  w.U8(s.cluster ? 1 : 0);
  if (s.cluster) w.FoundingField(*s.cluster);
  return w.Take();
}

Result<PersistedState> DecodeState(std::span<const std::uint8_t> bytes) {
  Reader r(bytes);
  std::uint8_t magic[4];
  for (auto& m : magic) m = r.U8();
  if (!r.ok() || std::memcmp(magic, kStateMagic, sizeof magic) != 0)
    return Fail("not a sprout formation state file (bad magic)");
  std::uint8_t version = r.U8();
  if (version != kStateVersion)
    return Fail("formation state version " + std::to_string(version) + " is not " + std::to_string(kStateVersion));
  PersistedState s;
  s.incarnation = r.U64();
  s.promised = r.BallotField();
  s.accepted_ballot = r.BallotField();
  if (r.Flag()) s.accepted = r.FoundingField();
  s.max_round = r.U64();
  if (r.Flag()) s.cluster = r.FoundingField();
  if (!r.ok()) return Fail("corrupt formation state: " + r.error());
  if (r.remaining() != 0) return Fail("corrupt formation state: trailing bytes");
  return s;
}

Node::Node(NodeConfig config, PersistedState state, std::uint64_t seed)
    : config_(std::move(config)), state_(std::move(state)), rng_(seed) {
  ++state_.incarnation;
  highest_round_seen_ = std::max(state_.max_round, state_.promised.round);
  if (state_.cluster) {
    phase_ = !config_.control_plane                    ? Phase::kWorker
             : state_.cluster->HasMember(config_.name) ? Phase::kMember
                                                       : Phase::kLearner;
    need_act_ = true;  // repeat the founding or join action: the caller's steps are idempotent
  }
}

std::uint64_t Node::Random(std::uint64_t lo, std::uint64_t hi) {
  if (hi <= lo) return lo;
  return lo + NextRandom(rng_) % (hi - lo + 1);
}

void Node::ScheduleElection() {
  // Back-off grows with failed attempts so that duelling candidates spread out.
  std::uint64_t scale = 1 + static_cast<std::uint64_t>(std::min(attempts_, 4));
  election_at_ = now_ + Random(config_.timing.election_min, config_.timing.election_max * scale);
}

bool Node::IsVoter(const std::string& name) const {
  if (config_.voters.empty()) return true;
  // The list holds addresses (peer URLs), which a site knows before the nodes have
  // names; a peer's URL is what its beacons, requests and grants said.
  std::string url = config_.peer_url;
  if (name != config_.name) {
    auto it = peers_.find(name);
    if (it == peers_.end() || it->second.peer_url.empty()) return false;
    url = it->second.peer_url;
  }
  return std::find(config_.voters.begin(), config_.voters.end(), url) != config_.voters.end();
}

int Node::UpPeers() const {
  int n = 0;
  for (const auto& [name, p] : peers_)
    if (p.control_plane && IsVoter(name) && now_ - p.last_seen <= config_.timing.peer_timeout) ++n;
  return n;
}

int Node::Electorate() const {
  // Safety needs every two quorums to share a node, so a quorum must be a majority of
  // every node that could vote. A static list bounds that set by itself; otherwise the
  // bound is M (the Shoot's maximum), raised to the nodes actually up, so that more
  // spare nodes than M, when they can hear each other, still need a majority of all.
  const int n = config_.expected_control_plane;
  if (!config_.voters.empty()) return std::max(n, static_cast<int>(config_.voters.size()));
  return std::max({n, config_.electorate, UpPeers() + 1});
}

void Node::Broadcast(Output& out, Message m) { out.messages.push_back({"", std::move(m)}); }

void Node::Send(Output& out, const std::string& to, Message m) { out.messages.push_back({to, std::move(m)}); }

Output Node::Finish(Output out) {
  // The saved state must be durable before any message that depends on it leaves.
  if (dirty_) {
    out.actions.insert(out.actions.begin(), PersistState{state_});
    dirty_ = false;
  }
  return out;
}

Output Node::OnTick(std::uint64_t now) {
  now_ = std::max(now_, now);
  Output out;
  if (!started_) {
    started_ = true;
    next_beacon_ = now_;
    ScheduleElection();
  }
  if (state_.cluster) {
    if (need_act_) Act(out);
    // Only control-plane nodes speak for the cluster: a worker's word proves only the
    // worker key, which control-plane nodes do not take advertisements under.
    if (config_.control_plane && now_ >= next_advert_) {
      Broadcast(out, ClusterAdvertisement{*state_.cluster});
      next_advert_ = now_ + config_.timing.advertise_interval;
    }
    return Finish(std::move(out));
  }
  if (now_ >= next_beacon_) {
    Broadcast(out, Beacon{config_.peer_url, config_.control_plane});
    next_beacon_ = now_ + config_.timing.beacon_interval;
  }
  if (!Votes()) return Finish(std::move(out));
  const Timing& t = config_.timing;
  switch (phase_) {
    case Phase::kCandidate:
      if (now_ - phase_started_ >= PhaseTimeout()) {
        GiveUp(0);
      } else if (const int grants = static_cast<int>(grants_.size());
                 majority_at_ && grants >= Quorum() &&
                 (grants >= std::max(config_.expected_control_plane, UpPeers() + 1) ||
                  now_ - *majority_at_ >= t.founding_grace)) {
        // A quorum that grew (more nodes came up) since the majority was reached must
        // be met again: the grants must still be a majority of every node that may vote.
        Propose(out);
      } else if (now_ - last_send_ >= t.resend) {
        // Requests are idempotent, so repeating them to everyone covers lost ones.
        Broadcast(out, VoteRequest{ballot_, config_.peer_url});
        last_send_ = now_;
      }
      break;
    case Phase::kProposing:
      if (now_ - phase_started_ >= PhaseTimeout()) {
        GiveUp(0);
      } else if (now_ - last_send_ >= t.resend) {
        Broadcast(out, FoundingProposal{ballot_, proposal_});
        last_send_ = now_;
      }
      break;
    case Phase::kDiscovering:
      if (config_.may_found && now_ >= election_at_ && UpPeers() + 1 >= Quorum()) StartCandidacy(out);
      break;
    default:
      break;
  }
  return Finish(std::move(out));
}

VoteGrant Node::GrantFor(const Ballot& b, bool granted) const {
  VoteGrant g;
  g.ballot = b;
  g.granted = granted;
  g.promised = state_.promised;
  g.peer_url = config_.peer_url;
  if (state_.accepted) {
    g.accepted_ballot = state_.accepted_ballot;
    g.accepted = state_.accepted;
  }
  return g;
}

void Node::StartCandidacy(Output& out) {
  // A round above everything this node ever saw or used: its ballot is new, and the
  // persisted max_round keeps it new across restarts, so one ballot never carries two
  // different proposals.
  std::uint64_t round = std::max({state_.max_round, state_.promised.round, highest_round_seen_}) + 1;
  ballot_ = Ballot{round, config_.name};
  state_.max_round = round;
  highest_round_seen_ = round;
  state_.promised = ballot_;
  dirty_ = true;
  grants_.clear();
  grants_[config_.name] = GrantFor(ballot_, true);
  majority_at_.reset();
  if (Quorum() <= 1) majority_at_ = now_;
  accepts_.clear();
  phase_ = Phase::kCandidate;
  phase_started_ = now_;
  last_send_ = now_;
  Broadcast(out, VoteRequest{ballot_, config_.peer_url});
}

void Node::Propose(Output& out) {
  // Paxos phase 2: if any voter already accepted a founding, the highest-ballot one
  // may have been chosen, so we must carry it forward instead of inventing our own.
  const VoteGrant* highest = nullptr;
  for (const auto& [name, g] : grants_)
    if (g.accepted && (!highest || *highest->accepted_ballot < *g.accepted_ballot)) highest = &g;
  if (highest) {
    proposal_ = *highest->accepted;
  } else {
    proposal_ = Founding{};
    proposal_.founder = config_.name;
    proposal_.round = ballot_.round;
    proposal_.token = MakeToken(config_.cluster_name, ballot_);
    for (const auto& [name, g] : grants_) proposal_.members.push_back({name, g.peer_url});  // map: sorted
  }
  state_.accepted_ballot = ballot_;
  state_.accepted = proposal_;
  dirty_ = true;
  accepts_ = {config_.name};
  phase_ = Phase::kProposing;
  phase_started_ = now_;
  last_send_ = now_;
  Broadcast(out, FoundingProposal{ballot_, proposal_});
  if (static_cast<int>(accepts_.size()) >= Quorum()) {
    Learn(proposal_, out);
    Broadcast(out, FoundingAnnouncement{proposal_});
  }
}

void Node::GiveUp(std::uint64_t seen_round) {
  highest_round_seen_ = std::max(highest_round_seen_, seen_round);
  phase_ = Phase::kDiscovering;
  grants_.clear();
  accepts_.clear();
  ++attempts_;
  ScheduleElection();
}

void Node::StepDown(const Ballot& higher) {
  // Our vote now belongs to a higher ballot, which our own candidacy cannot beat.
  highest_round_seen_ = std::max(highest_round_seen_, higher.round);
  if (phase_ == Phase::kCandidate || phase_ == Phase::kProposing) {
    phase_ = Phase::kDiscovering;
    grants_.clear();
    accepts_.clear();
  }
  Defer();
}

void Node::Defer() {
  // A candidate we support gets a whole phase before we compete with it: without this,
  // candidates on a slow network keep pre-empting each other and nobody finishes.
  std::uint64_t scale = 1 + static_cast<std::uint64_t>(std::min(attempts_, 4));
  std::uint64_t at = now_ + PhaseTimeout() + Random(config_.timing.election_min, config_.timing.election_max * scale);
  election_at_ = std::max(election_at_, at);
}

std::uint64_t Node::PhaseTimeout() const {
  // Longer after failures, so that a slow network still lets one candidacy finish.
  return config_.timing.phase_timeout * (1 + static_cast<std::uint64_t>(std::min(attempts_, 4)));
}

void Node::Learn(const Founding& f, Output& out) {
  if (state_.cluster) {
    if (!(*state_.cluster == f)) ++conflicts_;
    return;
  }
  state_.cluster = f;
  dirty_ = true;
  phase_ = !config_.control_plane ? Phase::kWorker : f.HasMember(config_.name) ? Phase::kMember : Phase::kLearner;
  need_act_ = true;
  Act(out);
  next_advert_ = now_ + config_.timing.advertise_interval;
}

void Node::Act(Output& out) {
  need_act_ = false;
  const Founding& f = *state_.cluster;
  // A named Action, not emplace_back: GCC 12 warns falsely about emplacing into a variant.
  Action act = JoinAsWorker{f.token, f};
  if (phase_ == Phase::kMember)
    act = StartEtcdNew{f.InitialCluster(), f.token, f};
  else if (phase_ == Phase::kLearner)
    act = JoinAsLearner{f.token, f};
  out.actions.push_back(std::move(act));
}

Output Node::OnMessage(const std::string& from, const Message& message) {
  Output out;
  if (from == config_.name) return out;
  Peer& peer = peers_[from];
  peer.last_seen = now_;
  std::visit(
      [&](const auto& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, Beacon>) {
          peer.peer_url = m.peer_url;
          peer.control_plane = m.control_plane;
          if (state_.cluster && config_.control_plane) Send(out, from, ClusterAdvertisement{*state_.cluster});
        } else if constexpr (std::is_same_v<T, VoteRequest>) {
          highest_round_seen_ = std::max(highest_round_seen_, m.ballot.round);
          if (state_.cluster) {
            Send(out, from, ClusterAdvertisement{*state_.cluster});  // there is a cluster: don't found
            return;
          }
          // A candidate asks only for itself; anything else is a confused or buggy peer.
          if (!Votes() || m.ballot.candidate != from || m.ballot.round == 0) return;
          peer.peer_url = m.peer_url;
          if (state_.promised < m.ballot) {
            state_.promised = m.ballot;
            dirty_ = true;
            StepDown(m.ballot);
          } else if (state_.promised == m.ballot) {
            Defer();  // our candidate is still at work
          }
          Send(out, from, GrantFor(m.ballot, state_.promised == m.ballot));
        } else if constexpr (std::is_same_v<T, VoteGrant>) {
          highest_round_seen_ = std::max(highest_round_seen_, m.promised.round);
          // Votes of nodes outside a configured voter list would let two disjoint
          // "majorities" exist, so they do not count.
          if (phase_ != Phase::kCandidate || !(m.ballot == ballot_)) return;
          if (!m.peer_url.empty()) peer.peer_url = m.peer_url;
          if (!IsVoter(from)) return;
          if (!m.granted) {
            GiveUp(m.promised.round);  // someone holds a higher ballot: retry above it later
            return;
          }
          // Only a voter's own, consistent report may be counted.
          if (m.accepted.has_value() != m.accepted_ballot.has_value()) return;
          grants_[from] = m;
          if (!majority_at_ && static_cast<int>(grants_.size()) >= Quorum()) majority_at_ = now_;
        } else if constexpr (std::is_same_v<T, FoundingProposal>) {
          highest_round_seen_ = std::max(highest_round_seen_, m.ballot.round);
          if (state_.cluster) {
            Send(out, from, ClusterAdvertisement{*state_.cluster});
            return;
          }
          if (!Votes() || m.ballot.candidate != from || m.ballot.round == 0) return;
          if (m.ballot < state_.promised) {
            Send(out, from, FoundingAccepted{m.ballot, false, state_.promised});
            return;
          }
          if (state_.promised < m.ballot)
            StepDown(m.ballot);
          else
            Defer();
          state_.promised = m.ballot;
          state_.accepted_ballot = m.ballot;
          state_.accepted = m.founding;
          dirty_ = true;
          Send(out, from, FoundingAccepted{m.ballot, true, state_.promised});
        } else if constexpr (std::is_same_v<T, FoundingAccepted>) {
          highest_round_seen_ = std::max(highest_round_seen_, m.promised.round);
          if (phase_ != Phase::kProposing || !(m.ballot == ballot_) || !IsVoter(from)) return;
          if (!m.accepted) {
            GiveUp(m.promised.round);
            return;
          }
          accepts_.insert(from);
          if (static_cast<int>(accepts_.size()) >= Quorum()) {
            // A majority accepted: the founding is chosen and can never change.
            Founding chosen = proposal_;
            Learn(chosen, out);
            Broadcast(out, FoundingAnnouncement{chosen});
          }
        } else if constexpr (std::is_same_v<T, FoundingAnnouncement> || std::is_same_v<T, ClusterAdvertisement>) {
          Learn(m.founding, out);
        }  // liveness probes and echoes end in beacons.cc
      },
      message);
  return Finish(std::move(out));
}

}  // namespace sprout::formation
