#include "formation/join.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <mutex>
#include <thread>

#include "formationd/daemon.h"
#include "formationd/join_endpoint.h"
#include "formationd/join_net.h"
#include "util/fs.h"

using namespace sprout::formation;

namespace {

// WaitFor polls cond every 10 ms for up to seconds.
template <typename Cond>
bool WaitFor(Cond cond, int seconds) {
  for (int i = 0; i < seconds * 100 && !cond(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return cond();
}

// Keys is what the daemon derives for one cluster secret: what a control-plane node's
// join endpoint accepts, and how a control-plane node and a worker authenticate to it.
struct Keys {
  JoinKeys serve;
  JoinKey control_plane;
  JoinKey worker;
};

// KeysFor derives them as nodes do: the control-plane node from the cluster secret, the
// worker from the worker secret alone (it never sees the cluster secret).
Keys KeysFor(const std::string& secret) {
  DaemonOptions cp;
  cp.secret = secret;
  cp.cluster_name = "test";
  auto c = DeriveNodeKeys(cp);
  REQUIRE(c);
  DaemonOptions w;
  w.control_plane = false;
  w.worker_secret = WorkerSecret(secret);
  w.cluster_name = "test";
  auto k = DeriveNodeKeys(w);
  REQUIRE(k);
  REQUIRE(c->serve);
  return {*c->serve, c->join, k->join};
}

}  // namespace

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

TEST_CASE("join answer: workers get the CA certificate and a worker token but no key; control planes get the CAs") {
  auto cas = sprout::pki::MakeClusterCAs();
  REQUIRE(cas);
  auto token = MakeBootstrapToken();
  REQUIRE(token);
  CHECK(ValidBootstrapToken(*token));
  CHECK_FALSE(ValidBootstrapToken("ABCDEF.0123456789abcdef"));
  Credentials served{*cas, *token, {"https://198.18.0.11:6443"}};
  const std::int64_t now = 1'800'000'000;
  auto worker = ParseJoinResponse(
      RenderJoinResponse(AnswerJoin({kJoinVersion, false, "w", "198.18.0.21"}, JoinAuthority::kWorker, served, now)));
  REQUIRE(worker);
  CHECK(worker->ca_bundle == cas->kubernetes_ca.cert_pem);
  CHECK(worker->ca.empty());
  // Never the base token: the worker token of this window, which expires.
  CHECK(worker->bootstrap_token != *token);
  CHECK(worker->bootstrap_token == WorkerToken(*token, WorkerTokenWindow(now)).value());
  CHECK(RenderJoinResponse(*worker).find("PRIVATE KEY") == std::string::npos);
  CHECK_FALSE(CredentialsFrom(*worker));
  auto cp = ParseJoinResponse(RenderJoinResponse(
      AnswerJoin({kJoinVersion, true, "c", "198.18.0.12"}, JoinAuthority::kControlPlane, served, now)));
  REQUIRE(cp);
  CHECK(cp->bootstrap_token == *token);
  auto creds = CredentialsFrom(*cp);
  REQUIRE(creds);
  CHECK(creds->cas.etcd_ca.key_pem == cas->etcd_ca.key_pem);
  CHECK(creds->api_endpoints == served.api_endpoints);
}

TEST_CASE("join answer: a request for control-plane credentials that proved only the worker key gets nothing") {
  auto cas = sprout::pki::MakeClusterCAs();
  REQUIRE(cas);
  Credentials served{*cas, "abcdef.0123456789abcdef", {"https://198.18.0.11:6443"}};
  JoinResponse r = AnswerJoin({kJoinVersion, true, "w", "198.18.0.21"}, JoinAuthority::kWorker, served, 0);
  CHECK_FALSE(r.ok);
  CHECK(r.error.find("proved only the worker secret") != std::string::npos);
  CHECK(r.ca.empty());
  CHECK(r.ca_bundle.empty());
  CHECK(r.bootstrap_token.empty());
  const std::string wire = RenderJoinResponse(r);
  CHECK(wire.find("PRIVATE KEY") == std::string::npos);
  CHECK(wire.find(cas->kubernetes_ca.cert_pem.substr(30, 40)) == std::string::npos);
  // A control-plane node may ask for less: the worker's answer.
  JoinResponse less = AnswerJoin({kJoinVersion, false, "c", "198.18.0.12"}, JoinAuthority::kControlPlane, served, 0);
  CHECK(less.ok);
  CHECK(less.ca.empty());
}

TEST_CASE("join endpoint: a node holding only worker material joins as a worker and is refused as control plane") {
  auto cas = sprout::pki::MakeClusterCAs();
  REQUIRE(cas);
  auto keys = KeysFor("right secret 0123456789");
  JoinServer server;
  REQUIRE(server.Start("127.0.0.1", 0, keys.serve));
  server.SetCredentials({*cas, "abcdef.0123456789abcdef", {"https://127.0.0.1:6443"}});
  // keys.worker came from the worker secret alone (KeysFor): what a worker holds.
  REQUIRE(keys.worker.authority == JoinAuthority::kWorker);

  auto as_worker = FetchJoin("127.0.0.1", server.port(), keys.worker, {kJoinVersion, false, "w1", "127.0.0.1"});
  REQUIRE(as_worker);
  CHECK_FALSE(as_worker->control_plane);
  CHECK(as_worker->ca_bundle == cas->kubernetes_ca.cert_pem);
  CHECK(as_worker->ca.empty());

  // The request text says control-plane; the PSK says worker; the PSK wins.
  auto overreach = FetchJoin("127.0.0.1", server.port(), keys.worker, {kJoinVersion, true, "w1", "127.0.0.1"});
  REQUIRE_FALSE(overreach);
  CHECK(overreach.error().find("refused: control-plane credentials need the cluster secret") != std::string::npos);
  CHECK(WaitFor([&] { return server.overreached() == 1; }, 30));

  // The worker's PSK under the control-plane identity does not even complete a handshake.
  JoinKey posing{JoinAuthority::kControlPlane, keys.worker.psk};
  auto posed = FetchJoin("127.0.0.1", server.port(), posing, {kJoinVersion, true, "w1", "127.0.0.1"});
  REQUIRE_FALSE(posed);
  CHECK(posed.error().find("refused the TLS handshake") != std::string::npos);

  // A control-plane node still gets the CAs with their keys.
  auto cp = FetchJoin("127.0.0.1", server.port(), keys.control_plane, {kJoinVersion, true, "c2", "127.0.0.1"});
  REQUIRE(cp);
  auto creds = CredentialsFrom(*cp);
  REQUIRE(creds);
  CHECK(creds->cas.kubernetes_ca.key_pem == cas->kubernetes_ca.key_pem);
  server.Stop();
}

TEST_CASE("join endpoint: a control-plane joiner gets the cluster's encryption key and installs it; a worker never") {
  auto cas = sprout::pki::MakeClusterCAs();
  REQUIRE(cas);
  REQUIRE(sprout::pki::ValidEncryptionKey(cas->encryption_key));
  auto keys = KeysFor("right secret 0123456789");
  JoinServer server;
  REQUIRE(server.Start("127.0.0.1", 0, keys.serve));
  server.SetCredentials({*cas, "abcdef.0123456789abcdef", {"https://127.0.0.1:6443"}});

  auto cp = FetchJoin("127.0.0.1", server.port(), keys.control_plane, {kJoinVersion, true, "c2", "127.0.0.1"});
  REQUIRE(cp);
  auto creds = CredentialsFrom(*cp);
  REQUIRE(creds);
  CHECK(creds->cas.encryption_key == cas->encryption_key);
  sprout::TempDir dir(std::filesystem::temp_directory_path(), "join-test");
  NodeCredentialFiles files{dir.path() / "pki", dir.path() / "bootstrap-token", dir.path() / "founded-pki", "c2",
                            "127.0.0.1"};
  REQUIRE(InstallCredentials(files, *creds));
  const auto key_file = files.pki_dir / sprout::pki::kEncryptionKeyFile;
  CHECK(sprout::ReadFile(key_file).value() == cas->encryption_key + "\n");
  CHECK((std::filesystem::status(key_file).permissions() & std::filesystem::perms::all) ==
        std::filesystem::perms(0600));
  auto loaded = sprout::pki::LoadCAs(files.pki_dir);
  REQUIRE(loaded);
  CHECK(loaded->encryption_key == cas->encryption_key);

  // A worker, over its own PSK, gets an answer with no trace of the key, as bytes on the
  // wire and as files it saves; asking for more gets nothing at all.
  auto worker = FetchJoin("127.0.0.1", server.port(), keys.worker, {kJoinVersion, false, "w1", "127.0.0.1"});
  REQUIRE(worker);
  const std::string wire = RenderJoinResponse(*worker);
  CHECK(wire.find(cas->encryption_key) == std::string::npos);
  CHECK(wire.find(sprout::pki::kEncryptionKeyFile) == std::string::npos);
  sprout::TempDir wdir(std::filesystem::temp_directory_path(), "join-test-worker");
  REQUIRE(SaveWorkerCredentials(wdir.path(), *worker));
  for (const auto& e : std::filesystem::recursive_directory_iterator(wdir.path())) {
    INFO(e.path());
    CHECK(sprout::ReadFile(e.path()).value().find(cas->encryption_key) == std::string::npos);
  }
  CHECK_FALSE(FetchJoin("127.0.0.1", server.port(), keys.worker, {kJoinVersion, true, "w1", "127.0.0.1"}));

  // A response with a malformed key is refused, not installed.
  auto bad = *cp;
  bad.ca[sprout::pki::kEncryptionKeyFile] = "c2hvcnQ=\n";
  auto refused = CredentialsFrom(bad);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().find("encryption key") != std::string::npos);
  // A cluster founded before the key existed hands over none, and that still joins.
  auto old = *cp;
  old.ca.erase(sprout::pki::kEncryptionKeyFile);
  auto without = CredentialsFrom(old);
  REQUIRE(without);
  CHECK(without->cas.encryption_key.empty());
  server.Stop();
}

TEST_CASE("join endpoint: TLS-PSK over loopback serves the right secret and refuses a wrong one") {
  auto cas = sprout::pki::MakeClusterCAs();
  REQUIRE(cas);
  auto keys = KeysFor("right secret 0123456789");
  auto wrong = KeysFor("wrong secret 0123456789");
  JoinServer server;
  REQUIRE(server.Start("127.0.0.1", 0, keys.serve));
  JoinRequest request{kJoinVersion, false, "w1", "127.0.0.1"};
  // No credentials yet: refused with a reason.
  auto early = FetchJoin("127.0.0.1", server.port(), keys.control_plane, request);
  REQUIRE_FALSE(early);
  CHECK(early.error().find("no cluster credentials yet") != std::string::npos);
  server.SetCredentials({*cas, "abcdef.0123456789abcdef", {"https://127.0.0.1:6443"}});
  auto got = FetchJoin("127.0.0.1", server.port(), keys.control_plane, request);
  REQUIRE(got);
  CHECK(got->ca_bundle == cas->kubernetes_ca.cert_pem);
  auto refused = FetchJoin("127.0.0.1", server.port(), wrong.control_plane, request);
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
  CHECK(*token == got->bootstrap_token + "\n");  // the worker token the endpoint handed out
  CHECK(got->bootstrap_token != "abcdef.0123456789abcdef");
  CHECK((std::filesystem::status(dir.path() / "bootstrap-token").permissions() & std::filesystem::perms::all) ==
        std::filesystem::perms(0600));
  server.Stop();
}

namespace {

// ConnectFrom opens a TCP connection from source address src to 127.0.0.1:port (every
// 127/8 address is local, so each src is another client address); -1 on failure.
int ConnectFrom(const char* src, std::uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in local{};
  local.sin_family = AF_INET;
  ::inet_pton(AF_INET, src, &local.sin_addr);
  sockaddr_in server{};
  server.sin_family = AF_INET;
  server.sin_port = htons(port);
  ::inet_pton(AF_INET, "127.0.0.1", &server.sin_addr);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&server), sizeof server) != 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  return fd;
}

struct Served {
  sprout::pki::ClusterCAs cas;
  Keys keys;
};

Served ServedFixture() {
  // As in the daemon (daemon.cc): a peer that vanished gives EPIPE, not SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  auto cas = sprout::pki::MakeClusterCAs();
  REQUIRE(cas);
  return {*cas, KeysFor("right secret 0123456789")};
}

}  // namespace

TEST_CASE("join endpoint: clients that stall or dribble do not keep a joiner waiting, and are cut off") {
  auto f = ServedFixture();
  JoinLimits limits;
  limits.deadline_ms = 2000;
  JoinServer server(limits);
  REQUIRE(server.Start("127.0.0.1", 0, f.keys.serve));
  server.SetCredentials({f.cas, "abcdef.0123456789abcdef", {"https://127.0.0.1:6443"}});
  // Three clients that connect and say nothing, and one that sends a byte every 200 ms
  // (each read then succeeds within the 3 s I/O timeout: only the deadline stops it; the
  // server used to serve one connection at a time, so such a client held it forever).
  std::vector<int> stalled;
  for (int i = 0; i < 3; ++i) stalled.push_back(ConnectFrom("127.0.0.5", server.port()));
  for (int fd : stalled) REQUIRE(fd >= 0);
  int dribbler = ConnectFrom("127.0.0.6", server.port());
  REQUIRE(dribbler >= 0);
  std::atomic<bool> dribbler_closed{false};
  std::thread dribble([&] {
    // A TLS handshake record header announcing 16 KiB, then its body a byte at a time:
    // the server's TLS library waits for the whole record.
    const char header[] = {0x16, 0x03, 0x01, 0x40, 0x00};
    if (::send(dribbler, header, sizeof header, MSG_NOSIGNAL) != sizeof header) return;
    for (int i = 0; i < 100; ++i) {  // 20 s at most
      if (::send(dribbler, "", 1, MSG_NOSIGNAL) != 1) {
        dribbler_closed = true;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  // A real joiner, meanwhile, is served at once.
  JoinRequest request{kJoinVersion, false, "w1", "127.0.0.1"};
  auto got = FetchJoin("127.0.0.1", server.port(), f.keys.worker, request);
  REQUIRE(got);
  CHECK(ValidBootstrapToken(got->bootstrap_token));
  CHECK(got->bootstrap_token != "abcdef.0123456789abcdef");  // a worker token, never the base
  // Past the 2 s deadline all four are cut off, the dribbler included.
  CHECK(WaitFor([&] { return server.cut_off() == 4; }, 20));
  dribble.join();
  CHECK(dribbler_closed);
  for (int fd : stalled) ::close(fd);
  ::close(dribbler);
}

TEST_CASE("join endpoint: one address gets at most per_source connections; others are still served") {
  auto f = ServedFixture();
  JoinLimits limits;
  limits.per_source = 2;
  JoinServer server(limits);
  REQUIRE(server.Start("127.0.0.1", 0, f.keys.serve));
  server.SetCredentials({f.cas, "abcdef.0123456789abcdef", {"https://127.0.0.1:6443"}});
  std::vector<int> flood;
  for (int i = 0; i < 5; ++i) flood.push_back(ConnectFrom("127.0.0.7", server.port()));
  CHECK(WaitFor([&] { return server.turned_away() == 3; }, 20));
  JoinRequest request{kJoinVersion, false, "w1", "127.0.0.1"};
  CHECK(FetchJoin("127.0.0.1", server.port(), f.keys.worker, request));
  for (int fd : flood) ::close(fd);
  server.Stop();  // also ends the two connections still being served
  CHECK_FALSE(server.running());
}

TEST_CASE("backup copy offer: round trip, and names, sizes and roles that are refused") {
  JoinRequest r{kJoinVersion, true, "node-1", "198.18.0.11",
                BackupCopyOffer{"c-20261126T080000Z-scheduled.sprout-backup", 1234}};
  auto back = ParseJoinRequest(RenderJoinRequest(r));
  REQUIRE(back);
  REQUIRE(back->copy);
  CHECK(back->copy->bundle == "c-20261126T080000Z-scheduled.sprout-backup");
  CHECK(back->copy->size == 1234);
  CHECK_FALSE(ParseJoinRequest(RenderJoinRequest({kJoinVersion, true, "n", "198.18.0.11"}))->copy);
  auto refused = [](const std::string& copy, const char* role = "control-plane") {
    auto p = ParseJoinRequest(std::string(R"({"version":1,"role":")") + role +
                              R"(","name":"n","address":"198.18.0.11","copy":)" + copy + "}");
    return p ? std::string() : p.error();
  };
  for (const char* name : {"../../etc/x.sprout-backup", ".c-1.sprout-backup", "c-1.sprout-backup.tmp-n-1",
                           "c 1.sprout-backup", ".sprout-backup", "c-1.tar", ""}) {
    INFO(name);
    CHECK(refused(std::string(R"({"bundle":")") + name + R"(","size":5})").find("\"bundle\"") != std::string::npos);
  }
  CHECK(refused(R"({"bundle":"c.sprout-backup","size":0})").find("\"size\"") != std::string::npos);
  CHECK(refused(R"({"bundle":"c.sprout-backup","size":-3})").find("\"size\"") != std::string::npos);
  CHECK(refused(R"({"bundle":"c.sprout-backup","size":)" + std::to_string(kMaxBackupCopy + 1) + "}").find("\"size\"") !=
        std::string::npos);
  CHECK(refused(R"({"bundle":"c.sprout-backup","size":5})", "worker").find("control-plane") != std::string::npos);
  CHECK(refused(R"("c.sprout-backup")").find("\"copy\" must be an object") != std::string::npos);
  CHECK(ValidBundleFileName("sprt-backup-20261124T101500Z-manual-node2.sprout-backup"));
}

TEST_CASE("backup copy allowance: 30 s and 4 s a started MiB, the same on both sides") {
  CHECK(BackupCopyAllowanceMs(1) == 34000);
  CHECK(BackupCopyAllowanceMs(1ULL << 20) == 34000);
  CHECK(BackupCopyAllowanceMs((1ULL << 20) + 1) == 38000);
  // The 2.6 MB bundle of a three-node Kubernetes cluster whose copies a 5 s wait cut off.
  CHECK(BackupCopyAllowanceMs(2649678) == 42000);
  // The largest copy still fits the int the socket timeouts take.
  CHECK(BackupCopyAllowanceMs(kMaxBackupCopy) == 30000 + 4000 * 512);
  CHECK(5000 + BackupCopyAllowanceMs(kMaxBackupCopy) < std::int64_t{1} << 31);
}

TEST_CASE("backup copy: only a node that proved the control-plane key, and only where copies are kept") {
  JoinRequest offer{kJoinVersion, true, "node-1", "198.18.0.11", BackupCopyOffer{"c.sprout-backup", 5}};
  CHECK(MayStoreCopy(offer, JoinAuthority::kControlPlane, true));
  auto worker = MayStoreCopy(offer, JoinAuthority::kWorker, true);
  REQUIRE_FALSE(worker);
  CHECK(worker.error().find("only from a control-plane node") != std::string::npos);
  auto nowhere = MayStoreCopy(offer, JoinAuthority::kControlPlane, false);
  REQUIRE_FALSE(nowhere);
  CHECK(nowhere.error().find("keeps no backup copies") != std::string::npos);
  CHECK_FALSE(MayStoreCopy({kJoinVersion, true, "n", "198.18.0.11"}, JoinAuthority::kControlPlane, true));
}

TEST_CASE("join endpoint: a control-plane peer's backup copy arrives whole; a worker's and a refused one do not") {
  auto keys = KeysFor("right secret 0123456789");
  JoinServer server;
  REQUIRE(server.Start("127.0.0.1", 0, keys.serve));
  const JoinRequest from{kJoinVersion, true, "node-1", "127.0.0.1"};
  // 300 KiB of varied bytes: many TLS records, and newlines inside the body.
  std::string bytes;
  for (int i = 0; i < 300 * 1024; ++i) bytes.push_back(static_cast<char>((i * 131 + i / 7) & 0xff));
  const std::string name = "c-20261126T080000Z-scheduled.sprout-backup";

  // No store yet: a node that keeps no copies says so.
  auto early = PushBackupCopy("127.0.0.1", server.port(), keys.control_plane, from, name, bytes);
  REQUIRE_FALSE(early);
  CHECK(early.error().find("keeps no backup copies") != std::string::npos);

  std::mutex mu;
  std::vector<BackupCopy> kept;
  bool fail_next = false;
  server.SetBackupStore([&](const BackupCopy& c) -> sprout::Status {
    std::lock_guard<std::mutex> lock(mu);
    if (fail_next) return sprout::Fail("the bundle does not open with this cluster's secret");
    kept.push_back(c);
    return sprout::Ok{};
  });
  auto pushed = PushBackupCopy("127.0.0.1", server.port(), keys.control_plane, from, name, bytes);
  REQUIRE(pushed);
  {
    std::lock_guard<std::mutex> lock(mu);
    REQUIRE(kept.size() == 1);
    CHECK(kept[0].from == "node-1");
    CHECK(kept[0].bundle == name);
    CHECK(kept[0].bytes == bytes);
  }

  // A worker's key: refused by the PSK it proved, whatever the request says; nothing kept.
  auto worker = PushBackupCopy("127.0.0.1", server.port(), keys.worker, from, name, bytes);
  REQUIRE_FALSE(worker);
  CHECK(worker.error().find("only from a control-plane node") != std::string::npos);

  // The store's refusal reaches the sender.
  {
    std::lock_guard<std::mutex> lock(mu);
    fail_next = true;
  }
  auto refused = PushBackupCopy("127.0.0.1", server.port(), keys.control_plane, from, name, bytes);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().find("does not open with this cluster's secret") != std::string::npos);
  {
    std::lock_guard<std::mutex> lock(mu);
    CHECK(kept.size() == 1);
  }
  server.Stop();
}

TEST_CASE("worker tokens: one per 12-hour window, derived from the base token, expiring after the next window") {
  const std::string base = "abcdef.0123456789abcdef";
  const std::int64_t now = 1'800'000'000;  // 2027-01-15T08:00:00Z
  const std::int64_t w = WorkerTokenWindow(now);
  CHECK(w == now / (12 * 3600));
  CHECK(WorkerTokenWindow(w * kWorkerTokenWindowSeconds) == w);
  CHECK(WorkerTokenWindow(w * kWorkerTokenWindowSeconds - 1) == w - 1);
  CHECK(WorkerTokenWindow(-1) == -1);
  // Handed out anywhere in window w, a token lives 12 to 24 hours more.
  CHECK(WorkerTokenExpiry(w) - (w + 1) * kWorkerTokenWindowSeconds == kWorkerTokenWindowSeconds);

  auto t = WorkerToken(base, w);
  REQUIRE(t.ok());
  CHECK(t->size() == 23);
  CHECK((*t)[6] == '.');
  CHECK(*t != base);
  CHECK(WorkerToken(base, w).value() == *t);  // every control-plane node derives the same
  CHECK(WorkerToken(base, w + 1).value() != *t);
  CHECK(WorkerToken("zzzzzz.0123456789abcdef", w).value() != *t);
  CHECK(t->find(base.substr(7)) == std::string::npos);
  CHECK_FALSE(WorkerToken("not a token", w).ok());
}

namespace {

// PinnedHash is the hash a worker personalized with secret pins.
std::string PinnedHash(const std::string& secret) {
  auto hash = sprout::pki::ClusterCaCertHash(secret);
  REQUIRE(hash);
  return *hash;
}

}  // namespace

TEST_CASE("worker CA pin: a pinned worker keeps only the CA whose hash is its pin", "[formation]") {
  const std::string secret = "a cluster secret of 32 bytes....";
  auto real = sprout::pki::MakeClusterCAs(secret);
  auto rogue = sprout::pki::MakeClusterCAs();  // a worker-secret holder's own CA
  REQUIRE(real);
  REQUIRE(rogue);
  const std::string pin = PinnedHash(secret);
  WorkerCaTrust trust{pin, "sprout.ca-cert-hash (config area)", "", "/var/lib/sprout/worker/ca.crt"};

  auto kept = CheckWorkerCa(trust, "198.18.0.12:7777", real->kubernetes_ca.cert_pem);
  CHECK(kept.keep);
  CHECK_FALSE(kept.first_use);
  CHECK(kept.offered == pin);
  CHECK(kept.refusal.empty());

  auto refused = CheckWorkerCa(trust, "198.18.0.11:7777", rogue->kubernetes_ca.cert_pem);
  CHECK_FALSE(refused.keep);
  const std::string offered = sprout::pki::SpkiSha256(rogue->kubernetes_ca.cert_pem).value();
  CHECK(refused.offered == offered);
  CHECK(refused.refusal ==
        "worker: refused the credentials of the join endpoint 198.18.0.11:7777: it hands out the cluster CA " +
            offered + ", and this worker pins " + pin +
            " (sprout.ca-cert-hash (config area)); nothing was saved, trying the next endpoint. That endpoint holds "
            "the worker secret but not this cluster's CA: another worker posing as the control plane, or the pin is "
            "wrong. If `sprout-firstboot status` on a control-plane node of this cluster prints " +
            offered +
            " (a cluster formed before workers pinned the CA), pin that: sprout personalize IMAGE --ca-cert-hash " +
            offered + " (or sprout.ca-cert-hash= in fw_cfg)");

  // A pin beats the CA kept before: one kept from a rogue before the pin was given is not
  // trusted, and the real one is taken although it differs from it.
  WorkerCaTrust poisoned = trust;
  poisoned.trusted = offered;
  CHECK(CheckWorkerCa(poisoned, "198.18.0.12:7777", real->kubernetes_ca.cert_pem).keep);
  CHECK_FALSE(CheckWorkerCa(poisoned, "198.18.0.11:7777", rogue->kubernetes_ca.cert_pem).keep);
}

TEST_CASE("worker CA pin: the pinned CA with another certificate behind it is refused", "[formation]") {
  const std::string secret = "a cluster secret of 32 bytes....";
  auto real = sprout::pki::MakeClusterCAs(secret);
  auto rogue = sprout::pki::MakeClusterCAs();
  REQUIRE(real);
  REQUIRE(rogue);
  WorkerCaTrust trust{PinnedHash(secret), "--ca-cert-hash", "", ""};
  // The kubelet would trust every certificate of the bundle: the real CA's hash must not
  // carry a rogue's CA in behind it.
  auto bundle = CheckWorkerCa(trust, "198.18.0.11:7777", real->kubernetes_ca.cert_pem + rogue->kubernetes_ca.cert_pem);
  CHECK_FALSE(bundle.keep);
  CHECK(bundle.offered.empty());
  CHECK(bundle.refusal ==
        "worker: refused the credentials of the join endpoint 198.18.0.11:7777: its CA certificate is unusable (not "
        "one certificate: 2 PEM blocks); nothing was saved, trying the next endpoint");
  CHECK_FALSE(CheckWorkerCa(trust, "198.18.0.11:7777", "").keep);
  CHECK_FALSE(CheckWorkerCa(trust, "198.18.0.11:7777", rogue->kubernetes_ca.key_pem).keep);
}

TEST_CASE("worker CA pin: without a pin the first CA is trusted, and any other refused afterwards", "[formation]") {
  auto first = sprout::pki::MakeClusterCAs();
  auto other = sprout::pki::MakeClusterCAs();
  REQUIRE(first);
  REQUIRE(other);
  WorkerCaTrust fresh{"", "", "", "/var/lib/sprout/worker/ca.crt"};
  auto taken = CheckWorkerCa(fresh, "198.18.0.11:7777", first->kubernetes_ca.cert_pem);
  CHECK(taken.keep);
  CHECK(taken.first_use);

  WorkerCaTrust after = fresh;
  after.trusted = taken.offered;
  auto again = CheckWorkerCa(after, "198.18.0.12:7777", first->kubernetes_ca.cert_pem);
  CHECK(again.keep);
  CHECK_FALSE(again.first_use);
  auto refused = CheckWorkerCa(after, "198.18.0.13:7777", other->kubernetes_ca.cert_pem);
  CHECK_FALSE(refused.keep);
  CHECK(refused.refusal ==
        "worker: refused the credentials of the join endpoint 198.18.0.13:7777: it hands out the cluster CA " +
            refused.offered + ", and this worker trusted " + taken.offered +
            " on first use (/var/lib/sprout/worker/ca.crt); nothing was saved, trying the next endpoint. If the "
            "cluster's CA really changed (this worker now belongs to a new cluster), pin the new one: sprout "
            "personalize IMAGE --ca-cert-hash HASH with the hash `sprout-firstboot status` prints on a control-plane "
            "node");
}

TEST_CASE("worker CA pin: a worker without a pin says how to add one", "[formation]") {
  CHECK(NoCaPinWarning("", "") ==
        "worker: no pin of the cluster CA (ca-cert-hash): it will trust the first CA a join endpoint hands it, and any "
        "holder of the worker secret can pose as a join endpoint; pin it: sprout personalize IMAGE --role worker "
        "--cluster-secret FILE writes the pin of a cluster formed with that secret, or give --ca-cert-hash "
        "sha256:HEX (sprout.ca-cert-hash=) with the hash `sprout-firstboot status` prints on a control-plane node");
  CHECK_THAT(NoCaPinWarning("sha256:ab", "/var/lib/sprout/worker/ca.crt"),
             Catch::StartsWith("worker: no pin of the cluster CA (ca-cert-hash): it trusts the CA sha256:ab it was "
                               "handed first (/var/lib/sprout/worker/ca.crt), and any holder"));
}
