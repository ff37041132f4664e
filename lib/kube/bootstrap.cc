#include "kube/bootstrap.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "formation/join.h"
#include "util/text.h"

namespace sprout::kube {

namespace {

bool LowerAlnum(const std::string& s) {
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) return false;
  }
  return true;
}

// Split parts a token into its id and secret, or fails.
Result<std::pair<std::string, std::string>> Split(const std::string& token) {
  const auto dot = token.find('.');
  std::string id = token.substr(0, dot);
  std::string secret = dot == std::string::npos ? "" : token.substr(dot + 1);
  if (id.size() != 6 || secret.size() != 16 || !LowerAlnum(id) || !LowerAlnum(secret)) {
    return Fail("the bootstrap token is not of the form [a-z0-9]{6}.[a-z0-9]{16}");
  }
  return std::pair{id, secret};
}

std::string Rfc3339(std::int64_t unix_seconds) { return UtcTime(unix_seconds, "%Y-%m-%dT%H:%M:%SZ"); }

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

Result<ApiObject> BootstrapTokenSecret(const std::string& token, std::int64_t expires, const std::string& description) {
  auto parts = Split(token);
  if (!parts) return Fail(parts.error());
  const auto& [id, secret] = *parts;
  nlohmann::ordered_json j;
  j["apiVersion"] = "v1";
  j["kind"] = "Secret";
  j["metadata"] = {{"name", "bootstrap-token-" + id}, {"namespace", "kube-system"}};
  j["type"] = "bootstrap.kubernetes.io/token";
  j["stringData"] = {{"description", description},
                     {"token-id", id},
                     {"token-secret", secret},
                     {"expiration", Rfc3339(expires)},
                     {"usage-bootstrap-authentication", "true"},
                     {"auth-extra-groups", kBootstrapGroup}};
  return ApiObject{"/api/v1/namespaces/kube-system/secrets", "kube-system/bootstrap-token-" + id, j.dump()};
}

Result<std::vector<ApiObject>> WorkerTokenSecrets(const std::string& base, std::int64_t now) {
  std::vector<ApiObject> out;
  const std::int64_t window = formation::WorkerTokenWindow(now);
  for (std::int64_t w : {window, window + 1}) {
    auto token = formation::WorkerToken(base, w);
    if (!token) return Fail(token.error());
    auto secret = BootstrapTokenSecret(*token, formation::WorkerTokenExpiry(w),
                                       "sprout: the worker token of window " + std::to_string(w) + " (" +
                                           Rfc3339(w * formation::kWorkerTokenWindowSeconds) + " to " +
                                           Rfc3339((w + 1) * formation::kWorkerTokenWindowSeconds) + ")");
    if (!secret) return Fail(secret.error());
    out.push_back(std::move(*secret));
  }
  return out;
}

Result<std::string> BaseTokenSecretPath(const std::string& base) {
  auto parts = Split(base);
  if (!parts) return Fail(parts.error());
  return "/api/v1/namespaces/kube-system/secrets/bootstrap-token-" + parts->first;
}

std::vector<ApiObject> BootstrapBindings() {
  return {Binding("kubeadm:kubelet-bootstrap", "system:node-bootstrapper", kBootstrapGroup),
          Binding("kubeadm:node-autoapprove-certificate-rotation",
                  "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes"),
          Binding("sprout:node-proxier", "system:node-proxier", "system:nodes")};
}

std::vector<std::string> RevokedBindingPaths() {
  return {"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/kubeadm:node-autoapprove-bootstrap"};
}

}  // namespace sprout::kube
