#include "formation/join_endpoint.h"

#include <catch2/catch.hpp>

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
  auto made = f::MakeFounderCredentials(TwoMembers());
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

TEST_CASE("join endpoint: a founder's marker or etcd's member directory are traces of an earlier founding",
          "[formation]") {
  sprout::TempDir dir(std::filesystem::temp_directory_path(), "founding-traces-test");
  f::NodeCredentialFiles files{dir.path() / "pki", dir.path() / "bootstrap-token", dir.path() / "founded-pki", "node1",
                               "127.0.0.1"};
  auto etcd = dir.path() / "etcd";
  // A PKI installed by a founding that crashed before its mark is no trace: nobody saw it.
  auto made = f::MakeFounderCredentials(TwoMembers());
  REQUIRE(made);
  REQUIRE(f::InstallCredentials(files, *made));
  CHECK(f::TracesOfEarlierFounding(files, etcd).empty());
  REQUIRE(sprout::WriteFileAtomic(files.founded, "sprout-x\n"));
  CHECK(f::TracesOfEarlierFounding(files, etcd) == std::vector<std::string>{files.founded.string()});
  std::filesystem::remove(files.founded);
  std::filesystem::create_directories(etcd / "member");
  CHECK(f::TracesOfEarlierFounding(files, etcd) == std::vector<std::string>{(etcd / "member").string()});
}

TEST_CASE("join endpoint: serves its credentials and tells joiners changed API endpoints", "[formation]") {
  auto made = f::MakeFounderCredentials(TwoMembers());
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
