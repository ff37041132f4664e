#include "formation/beacons.h"

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

}  // namespace

TEST_CASE("beacons: frames a peer sealed are handed on, and answers go where it was heard", "[formation]") {
  auto net = std::make_shared<Net>();
  f::Beacons a(std::make_unique<FakeDatagrams>(net), f::Sealer(KeyOf(1), "edge", "a", 1),
               f::Gate(KeyOf(1), "edge", "a"));
  f::Sealer b(KeyOf(1), "edge", "b", 1);
  net->inbox.push_back({b.Seal(BeaconOf("b")), Address("198.18.0.12")});
  std::vector<Received> got;
  auto keep = [&got](const std::string& sender, const f::Message& m) {
    got.push_back({sender, m});
    return true;
  };
  REQUIRE(a.Drain(256, keep));
  REQUIRE(got.size() == 1);
  CHECK(got[0].sender == "b");
  CHECK(got[0].message == BeaconOf("b"));
  CHECK(a.Heard() == std::vector<std::string>{"b"});

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
}

TEST_CASE("beacons: forged and replayed frames are counted, not handed on", "[formation]") {
  auto net = std::make_shared<Net>();
  f::Beacons a(std::make_unique<FakeDatagrams>(net), f::Sealer(KeyOf(1), "edge", "a", 1),
               f::Gate(KeyOf(1), "edge", "a"));
  f::Sealer b(KeyOf(1), "edge", "b", 1);
  f::Sealer forger(KeyOf(2), "edge", "b", 1);
  auto frame = b.Seal(BeaconOf("b"));
  net->inbox.push_back({frame, Address("198.18.0.12")});
  net->inbox.push_back({frame, Address("198.18.0.12")});  // the copy sent to a static peer
  net->inbox.push_back({forger.Seal(BeaconOf("b")), Address("198.18.0.66")});
  int handed = 0;
  REQUIRE(a.Drain(256, [&handed](const std::string&, const f::Message&) { return ++handed > 0; }));
  CHECK(handed == 1);
  CHECK(a.counters().accepted == 1);
  CHECK(a.counters().replayed == 1);
  CHECK(a.counters().forged == 1);
  CHECK(a.last_refused_from() == "198.18.0.66:7777");
  CHECK(a.Heard() == std::vector<std::string>{"b"});  // the forger's address is not learnt
}

TEST_CASE("beacons: a drain is bounded and stops when the handler fails", "[formation]") {
  auto net = std::make_shared<Net>();
  f::Beacons a(std::make_unique<FakeDatagrams>(net), f::Sealer(KeyOf(1), "edge", "a", 1),
               f::Gate(KeyOf(1), "edge", "a"));
  f::Sealer b(KeyOf(1), "edge", "b", 1);
  for (int i = 0; i < 5; ++i) net->inbox.push_back({b.Seal(BeaconOf("b")), Address("198.18.0.12")});
  int handed = 0;
  auto count = [&handed](const std::string&, const f::Message&) { return ++handed > 0; };
  REQUIRE(a.Drain(2, count));
  CHECK(handed == 2);
  CHECK(net->inbox.size() == 3);
  CHECK_FALSE(a.Drain(256, [](const std::string&, const f::Message&) { return false; }));
  CHECK(net->inbox.size() == 2);
}

TEST_CASE("beacons: refused sends are counted", "[formation]") {
  auto net = std::make_shared<Net>();
  net->refuse = true;
  f::Beacons a(std::make_unique<FakeDatagrams>(net), f::Sealer(KeyOf(1), "edge", "a", 1),
               f::Gate(KeyOf(1), "edge", "a"));
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

TEST_CASE("beacons: a control-plane node hears workers under the worker key and answers them under it only",
          "[formation]") {
  auto net = std::make_shared<Net>();
  const f::Key cp = KeyOf(1);
  const f::Key worker = KeyOf(7);
  f::Gate gate(cp, "edge", "a");
  gate.AdmitWorkers(worker);
  f::Beacons a(std::make_unique<FakeDatagrams>(net), f::Sealer(cp, "edge", "a", 1), std::move(gate));
  a.SealForWorkers(f::Sealer(worker, "edge", "a", 1));
  f::Sealer w(worker, "edge", "w", 1);
  net->inbox.push_back({w.Seal(f::Beacon{"https://w:2380", false}), Address("198.18.0.31")});
  net->inbox.push_back({w.Seal(f::VoteRequest{{9, "w"}, "https://w:2380"}), Address("198.18.0.31")});
  std::vector<Received> got;
  REQUIRE(a.Drain(256, [&got](const std::string& sender, const f::Message& m) {
    got.push_back({sender, m});
    return true;
  }));
  REQUIRE(got.size() == 1);  // the vote request under the worker key never reaches the node
  CHECK(got[0].sender == "w");
  CHECK(a.counters().overreach == 1);
  CHECK(a.Heard() == std::vector<std::string>{"w"});

  f::Founding founding{"a", 1, "sprout-x", {{"a", "https://a:2380"}}};
  f::Gate at_worker(worker, "edge", "w");
  f::Gate at_control_plane(cp, "edge", "b");
  // An answer to the worker goes to where it was heard, under the worker key.
  a.Send({{"w", f::ClusterAdvertisement{founding}}});
  REQUIRE(net->sent.size() == 1);
  CHECK(f::FormatAddress(net->sent[0].second) == "198.18.0.31:7777");
  CHECK(at_worker.Open(net->sent[0].first));
  // Election traffic addressed to a worker is not sent at all.
  a.Send({{"w", f::VoteGrant{}}});
  CHECK(net->sent.size() == 1);
  CHECK(net->broadcast.empty());
  // A broadcast advertisement goes out under both keys; a vote request under the cluster key only.
  a.Send({{"", f::ClusterAdvertisement{founding}}});
  REQUIRE(net->broadcast.size() == 2);
  CHECK(at_control_plane.Open(net->broadcast[0]));
  CHECK(at_worker.Open(net->broadcast[1]));
  a.Send({{"", f::VoteRequest{{3, "a"}, "https://a:2380"}}});
  REQUIRE(net->broadcast.size() == 3);
  CHECK_FALSE(at_worker.Open(net->broadcast[2]));
  CHECK(at_control_plane.Open(net->broadcast[2]));
}
