#include "formationd/beacons.h"

#include <arpa/inet.h>

#include <catch2/catch.hpp>
#include <deque>
#include <memory>

namespace f = sprout::formation;

namespace {

// Net is what a FakeDatagrams saw and what it will hand out.
struct Net {
  std::deque<f::Datagram> inbox;                                        // waiting to be received
  std::vector<std::pair<std::vector<std::uint8_t>, sockaddr_in>> sent;  // SendTo
  std::vector<std::vector<std::uint8_t>> broadcast;                     // SendAll
  bool refuse = false;                                                  // every send fails
};

// FakeDatagrams is the network in memory.
class FakeDatagrams : public f::Datagrams {
 public:
  explicit FakeDatagrams(std::shared_ptr<Net> net) : net_(std::move(net)) {}
  bool SendTo(const std::vector<std::uint8_t>& bytes, const sockaddr_in& to) override {
    net_->sent.emplace_back(bytes, to);
    return !net_->refuse;
  }
  int SendAll(const std::vector<std::uint8_t>& bytes) override {
    net_->broadcast.push_back(bytes);
    return net_->refuse ? 3 : 0;
  }
  std::optional<f::Datagram> Receive() override {
    if (net_->inbox.empty()) return std::nullopt;
    auto d = net_->inbox.front();
    net_->inbox.pop_front();
    return d;
  }
  int fd() const override { return -1; }

 private:
  std::shared_ptr<Net> net_;
};

sockaddr_in Address(const std::string& ip) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(7777);
  a.sin_addr = *f::ParseIPv4(ip);
  return a;
}

f::Key KeyOf(std::uint8_t b) {
  f::Key k{};
  k.fill(b);
  return k;
}

f::Message BeaconOf(const std::string& name) { return f::Beacon{"https://" + name + ":2380", true}; }

struct Received {
  std::string sender;
  f::Message message;
};

// Counting is a nonce source for tests.
std::function<f::Nonce()> Counting() {
  return [n = std::uint8_t{0}]() mutable {
    f::Nonce x{};
    x[0] = ++n;
    return x;
  };
}

// Make is node self on net, incarnation 1.
f::Beacons Make(const std::shared_ptr<Net>& net, const std::string& self, f::LivenessOptions o = {}) {
  return f::Beacons(std::make_unique<FakeDatagrams>(net), f::FrameKeys{.formation = KeyOf(1)}, "edge", self, 1,
                    Counting(), o);
}

// Probes are the nonces of the liveness probes sent so far, in order.
std::vector<f::Nonce> Probes(const Net& net) {
  std::vector<f::Nonce> out;
  for (const auto& [bytes, to] : net.sent) {
    auto frame = f::DecodeMessage(bytes);
    if (frame && std::holds_alternative<f::LivenessProbe>(frame->message))
      out.push_back(std::get<f::LivenessProbe>(frame->message).nonce);
  }
  return out;
}

// Answer has peer echo the last probe sent on net, from address.
void Answer(const std::shared_ptr<Net>& net, f::Sealer& peer, const std::string& address) {
  auto probes = Probes(*net);
  REQUIRE_FALSE(probes.empty());
  net->inbox.push_back({peer.Seal(f::LivenessEcho{probes.back()}), Address(address)});
}

}  // namespace

TEST_CASE("beacons: frames a peer sealed are handed on once it answered, and answers go where it was heard",
          "[formation]") {
  auto net = std::make_shared<Net>();
  f::Beacons a = Make(net, "a");
  f::Sealer b(KeyOf(1), "edge", "b", 1);
  net->inbox.push_back({b.Seal(BeaconOf("b")), Address("198.18.0.12")});
  std::vector<Received> got;
  auto keep = [&got](const std::string& sender, const f::Message& m) {
    got.push_back({sender, m});
    return true;
  };
  REQUIRE(a.Drain(256, keep, 0));
  CHECK(got.empty());  // held: b's incarnation has not answered yet
  REQUIRE(net->sent.size() == 1);
  CHECK(f::FormatAddress(net->sent[0].second) == "198.18.0.12:7777");  // the probe
  Answer(net, b, "198.18.0.12");
  REQUIRE(a.Drain(256, keep, 1));
  REQUIRE(got.size() == 1);
  CHECK(got[0].sender == "b");
  CHECK(got[0].message == BeaconOf("b"));
  CHECK(a.Heard() == std::vector<std::string>{"b"});
  // Now b's frames pass at once.
  net->inbox.push_back({b.Seal(BeaconOf("b")), Address("198.18.0.12")});
  REQUIRE(a.Drain(256, keep, 2));
  CHECK(got.size() == 2);

  net->sent.clear();
  a.Send({{"b", BeaconOf("a")}, {"", BeaconOf("a")}, {"c", BeaconOf("a")}});
  REQUIRE(net->sent.size() == 1);
  CHECK(f::FormatAddress(net->sent[0].second) == "198.18.0.12:7777");
  CHECK(net->broadcast.size() == 2);  // to everyone, and to c, whom a never heard
  // What a sent, b's gate opens.
  f::Gate gate_b(KeyOf(1), "edge", "b");
  auto opened = gate_b.Open(net->sent[0].first);
  REQUIRE(opened);
  CHECK(opened->frame.header.sender == "a");
  CHECK(a.send_failures() == 0);
  CHECK(a.stale() == 0);
}

TEST_CASE("beacons: two nodes prove their incarnations to each other and talk", "[formation]") {
  auto net_a = std::make_shared<Net>();
  auto net_b = std::make_shared<Net>();
  f::Beacons a = Make(net_a, "a");
  f::Beacons b = Make(net_b, "b");
  std::vector<Received> got_a;
  std::vector<Received> got_b;
  auto keep = [](std::vector<Received>& got) {
    return [&got](const std::string& sender, const f::Message& m) {
      got.push_back({sender, m});
      return true;
    };
  };
  // Carry what each sent (unicast or to all) to the other, for a few rounds.
  auto carry = [](Net& from, Net& to, const std::string& address) {
    for (auto& [bytes, where] : from.sent) to.inbox.push_back({bytes, Address(address)});
    for (auto& bytes : from.broadcast) to.inbox.push_back({bytes, Address(address)});
    from.sent.clear();
    from.broadcast.clear();
  };
  a.Send({{"", BeaconOf("a")}});
  b.Send({{"", BeaconOf("b")}});
  for (std::uint64_t t = 0; t < 4; ++t) {
    carry(*net_a, *net_b, "198.18.0.11");
    carry(*net_b, *net_a, "198.18.0.12");
    REQUIRE(a.Drain(256, keep(got_a), t));
    REQUIRE(b.Drain(256, keep(got_b), t));
  }
  REQUIRE(got_a.size() == 1);
  CHECK(got_a[0].message == BeaconOf("b"));
  REQUIRE(got_b.size() == 1);
  CHECK(got_b[0].message == BeaconOf("a"));
}

TEST_CASE("beacons: a captured advertisement of an earlier install is dropped as stale, the live node passes",
          "[formation]") {
  auto net = std::make_shared<Net>();
  f::Beacons a = Make(net, "a", f::LivenessOptions{.give_up_ms = 3000});
  f::Founding old{"b", 1, "sprout-0123456789abcdef", {{"b", "https://198.18.0.12:2380"}}};
  // Frames b sealed in an earlier install (incarnation 100), replayed from elsewhere.
  f::Sealer earlier(KeyOf(1), "edge", "b", 100);
  std::vector<std::vector<std::uint8_t>> capture;
  for (int i = 0; i < 3; ++i) capture.push_back(earlier.Seal(f::ClusterAdvertisement{old}));
  for (const auto& frame : capture) net->inbox.push_back({frame, Address("198.18.0.99")});
  int handed = 0;
  auto count = [&handed](const std::string&, const f::Message&) { return ++handed > 0; };
  REQUIRE(a.Drain(256, count, 0));
  CHECK(handed == 0);
  REQUIRE(net->sent.size() == 1);  // one probe to where the capture came from; nobody answers
  REQUIRE(a.Drain(256, count, 3000));
  CHECK(handed == 0);
  CHECK(a.stale() == 3);
  CHECK(a.counters().accepted == 0);  // the gate's replay window never saw them
  // b of this install (incarnation 200) is heard and answers; the capture, replayed
  // again, is now older than b's live incarnation and dropped at once.
  f::Sealer live(KeyOf(1), "edge", "b", 200);
  net->inbox.push_back({live.Seal(BeaconOf("b")), Address("198.18.0.12")});
  REQUIRE(a.Drain(256, count, 3001));
  Answer(net, live, "198.18.0.12");
  for (const auto& frame : capture) net->inbox.push_back({frame, Address("198.18.0.99")});
  REQUIRE(a.Drain(256, count, 3002));
  CHECK(handed == 1);
  CHECK(a.stale() == 6);
}

TEST_CASE("beacons: forged and replayed frames are counted, not handed on", "[formation]") {
  auto net = std::make_shared<Net>();
  f::Beacons a = Make(net, "a");
  f::Sealer b(KeyOf(1), "edge", "b", 1);
  f::Sealer forger(KeyOf(2), "edge", "b", 1);
  auto frame = b.Seal(BeaconOf("b"));
  net->inbox.push_back({frame, Address("198.18.0.12")});
  net->inbox.push_back({frame, Address("198.18.0.12")});  // the copy sent to a static peer
  net->inbox.push_back({forger.Seal(BeaconOf("b")), Address("198.18.0.66")});
  int handed = 0;
  auto count = [&handed](const std::string&, const f::Message&) { return ++handed > 0; };
  REQUIRE(a.Drain(256, count, 0));
  Answer(net, b, "198.18.0.12");
  REQUIRE(a.Drain(256, count, 1));
  CHECK(handed == 1);
  CHECK(a.counters().accepted == 1);
  CHECK(a.counters().replayed == 1);
  CHECK(a.counters().forged == 1);
  CHECK(a.last_refused_from() == "198.18.0.12:7777");  // the copy, refused last
  CHECK(a.Heard() == std::vector<std::string>{"b"});   // the forger's address is not learnt
}

TEST_CASE("beacons: a drain is bounded and stops when the handler fails", "[formation]") {
  auto net = std::make_shared<Net>();
  f::Beacons a = Make(net, "a");
  f::Sealer b(KeyOf(1), "edge", "b", 1);
  int handed = 0;
  auto count = [&handed](const std::string&, const f::Message&) { return ++handed > 0; };
  net->inbox.push_back({b.Seal(BeaconOf("b")), Address("198.18.0.12")});
  REQUIRE(a.Drain(256, count, 0));
  Answer(net, b, "198.18.0.12");
  REQUIRE(a.Drain(256, count, 1));
  REQUIRE(handed == 1);
  for (int i = 0; i < 5; ++i) net->inbox.push_back({b.Seal(BeaconOf("b")), Address("198.18.0.12")});
  REQUIRE(a.Drain(2, count, 2));
  CHECK(handed == 3);
  CHECK(net->inbox.size() == 3);
  CHECK_FALSE(a.Drain(
      256, [](const std::string&, const f::Message&) { return false; }, 3));
  CHECK(net->inbox.size() == 2);
}

TEST_CASE("beacons: refused sends are counted", "[formation]") {
  auto net = std::make_shared<Net>();
  net->refuse = true;
  f::Beacons a = Make(net, "a");
  a.Send({{"", BeaconOf("a")}});
  CHECK(a.send_failures() == 3);
}
TEST_CASE("beacons: replays alone are not worth a drop log line", "[formation]") {
  f::DropCounters a;
  f::DropCounters b;
  b.replayed = 9;
  b.own = 2;
  b.accepted = 5;
  CHECK(f::SameDrops(a, b));
  b.forged = 1;
  CHECK_FALSE(f::SameDrops(a, b));
  CHECK(f::CountersText(b) ==
        "accepted=5 malformed=0 other_cluster=0 forged=1 replayed=9 own=2 overreach=0 for_workers=0");
  b.forged = 0;
  b.for_workers = 4;  // other control-plane nodes' copies for workers: expected, not logged
  CHECK(f::SameDrops(a, b));
  b.overreach = 1;
  CHECK_FALSE(f::SameDrops(a, b));
}

// ControlPlane is control-plane node self on net, incarnation 1, holding cp and worker.
f::Beacons ControlPlane(const std::shared_ptr<Net>& net, const std::string& self, const f::Key& cp,
                        const f::Key& worker) {
  return f::Beacons(std::make_unique<FakeDatagrams>(net), f::FrameKeys{cp, worker}, "edge", self, 1, Counting());
}

// Worker is worker self on net, incarnation 1: it holds the worker key alone.
f::Beacons Worker(const std::shared_ptr<Net>& net, const std::string& self, const f::Key& worker) {
  return f::Beacons(std::make_unique<FakeDatagrams>(net), f::FrameKeys{worker, std::nullopt}, "edge", self, 1,
                    Counting());
}

// Opens says whether a gate of self under key admits bytes.
bool Opens(const f::Key& key, const std::vector<std::uint8_t>& bytes) {
  f::Gate gate(key, "edge", "someone-else");
  return gate.Open(bytes).has_value();
}

TEST_CASE("beacons: a control-plane node hears workers under the worker key and answers them under it only",
          "[formation]") {
  auto net = std::make_shared<Net>();
  const f::Key cp = KeyOf(1);
  const f::Key worker = KeyOf(7);
  f::Beacons a = ControlPlane(net, "a", cp, worker);
  f::Sealer w(worker, "edge", "w", 1);
  net->inbox.push_back({w.Seal(f::Beacon{"https://w:2380", false}), Address("198.18.0.31")});
  net->inbox.push_back({w.Seal(f::VoteRequest{{9, "w"}, "https://w:2380"}), Address("198.18.0.31")});
  std::vector<Received> got;
  auto keep = [&got](const std::string& sender, const f::Message& m) {
    got.push_back({sender, m});
    return true;
  };
  REQUIRE(a.Drain(256, keep, 0));
  CHECK(got.empty());  // the beacon waits for w's incarnation to answer
  // The vote request under the worker key is overreach at once: it is not held or probed.
  CHECK(a.counters().overreach == 1);
  // w is probed once, under the worker key: the only key a worker can answer under.
  REQUIRE(net->sent.size() == 1);
  CHECK(Opens(worker, net->sent[0].first));
  CHECK_FALSE(Opens(cp, net->sent[0].first));
  Answer(net, w, "198.18.0.31");
  REQUIRE(a.Drain(256, keep, 1));
  REQUIRE(got.size() == 1);
  CHECK(got[0].sender == "w");
  CHECK(got[0].message == f::Message{f::Beacon{"https://w:2380", false}});
  CHECK(a.Heard() == std::vector<std::string>{"w"});
  // Once w answered, a vote request of its live incarnation is still overreach.
  net->inbox.push_back({w.Seal(f::VoteRequest{{10, "w"}, "https://w:2380"}), Address("198.18.0.31")});
  REQUIRE(a.Drain(256, keep, 2));
  CHECK(got.size() == 1);
  CHECK(a.counters().overreach == 2);

  net->sent.clear();
  f::Founding founding{"a", 1, "sprout-x", {{"a", "https://a:2380"}}};
  // An answer to the worker goes to where it was heard, under the worker key.
  a.Send({{"w", f::ClusterAdvertisement{founding}}});
  REQUIRE(net->sent.size() == 1);
  CHECK(f::FormatAddress(net->sent[0].second) == "198.18.0.31:7777");
  CHECK(Opens(worker, net->sent[0].first));
  // Election traffic addressed to a worker is not sent at all.
  a.Send({{"w", f::VoteGrant{}}});
  CHECK(net->sent.size() == 1);
  CHECK(net->broadcast.empty());
  // A broadcast advertisement goes out under both keys; a vote request under the cluster key only.
  a.Send({{"", f::ClusterAdvertisement{founding}}});
  REQUIRE(net->broadcast.size() == 2);
  CHECK(Opens(cp, net->broadcast[0]));
  CHECK(Opens(worker, net->broadcast[1]));
  a.Send({{"", f::VoteRequest{{3, "a"}, "https://a:2380"}}});
  REQUIRE(net->broadcast.size() == 3);
  CHECK_FALSE(Opens(worker, net->broadcast[2]));
  CHECK(Opens(cp, net->broadcast[2]));
}

TEST_CASE("beacons: another control-plane node's worker-key copy is dropped quietly, without a probe", "[formation]") {
  auto net = std::make_shared<Net>();
  const f::Key cp = KeyOf(1);
  const f::Key worker = KeyOf(7);
  f::Beacons a = ControlPlane(net, "a", cp, worker);
  f::Founding founding{"b", 1, "sprout-x", {{"b", "https://b:2380"}}};
  f::Sealer b_for_workers(worker, "edge", "b", 1);
  net->inbox.push_back({b_for_workers.Seal(f::ClusterAdvertisement{founding}), Address("198.18.0.12")});
  int handed = 0;
  auto count = [&handed](const std::string&, const f::Message&) { return ++handed > 0; };
  REQUIRE(a.Drain(256, count, 0));
  CHECK(handed == 0);
  CHECK(a.counters().for_workers == 1);
  CHECK(a.counters().overreach == 0);
  CHECK(net->sent.empty());
  CHECK(a.Heard().empty());
}

TEST_CASE(
    "beacons: a worker's captured frames are stale, and a worker-key echo never vouches for a "
    "control-plane incarnation",
    "[formation]") {
  auto net = std::make_shared<Net>();
  const f::Key cp = KeyOf(1);
  const f::Key worker = KeyOf(7);
  f::Beacons a = ControlPlane(net, "a", cp, worker);
  int handed = 0;
  auto count = [&handed](const std::string&, const f::Message&) { return ++handed > 0; };
  // A worker's beacons from an earlier install, replayed: nobody answers under its name.
  f::Sealer earlier_worker(worker, "edge", "w", 100);
  for (int i = 0; i < 2; ++i)
    net->inbox.push_back({earlier_worker.Seal(f::Beacon{"https://w:2380", false}), Address("198.18.0.99")});
  // A control-plane node's advertisement from an earlier install, replayed too.
  f::Founding old{"b", 1, "sprout-old", {{"b", "https://b:2380"}}};
  f::Sealer earlier_b(cp, "edge", "b", 100);
  net->inbox.push_back({earlier_b.Seal(f::ClusterAdvertisement{old}), Address("198.18.0.99")});
  REQUIRE(a.Drain(256, count, 0));
  REQUIRE(net->sent.size() == 2);  // one probe each, under the key each frame came in under
  CHECK(Opens(worker, net->sent[0].first));
  CHECK(Opens(cp, net->sent[1].first));
  // A worker who sees the probe to b echoes it under the worker key, posing as b.
  f::Sealer posing_as_b(worker, "edge", "b", 100);
  net->inbox.push_back({posing_as_b.Seal(f::LivenessEcho{Probes(*net).back()}), Address("198.18.0.31")});
  REQUIRE(a.Drain(256, count, 1));
  CHECK(handed == 0);  // the worker-key echo is no answer for b's frames under the cluster key
  REQUIRE(a.Drain(256, count, 3000));
  CHECK(handed == 0);
  CHECK(a.stale() == 3);
  CHECK(a.counters().accepted == 0);
}

TEST_CASE("beacons: a worker liveness-checks a control-plane node's advertisement under the worker key",
          "[formation]") {
  auto net_a = std::make_shared<Net>();
  auto net_w = std::make_shared<Net>();
  const f::Key cp = KeyOf(1);
  const f::Key worker = KeyOf(7);
  f::Beacons a = ControlPlane(net_a, "a", cp, worker);
  f::Beacons w = Worker(net_w, "w", worker);
  std::vector<Received> got_w;
  auto keep = [&got_w](const std::string& sender, const f::Message& m) {
    got_w.push_back({sender, m});
    return true;
  };
  auto ignore = [](const std::string&, const f::Message&) { return true; };
  auto carry = [](Net& from, Net& to, const std::string& address) {
    for (auto& [bytes, where] : from.sent) to.inbox.push_back({bytes, Address(address)});
    for (auto& bytes : from.broadcast) to.inbox.push_back({bytes, Address(address)});
    from.sent.clear();
    from.broadcast.clear();
  };
  f::Founding founding{"a", 1, "sprout-x", {{"a", "https://a:2380"}}};
  a.Send({{"", f::ClusterAdvertisement{founding}}});  // under both keys; w can open one copy
  carry(*net_a, *net_w, "198.18.0.11");
  REQUIRE(w.Drain(256, keep, 0));
  CHECK(got_w.empty());
  REQUIRE(net_w->sent.size() == 1);  // w's probe, under the worker key
  CHECK(Opens(worker, net_w->sent[0].first));
  CHECK(w.counters().forged == 1);  // the cluster-key copy: w cannot open it
  carry(*net_w, *net_a, "198.18.0.31");
  REQUIRE(a.Drain(256, ignore, 1));
  REQUIRE(net_a->sent.size() == 1);  // a's echo, under the worker key
  CHECK(Opens(worker, net_a->sent[0].first));
  CHECK_FALSE(Opens(cp, net_a->sent[0].first));
  carry(*net_a, *net_w, "198.18.0.11");
  REQUIRE(w.Drain(256, keep, 2));
  REQUIRE(got_w.size() == 1);
  CHECK(got_w[0].sender == "a");
  CHECK(got_w[0].message == f::Message{f::ClusterAdvertisement{founding}});
  // The same advertisement from an earlier install of a is stale at the worker.
  f::Sealer earlier_a(worker, "edge", "a", 0);
  net_w->inbox.push_back({earlier_a.Seal(f::ClusterAdvertisement{founding}), Address("198.18.0.99")});
  REQUIRE(w.Drain(256, keep, 3));
  CHECK(got_w.size() == 1);
  CHECK(w.stale() == 1);
}
