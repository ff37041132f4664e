// TLS bootstrapping of worker kubelets, as kubeadm sets it up: the bootstrap token
// formation hands out becomes a bootstrap-token Secret, and ClusterRoleBindings let its
// holders ask for a node client certificate and have it approved, and let nodes renew
// theirs (and run kube-proxy). Pure: API objects as JSON text, for the node agent to
// create.
#pragma once

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

// BootstrapTokenSecret is kube-system/bootstrap-token-ID for token "ID.SECRET"
// (authentication and signing, in kBootstrapGroup, no expiry); a malformed token is an error.
Result<ApiObject> BootstrapTokenSecret(const std::string& token);

// BootstrapBindings are kubeadm's three ClusterRoleBindings: kBootstrapGroup may create
// CSRs (system:node-bootstrapper) and has node-client CSRs auto-approved; system:nodes
// have their renewal CSRs auto-approved. A fourth, sprout's own, grants system:nodes
// system:node-proxier: kube-proxy runs on the host with the node's kubelet credentials
// (kubeadm runs it as a DaemonSet with a ServiceAccount instead).
std::vector<ApiObject> BootstrapBindings();

}  // namespace sprout::kube
