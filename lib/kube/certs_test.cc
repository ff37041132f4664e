#include "kube/certs.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <ctime>
#include <map>

#include "util/text.h"

using namespace sprout;
using namespace sprout::kube;

namespace {

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// Decoded is a kubeconfig read back: server, CA and the client certificate and key.
struct Decoded {
  std::string server, ca, cert, key, user, token;
};

Decoded Decode(const std::string& text) {
  YAML::Node y = YAML::Load(text);
  Decoded d;
  d.server = y["clusters"][0]["cluster"]["server"].as<std::string>();
  d.ca = Base64Decode(y["clusters"][0]["cluster"]["certificate-authority-data"].as<std::string>()).value_or("");
  d.user = y["users"][0]["name"].as<std::string>();
  const auto u = y["users"][0]["user"];
  if (u["client-certificate-data"]) d.cert = Base64Decode(u["client-certificate-data"].as<std::string>()).value_or("");
  if (u["client-key-data"]) d.key = Base64Decode(u["client-key-data"].as<std::string>()).value_or("");
  if (u["token"]) d.token = u["token"].as<std::string>();
  CHECK(y["current-context"].as<std::string>() == y["contexts"][0]["name"].as<std::string>());
  CHECK(y["contexts"][0]["context"]["user"].as<std::string>() == d.user);
  return d;
}

}  // namespace

TEST_CASE("kube: the first service IP is the service network's first address", "[kube]") {
  CHECK(FirstServiceIP("10.96.0.0/12").value() == "10.96.0.1");
  CHECK(FirstServiceIP("198.18.128.0/24").value() == "198.18.128.1");
  CHECK(FirstServiceIP("172.16.0.0/16").value() == "172.16.0.1");
  auto host_bits = FirstServiceIP("10.96.0.5/12");
  REQUIRE_FALSE(host_bits);
  CHECK(host_bits.error().find("host bits") != std::string::npos);
  CHECK_FALSE(FirstServiceIP("10.96.0.0"));
  CHECK_FALSE(FirstServiceIP("10.96.0.0/31"));
  CHECK_FALSE(FirstServiceIP("fd00::/108"));
  CHECK_FALSE(FirstServiceIP("ten/12"));
}

TEST_CASE("kube: control-plane certificates and kubeconfigs follow kubeadm's names, subjects, SANs and modes",
          "[kube]") {
  auto cas = pki::MakeClusterCAs();
  REQUIRE(cas);
  ControlPlaneNode node{"node-1", {"198.18.0.11"}, "10.96.0.0/12", "sprout", "cluster.local"};
  auto files = ControlPlaneFiles(*cas, node);
  REQUIRE(files);
  std::map<std::string, pki::PkiFile> by;
  for (const auto& f : *files) by[f.path] = f;
  const std::vector<std::string> want = {"pki/apiserver.crt",
                                         "pki/apiserver.key",
                                         "pki/apiserver-kubelet-client.crt",
                                         "pki/apiserver-kubelet-client.key",
                                         "pki/front-proxy-client.crt",
                                         "pki/front-proxy-client.key",
                                         "admin.conf",
                                         "controller-manager.conf",
                                         "scheduler.conf",
                                         "kubelet.conf",
                                         "pki/encryption-config.yaml",
                                         "audit-policy.yaml"};
  CHECK(by.size() == want.size());
  for (const auto& p : want) {
    INFO(p);
    REQUIRE(by.count(p) == 1);
    const bool secret = p.ends_with(".key") || p.ends_with(".conf") || p == "pki/encryption-config.yaml";
    CHECK(by[p].mode == std::filesystem::perms(secret ? 0600 : 0644));
  }

  SECTION("the apiserver serves every name a client uses, signed by the Kubernetes CA") {
    const auto& crt = by["pki/apiserver.crt"].content;
    CHECK(pki::VerifyIssued(cas->kubernetes_ca.cert_pem, crt));
    CHECK_FALSE(pki::VerifyIssued(cas->etcd_ca.cert_pem, crt));
    CHECK(pki::KeyMatches(crt, by["pki/apiserver.key"].content));
    auto names = pki::CertNames(crt);
    REQUIRE(names);
    for (const char* n :
         {"DNS:node-1", "DNS:localhost", "DNS:kubernetes", "DNS:kubernetes.default", "DNS:kubernetes.default.svc",
          "DNS:kubernetes.default.svc.cluster.local", "IP:10.96.0.1", "IP:198.18.0.11", "IP:127.0.0.1"}) {
      INFO(n);
      CHECK(Has(*names, n));
    }
    CHECK(pki::CertSubject(crt)->common_name == "kube-apiserver");
  }

  SECTION("the apiserver's client certificates: kubelet client in system:masters, front proxy from its own CA") {
    const auto& kc = by["pki/apiserver-kubelet-client.crt"].content;
    CHECK(pki::VerifyIssued(cas->kubernetes_ca.cert_pem, kc));
    auto s = pki::CertSubject(kc);
    REQUIRE(s);
    CHECK(s->common_name == "kube-apiserver-kubelet-client");
    CHECK(s->organizations == std::vector<std::string>{"system:masters"});
    const auto& fp = by["pki/front-proxy-client.crt"].content;
    CHECK(pki::VerifyIssued(cas->front_proxy_ca.cert_pem, fp));
    CHECK_FALSE(pki::VerifyIssued(cas->kubernetes_ca.cert_pem, fp));
    CHECK(pki::CertSubject(fp)->common_name == "front-proxy-client");
    CHECK(pki::CertNames(fp)->empty());
  }

  SECTION("each kubeconfig names this node's apiserver, embeds the CA, and carries its own user") {
    const std::map<std::string, std::pair<std::string, std::vector<std::string>>> users = {
        {"admin.conf", {"kubernetes-admin", {"system:masters"}}},
        {"controller-manager.conf", {"system:kube-controller-manager", {}}},
        {"scheduler.conf", {"system:kube-scheduler", {}}},
        {"kubelet.conf", {"system:node:node-1", {"system:nodes"}}},
    };
    for (const auto& [file, who] : users) {
      INFO(file);
      Decoded d = Decode(by[file].content);
      CHECK(d.server == "https://198.18.0.11:6443");
      CHECK(d.ca == cas->kubernetes_ca.cert_pem);
      CHECK(d.user == who.first);
      CHECK(pki::VerifyIssued(cas->kubernetes_ca.cert_pem, d.cert));
      CHECK(pki::KeyMatches(d.cert, d.key));
      auto s = pki::CertSubject(d.cert);
      REQUIRE(s);
      CHECK(s->common_name == who.first);
      CHECK(s->organizations == who.second);
      CHECK(pki::CertNames(d.cert)->empty());
    }
  }
}

TEST_CASE("kube: a bad node is refused with the reason", "[kube]") {
  auto cas = pki::MakeClusterCAs();
  REQUIRE(cas);
  auto no_name = ControlPlaneFiles(*cas, {"", {"198.18.0.11"}, "10.96.0.0/12"});
  REQUIRE_FALSE(no_name);
  CHECK(no_name.error().find("no name") != std::string::npos);
  auto no_ip = ControlPlaneFiles(*cas, {"n", {}, "10.96.0.0/12"});
  REQUIRE_FALSE(no_ip);
  CHECK(no_ip.error().find("no address") != std::string::npos);
  auto bad_cidr = ControlPlaneFiles(*cas, {"n", {"198.18.0.11"}, "10.96.0.0"});
  REQUIRE_FALSE(bad_cidr);
  CHECK(bad_cidr.error().find("10.96.0.0") != std::string::npos);
}

TEST_CASE("kube: a worker's bootstrap kubeconfig carries the token and no key", "[kube]") {
  auto f = BootstrapKubeconfig("CA-PEM\n", "https://[fd00::1]:6443", "abcdef.0123456789abcdef", "sprout");
  CHECK(f.path == "bootstrap-kubelet.conf");
  CHECK(f.mode == std::filesystem::perms(0600));
  Decoded d = Decode(f.content);
  CHECK(d.server == "https://[fd00::1]:6443");
  CHECK(d.ca == "CA-PEM\n");
  CHECK(d.user == "tls-bootstrap-token-user");
  CHECK(d.token == "abcdef.0123456789abcdef");
  CHECK(d.cert.empty());
  CHECK(d.key.empty());
  CHECK(ApiServerURL("fd00::1") == "https://[fd00::1]:6443");
  CHECK(ApiServerURL("198.18.0.11") == "https://198.18.0.11:6443");
}

TEST_CASE("kube: a reboot re-keys nothing; a new address re-issues only what names it; a new CA re-issues all",
          "[kube]") {
  auto cas = pki::MakeClusterCAs();
  REQUIRE(cas);
  ControlPlaneNode node{"node-1", {"198.18.0.11"}, "10.96.0.0/12", "sprout", "cluster.local"};
  auto first = ControlPlaneFiles(*cas, node);
  REQUIRE(first);
  std::map<std::string, std::string> existing;
  for (const auto& f : *first) existing[f.path] = f.content;
  CHECK(existing.size() == ControlPlaneFilePaths().size());

  auto again = UpdateControlPlaneFiles(*cas, node, existing, std::time(nullptr));
  REQUIRE(again);
  CHECK(again->empty());

  ControlPlaneNode moved = node;
  moved.ips = {"198.18.0.21"};
  auto after_move = UpdateControlPlaneFiles(*cas, moved, existing, std::time(nullptr));
  REQUIRE(after_move);
  std::vector<std::string> paths;
  for (const auto& f : *after_move) paths.push_back(f.path);
  std::sort(paths.begin(), paths.end());
  CHECK(paths == std::vector<std::string>{"admin.conf", "controller-manager.conf", "kubelet.conf", "pki/apiserver.crt",
                                          "pki/apiserver.key", "scheduler.conf"});

  auto damaged = existing;
  damaged["pki/front-proxy-client.key"] = existing["pki/apiserver.key"];
  auto repaired = UpdateControlPlaneFiles(*cas, node, damaged, std::time(nullptr));
  REQUIRE(repaired);
  REQUIRE(repaired->size() == 2);
  CHECK(repaired->at(0).path == "pki/front-proxy-client.crt");

  auto other = pki::MakeClusterCAs();
  REQUIRE(other);
  auto rekeyed = UpdateControlPlaneFiles(*other, node, existing, std::time(nullptr));
  REQUIRE(rekeyed);
  // Everything but the audit policy, which names no key: the other cluster's encryption
  // key changes the encryption configuration too.
  CHECK(rekeyed->size() == ControlPlaneFilePaths().size() - 1);
}

TEST_CASE("kube: every certificate and kubeconfig is renewed two thirds into its lifetime, not before", "[kube]") {
  auto cas = pki::MakeClusterCAs();
  REQUIRE(cas);
  ControlPlaneNode node{"node-1", {"198.18.0.11"}, "10.96.0.0/12", "sprout", "cluster.local"};
  node.cert_validity_seconds = 3000;  // notBefore 300 s back (a tenth), notAfter 3000 s ahead
  auto first = ControlPlaneFiles(*cas, node);
  REQUIRE(first);
  std::map<std::string, std::string> existing;
  for (const auto& f : *first) existing[f.path] = f.content;
  auto validity = pki::CertValidity(existing.at("pki/apiserver.crt"));
  REQUIRE(validity);
  CHECK(validity->not_after - validity->not_before == 3300);
  const std::int64_t renew = pki::RenewalTime(*validity);
  CHECK(renew == validity->not_before + 2200);

  auto early = UpdateControlPlaneFiles(*cas, node, existing, renew - 1);
  REQUIRE(early);
  CHECK(early->empty());
  auto due = UpdateControlPlaneFiles(*cas, node, existing, renew);
  REQUIRE(due);
  std::vector<std::string> paths;
  for (const auto& f : *due) paths.push_back(f.path);
  std::sort(paths.begin(), paths.end());
  // Every leaf and kubeconfig; the encryption configuration and audit policy hold no
  // certificate and stay.
  CHECK(paths.size() == ControlPlaneFilePaths().size() - 2);
  CHECK(std::find(paths.begin(), paths.end(), "kubelet.conf") != paths.end());
  CHECK(std::find(paths.begin(), paths.end(), "pki/apiserver.crt") != paths.end());
  for (const auto& f : *due) {
    if (f.path != "pki/apiserver.crt") continue;
    auto renewed = pki::CertValidity(f.content);
    REQUIRE(renewed);
    CHECK(f.content != existing.at("pki/apiserver.crt"));
    CHECK(renewed->not_after - renewed->not_before == 3300);
  }
}
