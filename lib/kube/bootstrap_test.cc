#include "kube/bootstrap.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "formation/join.h"

namespace sprout::kube {
namespace {

TEST_CASE("A bootstrap-token Secret authenticates only, in the node-bootstrapper group, and expires") {
  auto s = BootstrapTokenSecret("abcdef.0123456789abcdef", 1'800'000'000, "test");
  REQUIRE(s.ok());
  CHECK(s->path == "/api/v1/namespaces/kube-system/secrets");
  auto j = nlohmann::json::parse(s->json);
  CHECK(j["metadata"]["name"] == "bootstrap-token-abcdef");
  CHECK(j["metadata"]["namespace"] == "kube-system");
  CHECK(j["type"] == "bootstrap.kubernetes.io/token");
  CHECK(j["stringData"]["token-id"] == "abcdef");
  CHECK(j["stringData"]["token-secret"] == "0123456789abcdef");
  CHECK(j["stringData"]["usage-bootstrap-authentication"] == "true");
  CHECK_FALSE(j["stringData"].contains("usage-bootstrap-signing"));  // it signs no cluster-info
  CHECK(j["stringData"]["auth-extra-groups"] == kBootstrapGroup);
  CHECK(j["stringData"]["expiration"] == "2027-01-15T08:00:00Z");
  for (const char* bad : {"", "abcdef", "abcdef.short", "ABCDEF.0123456789abcdef", "abcde.0123456789abcdefg",
                          "abcdef.0123456789abcde!"}) {
    INFO(bad);
    CHECK_FALSE(BootstrapTokenSecret(bad, 0, "").ok());
  }
}

TEST_CASE("Worker-token Secrets: this window's and the next, each expiring after its next window") {
  const std::string base = "abcdef.0123456789abcdef";
  const std::int64_t now = 1'800'000'000;  // 2027-01-15T08:00:00Z
  const std::int64_t w = formation::WorkerTokenWindow(now);
  const std::string t = formation::WorkerToken(base, w).value();
  auto secrets = WorkerTokenSecrets(base, now);
  REQUIRE(secrets.ok());
  REQUIRE(secrets->size() == 2);
  auto first = nlohmann::json::parse((*secrets)[0].json);
  auto second = nlohmann::json::parse((*secrets)[1].json);
  CHECK(first["stringData"]["token-id"].get<std::string>() + "." +
            first["stringData"]["token-secret"].get<std::string>() ==
        t);
  CHECK(second["stringData"]["token-id"].get<std::string>() + "." +
            second["stringData"]["token-secret"].get<std::string>() ==
        formation::WorkerToken(base, w + 1).value());
  CHECK(first["stringData"]["expiration"] == "2027-01-16T00:00:00Z");  // the end of window w + 1
  CHECK(second["stringData"]["expiration"] == "2027-01-16T12:00:00Z");
  // The base token itself gets no Secret; the one earlier versions made is deleted.
  for (const auto& o : *secrets) CHECK(o.name != "kube-system/bootstrap-token-abcdef");
  CHECK(BaseTokenSecretPath(base).value() == "/api/v1/namespaces/kube-system/secrets/bootstrap-token-abcdef");
}

TEST_CASE("The bootstrap bindings let token holders ask for node certificates, never have them approved") {
  auto b = BootstrapBindings();
  REQUIRE(b.size() == 3);
  std::map<std::string, std::pair<std::string, std::string>> seen;  // name -> role, group
  for (const auto& o : b) {
    CHECK(o.path == "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings");
    auto j = nlohmann::json::parse(o.json);
    seen[j["metadata"]["name"]] = {j["roleRef"]["name"], j["subjects"][0]["name"]};
  }
  CHECK(seen["kubeadm:kubelet-bootstrap"] ==
        std::pair<std::string, std::string>("system:node-bootstrapper", kBootstrapGroup));
  // The controller-manager approves no token's request for a node name: sprout's approver
  // does (kube/csr_approval.h), and the binding earlier versions made is deleted.
  CHECK(seen.count("kubeadm:node-autoapprove-bootstrap") == 0);
  for (const auto& [name, role_group] : seen) {
    CHECK(role_group.first != "system:certificates.k8s.io:certificatesigningrequests:nodeclient");
  }
  CHECK(RevokedBindingPaths() ==
        std::vector<std::string>{
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/kubeadm:node-autoapprove-bootstrap"});
  CHECK(seen["kubeadm:node-autoapprove-certificate-rotation"] ==
        std::pair<std::string, std::string>("system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
                                            "system:nodes"));
  // kube-proxy runs on the node's own credentials.
  CHECK(seen["sprout:node-proxier"] == std::pair<std::string, std::string>("system:node-proxier", "system:nodes"));
}

}  // namespace
}  // namespace sprout::kube
