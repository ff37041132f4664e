#include "formation/election.h"

#include <catch2/catch.hpp>
#include <deque>
#include <memory>

using namespace sprout::formation;

namespace {

NodeConfig Config(const std::string& name, int expected = 3) {
  NodeConfig c;
  c.name = name;
  c.peer_url = "https://" + name + ":2380";
  c.cluster_name = "edge";
  c.expected_control_plane = expected;
  return c;
}

template <typename T>
std::vector<T> ActionsOf(const Output& out) {
  std::vector<T> v;
  for (const auto& a : out.actions)
    if (auto* p = std::get_if<T>(&a)) v.push_back(*p);
  return v;
}

template <typename T>
std::vector<T> MessagesOf(const Output& out) {
  std::vector<T> v;
  for (const auto& m : out.messages)
    if (auto* p = std::get_if<T>(&m.message)) v.push_back(*p);
  return v;
}

// Lan delivers every message, in order, with no loss: the friendliest network.
struct Lan {
  std::vector<std::unique_ptr<Node>> nodes;
  std::deque<std::tuple<std::string, std::string, Message>> wire;  // from, to, message
  std::map<std::string, std::vector<Action>> actions;
  std::uint64_t now = 0;

  explicit Lan(int n) {
    for (int i = 1; i <= n; ++i)
      nodes.push_back(std::make_unique<Node>(Config("n" + std::to_string(i), n), PersistedState{}, i));
  }
  void Take(Node& from, Output out) {
    for (auto& a : out.actions) actions[from.config().name].push_back(a);
    for (auto& m : out.messages)
      for (auto& to : nodes)
        if (to.get() != &from && (m.to.empty() || m.to == to->config().name))
          wire.emplace_back(from.config().name, to->config().name, m.message);
  }
  void Run(std::uint64_t until) {
    for (; now <= until; now += 50) {
      for (auto& n : nodes) Take(*n, n->OnTick(now));
      while (!wire.empty()) {
        auto [from, to, m] = wire.front();
        wire.pop_front();
        for (auto& n : nodes)
          if (n->config().name == to) Take(*n, n->OnMessage(from, m));
      }
    }
  }
};

}  // namespace

TEST_CASE("three nodes on a clean network found one cluster with all three members", "[formation]") {
  Lan lan(3);
  lan.Run(5000);
  std::vector<StartEtcdNew> starts;
  for (auto& [name, acts] : lan.actions)
    for (auto& a : acts)
      if (auto* s = std::get_if<StartEtcdNew>(&a)) starts.push_back(*s);
  REQUIRE(starts.size() == 3);
  for (const auto& s : starts) {
    CHECK(s.initial_cluster == "n1=https://n1:2380,n2=https://n2:2380,n3=https://n3:2380");
    CHECK(s.token == starts[0].token);
  }
  for (auto& n : lan.nodes) CHECK(n->phase() == Phase::kMember);
}

TEST_CASE("a candidate needs a majority of the expected control-plane count", "[formation]") {
  Node a(Config("n1", 5), {}, 1);
  std::uint64_t t = 0;
  // Two of five are up (n1 and n2): no candidacy however long it waits.
  for (; t < 10000; t += 50) {
    a.OnMessage("n2", Beacon{"https://n2:2380", true});
    CHECK(MessagesOf<VoteRequest>(a.OnTick(t)).empty());
  }
  bool asked = false;
  for (; t < 20000 && !asked; t += 50) {
    a.OnMessage("n2", Beacon{"https://n2:2380", true});
    a.OnMessage("n3", Beacon{"https://n3:2380", true});
    asked = !MessagesOf<VoteRequest>(a.OnTick(t)).empty();
  }
  REQUIRE(asked);
  CHECK(a.phase() == Phase::kCandidate);
  Ballot b = a.state().promised;
  CHECK(b.candidate == "n1");
  // One grant (two of five with its own vote) is not enough to propose.
  a.OnMessage("n2", VoteGrant{b, true, b, "https://n2:2380", std::nullopt, std::nullopt});
  for (int i = 0; i < 10; ++i) CHECK(MessagesOf<FoundingProposal>(a.OnTick(t += 50)).empty());
  a.OnMessage("n3", VoteGrant{b, true, b, "https://n3:2380", std::nullopt, std::nullopt});
  std::vector<FoundingProposal> props;
  for (int i = 0; i < 10 && props.empty(); ++i) props = MessagesOf<FoundingProposal>(a.OnTick(t += 50));
  REQUIRE(props.size() == 1);
  // The founding set is the candidate plus exactly the peers that voted for it.
  CHECK(props[0].founding.InitialCluster() == "n1=https://n1:2380,n2=https://n2:2380,n3=https://n3:2380");
  CHECK(props[0].founding.founder == "n1");
  CHECK(props[0].founding.token == MakeToken("edge", b));
}

TEST_CASE("a vote persists across a restart: the rebuilt node refuses lower ballots", "[formation]") {
  Node voter(Config("n2"), {}, 7);
  voter.OnTick(0);
  Output out = voter.OnMessage("n1", VoteRequest{{5, "n1"}, "https://n1:2380"});
  auto persists = ActionsOf<PersistState>(out);
  REQUIRE(persists.size() == 1);
  // The vote is saved before the grant is sent: persisting comes first in the output.
  REQUIRE(std::holds_alternative<PersistState>(out.actions.front()));
  CHECK(persists[0].state.promised == Ballot{5, "n1"});
  auto grants = MessagesOf<VoteGrant>(out);
  REQUIRE(grants.size() == 1);
  CHECK(grants[0].granted);

  // Power loss: the caller saved the bytes; a new Node is built from them.
  auto saved = EncodeState(persists[0].state);
  auto loaded = DecodeState(saved);
  REQUIRE(loaded.ok());
  Node again(Config("n2"), *loaded, 8);
  CHECK(again.state().incarnation == persists[0].state.incarnation + 1);
  again.OnTick(100);
  auto denied = MessagesOf<VoteGrant>(again.OnMessage("n3", VoteRequest{{4, "n3"}, "https://n3:2380"}));
  REQUIRE(denied.size() == 1);
  CHECK_FALSE(denied[0].granted);
  CHECK(denied[0].promised == Ballot{5, "n1"});
  // The same candidate asking again (a retransmission) gets the same vote back.
  auto regrant = MessagesOf<VoteGrant>(again.OnMessage("n1", VoteRequest{{5, "n1"}, "https://n1:2380"}));
  REQUIRE(regrant.size() == 1);
  CHECK(regrant[0].granted);
}

TEST_CASE("an accepted founding persists across a restart and is reported to later candidates", "[formation]") {
  Node voter(Config("n2"), {}, 7);
  voter.OnTick(0);
  Founding f{"n1", 5, MakeToken("edge", {5, "n1"}), {{"n1", "https://n1:2380"}, {"n2", "https://n2:2380"}}};
  Output out = voter.OnMessage("n1", FoundingProposal{{5, "n1"}, f});
  auto persists = ActionsOf<PersistState>(out);
  REQUIRE(persists.size() == 1);
  Node again(Config("n2"), DecodeState(EncodeState(persists[0].state)).value(), 9);
  again.OnTick(0);
  auto g = MessagesOf<VoteGrant>(again.OnMessage("n3", VoteRequest{{6, "n3"}, "https://n3:2380"}));
  REQUIRE(g.size() == 1);
  CHECK(g[0].granted);
  REQUIRE(g[0].accepted);
  CHECK(*g[0].accepted == f);
  CHECK(*g[0].accepted_ballot == Ballot{5, "n1"});
}

TEST_CASE("a candidate carries forward a founding a voter already accepted", "[formation]") {
  Node c(Config("n3"), {}, 3);
  std::uint64_t t = 0;
  Ballot b;
  for (; t < 5000 && b.IsZero(); t += 50) {
    c.OnMessage("n2", Beacon{"https://n2:2380", true});
    auto reqs = MessagesOf<VoteRequest>(c.OnTick(t));
    if (!reqs.empty()) b = reqs[0].ballot;
  }
  REQUIRE_FALSE(b.IsZero());
  Founding earlier{"n1", 1, MakeToken("edge", {1, "n1"}), {{"n1", "https://n1:2380"}, {"n2", "https://n2:2380"}}};
  c.OnMessage("n2", VoteGrant{b, true, b, "https://n2:2380", Ballot{1, "n1"}, earlier});
  std::vector<FoundingProposal> props;
  for (int i = 0; i < 20 && props.empty(); ++i) props = MessagesOf<FoundingProposal>(c.OnTick(t += 50));
  REQUIRE(props.size() == 1);
  CHECK(props[0].founding == earlier);  // not a new founding with n3 in it
  CHECK(props[0].ballot == b);
  // Once n2 accepts, the founding is chosen; n3 is not a member, so it joins as a learner.
  Output out = c.OnMessage("n2", FoundingAccepted{b, true, b});
  auto joins = ActionsOf<JoinAsLearner>(out);
  REQUIRE(joins.size() == 1);
  CHECK(joins[0].token == earlier.token);
  CHECK(ActionsOf<StartEtcdNew>(out).empty());
  CHECK(MessagesOf<FoundingAnnouncement>(out).size() == 1);
  CHECK(c.phase() == Phase::kLearner);
}

TEST_CASE("a node that hears its cluster advertised never founds and joins as a learner", "[formation]") {
  Node n(Config("n4"), {}, 4);
  n.OnTick(0);
  Founding f{"n1", 2, MakeToken("edge", {2, "n1"}), {{"n1", "https://n1:2380"}, {"n2", "https://n2:2380"}}};
  Output out = n.OnMessage("n2", ClusterAdvertisement{f});
  auto joins = ActionsOf<JoinAsLearner>(out);
  REQUIRE(joins.size() == 1);
  CHECK(joins[0].founding == f);
  for (std::uint64_t t = 50; t < 10000; t += 50) {
    n.OnMessage("n2", Beacon{"https://n2:2380", true});
    n.OnMessage("n3", Beacon{"https://n3:2380", true});
    Output o = n.OnTick(t);
    CHECK(MessagesOf<VoteRequest>(o).empty());
    CHECK(ActionsOf<StartEtcdNew>(o).empty());
  }
  // It answers a would-be candidate with the advertisement instead of a vote.
  Output o = n.OnMessage("n3", VoteRequest{{9, "n3"}, "https://n3:2380"});
  CHECK(MessagesOf<VoteGrant>(o).empty());
  CHECK(MessagesOf<ClusterAdvertisement>(o).size() == 1);
}

TEST_CASE("every new Node is a new incarnation, saved before its first message", "[formation]") {
  PersistedState s;
  s.incarnation = 41;
  Node n(Config("n1"), s, 1);
  CHECK(n.state().incarnation == 42);
  Output out = n.OnTick(0);
  REQUIRE_FALSE(out.actions.empty());
  auto* p = std::get_if<PersistState>(&out.actions.front());
  REQUIRE(p);
  CHECK(p->state.incarnation == 42);
  CHECK_FALSE(out.messages.empty());                     // its first beacon
  CHECK(ActionsOf<PersistState>(n.OnTick(50)).empty());  // nothing new to save
}

TEST_CASE("persisted state round-trips and corrupt state is refused", "[formation]") {
  PersistedState s;
  s.incarnation = 3;
  s.promised = {7, "n2"};
  s.accepted_ballot = {6, "n1"};
  s.accepted = Founding{"n1", 6, "tok", {{"n1", "u1"}}};
  s.max_round = 4;
  s.cluster = s.accepted;
  auto bytes = EncodeState(s);
  auto back = DecodeState(bytes);
  REQUIRE(back.ok());
  CHECK(*back == s);
  CHECK(DecodeState(EncodeState(PersistedState{})).value() == PersistedState{});
  bytes.pop_back();
  auto cut = DecodeState(bytes);
  REQUIRE_FALSE(cut.ok());
  CHECK(cut.error().starts_with("corrupt formation state: "));
  std::vector<std::uint8_t> junk = {'n', 'o', 'p', 'e'};
  CHECK(DecodeState(junk).error() == "not a sprout formation state file (bad magic)");
}

TEST_CASE("with a static voter list, votes of unlisted nodes do not count", "[formation]") {
  NodeConfig c = Config("n1");
  c.voters = {"https://n1:2380", "https://n2:2380", "https://n3:2380"};
  Node a(c, {}, 1);
  std::uint64_t t = 0;
  Ballot b;
  // An unlisted node alone does not make a majority up...
  for (; t < 5000; t += 50) {
    a.OnMessage("x9", Beacon{"https://x9:2380", true});
    CHECK(MessagesOf<VoteRequest>(a.OnTick(t)).empty());
  }
  for (; t < 10000 && b.IsZero(); t += 50) {
    a.OnMessage("n2", Beacon{"https://n2:2380", true});
    auto reqs = MessagesOf<VoteRequest>(a.OnTick(t));
    if (!reqs.empty()) b = reqs[0].ballot;
  }
  REQUIRE_FALSE(b.IsZero());
  // ...and its vote is ignored, so n1 with x9 is still one vote short.
  a.OnMessage("x9", VoteGrant{b, true, b, "https://x9:2380", std::nullopt, std::nullopt});
  for (int i = 0; i < 10; ++i) CHECK(MessagesOf<FoundingProposal>(a.OnTick(t += 50)).empty());
  a.OnMessage("n2", VoteGrant{b, true, b, "https://n2:2380", std::nullopt, std::nullopt});
  std::vector<FoundingProposal> props;
  for (int i = 0; i < 10 && props.empty(); ++i) props = MessagesOf<FoundingProposal>(a.OnTick(t += 50));
  REQUIRE(props.size() == 1);
  CHECK_FALSE(props[0].founding.HasMember("x9"));
}

TEST_CASE("the quorum is a majority of M, or of every node up when more are up", "[formation]") {
  NodeConfig c = Config("n1");
  c.electorate = 5;  // the Shoot's maximum
  Node a(c, {}, 1);
  a.OnTick(0);
  CHECK(a.Electorate() == 5);
  CHECK(a.Quorum() == 3);
  // Two peers up: 3 of M=5 are up, which is a quorum.
  a.OnMessage("n2", Beacon{"https://n2:2380", true});
  a.OnMessage("n3", Beacon{"https://n3:2380", true});
  CHECK(a.Quorum() == 3);
  // Six more peers: eight are up, more than M, so a founding needs five of them.
  for (int i = 4; i <= 8; ++i) {
    std::string n = "n" + std::to_string(i);
    a.OnMessage(n, Beacon{"https://" + n + ":2380", true});
  }
  CHECK(a.Electorate() == 8);
  CHECK(a.Quorum() == 5);
  // Workers never count.
  a.OnMessage("w1", Beacon{"https://w1:2380", false});
  CHECK(a.Quorum() == 5);
}

TEST_CASE("a node that is not on the static list never runs, and joins as a learner", "[formation]") {
  NodeConfig c = Config("spare");
  c.voters = {"https://n1:2380", "https://n2:2380", "https://n3:2380"};
  Node s(c, {}, 7);
  CHECK_FALSE(s.Votes());
  std::uint64_t t = 0;
  for (; t < 10000; t += 50) {
    for (const char* n : {"n1", "n2", "n3"}) s.OnMessage(n, Beacon{std::string("https://") + n + ":2380", true});
    auto out = s.OnTick(t);
    CHECK(MessagesOf<VoteRequest>(out).empty());
  }
  // It does not vote for anyone either.
  auto out = s.OnMessage("n1", VoteRequest{Ballot{1, "n1"}, "https://n1:2380"});
  CHECK(MessagesOf<VoteGrant>(out).empty());
  // It learns the founding from an advertisement and joins it as a learner.
  Founding f;
  f.founder = "n1";
  f.round = 1;
  f.token = MakeToken("edge", Ballot{1, "n1"});
  f.members = {{"n1", "https://n1:2380"}, {"n2", "https://n2:2380"}};
  out = s.OnMessage("n1", ClusterAdvertisement{f});
  CHECK(ActionsOf<JoinAsLearner>(out).size() == 1);
  CHECK(s.phase() == Phase::kLearner);
}

TEST_CASE("a node given neither a static list nor M never founds, yet votes and joins", "[formation]") {
  NodeConfig c = Config("n1");
  c.may_found = false;  // what the daemon sets with no --peers and no maximum
  Node a(c, {}, 3);
  std::uint64_t t = 0;
  for (; t < 20000; t += 50) {
    for (const char* n : {"n2", "n3", "n4", "n5"}) a.OnMessage(n, Beacon{std::string("https://") + n + ":2380", true});
    auto out = a.OnTick(t);
    CHECK(MessagesOf<VoteRequest>(out).empty());
  }
  CHECK(a.phase() == Phase::kDiscovering);
  // It still grants a vote to a candidate that knows its quorum...
  auto out = a.OnMessage("n2", VoteRequest{Ballot{1, "n2"}, "https://n2:2380"});
  CHECK(MessagesOf<VoteGrant>(out).size() == 1);
  // ...and joins the founding it learns.
  Founding f;
  f.founder = "n2";
  f.round = 1;
  f.token = MakeToken("edge", Ballot{1, "n2"});
  f.members = {{"n2", "https://n2:2380"}, {"n3", "https://n3:2380"}, {"n4", "https://n4:2380"}};
  out = a.OnMessage("n2", ClusterAdvertisement{f});
  CHECK(ActionsOf<JoinAsLearner>(out).size() == 1);
}

TEST_CASE("a node says when it hears more control-plane nodes than M", "[formation]") {
  NodeConfig c = Config("n1");
  c.electorate = 3;
  Node a(c, {}, 1);
  a.OnTick(0);
  a.OnMessage("n2", Beacon{"https://n2:2380", true});
  a.OnMessage("n3", Beacon{"https://n3:2380", true});
  CHECK_FALSE(a.BeyondElectorate());  // 3 up, M = 3
  a.OnMessage("w1", Beacon{"https://w1:2380", false});
  CHECK_FALSE(a.BeyondElectorate());  // workers do not count
  a.OnMessage("n4", Beacon{"https://n4:2380", true});
  CHECK(a.BeyondElectorate());  // 4 up
  // With a static list the list is the electorate: nothing to warn about.
  NodeConfig listed = Config("n1");
  listed.electorate = 3;
  listed.voters = {"https://n1:2380", "https://n2:2380", "https://n3:2380", "https://n4:2380"};
  Node b(listed, {}, 1);
  b.OnTick(0);
  for (const char* n : {"n2", "n3", "n4"}) b.OnMessage(n, Beacon{std::string("https://") + n + ":2380", true});
  CHECK_FALSE(b.BeyondElectorate());
}
