#include "kube/api.h"

#include <catch2/catch.hpp>
#include <cerrno>

#include "pki/pki.h"
#include "util/fs.h"

using namespace sprout;
using namespace sprout::kube;

namespace {

// Client is a real CA and client certificate, so the PEMs look like the real thing.
struct Client {
  pki::CertKey ca;
  pki::CertKey cert;
};

Client MakeClient() {
  auto ca = pki::MakeCA("kubernetes");
  REQUIRE(ca);
  pki::CertRequest req;
  req.common_name = "system:node:node-2";
  req.organizations = {"system:nodes"};
  req.client = true;
  auto cert = pki::Issue(*ca, req);
  REQUIRE(cert);
  return {*ca, *cert};
}

std::string ErrorOf(const std::string& yaml) {
  auto k = ParseKubeconfig(yaml);
  REQUIRE_FALSE(k);
  return k.error();
}

}  // namespace

TEST_CASE("kube: ParseKubeconfig reads back what RenderKubeconfig wrote", "[kube]") {
  const Client c = MakeClient();
  Kubeconfig want{
      "sprout", "https://198.18.0.11:6443", c.ca.cert_pem, "system:node:node-2", c.cert.cert_pem, c.cert.key_pem, ""};
  auto got = ParseKubeconfig(RenderKubeconfig(want));
  REQUIRE(got);
  CHECK(got->cluster_name == want.cluster_name);
  CHECK(got->server == want.server);
  CHECK(got->ca_pem == want.ca_pem);
  CHECK(got->user == want.user);
  CHECK(got->cert_pem == want.cert_pem);
  CHECK(got->key_pem == want.key_pem);
  CHECK(got->token.empty());

  auto boot = ParseKubeconfig(
      BootstrapKubeconfig(c.ca.cert_pem, "https://198.18.0.11:6443", "abcdef.0123456789abcdef", "sprout").content);
  REQUIRE(boot);
  CHECK(boot->token == "abcdef.0123456789abcdef");
  CHECK(boot->user == "tls-bootstrap-token-user");
  CHECK(boot->cert_pem.empty());
  CHECK(boot->ca_pem == c.ca.cert_pem);
}

TEST_CASE("kube: ParseKubeconfig reads the kubelet's rotated certificate and key from one file", "[kube]") {
  const Client c = MakeClient();
  TempDir dir(std::filesystem::temp_directory_path(), "kubeconfig-test");
  const auto pem = dir.path() / "kubelet-client-current.pem";
  const auto ca = dir.path() / "ca.crt";
  REQUIRE(WriteFileAtomic(pem, c.cert.cert_pem + c.cert.key_pem, std::filesystem::perms(0600)));
  REQUIRE(WriteFileAtomic(ca, c.ca.cert_pem));
  // What the kubelet writes to /etc/kubernetes/kubelet.conf after TLS bootstrap.
  const std::string yaml =
      "apiVersion: v1\n"
      "clusters:\n"
      "- cluster:\n"
      "    certificate-authority: " +
      ca.string() +
      "\n"
      "    server: https://198.18.0.11:6443\n"
      "  name: default-cluster\n"
      "contexts:\n"
      "- context:\n"
      "    cluster: default-cluster\n"
      "    namespace: default\n"
      "    user: default-auth\n"
      "  name: default-context\n"
      "current-context: default-context\n"
      "kind: Config\n"
      "preferences: {}\n"
      "users:\n"
      "- name: default-auth\n"
      "  user:\n"
      "    client-certificate: " +
      pem.string() +
      "\n"
      "    client-key: " +
      pem.string() + "\n";
  auto k = ParseKubeconfig(yaml);
  REQUIRE(k);
  CHECK(k->cluster_name == "default-cluster");
  CHECK(k->user == "default-auth");
  CHECK(k->ca_pem == c.ca.cert_pem);
  CHECK(k->cert_pem == c.cert.cert_pem);
  CHECK(k->key_pem == c.cert.key_pem);
  CHECK(k->cert_pem.find("PRIVATE KEY") == std::string::npos);

  std::filesystem::remove(pem);
  CHECK_THAT(ErrorOf(yaml),
             Catch::StartsWith("the kubeconfig's users[0] (default-auth): client-certificate " + pem.string() + ": "));
  REQUIRE(WriteFileAtomic(pem, c.cert.cert_pem));
  CHECK(ErrorOf(yaml) ==
        "the kubeconfig's users[0] (default-auth): client-key " + pem.string() + " holds no PEM private key");
}

TEST_CASE("kube: ParseKubeconfig says what is wrong with a kubeconfig", "[kube]") {
  const std::string cluster =
      "clusters:\n- name: c\n  cluster:\n    server: https://10.0.0.1:6443\n"
      "    certificate-authority-data: Q0E=\n";
  CHECK_THAT(ErrorOf("clusters: [\n"), Catch::StartsWith("the kubeconfig is not valid: line "));
  CHECK(ErrorOf("- a\n") == "the kubeconfig is not a YAML mapping");
  CHECK(ErrorOf("kind: Config\n") == "the kubeconfig has no clusters");
  CHECK(ErrorOf("clusters:\n- name: c\n  cluster:\n    server: http://10.0.0.1:8080\n") ==
        "the kubeconfig's clusters[0] (c): server 'http://10.0.0.1:8080' is not an https:// URL");
  CHECK_THAT(ErrorOf("clusters:\n- name: c\n  cluster:\n    server: https://10.0.0.1:6443\n"),
             Catch::StartsWith("the kubeconfig's clusters[0] (c) has neither certificate-authority-data nor"));
  CHECK(ErrorOf("clusters:\n- name: c\n  cluster:\n    server: https://10.0.0.1:6443\n"
                "    certificate-authority-data: '%%%'\n") ==
        "the kubeconfig's clusters[0] (c): certificate-authority-data is not base64");
  CHECK(ErrorOf(cluster) == "the kubeconfig has no users");
  CHECK(ErrorOf(cluster + "users:\n- name: u\n  user: {}\n") ==
        "the kubeconfig's users[0] (u) has neither a client certificate nor a token");
  CHECK(ErrorOf(cluster + "users:\n- name: u\n  user:\n    client-certificate-data: Q0VSVA==\n") ==
        "the kubeconfig's users[0] (u) has a client certificate but no client key");
  CHECK(ErrorOf(cluster + "users:\n- name: u\n  user:\n    client-certificate: pki/u.crt\n") ==
        "the kubeconfig's users[0] (u): client-certificate pki/u.crt is not an absolute path");
  CHECK_THAT(ErrorOf(cluster + "users:\n- name: u\n  user:\n    exec:\n      command: aws\n"),
             Catch::StartsWith("the kubeconfig's users[0] (u) uses exec, which sprout does not support"));
  CHECK(ErrorOf(cluster + "users:\n- name: u\n  user:\n    token: [a]\n") ==
        "the kubeconfig's users[0] (u): token is not a string");
}

TEST_CASE("kube: ApiRequest names the server when it gets no connection, and the URL otherwise", "[kube]") {
  Kubeconfig k{"c", "https://127.0.0.1:1/", "not a CA", "u", "", "", "t"};
  auto r = ApiRequest(k, "GET", "/api/v1/nodes");
  REQUIRE_FALSE(r);
  // Nothing listens on port 1: the refused connection is said plainly, once for any path.
  CHECK(r.error() ==
        "cannot connect to https://127.0.0.1:1: connection refused (nothing listens there: its "
        "apiserver is not running, or still starting)");

  k.ca_pem.clear();
  r = ApiRequest(k, "GET", "/api/v1/nodes");
  REQUIRE_FALSE(r);
  CHECK(r.error() ==
        "cannot call https://127.0.0.1:1/api/v1/nodes: the kubeconfig has no cluster CA to verify it with");
}

TEST_CASE("kube: ConnectProblem says why from the socket's errno", "[kube]") {
  CHECK(ConnectProblem("https://198.18.0.11:6443", EHOSTUNREACH) ==
        "cannot connect to https://198.18.0.11:6443: no route to it (No route to host; is the node's link up?)");
  CHECK(ConnectProblem("https://198.18.0.11:6443", 0) == "cannot connect to https://198.18.0.11:6443: no connection");
  CHECK(ConnectProblem("https://198.18.0.11:6443", ETIMEDOUT) ==
        "cannot connect to https://198.18.0.11:6443: Connection timed out");
}
