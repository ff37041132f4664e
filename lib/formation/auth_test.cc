#include "formation/auth.h"

#include <catch2/catch.hpp>

using namespace sprout::formation;

namespace {

std::span<const std::uint8_t> Bytes(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

Key MustKey(std::string_view secret, std::string_view cluster) {
  auto k = DeriveKey(secret, cluster);
  REQUIRE(k.ok());
  return *k;
}

}  // namespace

TEST_CASE("the key is HKDF-SHA256 of the secret, salted by protocol, bound to the cluster name", "[formation]") {
  // RFC 5869 spelled out with plain HMAC: PRK = HMAC(salt, secret); OKM = HMAC(PRK, info | 0x01).
  Key salt_key{};
  std::string salt = "sprout formation v1";
  // HMAC pads keys shorter than a block with zeros, so a 19-byte salt equals itself padded to 32.
  std::copy(salt.begin(), salt.end(), salt_key.begin());
  Mac prk = ComputeMac(salt_key, Bytes("s3cret"));
  std::string info = std::string("cluster:edge-1") + '\x01';
  Mac okm = ComputeMac(prk, Bytes(info));
  CHECK(MustKey("s3cret", "edge-1") == okm);
  CHECK(MustKey("s3cret", "edge-1") != MustKey("s3cret", "edge-2"));
  CHECK(MustKey("s3cret", "edge-1") != MustKey("other", "edge-1"));
  CHECK_FALSE(DeriveKey("", "edge-1").ok());
}

TEST_CASE("a sealed frame opens at a peer of the same cluster", "[formation]") {
  Key k = MustKey("s3cret", "edge");
  Sealer a(k, "edge", "n1", 1);
  Gate g(k, "edge", "n2");
  auto f = g.Open(a.Seal(Beacon{"https://n1:2380", true}));
  REQUIRE(f);
  CHECK(f->frame.header.sender == "n1");
  CHECK(f->frame.header.counter == 1);
  CHECK_FALSE(f->worker);
  CHECK(std::get<Beacon>(f->frame.message).peer_url == "https://n1:2380");
  CHECK(g.counters() == DropCounters{.accepted = 1});
}

TEST_CASE("a frame with any byte tampered is rejected and counted", "[formation]") {
  Key k = MustKey("s3cret", "edge");
  Sealer a(k, "edge", "n1", 1);
  auto good = a.Seal(VoteRequest{{3, "n1"}, "https://n1:2380"});
  // A flipped bit inside the body keeps the frame well-formed, so only the MAC catches it.
  {
    Gate g(k, "edge", "n2");
    auto bad = good;
    bad[bad.size() - kMacSize - 3] ^= 0x01;  // inside the peer URL
    CHECK_FALSE(g.Open(bad));
    CHECK(g.counters() == DropCounters{.forged = 1});
  }
  // Every other single-byte change is refused too, as malformed, other cluster or forged.
  for (std::size_t i = 0; i < good.size(); ++i) {
    Gate g(k, "edge", "n2");
    auto bad = good;
    bad[i] ^= 0x20;
    CHECK_FALSE(g.Open(bad));
    const auto& c = g.counters();
    CHECK(c.accepted == 0);
    CHECK(c.malformed + c.other_cluster + c.forged == 1);
  }
}

TEST_CASE("a frame made with the wrong secret is counted as forged", "[formation]") {
  Sealer intruder(MustKey("guess", "edge"), "edge", "n9", 1);
  Gate g(MustKey("s3cret", "edge"), "edge", "n2");
  CHECK_FALSE(g.Open(intruder.Seal(Beacon{"https://n9:2380", true})));
  CHECK(g.counters() == DropCounters{.forged = 1});
  CHECK(g.last_reason() == "frame claiming to be from n9 has a bad MAC (wrong secret or tampered)");
}

TEST_CASE("a beacon of another cluster is counted as other-cluster, even with the same secret", "[formation]") {
  Sealer other(MustKey("s3cret", "lab"), "lab", "x1", 1);
  Gate g(MustKey("s3cret", "edge"), "edge", "n2");
  CHECK_FALSE(g.Open(other.Seal(Beacon{"https://x1:2380", true})));
  CHECK(g.counters() == DropCounters{.other_cluster = 1});
}

TEST_CASE("garbage and our own looped-back frames are counted separately", "[formation]") {
  Key k = MustKey("s3cret", "edge");
  Gate g(k, "edge", "n2");
  CHECK_FALSE(g.Open(Bytes("hello, world")));
  Sealer self(k, "edge", "n2", 1);
  CHECK_FALSE(g.Open(self.Seal(Beacon{"https://n2:2380", true})));
  CHECK(g.counters() == DropCounters{.malformed = 1, .own = 1});
}

TEST_CASE("replayed frames are dropped and counted; reordering inside the window is not", "[formation]") {
  Key k = MustKey("s3cret", "edge");
  Sealer a(k, "edge", "n1", 5);
  Gate g(k, "edge", "n2");
  std::vector<std::vector<std::uint8_t>> frames;
  for (int i = 0; i < 100; ++i) frames.push_back(a.Seal(Beacon{"https://n1:2380", true}));

  CHECK(g.Open(frames[10]));        // counter 11 first
  CHECK(g.Open(frames[5]));         // an older one that was merely late: fine once
  CHECK_FALSE(g.Open(frames[5]));   // the same one again: replay
  CHECK_FALSE(g.Open(frames[10]));  // replay of the newest
  CHECK(g.counters().replayed == 2);

  CHECK(g.Open(frames[99]));        // counter 100
  CHECK_FALSE(g.Open(frames[20]));  // 80 behind: outside the 64-frame window
  CHECK(g.Open(frames[40]));        // 60 behind and unseen: inside
  CHECK(g.counters().replayed == 3);

  // A reboot (higher incarnation) restarts the counter; frames of the old boot are stale.
  Sealer rebooted(k, "edge", "n1", 6);
  CHECK(g.Open(rebooted.Seal(Beacon{"https://n1:2380", true})));
  CHECK_FALSE(g.Open(frames[98]));
  CHECK(g.counters().replayed == 4);
  CHECK(g.counters().accepted == 5);
}

TEST_CASE("the worker secret is hex HMAC-SHA256 of the cluster secret, and only that form is valid", "[formation]") {
  // Known answer from the openssl command line:
  // printf 'sprout worker secret v1' | openssl dgst -sha256 -hmac 's3cret-0123456789'
  CHECK(WorkerSecret("s3cret-0123456789") == "ba880e710a35ca014c6bf8618972d84f9676b0d73bbd0b385e7039437b284b77");
  CHECK(WorkerSecret(std::string("\0\1binary", 8)) != WorkerSecret(std::string("\0\2binary", 8)));
  CHECK(ValidWorkerSecret(WorkerSecret("anything at all")));
  CHECK_FALSE(ValidWorkerSecret("BA880E710A35CA014C6BF8618972D84F9676B0D73BBD0B385E7039437B284B77"));
  CHECK_FALSE(ValidWorkerSecret("ba880e"));
  CHECK_FALSE(ValidWorkerSecret(""));
}

TEST_CASE("the worker key proves a worker and nothing more", "[formation]") {
  const std::string secret = "s3cret-0123456789";
  Key cp = MustKey(secret, "edge");
  Key worker = MustKey(WorkerSecret(secret), "edge");
  REQUIRE(cp != worker);
  Gate g(cp, "edge", "n1");
  g.AdmitWorkers(worker);
  Sealer w(worker, "edge", "w1", 1);

  SECTION("a worker's beacon is admitted, marked as a worker's") {
    auto opened = g.Open(w.Seal(Beacon{"https://w1:2380", false}));
    REQUIRE(opened);
    CHECK(opened->worker);
    CHECK(opened->frame.header.sender == "w1");
  }
  SECTION("anything else under the worker key is overreach: no votes, proposals or control-plane claims") {
    Founding f{"n1", 1, "sprout-x", {{"n1", "https://n1:2380"}}};
    std::vector<Message> refused = {
        Beacon{"https://w1:2380", true},
        VoteRequest{{5, "w1"}, "https://w1:2380"},
        VoteGrant{{5, "n2"}, true, {5, "n2"}, "https://w1:2380", std::nullopt, std::nullopt},
        FoundingProposal{{5, "w1"}, f},
        FoundingAccepted{{5, "n2"}, true, {5, "n2"}},
    };
    for (const auto& m : refused) CHECK_FALSE(g.Open(w.Seal(m)));
    CHECK(g.counters() == DropCounters{.overreach = refused.size()});
    CHECK(g.last_reason().find("only control-plane nodes may send") != std::string::npos);
  }
  SECTION("a founding under the worker key never reaches a control-plane node, and is not logged") {
    // Control-plane nodes hear each other's copies for workers; a worker's forgery looks the same.
    Founding f{"w1", 1, "sprout-forged", {{"w1", "https://w1:2380"}}};
    CHECK_FALSE(g.Open(w.Seal(FoundingAnnouncement{f})));
    CHECK_FALSE(g.Open(w.Seal(ClusterAdvertisement{f})));
    CHECK(g.counters() == DropCounters{.for_workers = 2});
  }
  SECTION("a worker cannot speak under the name of a control-plane node heard under the cluster key") {
    Sealer n2(cp, "edge", "n2", 1);
    REQUIRE(g.Open(n2.Seal(Beacon{"https://n2:2380", true})));
    Sealer impostor(worker, "edge", "n2", 99);
    CHECK_FALSE(g.Open(impostor.Seal(Beacon{"https://n2:2380", false})));
    CHECK(g.counters().overreach == 1);
    CHECK(g.last_reason().find("uses the name of control-plane node n2") != std::string::npos);
    // Nor did it touch n2's replay window: n2's next frame is still fresh.
    CHECK(g.Open(n2.Seal(Beacon{"https://n2:2380", true})));
  }
  SECTION("a worker's gate opens what control-plane nodes seal for workers, and nothing under the cluster key") {
    Gate at_worker(worker, "edge", "w1");
    Sealer n1_for_workers(worker, "edge", "n1", 1);
    Founding f{"n1", 1, "sprout-x", {{"n1", "https://n1:2380"}}};
    CHECK(at_worker.Open(n1_for_workers.Seal(ClusterAdvertisement{f})));
    Sealer n1(cp, "edge", "n1", 1);
    CHECK_FALSE(at_worker.Open(n1.Seal(ClusterAdvertisement{f})));
    CHECK(at_worker.counters().forged == 1);
  }
  SECTION("without AdmitWorkers a worker's frame is forged") {
    Gate plain(cp, "edge", "n1");
    CHECK_FALSE(plain.Open(w.Seal(Beacon{"https://w1:2380", false})));
    CHECK(plain.counters() == DropCounters{.forged = 1});
  }
  CHECK(WorkerMayReceive(ClusterAdvertisement{}));
  CHECK(WorkerMayReceive(FoundingAnnouncement{}));
  CHECK_FALSE(WorkerMayReceive(VoteRequest{}));
  CHECK_FALSE(WorkerMayReceive(Beacon{}));
}

TEST_CASE("ClusterSecretWeakness: short secrets and repeated patterns are weak; random bytes are not", "[auth]") {
  CHECK_THAT(ClusterSecretWeakness("s3cret"), Catch::Contains("6 bytes"));
  CHECK_THAT(ClusterSecretWeakness(std::string(32, 'a')), Catch::Contains("only 1 distinct"));
  CHECK_THAT(ClusterSecretWeakness("passwordpassword"), Catch::Contains("only 7 distinct"));
  CHECK(ClusterSecretWeakness("correct horse battery staple").empty());
  std::string bytes;
  for (int i = 0; i < 32; ++i) bytes.push_back(static_cast<char>(i * 37 + 11));
  CHECK(ClusterSecretWeakness(bytes).empty());
}
