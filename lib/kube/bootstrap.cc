#include "kube/bootstrap.h"

#include <nlohmann/json.hpp>

namespace sprout::kube {

namespace {

bool LowerAlnum(const std::string& s) {
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) return false;
  }
  return true;
}

ApiObject Binding(const std::string& name, const std::string& role, const std::string& group) {
  nlohmann::ordered_json j;
  j["apiVersion"] = "rbac.authorization.k8s.io/v1";
  j["kind"] = "ClusterRoleBinding";
  j["metadata"]["name"] = name;
  j["roleRef"] = {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "ClusterRole"}, {"name", role}};
  j["subjects"] =
      nlohmann::ordered_json::array({{{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "Group"}, {"name", group}}});
  return {"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", name, j.dump()};
}

}  // namespace

Result<ApiObject> BootstrapTokenSecret(const std::string& token) {
  const auto dot = token.find('.');
  const std::string id = token.substr(0, dot);
  const std::string secret = dot == std::string::npos ? "" : token.substr(dot + 1);
  if (id.size() != 6 || secret.size() != 16 || !LowerAlnum(id) || !LowerAlnum(secret)) {
    return Fail("the bootstrap token is not of the form [a-z0-9]{6}.[a-z0-9]{16}");
  }
  nlohmann::ordered_json j;
  j["apiVersion"] = "v1";
  j["kind"] = "Secret";
  j["metadata"] = {{"name", "bootstrap-token-" + id}, {"namespace", "kube-system"}};
  j["type"] = "bootstrap.kubernetes.io/token";
  j["stringData"] = {{"description", "sprout: the token formation hands to worker nodes"},
                     {"token-id", id},
                     {"token-secret", secret},
                     {"usage-bootstrap-authentication", "true"},
                     {"usage-bootstrap-signing", "true"},
                     {"auth-extra-groups", kBootstrapGroup}};
  return ApiObject{"/api/v1/namespaces/kube-system/secrets", "kube-system/bootstrap-token-" + id, j.dump()};
}

std::vector<ApiObject> BootstrapBindings() {
  return {Binding("kubeadm:kubelet-bootstrap", "system:node-bootstrapper", kBootstrapGroup),
          Binding("kubeadm:node-autoapprove-bootstrap",
                  "system:certificates.k8s.io:certificatesigningrequests:nodeclient", kBootstrapGroup),
          Binding("kubeadm:node-autoapprove-certificate-rotation",
                  "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes"),
          Binding("sprout:node-proxier", "system:node-proxier", "system:nodes")};
}

}  // namespace sprout::kube
