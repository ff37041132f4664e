#include "formation/sim.h"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include "formation/election.h"

namespace sprout::formation {

namespace {

// Each node ticks this often; every protocol timer is a multiple of it or longer.
constexpr std::uint64_t kTickMs = 50;
// After the network settles, a connected majority must agree within this long.
constexpr std::uint64_t kSettleDeadline = 30000;

// Rng is SplitMix64: the sim's only source of choices, so a seed fixes the schedule.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : s_(seed) {}
  std::uint64_t Next() {
    std::uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::uint64_t Range(std::uint64_t lo, std::uint64_t hi) { return hi <= lo ? lo : lo + Next() % (hi - lo + 1); }
  bool Chance(double p) { return static_cast<double>(Next() >> 11) * 0x1.0p-53 < p; }
  template <typename T>
  const T& Pick(const std::vector<T>& v) {
    return v[Next() % v.size()];
  }

 private:
  std::uint64_t s_;
};

enum class Kind { kTick, kDeliver, kCrash, kRestart, kPartition, kHeal, kSettle };

struct Event {
  std::uint64_t time = 0;
  std::uint64_t seq = 0;  // FIFO among equal times, so ordering never depends on the heap
  Kind kind = Kind::kTick;
  int node = 0;
  int from = 0;
  std::uint64_t life = 0;  // for ticks: the node's life they belong to
  std::optional<Message> message;
  std::vector<int> groups;  // for partitions
};

struct Later {
  bool operator()(const Event& a, const Event& b) const { return a.time != b.time ? a.time > b.time : a.seq > b.seq; }
};

std::string Name(int i) { return "n" + std::to_string(i + 1); }

std::string Describe(const Founding& f) {
  std::string s = f.token + " by " + f.founder + " {";
  for (std::size_t i = 0; i < f.members.size(); ++i) s += (i ? "," : "") + f.members[i].name;
  return s + "}";
}

class Sim {
 public:
  explicit Sim(const SimOptions& o) : opt_(o), rng_(o.seed), n_(o.nodes) {
    // The checker calls a founding chosen once the smallest quorum any node may use
    // accepted it; the schedule keeps the largest quorum any node may need up at the end.
    const int n_lo = std::min(Expected(0), Expected(1)), n_hi = std::max(Expected(0), Expected(1));
    if (o.listed > 0) {
      majority_ = std::max(n_lo, o.listed) / 2 + 1;
      live_quorum_ = std::max(n_hi, o.listed) / 2 + 1;
    } else {
      majority_ = std::max(n_lo, Electorate()) / 2 + 1;
      live_quorum_ = std::max({n_hi, Electorate(), n_}) / 2 + 1;
    }
    res_.seed = o.seed;
    res_.nodes = o.nodes;
    nodes_.resize(static_cast<std::size_t>(n_));
    persisted_.resize(static_cast<std::size_t>(n_));
    life_.assign(static_cast<std::size_t>(n_), 0);
    group_.assign(static_cast<std::size_t>(n_), 0);
    stable_.assign(static_cast<std::size_t>(n_), true);
  }

  SimResult Run() {
    DrawSchedule();
    while (!queue_.empty()) {
      std::pop_heap(queue_.begin(), queue_.end(), Later{});
      Event e = std::move(queue_.back());
      queue_.pop_back();
      if (e.time > deadline_) break;
      now_ = e.time;
      ++res_.events;
      Mix(e.time);
      Mix(static_cast<std::uint64_t>(e.kind) * 131 + static_cast<std::uint64_t>(e.node) * 7 +
          static_cast<std::uint64_t>(e.from));
      Handle(e);
      if (settled_ && Converged()) {
        res_.converged = true;
        res_.converge_ms = now_ - settle_at_;
        break;
      }
    }
    if (!res_.converged) {
      std::string undecided;
      for (int i = 0; i < n_; ++i)
        if (stable_[Idx(i)] && !(nodes_[Idx(i)] && nodes_[Idx(i)]->state().cluster)) undecided += " " + Name(i);
      Violation("liveness: a connected majority did not agree on a cluster within " + std::to_string(kSettleDeadline) +
                " ms; undecided:" + undecided);
    }
    res_.foundings = started_.size();
    res_.founded = !started_.empty();
    if (res_.founded) res_.founding_size = started_.begin()->second.members.size();
    return std::move(res_);
  }

 private:
  static std::size_t Idx(int i) { return static_cast<std::size_t>(i); }

  // Expected is the N node i is given; Electorate the M every node is given.
  int Expected(int i) const {
    int n = opt_.expected > 0 ? opt_.expected : opt_.nodes;
    return opt_.expected_alt > 0 && i % 2 == 1 ? opt_.expected_alt : n;
  }
  int Electorate() const { return opt_.electorate; }
  // Voters counts the nodes that may vote: the static list, or every node.
  int Voters() const { return opt_.listed > 0 ? opt_.listed : n_; }

  void Mix(std::uint64_t v) {
    // FNV-1a over the event stream: equal digests mean the replay took the same path.
    for (int i = 0; i < 8; ++i) {
      res_.digest ^= (v >> (8 * i)) & 0xff;
      res_.digest *= 0x100000001b3ull;
    }
  }

  void Push(Event e) {
    e.seq = seq_++;
    queue_.push_back(std::move(e));
    std::push_heap(queue_.begin(), queue_.end(), Later{});
  }

  void Trace(const std::string& line) {
    if (opt_.trace) res_.trace += "t=" + std::to_string(now_) + " " + line + "\n";
  }

  void Violation(const std::string& what) {
    res_.violations.push_back("t=" + std::to_string(now_) + " " + what);
    Trace("VIOLATION " + what);
  }

  // DrawSchedule fixes the network's behaviour and every fault from the seed.
  void DrawSchedule() {
    static const std::vector<double> kLoss = {0.0, 0.02, 0.1, 0.3};
    static const std::vector<double> kDup = {0.0, 0.05, 0.2};
    static const std::vector<std::uint64_t> kMaxDelay = {2, 20, 100, 600};
    static const std::vector<std::uint64_t> kStagger = {0, 500, 3000};
    loss_ = rng_.Pick(kLoss);
    dup_ = rng_.Pick(kDup);
    max_delay_ = rng_.Pick(kMaxDelay);
    std::uint64_t stagger = rng_.Pick(kStagger);
    settle_at_ = rng_.Range(0, 6000);
    deadline_ = settle_at_ + kSettleDeadline;
    for (int i = 0; i < n_; ++i) Push(Event{.time = rng_.Range(0, stagger), .kind = Kind::kRestart, .node = i});
    int faults = static_cast<int>(rng_.Range(0, 6));
    if (settle_at_ < 200) faults = 0;
    for (int k = 0; k < faults; ++k) {
      std::uint64_t at = rng_.Range(0, settle_at_ - 100);
      if (rng_.Chance(0.5)) {
        int who = static_cast<int>(rng_.Range(0, static_cast<std::uint64_t>(n_ - 1)));
        Push(Event{.time = at, .kind = Kind::kCrash, .node = who});
        std::uint64_t back = at + rng_.Range(10, 3000);
        if (back < settle_at_) Push(Event{.time = back, .kind = Kind::kRestart, .node = who});
      } else {
        Event p{.time = at, .kind = Kind::kPartition};
        std::uint64_t parts = rng_.Range(2, 3);
        for (int i = 0; i < n_; ++i) p.groups.push_back(static_cast<int>(rng_.Range(0, parts - 1)));
        Push(std::move(p));
        std::uint64_t heal = at + rng_.Range(100, 4000);
        if (heal < settle_at_) Push(Event{.time = heal, .kind = Kind::kHeal});
      }
    }
    // From settle_at_ on, a quorum of the voters stays up and connected; the rest of the
    // voters may stay away (spares outside a static list always stay).
    if (Voters() > live_quorum_ && rng_.Chance(0.4)) {
      int away = static_cast<int>(rng_.Range(1, static_cast<std::uint64_t>(Voters() - live_quorum_)));
      std::vector<int> order(Idx(Voters()));
      for (int i = 0; i < Voters(); ++i) order[Idx(i)] = i;
      for (int i = Voters() - 1; i > 0; --i)
        std::swap(order[Idx(i)], order[rng_.Range(0, static_cast<std::uint64_t>(i))]);
      for (int i = 0; i < away; ++i) stable_[Idx(order[Idx(i)])] = false;
    }
    Push(Event{.time = settle_at_, .kind = Kind::kSettle});
    std::ostringstream s;
    s << "nodes=" << n_ << " N=" << Expected(0);
    if (opt_.expected_alt > 0) s << "/" << Expected(1);
    s << " M=" << Electorate() << " listed=" << opt_.listed << " loss=" << loss_ << " dup=" << dup_
      << " max_delay=" << max_delay_ << "ms stagger=" << stagger << "ms faults=" << faults
      << " settle_at=" << settle_at_ << "ms away=";
    for (int i = 0; i < n_; ++i)
      if (!stable_[Idx(i)]) s << Name(i) << ",";
    res_.schedule = s.str();
  }

  void Handle(Event& e) {
    switch (e.kind) {
      case Kind::kTick:
        if (!nodes_[Idx(e.node)] || e.life != life_[Idx(e.node)]) return;  // a tick of an earlier life
        Apply(e.node, nodes_[Idx(e.node)]->OnTick(now_));
        Push(Event{.time = now_ + kTickMs, .kind = Kind::kTick, .node = e.node, .life = e.life});
        return;
      case Kind::kDeliver: {
        if (!nodes_[Idx(e.node)] || !Linked(e.from, e.node)) return;
        ++res_.delivered;
        Mix(e.message->index());
        Trace(Name(e.from) + " -> " + Name(e.node) + " " + MessageName(*e.message));
        Apply(e.node, nodes_[Idx(e.node)]->OnMessage(Name(e.from), *e.message));
        return;
      }
      case Kind::kCrash:
        if (!nodes_[Idx(e.node)]) return;
        Crash(e.node);
        return;
      case Kind::kRestart:
        if (nodes_[Idx(e.node)]) return;
        Start(e.node);
        return;
      case Kind::kPartition:
        ++res_.partitions;
        group_ = e.groups;
        Trace("partition");
        return;
      case Kind::kHeal:
        std::fill(group_.begin(), group_.end(), 0);
        Trace("heal");
        return;
      case Kind::kSettle:
        Settle();
        return;
    }
  }

  void Crash(int i) {
    ++res_.crashes;
    nodes_[Idx(i)].reset();
    ++life_[Idx(i)];
    Trace(Name(i) + " crashed");
  }

  void Start(int i) {
    NodeConfig c;
    c.name = Name(i);
    c.peer_url = "https://" + c.name + ":2380";
    c.cluster_name = "sim";
    c.expected_control_plane = Expected(i);
    c.electorate = Electorate();
    for (int v = 0; v < opt_.listed; ++v) c.voters.push_back("https://" + Name(v) + ":2380");
    PersistedState s = opt_.forget_on_restart ? PersistedState{} : persisted_[Idx(i)];
    ++life_[Idx(i)];
    nodes_[Idx(i)] = std::make_unique<Node>(c, s, rng_.Next());
    Trace(Name(i) + " started (incarnation " + std::to_string(nodes_[Idx(i)]->state().incarnation) + ")");
    // Ticks start at a random offset so nodes are not in lock-step.
    Push(Event{.time = now_ + rng_.Range(0, kTickMs - 1), .kind = Kind::kTick, .node = i, .life = life_[Idx(i)]});
  }

  void Settle() {
    settled_ = true;
    std::fill(group_.begin(), group_.end(), 0);
    loss_ = std::min(loss_, 0.1);
    for (int i = 0; i < n_; ++i) {
      if (stable_[Idx(i)]) {
        if (!nodes_[Idx(i)]) Start(i);
      } else if (nodes_[Idx(i)] && rng_.Chance(0.5)) {
        Crash(i);
      } else {
        group_[Idx(i)] = 100 + i;  // alone, cut off for good
      }
    }
    Trace("settled");
  }

  bool Linked(int a, int b) const { return group_[Idx(a)] == group_[Idx(b)]; }

  bool Converged() const {
    for (int i = 0; i < n_; ++i)
      if (stable_[Idx(i)] && !(nodes_[Idx(i)] && nodes_[Idx(i)]->state().cluster)) return false;
    return true;
  }

  void Send(int from, int to, const Message& m) {
    if (!Linked(from, to) || rng_.Chance(loss_)) return;
    int copies = rng_.Chance(dup_) ? 2 : 1;
    for (int c = 0; c < copies; ++c)
      Push(Event{
          .time = now_ + rng_.Range(1, max_delay_), .kind = Kind::kDeliver, .node = to, .from = from, .message = m});
  }

  void Apply(int i, Output out) {
    for (auto& a : out.actions) {
      if (auto* p = std::get_if<PersistState>(&a)) {
        Check(i, p->state);
        persisted_[Idx(i)] = p->state;
      } else if (auto* s = std::get_if<StartEtcdNew>(&a)) {
        Trace(Name(i) + " starts etcd new: " + Describe(s->founding));
        if (!s->founding.HasMember(Name(i))) Violation(Name(i) + " started etcd new but is not a founding member");
        if (s->initial_cluster != s->founding.InitialCluster() || s->token != s->founding.token)
          Violation(Name(i) + " started etcd with flags that differ from its founding");
        started_.emplace(s->token, s->founding);
        if (started_.size() > 1) {
          std::string all;
          for (const auto& [t, f] : started_) all += " [" + Describe(f) + "]";
          Violation("two founders: etcd started with different foundings:" + all);
        }
      } else if (auto* j = std::get_if<JoinAsLearner>(&a)) {
        Trace(Name(i) + " joins as learner: " + Describe(j->founding));
        if (j->founding.HasMember(Name(i))) Violation(Name(i) + " is a founding member but was told to join");
      }
    }
    for (auto& m : out.messages) {
      if (m.to.empty()) {
        for (int j = 0; j < n_; ++j)
          if (j != i) Send(i, j, m.message);
      } else {
        int j = std::stoi(m.to.substr(1)) - 1;
        if (j >= 0 && j < n_) Send(i, j, m.message);
      }
    }
  }

  // Check watches persisted state the way a Paxos proof does: once a majority has
  // accepted one founding under one ballot it is chosen, and nothing else may ever be
  // chosen or learned.
  void Check(int i, const PersistedState& s) {
    if (s.accepted && !s.accepted_ballot.IsZero()) {
      auto& [value, voters] = accepted_[s.accepted_ballot];
      if (voters.empty()) value = *s.accepted;
      if (!(value == *s.accepted)) Violation("two values accepted under one ballot");
      voters.insert(i);
      if (static_cast<int>(voters.size()) >= majority_) {
        if (!chosen_) {
          chosen_ = value;
          Trace("chosen: " + Describe(value));
        } else if (!(*chosen_ == value)) {
          Violation("two foundings chosen: [" + Describe(*chosen_) + "] and [" + Describe(value) + "]");
        }
      }
    }
    if (s.cluster) {
      if (!chosen_)
        Violation(Name(i) + " learned a founding no majority accepted: " + Describe(*s.cluster));
      else if (!(*chosen_ == *s.cluster))
        Violation(Name(i) + " learned a founding that was not chosen");
    }
  }

  SimOptions opt_;
  Rng rng_;
  int n_;
  int majority_ = 0;     // smallest quorum any node may use: the checker's "chosen"
  int live_quorum_ = 0;  // largest quorum any node may need once the network settled
  SimResult res_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<PersistedState> persisted_;
  std::vector<std::uint64_t> life_;
  std::vector<int> group_;
  std::vector<bool> stable_;
  std::vector<Event> queue_;
  std::uint64_t seq_ = 0;
  std::uint64_t now_ = 0;
  double loss_ = 0;
  double dup_ = 0;
  std::uint64_t max_delay_ = 1;
  std::uint64_t settle_at_ = 0;
  std::uint64_t deadline_ = 0;
  bool settled_ = false;
  std::map<std::string, Founding> started_;
  std::map<Ballot, std::pair<Founding, std::set<int>>> accepted_;
  std::optional<Founding> chosen_;
};

}  // namespace

SimResult RunSchedule(const SimOptions& options) { return Sim(options).Run(); }

}  // namespace sprout::formation
