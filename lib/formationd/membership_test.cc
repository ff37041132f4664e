#include "formationd/membership.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "formationd/daemon.h"
#include "formationd/join_net.h"
#include "pki/pki.h"
#include "util/fs.h"

namespace f = sprout::formation;

namespace {

f::EtcdMember MemberOf(std::string id, std::string name, std::string url, bool learner = false) {
  return f::EtcdMember{std::move(id), std::move(name), {std::move(url)}, learner};
}

// Eventually polls take until it yields something, for up to 5 s.
template <typename Take>
auto Eventually(Take take) {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  auto r = take();
  while (!r && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    r = take();
  }
  return r;
}

f::DaemonOptions OptionsIn(const std::filesystem::path& dir, const std::string& name) {
  f::DaemonOptions o;
  o.state_dir = dir / "state";
  o.name = name;
  o.listen = "127.0.0.1";
  o.pki_dir = dir / "pki";
  o.etcd_data_dir = dir / "etcd";
  o.port = 1;  // nothing listens there: a join endpoint that refuses at once
  return o;
}

f::EtcdConfig EtcdConfigOf(const f::DaemonOptions& o) {
  f::EtcdConfig c;
  c.name = o.name;
  c.data_dir = o.etcd_data_dir.string();
  c.address = o.listen;
  c.pki_dir = o.pki_dir.string();
  return c;
}

}  // namespace

TEST_CASE("membership: retries back off from 250 ms, doubling up to 4 s", "[formation]") {
  std::vector<int> waits;
  for (int i = 0; i < 7; ++i) waits.push_back(f::BackoffMs(i));
  CHECK(waits == std::vector<int>{250, 500, 1000, 2000, 4000, 4000, 4000});
}

TEST_CASE("membership: this node's entry is found by peer URL, or by name once started", "[formation]") {
  const std::string self = "https://198.18.0.14:2380";
  std::vector<f::EtcdMember> added = {MemberOf("1", "node1", "https://198.18.0.11:2380"),
                                      MemberOf("9", "", self, true)};
  REQUIRE(f::FindSelf(added, "node4", self) != nullptr);
  CHECK(f::FindSelf(added, "node4", self)->id == "9");
  // A started member of the same name at another address: this node, replaced.
  std::vector<f::EtcdMember> stale = {MemberOf("1", "node1", "https://198.18.0.11:2380"),
                                      MemberOf("4", "node4", "https://198.18.0.99:2380")};
  REQUIRE(f::FindSelf(stale, "node4", self) != nullptr);
  CHECK(f::FindSelf(stale, "node4", self)->id == "4");
  CHECK(f::FindByPeerUrl(stale, self) == nullptr);
  // An unstarted entry has no name to match.
  CHECK(f::FindSelf({MemberOf("5", "", "https://198.18.0.99:2380", true)}, "", self) == nullptr);
  CHECK(f::FindSelf({}, "node4", self) == nullptr);
  REQUIRE(f::FindByPeerUrl(added, self) != nullptr);
  CHECK(f::FindByPeerUrl(added, self)->learner);
}

TEST_CASE("membership: a worker whose credentials are saved starts no task", "[formation]") {
  sprout::TempDir dir(std::filesystem::temp_directory_path(), "membership-test");
  auto o = OptionsIn(dir.path(), "w1");
  std::filesystem::create_directories(o.state_dir / "worker");
  REQUIRE(sprout::WriteFileAtomic(o.state_dir / "worker" / "bootstrap-token", "abcdef.0123456789abcdef\n"));
  f::Membership membership(o, f::JoinKey{}, EtcdConfigOf(o));
  f::JoinAsWorker w{"sprout-x", f::Founding{"node1", 1, "sprout-x", {{"node1", "https://127.0.0.1:2380"}}}};
  CHECK(membership.StartWorker(w));
  CHECK_FALSE(membership.TakeWorker());
}

TEST_CASE("membership: a learner that started before restarts from its data dir without asking the cluster",
          "[formation]") {
  sprout::TempDir dir(std::filesystem::temp_directory_path(), "membership-test");
  auto o = OptionsIn(dir.path(), "node4");
  std::filesystem::create_directories(o.state_dir);  // as RunDaemon does
  f::Founding founding{"node1", 1, "sprout-x", {{"node1", "https://198.18.0.11:2380"}}};
  auto made = f::MakeFounderCredentials(founding, "");
  REQUIRE(made);
  REQUIRE(f::InstallCredentials(f::CredentialFiles(o), *made));
  std::filesystem::create_directories(o.etcd_data_dir / "member");
  f::Membership membership(o, f::JoinKey{}, EtcdConfigOf(o));
  membership.StartLearner(f::JoinAsLearner{"sprout-x", founding});
  auto started = Eventually([&membership] { return membership.TakeStarted(); });
  REQUIRE(started);
  CHECK(started->credentials.bootstrap_token == made->bootstrap_token);
  CHECK(started->credentials.api_endpoints == std::vector<std::string>{"https://198.18.0.11:6443"});
  CHECK(started->args.initial_cluster == "node4=https://127.0.0.1:2380");
  CHECK(started->args.initial_cluster_state == "existing");
}

TEST_CASE("membership: stopping ends a task that is backing off", "[formation]") {
  sprout::TempDir dir(std::filesystem::temp_directory_path(), "membership-test");
  auto o = OptionsIn(dir.path(), "node2");
  f::Founding founding{
      "node1", 1, "sprout-x", {{"node1", "https://127.0.0.1:2380"}, {"node2", "https://127.0.0.2:2380"}}};
  auto begin = std::chrono::steady_clock::now();
  {
    f::Membership membership(o, f::JoinKey{}, EtcdConfigOf(o));
    membership.FetchFoundingCredentials(founding, f::EtcdArgs{});
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    CHECK_FALSE(membership.TakeStarted());  // still retrying: nobody answers
    membership.Stop();
  }  // waits for the task
  CHECK(std::chrono::steady_clock::now() - begin < std::chrono::seconds(3));
}

namespace {

// WorkerKeys are a cluster's join keys: what its endpoints accept, and a worker's PSK.
struct WorkerKeys {
  f::JoinKeys serve;
  f::JoinKey worker;
};

WorkerKeys KeysOf(const std::string& secret) {
  f::DaemonOptions cp;
  cp.secret = secret;
  cp.cluster_name = "test";
  auto c = f::DeriveNodeKeys(cp);
  REQUIRE(c);
  REQUIRE(c->serve);
  f::DaemonOptions w;
  w.control_plane = false;
  w.worker_secret = f::WorkerSecret(secret);
  w.cluster_name = "test";
  auto k = f::DeriveNodeKeys(w);
  REQUIRE(k);
  return {*c->serve, k->join};
}

}  // namespace

TEST_CASE("membership: a pinned worker refuses a rogue endpoint with the worker secret and joins through the real one",
          "[formation]") {
  const std::string secret = "a cluster secret of 32 bytes....";
  auto keys = KeysOf(secret);
  // The founder's address answers with the worker PSK but a CA of its own: a worker
  // posing as the join endpoint. The other founding member is the real control plane.
  f::Founding founding{
      "node1", 1, "sprout-x", {{"node1", "https://127.0.0.1:2380"}, {"node2", "https://127.0.0.2:2380"}}};
  auto rogue = f::MakeFounderCredentials(founding, "");
  auto real = f::MakeFounderCredentials(founding, secret);
  REQUIRE(rogue);
  REQUIRE(real);
  rogue->api_endpoints = {"https://127.0.0.1:6443"};  // itself as the API server
  f::JoinKeys rogue_keys{f::JoinPsk(f::Key{}), keys.serve.worker};
  f::JoinServer rogue_server;
  REQUIRE(rogue_server.Start("127.0.0.1", 0, rogue_keys));
  rogue_server.SetCredentials(*rogue);
  f::JoinServer real_server;
  REQUIRE(real_server.Start("127.0.0.2", rogue_server.port(), keys.serve));
  real_server.SetCredentials(*real);

  sprout::TempDir dir(std::filesystem::temp_directory_path(), "membership-test");
  auto o = OptionsIn(dir.path(), "w1");
  o.control_plane = false;
  o.port = rogue_server.port();
  f::JoinAsWorker w{"sprout-x", founding};
  const auto ca_file = o.state_dir / "worker" / "ca.crt";

  SECTION("pinned: the rogue's CA is refused and nothing of it is saved") {
    auto pin = sprout::pki::ClusterCaCertHash(secret);
    REQUIRE(pin);
    o.ca_cert_hash = *pin;
    o.ca_cert_hash_source = "--ca-cert-hash";
    f::Membership membership(o, keys.worker, EtcdConfigOf(o));
    CHECK_FALSE(membership.StartWorker(w));
    auto done = Eventually([&membership] { return membership.TakeWorker(); });
    REQUIRE(done);
    CHECK(*done);
    auto saved = sprout::ReadFile(ca_file);
    REQUIRE(saved);
    CHECK(*saved == real->cas.kubernetes_ca.cert_pem);
    auto endpoints = sprout::ReadFile(o.state_dir / "worker" / "api-endpoints");
    REQUIRE(endpoints);
    CHECK(*endpoints ==
          "https://127.0.0.1:6443\nhttps://127.0.0.2:6443\n");  // the real endpoint's list, not the rogue's
  }
  SECTION("not pinned: the first answer is kept, the rogue's (the attack the pin stops)") {
    f::Membership membership(o, keys.worker, EtcdConfigOf(o));
    CHECK_FALSE(membership.StartWorker(w));
    auto done = Eventually([&membership] { return membership.TakeWorker(); });
    REQUIRE(done);
    CHECK(*done);
    auto saved = sprout::ReadFile(ca_file);
    REQUIRE(saved);
    CHECK(*saved == rogue->cas.kubernetes_ca.cert_pem);
  }
  SECTION("not pinned, a CA kept before: another is refused (trust on first use)") {
    std::filesystem::create_directories(ca_file.parent_path());
    REQUIRE(sprout::WriteFileAtomic(ca_file, real->cas.kubernetes_ca.cert_pem));
    f::Membership membership(o, keys.worker, EtcdConfigOf(o));
    CHECK_FALSE(membership.StartWorker(w));
    auto done = Eventually([&membership] { return membership.TakeWorker(); });
    REQUIRE(done);
    CHECK(*done);
    CHECK(sprout::ReadFile(ca_file).value() == real->cas.kubernetes_ca.cert_pem);
    CHECK(sprout::ReadFile(o.state_dir / "worker" / "bootstrap-token"));
  }
  SECTION("pinned, credentials saved from the rogue before: they are fetched again") {
    std::filesystem::create_directories(ca_file.parent_path());
    REQUIRE(sprout::WriteFileAtomic(ca_file, rogue->cas.kubernetes_ca.cert_pem));
    REQUIRE(sprout::WriteFileAtomic(o.state_dir / "worker" / "bootstrap-token", "abcdef.0123456789abcdef\n"));
    o.ca_cert_hash = sprout::pki::ClusterCaCertHash(secret).value();
    f::Membership membership(o, keys.worker, EtcdConfigOf(o));
    CHECK_FALSE(membership.StartWorker(w));  // not "already there"
    auto done = Eventually([&membership] { return membership.TakeWorker(); });
    REQUIRE(done);
    CHECK(*done);
    CHECK(sprout::ReadFile(ca_file).value() == real->cas.kubernetes_ca.cert_pem);
  }
  rogue_server.Stop();
  real_server.Stop();
}
