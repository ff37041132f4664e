#include "kube/apiserver_config.h"

namespace sprout::kube {

std::string EncryptionConfigYaml(const std::string& key) {
  std::string out =
      "# Written by sprout-firstboot from the cluster's encryption key (pki/encryption.key).\n"
      "apiVersion: apiserver.config.k8s.io/v1\n"
      "kind: EncryptionConfiguration\n"
      "resources:\n"
      "  - resources:\n"
      "      - secrets\n"
      "    providers:\n";
  if (!key.empty()) {
    out += std::string("      - aescbc:\n") +
           "          keys:\n"
           "            - name: " +
           kEncryptionKeyName + "\n              secret: " + key + "\n";
  }
  out += "      - identity: {}\n";
  return out;
}

std::string AuditPolicyYaml() {
  return R"(# Written by sprout-firstboot: the kube-apiserver's audit policy.
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages:
  - RequestReceived
rules:
  # Health probes: every few seconds from the kubelet, and they change nothing.
  - level: None
    nonResourceURLs:
      - /healthz*
      - /livez*
      - /readyz*
      - /version
  # Leader-election and node-heartbeat leases, renewed every few seconds.
  - level: None
    users:
      - system:kube-controller-manager
      - system:kube-scheduler
    verbs: [get, update]
    resources:
      - group: coordination.k8s.io
        resources: [leases]
  - level: None
    userGroups:
      - system:nodes
    verbs: [get, update, patch]
    resources:
      - group: coordination.k8s.io
        resources: [leases]
  # Objects that hold secrets: metadata only, never a body, whatever the rule below
  # becomes.
  - level: Metadata
    resources:
      - group: ""
        resources: [secrets, configmaps, serviceaccounts/token]
      - group: authentication.k8s.io
        resources: [tokenreviews]
  # Everything else: who did what to which object, and when.
  - level: Metadata
)";
}

}  // namespace sprout::kube
