#include "formation/liveness.h"

#include <arpa/inet.h>

#include <catch2/catch.hpp>

namespace f = sprout::formation;

namespace {

// Counting is a nonce source for tests: 1, 2, 3, ... in the first byte.
std::function<f::Nonce()> Counting() {
  return [n = std::uint8_t{0}]() mutable {
    f::Nonce x{};
    x[0] = ++n;
    return x;
  };
}

f::Nonce NonceOf(std::uint8_t b) {
  f::Nonce x{};
  x[0] = b;
  return x;
}

f::Datagram D(std::uint8_t marker) { return f::Datagram{{marker}, {}}; }

}  // namespace

TEST_CASE("liveness: frames wait until their incarnation echoes our nonce, then pass in order", "[formation]") {
  f::Liveness l(Counting(), f::LivenessOptions{.probe_interval_ms = 250, .give_up_ms = 3000});
  auto s1 = l.OnFrame("b", 7, "beacon", D(1), 0);
  CHECK(s1.verdict == f::Liveness::Verdict::kHold);
  REQUIRE(s1.probe);
  CHECK(*s1.probe == NonceOf(1));
  auto s2 = l.OnFrame("b", 7, "vote-request", D(2), 100);
  CHECK(s2.verdict == f::Liveness::Verdict::kHold);
  CHECK_FALSE(s2.probe);  // probed 100 ms ago
  auto s3 = l.OnFrame("b", 7, "beacon", D(3), 250);
  REQUIRE(s3.probe);
  CHECK(*s3.probe == NonceOf(1));  // probed again, same nonce
  // An echo of a nonce never sent to b, or from someone else, changes nothing.
  CHECK(l.OnEcho("b", 7, NonceOf(9)).release.empty());
  CHECK(l.OnEcho("c", 7, NonceOf(1)).release.empty());
  CHECK_FALSE(l.confirmed("b"));
  auto echoed = l.OnEcho("b", 7, NonceOf(1));
  REQUIRE(echoed.release.size() == 3);
  CHECK(echoed.release[0].bytes == std::vector<std::uint8_t>{1});
  CHECK(echoed.release[2].bytes == std::vector<std::uint8_t>{3});
  CHECK(echoed.stale.empty());
  CHECK(l.confirmed("b") == 7u);
  CHECK(l.held() == 0);
  // From now on b's frames of incarnation 7 pass at once.
  CHECK(l.OnFrame("b", 7, "beacon", D(4), 300).verdict == f::Liveness::Verdict::kDeliver);
}

TEST_CASE("liveness: an incarnation that never answers is dropped as stale and reported", "[formation]") {
  f::Liveness l(Counting());
  for (int i = 0; i < 5; ++i) l.OnFrame("b", 3, "cluster-advertisement", D(1), 10);
  CHECK(l.Expire(3009).empty());
  auto stale = l.Expire(3010);
  REQUIRE(stale.size() == 1);
  CHECK(stale[0].sender == "b");
  CHECK(stale[0].incarnation == 3);
  CHECK(stale[0].frames == 5);
  CHECK(stale[0].messages == std::set<std::string>{"cluster-advertisement"});
  CHECK(l.stale_frames() == 5);
  CHECK(l.held() == 0);
}

TEST_CASE("liveness: the live incarnation's echo makes a replayed one stale, also later", "[formation]") {
  f::Liveness l(Counting());
  // A capture of b's earlier incarnation 3 arrives first, then b itself, now in 5.
  auto old = l.OnFrame("b", 3, "cluster-advertisement", D(1), 0);
  auto live = l.OnFrame("b", 5, "beacon", D(2), 1);
  REQUIRE(old.probe);
  REQUIRE(live.probe);
  // The probe sent because of the capture reaches the live b, which answers in 5.
  auto echoed = l.OnEcho("b", 5, *old.probe);
  REQUIRE(echoed.release.size() == 1);
  CHECK(echoed.release[0].bytes == std::vector<std::uint8_t>{2});
  REQUIRE(echoed.stale.size() == 1);
  CHECK(echoed.stale[0].incarnation == 3);
  CHECK(l.OnFrame("b", 3, "cluster-advertisement", D(1), 2).verdict == f::Liveness::Verdict::kStale);
  CHECK(l.stale_frames() == 2);
  // A higher incarnation (b restarted) is held and probed again.
  auto restarted = l.OnFrame("b", 6, "beacon", D(3), 3);
  CHECK(restarted.verdict == f::Liveness::Verdict::kHold);
  CHECK(restarted.probe);
  // So is one whose live incarnation is lower than a capture's (a wrong clock): the
  // capture still gets no answer of its own.
  f::Liveness skew(Counting());
  auto future = skew.OnFrame("b", 900, "cluster-advertisement", D(1), 0);
  REQUIRE(future.probe);
  auto answer = skew.OnEcho("b", 100, *future.probe);
  CHECK(answer.release.empty());
  REQUIRE(answer.stale.size() == 1);
  CHECK(skew.confirmed("b") == 100u);
}

TEST_CASE("liveness: held incarnations and frames are bounded", "[formation]") {
  f::Liveness l(Counting(), f::LivenessOptions{.max_pending = 2, .max_held = 2});
  l.OnFrame("a", 1, "beacon", D(1), 0);
  l.OnFrame("b", 1, "beacon", D(2), 1);
  l.OnFrame("c", 1, "beacon", D(3), 2);  // evicts a
  CHECK(l.held() == 2);
  CHECK(l.stale_frames() == 1);
  for (std::uint8_t i = 4; i < 8; ++i) l.OnFrame("c", 1, "beacon", D(i), 3);
  auto echoed = l.OnEcho("c", 1, NonceOf(3));
  REQUIRE(echoed.release.size() == 2);  // the newest two
  CHECK(echoed.release[0].bytes == std::vector<std::uint8_t>{6});
  CHECK(echoed.release[1].bytes == std::vector<std::uint8_t>{7});
}

TEST_CASE("liveness: Authenticate accepts only this cluster's MAC, and not our own frames", "[formation]") {
  f::Key key{};
  key.fill(1);
  f::Key other{};
  other.fill(2);
  f::Sealer b(key, "edge", "b", 1);
  f::Sealer forger(other, "edge", "b", 1);
  f::Sealer self(key, "edge", "a", 1);
  f::Sealer elsewhere(key, "other", "b", 1);
  auto tag = f::TagFor("edge");
  auto frame = b.Seal(f::LivenessProbe{NonceOf(1)});
  auto ok = f::Authenticate(key, tag, "a", frame);
  REQUIRE(ok);
  CHECK(ok->message == f::Message{f::LivenessProbe{NonceOf(1)}});
  CHECK_FALSE(f::Authenticate(key, tag, "a", forger.Seal(f::LivenessProbe{})));
  CHECK_FALSE(f::Authenticate(key, tag, "a", self.Seal(f::LivenessProbe{})));
  CHECK_FALSE(f::Authenticate(key, tag, "a", elsewhere.Seal(f::LivenessProbe{})));
  frame[frame.size() - 40] ^= 1;
  CHECK_FALSE(f::Authenticate(key, tag, "a", frame));
}
