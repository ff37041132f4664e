#include "formationd/daemon.h"

#include <catch2/catch.hpp>

#include "formationd/etcd.h"
#include "formationd/transport.h"
#include "util/fs.h"

namespace f = sprout::formation;

TEST_CASE("etcd flags of a founding member come from the founding", "[formation]") {
  f::Founding founding;
  founding.founder = "b";
  founding.round = 3;
  founding.token = "sprout-0123456789abcdef";
  founding.members = {{"a", "http://198.18.0.11:2380"}, {"b", "http://198.18.0.12:2380"}};
  f::StartEtcdNew start{founding.InitialCluster(), founding.token, founding};
  f::EtcdConfig config;
  config.bin = "/usr/bin/etcd";
  config.name = "a";
  config.data_dir = "/var/lib/sprout/etcd";
  config.address = "198.18.0.11";
  config.pki_dir = "/var/lib/sprout/pki";
  auto args = f::EtcdCommandLine(f::EtcdNewArgs(config, start));
  std::vector<std::string> want = {"/usr/bin/etcd",
                                   "--name=a",
                                   "--data-dir=/var/lib/sprout/etcd",
                                   "--listen-peer-urls=https://198.18.0.11:2380",
                                   "--initial-advertise-peer-urls=https://198.18.0.11:2380",
                                   "--listen-client-urls=https://127.0.0.1:2379,https://198.18.0.11:2379",
                                   "--advertise-client-urls=https://198.18.0.11:2379",
                                   "--initial-cluster=a=http://198.18.0.11:2380,b=http://198.18.0.12:2380",
                                   "--initial-cluster-token=sprout-0123456789abcdef",
                                   "--initial-cluster-state=new",
                                   "--client-cert-auth=true",
                                   "--trusted-ca-file=/var/lib/sprout/pki/etcd/ca.crt",
                                   "--cert-file=/var/lib/sprout/pki/etcd/server.crt",
                                   "--key-file=/var/lib/sprout/pki/etcd/server.key",
                                   "--peer-client-cert-auth=true",
                                   "--peer-trusted-ca-file=/var/lib/sprout/pki/etcd/ca.crt",
                                   "--peer-cert-file=/var/lib/sprout/pki/etcd/peer.crt",
                                   "--peer-key-file=/var/lib/sprout/pki/etcd/peer.key",
                                   "--logger=zap",
                                   "--log-outputs=stderr"};
  CHECK(args == want);
}

TEST_CASE("systemd status lines name the phase", "[formation]") {
  CHECK(f::StatusLine(f::Phase::kDiscovering, 1, 3) == "discovering: 2/3 control-plane peers");
  CHECK(f::StatusLine(f::Phase::kCandidate, 2, 3) == "founding");
  CHECK(f::StatusLine(f::Phase::kProposing, 2, 3) == "founding");
  CHECK(f::StatusLine(f::Phase::kMember, 2, 3) == "member");
  CHECK(f::StatusLine(f::Phase::kLearner, 2, 3) == "joining as learner");
}

TEST_CASE("formation state survives a save and load", "[formation]") {
  sprout::TempDir dir(std::filesystem::temp_directory_path(), "sprout-formation-state");
  auto fresh = f::LoadFormationState(dir.path());
  REQUIRE(fresh);
  CHECK(*fresh == f::PersistedState{});
  f::PersistedState s;
  s.incarnation = 4;
  s.promised = {7, "b"};
  s.max_round = 7;
  s.cluster = f::Founding{"b", 7, "sprout-x", {{"b", "http://198.18.0.12:2380"}}};
  REQUIRE(f::SaveFormationState(dir.path(), s));
  auto loaded = f::LoadFormationState(dir.path());
  REQUIRE(loaded);
  CHECK(*loaded == s);
  CHECK(std::filesystem::status(dir.path() / "formation.state").permissions() == std::filesystem::perms(0600));
  REQUIRE(sprout::WriteFileAtomic(dir.path() / "formation.state", "garbage"));
  auto broken = f::LoadFormationState(dir.path());
  REQUIRE_FALSE(broken);
  CHECK(broken.error().find("formation.state") != std::string::npos);
}

TEST_CASE("transport addresses are checked before any socket is opened", "[formation]") {
  CHECK(f::ParseIPv4("198.18.0.11"));
  CHECK_FALSE(f::ParseIPv4("198.18.0"));
  f::TransportConfig bad_group;
  bad_group.listen = "127.0.0.1";
  bad_group.group = "198.18.0.1";
  auto t = f::UdpTransport::Open(bad_group);
  REQUIRE_FALSE(t);
  CHECK(t.error() == "multicast group '198.18.0.1' is not an IPv4 multicast address (224.0.0.0/4)");
  f::TransportConfig bad_listen;
  bad_listen.listen = "node1";
  auto u = f::UdpTransport::Open(bad_listen);
  REQUIRE_FALSE(u);
  CHECK(u.error() == "listen address 'node1' is not an IPv4 address");
}

TEST_CASE("a learner's initial cluster comes from the member list after its add", "[formation]") {
  // The shape etcd 3.4's JSON gateway returns for /v3/cluster/member/add.
  std::string add =
      R"({"header":{"cluster_id":"1"},"member":{"ID":"9","peerURLs":["http://198.18.0.14:2380"],"isLearner":true},
    "members":[{"ID":"1","name":"node1","peerURLs":["http://198.18.0.11:2380"],"clientURLs":["http://198.18.0.11:2379"]},
               {"ID":"2","name":"node2","peerURLs":["http://198.18.0.12:2380"]},
               {"ID":"9","peerURLs":["http://198.18.0.14:2380"],"isLearner":true}]})";
  auto members = f::ParseMembers(add);
  REQUIRE(members);
  REQUIRE(members->size() == 3);
  CHECK(members->at(2).learner);
  CHECK(members->at(2).name.empty());
  auto ic = f::JoinInitialCluster(*members, "node4", "http://198.18.0.14:2380");
  REQUIRE(ic);
  CHECK(*ic == "node1=http://198.18.0.11:2380,node2=http://198.18.0.12:2380,node4=http://198.18.0.14:2380");
  auto missing = f::JoinInitialCluster(*members, "node5", "http://198.18.0.15:2380");
  REQUIRE_FALSE(missing);
  CHECK(missing.error() == "the member list has no entry with this node's peer URL http://198.18.0.15:2380");
  CHECK_FALSE(f::ParseMembers("<html>"));
  CHECK(f::ClientUrlFor("http://198.18.0.11:2380") == "http://198.18.0.11:2379");
  f::EtcdConfig config;
  config.name = "node4";
  config.data_dir = "/d";
  config.address = "198.18.0.14";
  auto args = f::EtcdExistingArgs(config, *ic);
  CHECK(args.initial_cluster_state == "existing");
  CHECK(args.initial_cluster_token.empty());
  CHECK(f::HostOf("https://198.18.0.11:2380") == "198.18.0.11");
  CHECK(f::HostOf("https://[fd00::1]:2380") == "fd00::1");
}

TEST_CASE("Workers are told the API endpoints of the voting members, not of learners", "[formation][etcd]") {
  auto members = f::ParseMembers(R"({"members":[
    {"ID":"3","name":"node-3","peerURLs":["https://198.18.0.13:2380"]},
    {"ID":"1","name":"node-1","peerURLs":["https://198.18.0.11:2380"]},
    {"ID":"5","name":"node-5","peerURLs":["https://198.18.0.15:2380"],"isLearner":true},
    {"ID":"6","peerURLs":["https://[fd00::6]:2380"]}]})");
  REQUIRE(members);
  CHECK(f::ApiEndpointsOf(*members) ==
        std::vector<std::string>{"https://198.18.0.11:6443", "https://198.18.0.13:6443", "https://[fd00::6]:6443"});
  CHECK(f::ApiEndpointsOf({}).empty());
}

TEST_CASE("Formation's record of node addresses is the started members' names and peer hosts", "[formation][etcd]") {
  auto members = f::ParseMembers(R"({"members":[
    {"ID":"3","name":"node-3","peerURLs":["https://198.18.0.13:2380"]},
    {"ID":"1","name":"node-1","peerURLs":["https://198.18.0.11:2380","https://198.18.1.11:2380"]},
    {"ID":"5","name":"node-5","peerURLs":["https://198.18.0.15:2380"],"isLearner":true},
    {"ID":"6","peerURLs":["https://[fd00::6]:2380"]},
    {"ID":"7","name":"twice","peerURLs":["https://198.18.0.17:2380"]},
    {"ID":"8","name":"twice","peerURLs":["https://198.18.0.18:2380"]}]})");
  REQUIRE(members);
  // A started learner is a node formation admitted; an unstarted member has no name yet;
  // a name two members carry with different addresses is no record of either.
  CHECK(f::MemberAddresses(*members) == std::map<std::string, std::string>{{"node-1", "198.18.0.11"},
                                                                           {"node-3", "198.18.0.13"},
                                                                           {"node-5", "198.18.0.15"}});
  CHECK(f::MemberAddresses({}).empty());
}

TEST_CASE("node keys: a worker derives only worker keys; a control-plane node both", "[formation]") {
  const std::string secret = "cluster secret 0123456789";
  f::DaemonOptions cp;
  cp.secret = secret;
  cp.cluster_name = "edge";
  auto c = f::DeriveNodeKeys(cp);
  REQUIRE(c);
  REQUIRE(c->frames.worker);
  REQUIRE(c->serve);
  CHECK(c->join.authority == f::JoinAuthority::kControlPlane);
  CHECK(c->serve->control_plane == c->join.psk);

  f::DaemonOptions w;
  w.control_plane = false;
  w.worker_secret = f::WorkerSecret(secret);
  w.cluster_name = "edge";
  auto k = f::DeriveNodeKeys(w);
  REQUIRE(k);
  CHECK_FALSE(k->frames.worker);
  CHECK_FALSE(k->serve);
  CHECK(k->join.authority == f::JoinAuthority::kWorker);
  CHECK(k->frames.formation == *c->frames.worker);    // what control-plane nodes seal for workers
  CHECK(k->join.psk == c->serve->worker);             // what their join endpoint accepts as a worker
  CHECK(k->frames.formation != c->frames.formation);  // and nothing of the control plane's
  CHECK(k->join.psk != c->serve->control_plane);

  // A worker given the cluster secret derives the same, and holds no control-plane key.
  f::DaemonOptions given_cluster_secret = w;
  given_cluster_secret.worker_secret.clear();
  given_cluster_secret.secret = secret;
  auto same = f::DeriveNodeKeys(given_cluster_secret);
  REQUIRE(same);
  CHECK(same->frames.formation == k->frames.formation);
  CHECK(same->join.psk == k->join.psk);
  CHECK_FALSE(same->serve);

  // A control-plane node with only the worker secret has nothing to prove itself with.
  f::DaemonOptions cp_without = cp;
  cp_without.secret.clear();
  cp_without.worker_secret = f::WorkerSecret(secret);
  auto refused = f::DeriveNodeKeys(cp_without);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().find("needs the cluster secret") != std::string::npos);
}
