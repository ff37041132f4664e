#include "pki/pki.h"

#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <ctime>
#include <map>

#include "util/fs.h"
#include "util/text.h"

using namespace sprout::pki;

namespace {

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

TEST_CASE("pki: node etcd certificates chain to the etcd CA and carry the node's names") {
  auto cas = MakeClusterCAs();
  REQUIRE(cas);
  auto files = NodeFiles(*cas, NodeIdentity{"node1", {"198.18.0.11"}});
  REQUIRE(files);
  std::map<std::string, std::string> by_path;
  for (const auto& f : *files) by_path[f.path] = f.content;
  for (const char* base : {"etcd/server", "etcd/peer", "etcd/healthcheck-client", "apiserver-etcd-client"}) {
    INFO(base);
    REQUIRE(by_path.count(std::string(base) + ".crt") == 1);
    CHECK(VerifyIssued(cas->etcd_ca.cert_pem, by_path[std::string(base) + ".crt"]));
    CHECK(KeyMatches(by_path[std::string(base) + ".crt"], by_path[std::string(base) + ".key"]));
    // Not signed by another CA of the cluster.
    CHECK_FALSE(VerifyIssued(cas->kubernetes_ca.cert_pem, by_path[std::string(base) + ".crt"]));
  }
  auto names = CertNames(by_path["etcd/server.crt"]);
  REQUIRE(names);
  for (const char* n : {"DNS:node1", "DNS:localhost", "IP:198.18.0.11", "IP:127.0.0.1", "IP:0:0:0:0:0:0:0:1"}) {
    INFO(n);
    bool found = Has(*names, n) || (std::string(n) == "IP:0:0:0:0:0:0:0:1" && Has(*names, "IP:::1"));
    CHECK(found);
  }
  auto client = CertNames(by_path["etcd/healthcheck-client.crt"]);
  REQUIRE(client);
  CHECK(client->empty());
}

TEST_CASE("pki: the CAs are self-signed, distinct, and round-trip through the file layout with 0600 keys") {
  auto cas = MakeClusterCAs();
  REQUIRE(cas);
  CHECK(VerifyIssued(cas->etcd_ca.cert_pem, cas->etcd_ca.cert_pem));
  CHECK(VerifyIssued(cas->kubernetes_ca.cert_pem, cas->kubernetes_ca.cert_pem));
  CHECK_FALSE(VerifyIssued(cas->etcd_ca.cert_pem, cas->kubernetes_ca.cert_pem));
  CHECK_FALSE(KeyMatches(cas->etcd_ca.cert_pem, cas->kubernetes_ca.key_pem));
  sprout::TempDir dir(std::filesystem::temp_directory_path(), "pki-test");
  REQUIRE(WritePkiFiles(dir.path(), CAFiles(*cas)));
  auto node = NodeFiles(*cas, NodeIdentity{"n", {"198.18.0.12"}});
  REQUIRE(node);
  REQUIRE(WritePkiFiles(dir.path(), *node));
  for (const char* p : {"ca.crt", "ca.key", "etcd/ca.crt", "etcd/ca.key", "front-proxy-ca.crt", "front-proxy-ca.key",
                        "sa.key", "sa.pub", "etcd/server.crt", "etcd/server.key", "etcd/peer.key",
                        "etcd/healthcheck-client.key", "apiserver-etcd-client.crt", "apiserver-etcd-client.key"}) {
    INFO(p);
    struct stat st {};
    REQUIRE(::stat((dir.path() / p).c_str(), &st) == 0);
    bool key = std::string(p).ends_with(".key");
    CHECK((st.st_mode & 0777) == (key ? 0600u : 0644u));
  }
  auto loaded = LoadCAs(dir.path());
  REQUIRE(loaded);
  CHECK(loaded->etcd_ca.cert_pem == cas->etcd_ca.cert_pem);
  CHECK(loaded->service_account.public_pem == cas->service_account.public_pem);
}

TEST_CASE("pki: LoadCAs names the missing file") {
  sprout::TempDir dir(std::filesystem::temp_directory_path(), "pki-test");
  auto loaded = LoadCAs(dir.path());
  REQUIRE_FALSE(loaded);
  CHECK(loaded.error().find("ca.crt") != std::string::npos);
}

TEST_CASE("pki: the founder's encryption key is 32 random bytes, written first and 0600, and loads back") {
  auto cas = MakeClusterCAs();
  REQUIRE(cas);
  CHECK(ValidEncryptionKey(cas->encryption_key));
  CHECK(sprout::Base64Decode(cas->encryption_key).value().size() == 32);
  auto other = MakeClusterCAs();
  REQUIRE(other);
  CHECK(other->encryption_key != cas->encryption_key);
  auto files = CAFiles(*cas);
  REQUIRE_FALSE(files.empty());
  CHECK(files.front().path == kEncryptionKeyFile);
  CHECK(files.front().mode == std::filesystem::perms(0600));
  sprout::TempDir dir(std::filesystem::temp_directory_path(), "pki-test");
  REQUIRE(WritePkiFiles(dir.path(), files));
  auto loaded = LoadCAs(dir.path());
  REQUIRE(loaded);
  CHECK(loaded->encryption_key == cas->encryption_key);

  // A cluster founded before the key existed: no file, no key, the CAs still load.
  std::filesystem::remove(dir.path() / kEncryptionKeyFile);
  auto old = LoadCAs(dir.path());
  REQUIRE(old);
  CHECK(old->encryption_key.empty());
  bool listed = false;
  for (const auto& f : CAFiles(*old)) listed = listed || f.path == kEncryptionKeyFile;
  CHECK_FALSE(listed);

  // A damaged key is named, never replaced by a new one.
  REQUIRE(sprout::WriteFileAtomic(dir.path() / kEncryptionKeyFile, "c2hvcnQ=\n"));
  auto bad = LoadCAs(dir.path());
  REQUIRE_FALSE(bad);
  CHECK(bad.error().find("encryption.key is not base64 of 32 bytes") != std::string::npos);
  CHECK_FALSE(ValidEncryptionKey(""));
  CHECK_FALSE(ValidEncryptionKey("not base64!"));
}

TEST_CASE("pki: a node's etcd certificates are kept until two thirds of their lifetime, then issued anew") {
  auto cas = MakeClusterCAs();
  REQUIRE(cas);
  NodeIdentity node{"node-1", {"198.18.0.11"}, 600};
  auto first = NodeFiles(*cas, node);
  REQUIRE(first);
  std::map<std::string, std::string> existing;
  for (const auto& f : *first) existing[f.path] = f.content;
  REQUIRE(existing.size() == 8);
  auto validity = CertValidity(existing.at("etcd/server.crt"));
  REQUIRE(validity);
  CHECK(validity->not_after - validity->not_before == 660);  // a tenth back, the lifetime ahead
  auto kept = UpdateNodeFiles(*cas, node, existing, RenewalTime(*validity) - 1);
  REQUIRE(kept);
  CHECK(kept->empty());
  auto renewed = UpdateNodeFiles(*cas, node, existing, RenewalTime(*validity));
  REQUIRE(renewed);
  CHECK(renewed->size() == 8);
  // Another address is another certificate, whatever the time.
  NodeIdentity moved = node;
  moved.ips = {"198.18.0.21"};
  auto after_move = UpdateNodeFiles(*cas, moved, existing, RenewalTime(*validity) - 1);
  REQUIRE(after_move);
  CHECK(after_move->size() == 4);  // server and peer name the address; the two clients do not
  CHECK_FALSE(CanKeep(existing.at("etcd/server.crt"), existing.at("etcd/peer.key"), cas->etcd_ca.cert_pem,
                      EtcdNodeRequests(node)[0].second, 0));
}

TEST_CASE("pki: a certificate that lives longer than the request asks is renewed at once") {
  auto cas = MakeClusterCAs();
  REQUIRE(cas);
  NodeIdentity year{"node-1", {"198.18.0.11"}};
  auto first = NodeFiles(*cas, year);
  REQUIRE(first);
  std::map<std::string, std::string> existing;
  for (const auto& f : *first) existing[f.path] = f.content;
  const auto now = static_cast<std::int64_t>(std::time(nullptr));
  auto same = UpdateNodeFiles(*cas, year, existing, now);
  REQUIRE(same);
  CHECK(same->empty());
  NodeIdentity short_lived = year;
  short_lived.validity_seconds = 600;
  auto shorter = UpdateNodeFiles(*cas, short_lived, existing, now);
  REQUIRE(shorter);
  CHECK(shorter->size() == 8);
}
