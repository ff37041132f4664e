#include "formationd/status.h"

#include <catch2/catch.hpp>

#include "util/fs.h"

namespace f = sprout::formation;

TEST_CASE("status: the STATUS= line follows the phase until promoted or saved", "[formation]") {
  f::StatusSnapshot s;
  s.up_peers = 1;
  CHECK(f::StatusText(s, 3) == "discovering: 2/3 control-plane peers");
  s.phase = f::Phase::kLearner;
  CHECK(f::StatusText(s, 3) == "joining as learner");
  s.promoted = true;
  CHECK(f::StatusText(s, 3) == "member");
  f::StatusSnapshot w;
  w.phase = f::Phase::kWorker;
  CHECK(f::StatusText(w, 3) == "worker");
  w.worker_done = true;
  CHECK(f::StatusText(w, 3) == "worker: credentials saved");
}

TEST_CASE("status: state.json takes every formation field from the loop and keeps the boot count", "[formation]") {
  sprout::NodeState before;
  before.boots = 4;
  before.cluster_token = "sprout-old";
  before.founder = "gone";
  before.members = {"gone"};
  before.etcd_pid = 77;
  f::StatusSnapshot s;
  s.phase = f::Phase::kCandidate;
  s.up_peers = 2;
  s.heard = {"node2", "node3"};
  f::StatusIdentity self{"node1", "198.18.0.11", 3};
  auto a = f::WithFormation(before, self, s);
  CHECK(a.boots == 4);
  CHECK(a.phase == "candidate");
  CHECK(a.name == "node1");
  CHECK(a.address == "198.18.0.11");
  CHECK(a.expected == 3);
  CHECK(a.up_peers == 2);
  CHECK(a.peers_up == std::vector<std::string>{"node2", "node3"});
  CHECK(a.cluster_token.empty());
  CHECK(a.founder.empty());
  CHECK(a.members.empty());
  CHECK(a.etcd_pid == -1);
  s.cluster = f::Founding{"node2", 1, "sprout-x", {{"node1", "https://a:2380"}, {"node2", "https://b:2380"}}};
  s.promoted = true;
  s.etcd_pid = 123;
  auto b = f::WithFormation(before, self, s);
  CHECK(b.phase == "member (joined as learner)");
  CHECK(b.cluster_token == "sprout-x");
  CHECK(b.founder == "node2");
  CHECK(b.members == std::vector<std::string>{"node1", "node2"});
  CHECK(b.etcd_pid == 123);
}

TEST_CASE("status: state.json is rewritten at most once a second", "[formation]") {
  sprout::TempDir dir(std::filesystem::temp_directory_path(), "status-test");
  f::StatusReporter reporter(dir.path(), f::StatusIdentity{"node1", "198.18.0.11", 3});
  f::StatusSnapshot s;
  reporter.Report(5000, s);
  CHECK(reporter.line() == "discovering: 1/3 control-plane peers");
  auto first = sprout::LoadNodeState(dir.path());
  REQUIRE(first);
  CHECK(first->phase == "discovering");
  s.phase = f::Phase::kMember;
  reporter.Report(5999, s);
  CHECK(reporter.line() == "member");  // STATUS= changes at once
  CHECK(sprout::LoadNodeState(dir.path())->phase == "discovering");
  reporter.Report(6000, s);
  CHECK(sprout::LoadNodeState(dir.path())->phase == "founding member");
}

TEST_CASE("status says when a node refuses to found or hears more than M, until a cluster is known", "[formation]") {
  f::StatusSnapshot s;
  s.up_peers = 2;
  CHECK(f::ElectorateWarning(s).empty());
  CHECK(f::StatusText(s, 3) == "discovering: 3/3 control-plane peers");
  s.refuses_to_found = true;
  CHECK_THAT(f::ElectorateWarning(s), Catch::Contains("not founding: neither a static peer list (--peers"));
  CHECK_THAT(f::ElectorateWarning(s), Catch::Contains("--max-control-planes"));
  CHECK(f::StatusText(s, 3) == "discovering: 3/3 control-plane peers (not founding: no --peers, no M)");
  s.refuses_to_found = false;
  s.beyond_electorate = true;
  s.electorate = 5;
  s.up_peers = 5;
  CHECK(f::ElectorateWarning(s) ==
        "more control-plane nodes are up than the maximum 5: one cluster is guaranteed only while at most 5 take part; "
        "raise --max-control-planes (the Shoot's controlPlane.maximum) or give a static peer list (--peers)");
  CHECK(f::StatusText(s, 3) == "discovering: 6/3 control-plane peers (more than the maximum 5 up)");
  sprout::NodeState state = f::WithFormation({}, {"n1", "198.18.0.11", 3}, s);
  CHECK(state.warning == f::ElectorateWarning(s));
  CHECK_THAT(sprout::NodeStateJson(state), Catch::Contains("\"warning\": \"more control-plane nodes are up"));
  s.cluster = f::Founding{"b", 7, "sprout-x", {{"b", "http://198.18.0.12:2380"}}};
  CHECK(f::ElectorateWarning(s).empty());
}
