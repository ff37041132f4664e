// TLS bootstrapping of worker kubelets, as kubeadm sets it up, with the token's life
// bounded: formation's cluster token (the *base* token, held by control-plane nodes
// only) is never a credential the API server accepts. Workers are handed a *worker
// token* derived from it for the current 12-hour window (formation::WorkerToken, which
// the join endpoint hands out); its bootstrap-token Secret may
// authenticate and nothing else (no signing), puts its holder in kBootstrapGroup, and
// expires at the end of the next window. ClusterRoleBindings let that group ask for a
// node client certificate and have it approved, and let nodes renew theirs (and run
// kube-proxy). Pure: API objects as JSON text, for the node agent to create.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/result.h"

namespace sprout::kube {

// kBootstrapGroup is the extra group of sprout's tokens (kubeadm's default node token group).
inline constexpr const char* kBootstrapGroup = "system:bootstrappers:kubeadm:default-node-token";

// ApiObject is one object to create: the collection path to POST to and its JSON.
struct ApiObject {
  std::string path;  // /api/v1/namespaces/kube-system/secrets
  std::string name;  // for messages
  std::string json;
};

// BootstrapTokenSecret is kube-system/bootstrap-token-ID for token "ID.SECRET":
// authentication only (no usage-bootstrap-signing), in kBootstrapGroup, expiring at
// Unix time `expires` (RFC 3339 in the Secret; the API server refuses an expired token
// and the controller-manager's tokencleaner deletes its Secret). A malformed token is
// an error.
Result<ApiObject> BootstrapTokenSecret(const std::string& token, std::int64_t expires, const std::string& description);

// WorkerTokenSecrets are the Secrets of the worker tokens of the window `now` lies in
// and of the next one, so a join endpoint whose clock runs ahead still hands out a
// token the API server knows.
Result<std::vector<ApiObject>> WorkerTokenSecrets(const std::string& base, std::int64_t now);

// BaseTokenSecretPath is the path of the Secret earlier sprout versions made for the
// base token itself (no expiry): the node agent deletes it, so the base token
// authenticates nothing.
Result<std::string> BaseTokenSecretPath(const std::string& base);

// BootstrapBindings are two of kubeadm's ClusterRoleBindings: kBootstrapGroup may create
// CSRs (system:node-bootstrapper), and system:nodes have their renewal CSRs
// auto-approved by the controller-manager. kubeadm's third, which has the
// controller-manager approve every node-client CSR of kBootstrapGroup whatever node name
// it asks for, is left out: sprout's approver decides those (kube/csr_approval.h). A
// fourth, sprout's own, grants system:nodes system:node-proxier: kube-proxy runs on the
// host with the node's kubelet credentials (kubeadm runs it as a DaemonSet with a
// ServiceAccount instead).
std::vector<ApiObject> BootstrapBindings();

// RevokedBindingPaths are the bindings earlier sprout versions made and the node agent
// deletes: kubeadm:node-autoapprove-bootstrap (above).
std::vector<std::string> RevokedBindingPaths();

}  // namespace sprout::kube
