#include "formationd/join_endpoint.h"

#include <catch2/catch.hpp>

#include "formationd/join_net.h"
#include "util/fs.h"

namespace f = sprout::formation;

namespace {

f::Founding TwoMembers() {
  return f::Founding{
      "node1", 1, "sprout-x", {{"node1", "https://127.0.0.1:2380"}, {"node2", "https://[fd00::2]:2380"}}};
}

}  // namespace

TEST_CASE("join endpoint: the founding members' API endpoints", "[formation]") {
  CHECK(f::ApiEndpoints(TwoMembers()) == std::vector<std::string>{"https://127.0.0.1:6443", "https://[fd00::2]:6443"});
}

TEST_CASE("join endpoint: credentials installed by one run are what the next run loads", "[formation]") {
  sprout::TempDir dir(std::filesystem::temp_directory_path(), "join-endpoint-test");
  f::NodeCredentialFiles files{dir.path() / "pki", dir.path() / "bootstrap-token", dir.path() / "founded-pki", "node1",
                               "127.0.0.1"};
  CHECK_FALSE(f::LoadLocalCredentials(files, TwoMembers()));
  auto made = f::MakeFounderCredentials(TwoMembers(), "");
  REQUIRE(made);
  CHECK(f::ValidBootstrapToken(made->bootstrap_token));
  CHECK(made->api_endpoints == f::ApiEndpoints(TwoMembers()));
  REQUIRE(f::InstallCredentials(files, *made));
  CHECK((std::filesystem::status(files.token_file).permissions() & std::filesystem::perms::all) ==
        std::filesystem::perms(0600));
  auto server = sprout::ReadFile(files.pki_dir / "etcd/server.crt");
  REQUIRE(server);
  auto loaded = f::LoadLocalCredentials(files, TwoMembers());
  REQUIRE(loaded);
  CHECK(loaded->bootstrap_token == made->bootstrap_token);
  CHECK(loaded->cas.etcd_ca.cert_pem == made->cas.etcd_ca.cert_pem);
  CHECK(loaded->api_endpoints == made->api_endpoints);
  // Installing the same credentials again keeps the node certificates they issued.
  REQUIRE(f::InstallCredentials(files, *loaded));
  CHECK(sprout::ReadFile(files.pki_dir / "etcd/server.crt").value() == *server);
  REQUIRE(sprout::WriteFileAtomic(files.token_file, "not a token\n"));
  auto broken = f::LoadLocalCredentials(files, TwoMembers());
  REQUIRE_FALSE(broken);
  CHECK(broken.error() == files.token_file.string() + " does not hold a bootstrap token");
}

TEST_CASE("join endpoint: a founder's marker, etcd's member directory and any CA file are traces of a PKI",
          "[formation]") {
  sprout::TempDir dir(std::filesystem::temp_directory_path(), "founding-traces-test");
  f::NodeCredentialFiles files{dir.path() / "pki", dir.path() / "bootstrap-token", dir.path() / "founded-pki", "node1",
                               "127.0.0.1"};
  auto etcd = dir.path() / "etcd";
  CHECK(f::TracesOfEarlierFounding(files, etcd).empty());
  REQUIRE(sprout::WriteFileAtomic(files.founded, "sprout-x\n"));
  CHECK(f::TracesOfEarlierFounding(files, etcd) == std::vector<std::string>{files.founded.string()});
  std::filesystem::remove(files.founded);
  std::filesystem::create_directories(etcd / "member");
  CHECK(f::TracesOfEarlierFounding(files, etcd) == std::vector<std::string>{(etcd / "member").string()});
  std::filesystem::remove_all(etcd);
  // A PKI installed by a founding that crashed before its mark is a trace too: the node
  // cannot know that nobody saw it, and a second CA is what must never happen.
  auto made = f::MakeFounderCredentials(TwoMembers(), "");
  REQUIRE(made);
  REQUIRE(f::InstallCredentials(files, *made));
  CHECK(f::TracesOfEarlierFounding(files, etcd).size() == 9);  // eight CA files and the encryption key
  // One CA file alone (the rest lost) still counts.
  for (const char* gone : {"ca.crt", "ca.key", "etcd/ca.crt", "front-proxy-ca.crt", "front-proxy-ca.key", "sa.key",
                           "sa.pub", "encryption.key"}) {
    std::filesystem::remove(files.pki_dir / gone);
  }
  CHECK(f::TracesOfEarlierFounding(files, etcd) == std::vector<std::string>{(files.pki_dir / "etcd/ca.key").string()});
  // So does the encryption key alone, which the founder writes first.
  std::filesystem::remove(files.pki_dir / "etcd/ca.key");
  REQUIRE(sprout::WriteFileAtomic(files.pki_dir / "encryption.key", made->cas.encryption_key + "\n"));
  CHECK(f::TracesOfEarlierFounding(files, etcd) ==
        std::vector<std::string>{(files.pki_dir / "encryption.key").string()});
}

TEST_CASE("join endpoint: a founder never makes a second PKI", "[formation]") {
  using P = f::FounderPki;
  struct Row {
    bool founder, local, cas, traces, others;
    P want;
  };
  const Row rows[] = {
      // Everything loads: use it, founder or not.
      {true, true, true, true, true, P::kUseLocal},
      {false, true, true, true, false, P::kUseLocal},
      // A member that is not the founder fetches what it lacks.
      {false, false, false, false, true, P::kFetch},
      {false, false, true, true, true, P::kFetch},
      // A fresh founder makes the PKI.
      {true, false, false, false, true, P::kMake},
      {true, false, false, false, false, P::kMake},
      // Its token is lost, the CAs load: fetch the token back, or make one if nobody has it.
      {true, false, true, true, true, P::kFetch},
      {true, false, true, true, false, P::kNewToken},
      // Traces of a PKI it cannot load: fetch it from the members, or refuse.
      {true, false, false, true, true, P::kFetch},
      {true, false, false, true, false, P::kRefuse},
  };
  for (const auto& r : rows) {
    INFO("founder=" << r.founder << " local=" << r.local << " cas=" << r.cas << " traces=" << r.traces
                    << " others=" << r.others);
    CHECK(f::DecideFounderPki({r.founder, r.local, r.cas, r.traces, r.others}) == r.want);
  }
}

TEST_CASE("join endpoint: installing never replaces a CA, but restores a lost key of the same CA", "[formation]") {
  sprout::TempDir dir(std::filesystem::temp_directory_path(), "join-endpoint-ca-test");
  f::NodeCredentialFiles files{dir.path() / "pki", dir.path() / "bootstrap-token", dir.path() / "founded-pki", "node1",
                               "127.0.0.1"};
  auto first = f::MakeFounderCredentials(TwoMembers(), "");
  auto second = f::MakeFounderCredentials(TwoMembers(), "");
  REQUIRE(first);
  REQUIRE(second);
  REQUIRE(f::InstallCredentials(files, *first));
  auto ca = sprout::ReadFile(files.pki_dir / "etcd/ca.crt");
  REQUIRE(ca);
  auto refused = f::InstallCredentials(files, *second);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().find((files.pki_dir / "ca.crt").string() + " holds another CA than the cluster's") == 0);
  CHECK(sprout::ReadFile(files.pki_dir / "etcd/ca.crt").value() == *ca);
  CHECK(f::LoadLocalCredentials(files, TwoMembers())->cas.kubernetes_ca.key_pem == first->cas.kubernetes_ca.key_pem);
  // A lost or damaged key is restored from the same cluster's credentials.
  REQUIRE(sprout::WriteFileAtomic(files.pki_dir / "etcd/ca.key", "damaged\n"));
  auto damaged = f::LoadLocalCredentials(files, TwoMembers());
  REQUIRE_FALSE(damaged);
  CHECK(damaged.error() ==
        (files.pki_dir / "etcd/ca.key").string() + " does not match " + (files.pki_dir / "etcd/ca.crt").string());
  REQUIRE(f::InstallCredentials(files, *first));
  CHECK(f::LoadLocalCredentials(files, TwoMembers()));
}

TEST_CASE("join endpoint: serves its credentials and tells joiners changed API endpoints", "[formation]") {
  auto made = f::MakeFounderCredentials(TwoMembers(), "");
  REQUIRE(made);
  auto key = f::DeriveKey("right secret 0123456789", "test");
  auto worker_key = f::DeriveKey(f::WorkerSecret("right secret 0123456789"), "test");
  REQUIRE(key);
  REQUIRE(worker_key);
  f::JoinEndpoint endpoint;
  CHECK_FALSE(endpoint.serving());
  f::JoinKeys keys{f::JoinPsk(*key), f::JoinPsk(*worker_key)};
  f::JoinKey as_worker{f::JoinAuthority::kWorker, f::JoinPsk(*worker_key)};
  REQUIRE(endpoint.Serve("127.0.0.1", 0, keys, *made));
  CHECK(endpoint.serving());
  f::JoinRequest worker{f::kJoinVersion, false, "w1", "127.0.0.1"};
  auto first = f::FetchJoin("127.0.0.1", endpoint.port(), as_worker, worker);
  REQUIRE(first);
  CHECK(first->api_endpoints == made->api_endpoints);
  CHECK_FALSE(endpoint.UpdateApiEndpoints({}));  // etcd did not answer: keep what is served
  CHECK_FALSE(endpoint.UpdateApiEndpoints(made->api_endpoints));
  std::vector<std::string> now = {"https://127.0.0.1:6443", "https://127.0.0.3:6443"};
  CHECK(endpoint.UpdateApiEndpoints(now));
  CHECK(endpoint.served().api_endpoints == now);
  auto second = f::FetchJoin("127.0.0.1", endpoint.port(), as_worker, worker);
  REQUIRE(second);
  CHECK(second->api_endpoints == now);
  endpoint.Stop();
}
