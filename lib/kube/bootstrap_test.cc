#include "kube/bootstrap.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

namespace sprout::kube {
namespace {

TEST_CASE("The bootstrap token becomes kubeadm's bootstrap-token Secret") {
  auto s = BootstrapTokenSecret("abcdef.0123456789abcdef");
  REQUIRE(s.ok());
  CHECK(s->path == "/api/v1/namespaces/kube-system/secrets");
  auto j = nlohmann::json::parse(s->json);
  CHECK(j["metadata"]["name"] == "bootstrap-token-abcdef");
  CHECK(j["metadata"]["namespace"] == "kube-system");
  CHECK(j["type"] == "bootstrap.kubernetes.io/token");
  CHECK(j["stringData"]["token-id"] == "abcdef");
  CHECK(j["stringData"]["token-secret"] == "0123456789abcdef");
  CHECK(j["stringData"]["usage-bootstrap-authentication"] == "true");
  CHECK(j["stringData"]["auth-extra-groups"] == kBootstrapGroup);
  CHECK_FALSE(j["stringData"].contains("expiration"));
  for (const char* bad : {"", "abcdef", "abcdef.short", "ABCDEF.0123456789abcdef", "abcde.0123456789abcdefg",
                          "abcdef.0123456789abcde!"}) {
    INFO(bad);
    CHECK_FALSE(BootstrapTokenSecret(bad).ok());
  }
}

TEST_CASE("The bootstrap bindings let token holders ask for node certificates and have them approved") {
  auto b = BootstrapBindings();
  REQUIRE(b.size() == 4);
  std::map<std::string, std::pair<std::string, std::string>> seen;  // name -> role, group
  for (const auto& o : b) {
    CHECK(o.path == "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings");
    auto j = nlohmann::json::parse(o.json);
    seen[j["metadata"]["name"]] = {j["roleRef"]["name"], j["subjects"][0]["name"]};
  }
  CHECK(seen["kubeadm:kubelet-bootstrap"] ==
        std::pair<std::string, std::string>("system:node-bootstrapper", kBootstrapGroup));
  CHECK(seen["kubeadm:node-autoapprove-bootstrap"].first ==
        "system:certificates.k8s.io:certificatesigningrequests:nodeclient");
  CHECK(seen["kubeadm:node-autoapprove-certificate-rotation"] ==
        std::pair<std::string, std::string>("system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
                                            "system:nodes"));
  // kube-proxy runs on the node's own credentials.
  CHECK(seen["sprout:node-proxier"] == std::pair<std::string, std::string>("system:node-proxier", "system:nodes"));
}

}  // namespace
}  // namespace sprout::kube
