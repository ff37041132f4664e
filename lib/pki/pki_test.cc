#include "pki/pki.h"

#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <ctime>
#include <map>

#include "util/fs.h"
#include "util/process.h"
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

namespace {

// OpensslSpkiHash is what kubeadm's documentation computes with the openssl command, for
// a certificate in PEM; "" when there is no openssl command.
std::string OpensslSpkiHash(const std::string& cert_pem) {
  if (sprout::FindProgram("openssl").empty()) return "";
  sprout::TempDir dir(std::filesystem::temp_directory_path(), "pki-test");
  REQUIRE(sprout::WriteFileAtomic(dir.path() / "ca.crt", cert_pem));
  auto out =
      sprout::RunChecked({{"sh", "-c",
                           "openssl x509 -in '" + (dir.path() / "ca.crt").string() +
                               "' -pubkey -noout | openssl pkey -pubin -outform der | sha256sum | cut -d' ' -f1"}});
  REQUIRE(out);
  return "sha256:" + std::string(sprout::Trim(*out));
}

constexpr const char* kExampleSecret = "example cluster secret 0123456789";

}  // namespace

TEST_CASE("pki: a derived key pair is the same for the same seed and label, and another for another") {
  auto a = DeriveKeyPair(kExampleSecret, kKubernetesCaKeyLabel);
  auto b = DeriveKeyPair(kExampleSecret, kKubernetesCaKeyLabel);
  auto other_label = DeriveKeyPair(kExampleSecret, "sprout something else v1");
  auto other_seed = DeriveKeyPair("example cluster secret 0123456788", kKubernetesCaKeyLabel);
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE(other_label);
  REQUIRE(other_seed);
  CHECK(a->private_pem == b->private_pem);
  CHECK(a->public_pem == b->public_pem);
  CHECK(a->public_pem != other_label->public_pem);
  CHECK(a->public_pem != other_seed->public_pem);
  // Computed apart from this code: 48 bytes of `openssl kdf -keylen 48 -kdfopt digest:SHA256
  // -kdfopt hexkey:<the secret's hex> -kdfopt "salt:sprout pki v1" -kdfopt "info:sprout
  // kubernetes ca key v1" HKDF`, reduced mod (n - 1) + 1 with python3 (b7307a55...865a2),
  // written as a SEC1 key and read by `openssl ec -pubout` (which computes the point).
  CHECK(a->public_pem ==
        "-----BEGIN PUBLIC KEY-----\n"
        "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEZPJuV3AdxtO6xRMUX41c2bBPnF3s\n"
        "Fsm/iADrIqH8swrg2+jx7Eubap3lappomjEfaSlmdBuGwuDhCX7pyoyr5Q==\n"
        "-----END PUBLIC KEY-----\n");
  auto hash = SpkiSha256(a->public_pem);
  REQUIRE(hash);
  CHECK(*hash == "sha256:7e858bf6c6e83eaf78d3cc3967d2e34b5d1608e99687acd70f16c5948e9fd40b");
  CHECK_FALSE(DeriveKeyPair("", kKubernetesCaKeyLabel));
}

TEST_CASE("pki: the founder's Kubernetes CA has the key derived from the cluster secret; the others do not") {
  auto cas = MakeClusterCAs(kExampleSecret);
  REQUIRE(cas);
  auto key = DeriveKeyPair(kExampleSecret, kKubernetesCaKeyLabel);
  REQUIRE(key);
  CHECK(KeyMatches(cas->kubernetes_ca.cert_pem, key->private_pem));
  CHECK(VerifyIssued(cas->kubernetes_ca.cert_pem, cas->kubernetes_ca.cert_pem));
  auto subject = CertSubject(cas->kubernetes_ca.cert_pem);
  REQUIRE(subject);
  CHECK(subject->common_name == "kubernetes");
  // It issues like any CA.
  CertRequest r;
  r.common_name = "kube-apiserver";
  r.server = true;
  auto leaf = Issue(cas->kubernetes_ca, r);
  REQUIRE(leaf);
  CHECK(VerifyIssued(cas->kubernetes_ca.cert_pem, leaf->cert_pem));
  // What a worker pins before the cluster exists is the hash of the CA the founder makes.
  auto pin = ClusterCaCertHash(kExampleSecret);
  auto made = SpkiSha256(cas->kubernetes_ca.cert_pem);
  REQUIRE(pin);
  REQUIRE(made);
  CHECK(*made == *pin);
  CHECK(*pin == "sha256:7e858bf6c6e83eaf78d3cc3967d2e34b5d1608e99687acd70f16c5948e9fd40b");
  // A second founding with the same secret makes another certificate for the same key.
  auto again = MakeClusterCAs(kExampleSecret);
  REQUIRE(again);
  CHECK(again->kubernetes_ca.cert_pem != cas->kubernetes_ca.cert_pem);
  CHECK(SpkiSha256(again->kubernetes_ca.cert_pem).value() == *pin);
  // Only that CA: the etcd and front-proxy CAs and the service-account key stay random.
  CHECK_FALSE(KeyMatches(again->etcd_ca.cert_pem, cas->etcd_ca.key_pem));
  CHECK_FALSE(KeyMatches(again->front_proxy_ca.cert_pem, cas->front_proxy_ca.key_pem));
  CHECK(again->service_account.public_pem != cas->service_account.public_pem);
  // Without a secret (tests) it is random.
  auto random = MakeClusterCAs();
  REQUIRE(random);
  CHECK(SpkiSha256(random->kubernetes_ca.cert_pem).value() != *pin);
}

TEST_CASE("pki: SpkiSha256 is kubeadm's CA hash, as the openssl command computes it") {
  auto derived = MakeClusterCAs(kExampleSecret);
  auto random = MakeClusterCAs();
  REQUIRE(derived);
  REQUIRE(random);
  for (const auto* ca : {&derived->kubernetes_ca, &random->kubernetes_ca, &random->etcd_ca}) {
    auto ours = SpkiSha256(ca->cert_pem);
    REQUIRE(ours);
    CHECK(ValidSpkiSha256(*ours));
    const std::string theirs = OpensslSpkiHash(ca->cert_pem);
    if (theirs.empty()) {
      WARN("no openssl command: the hash is checked against the derivation only");
    } else {
      CHECK(*ours == theirs);
    }
  }
  // The certificate's key and the bare public key hash alike.
  auto key = DeriveKeyPair(kExampleSecret, kKubernetesCaKeyLabel);
  REQUIRE(key);
  CHECK(SpkiSha256(key->public_pem).value() == SpkiSha256(derived->kubernetes_ca.cert_pem).value());
}

TEST_CASE("pki: SpkiSha256 takes exactly one certificate, so a pinned CA cannot bring another along") {
  auto cas = MakeClusterCAs();
  REQUIRE(cas);
  const std::string& one = cas->kubernetes_ca.cert_pem;
  CHECK(SpkiSha256(one));
  CHECK(SpkiSha256(one + "\n\n"));
  auto two = SpkiSha256(one + cas->etcd_ca.cert_pem);
  REQUIRE_FALSE(two);
  CHECK(two.error() == "not one certificate: 2 PEM blocks");
  auto trailing = SpkiSha256(one + "junk");
  REQUIRE_FALSE(trailing);
  CHECK(trailing.error() == "not one certificate: text follows it");
  CHECK_FALSE(SpkiSha256(""));
  CHECK_FALSE(SpkiSha256("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n"));
  CHECK_FALSE(SpkiSha256(cas->kubernetes_ca.key_pem));  // a private key is not what a CA is pinned by
}

TEST_CASE("pki: a CA pin has kubeadm's form") {
  CHECK(ValidSpkiSha256("sha256:7e858bf6c6e83eaf78d3cc3967d2e34b5d1608e99687acd70f16c5948e9fd40b"));
  CHECK_FALSE(ValidSpkiSha256("7e858bf6c6e83eaf78d3cc3967d2e34b5d1608e99687acd70f16c5948e9fd40b"));
  CHECK_FALSE(ValidSpkiSha256("sha256:7E858BF6C6E83EAF78D3CC3967D2E34B5D1608E99687ACD70F16C5948E9FD40B"));
  CHECK_FALSE(ValidSpkiSha256("sha256:7e858bf6"));
  CHECK_FALSE(ValidSpkiSha256("sha1:7e858bf6c6e83eaf78d3cc3967d2e34b5d1608e99687acd70f16c5948e9fd40b"));
}
