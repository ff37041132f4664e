#include "formation/join.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "util/fs.h"

using namespace sprout::formation;

TEST_CASE("join request: round trip and refusals name the field") {
  JoinRequest r{kJoinVersion, false, "worker-1", "198.18.0.21"};
  auto back = ParseJoinRequest(RenderJoinRequest(r));
  REQUIRE(back);
  CHECK_FALSE(back->control_plane);
  CHECK(back->name == "worker-1");
  CHECK(back->address == "198.18.0.21");
  auto bad = [](const std::string& text) {
    auto p = ParseJoinRequest(text);
    REQUIRE_FALSE(p);
    return p.error();
  };
  CHECK(bad("not json").find("JSON") != std::string::npos);
  CHECK(bad(R"({"version":2,"role":"worker","name":"a","address":"198.18.0.1"})").find("version") != std::string::npos);
  CHECK(bad(R"({"version":1,"role":"king","name":"a","address":"198.18.0.1"})").find("role") != std::string::npos);
  CHECK(bad(R"({"version":1,"role":"worker","name":"a b","address":"198.18.0.1"})").find("name") != std::string::npos);
  CHECK(bad(R"({"version":1,"role":"worker","name":"a","address":"999.1.1.1"})").find("address") != std::string::npos);
  CHECK(bad(std::string(kMaxJoinRequest + 1, ' ')).find("limit") != std::string::npos);
}

TEST_CASE("join answer: workers get the CA certificate and token but no key; control planes get the CAs") {
  auto cas = sprout::pki::MakeClusterCAs();
  REQUIRE(cas);
  auto token = MakeBootstrapToken();
  REQUIRE(token);
  CHECK(ValidBootstrapToken(*token));
  CHECK_FALSE(ValidBootstrapToken("ABCDEF.0123456789abcdef"));
  Credentials served{*cas, *token, {"https://198.18.0.11:6443"}};
  auto worker = ParseJoinResponse(RenderJoinResponse(AnswerJoin({kJoinVersion, false, "w", "198.18.0.21"}, served)));
  REQUIRE(worker);
  CHECK(worker->ca_bundle == cas->kubernetes_ca.cert_pem);
  CHECK(worker->ca.empty());
  CHECK(worker->bootstrap_token == *token);
  CHECK(RenderJoinResponse(*worker).find("PRIVATE KEY") == std::string::npos);
  CHECK_FALSE(CredentialsFrom(*worker));
  auto cp = ParseJoinResponse(RenderJoinResponse(AnswerJoin({kJoinVersion, true, "c", "198.18.0.12"}, served)));
  REQUIRE(cp);
  auto creds = CredentialsFrom(*cp);
  REQUIRE(creds);
  CHECK(creds->cas.etcd_ca.key_pem == cas->etcd_ca.key_pem);
  CHECK(creds->api_endpoints == served.api_endpoints);
}

TEST_CASE("join endpoint: TLS-PSK over loopback serves the right secret and refuses a wrong one") {
  auto cas = sprout::pki::MakeClusterCAs();
  REQUIRE(cas);
  auto key = DeriveKey("right secret 0123456789", "test");
  auto wrong = DeriveKey("wrong secret 0123456789", "test");
  REQUIRE(key);
  REQUIRE(wrong);
  JoinServer server;
  REQUIRE(server.Start("127.0.0.1", 0, JoinPsk(*key)));
  JoinRequest request{kJoinVersion, false, "w1", "127.0.0.1"};
  // No credentials yet: refused with a reason.
  auto early = FetchJoin("127.0.0.1", server.port(), JoinPsk(*key), request);
  REQUIRE_FALSE(early);
  CHECK(early.error().find("no cluster credentials yet") != std::string::npos);
  server.SetCredentials({*cas, "abcdef.0123456789abcdef", {"https://127.0.0.1:6443"}});
  auto got = FetchJoin("127.0.0.1", server.port(), JoinPsk(*key), request);
  REQUIRE(got);
  CHECK(got->ca_bundle == cas->kubernetes_ca.cert_pem);
  auto refused = FetchJoin("127.0.0.1", server.port(), JoinPsk(*wrong), request);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().find("refused the TLS handshake") != std::string::npos);
  // The client can see the refusal before the server's thread has counted it (30 s at most: a
  // sanitizer build beside a busy VM gets little CPU).
  for (int i = 0; i < 3000 && server.refused() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(server.refused() == 1);
  sprout::TempDir dir(std::filesystem::temp_directory_path(), "join-test");
  REQUIRE(SaveWorkerCredentials(dir.path(), *got));
  auto token = sprout::ReadFile(dir.path() / "bootstrap-token");
  REQUIRE(token);
  CHECK(*token == "abcdef.0123456789abcdef\n");
  CHECK((std::filesystem::status(dir.path() / "bootstrap-token").permissions() & std::filesystem::perms::all) ==
        std::filesystem::perms(0600));
  server.Stop();
}
