// The kube-apiserver's own configuration files beside its flags: the
// EncryptionConfiguration that encrypts Secrets in etcd with the cluster's key
// (pki::ClusterCAs::encryption_key), and the audit policy. Pure text; the control-plane
// step writes them (kube/controlplane.h). See docs/control-plane.md.
#pragma once

#include <string>

namespace sprout::kube {

// kEncryptionConfigPath and kAuditPolicyPath are the files' paths relative to the
// Kubernetes folder, as ControlPlaneFiles names its files (pki/* under the PKI folder).
inline constexpr const char* kEncryptionConfigPath = "pki/encryption-config.yaml";
inline constexpr const char* kAuditPolicyPath = "audit-policy.yaml";

// kEncryptionKeyName names the key in the configuration; etcd values written with it
// begin "k8s:enc:aescbc:v1:sprout-1:".
inline constexpr const char* kEncryptionKeyName = "sprout-1";

// EncryptionConfigYaml is the EncryptionConfiguration (apiserver.config.k8s.io/v1) for
// Secrets: aescbc with key (base64 of 32 bytes) to write and read, then identity to read
// what was stored in the clear. An empty key (a cluster founded before sprout made
// one) gives identity alone: Secrets stay in the clear, as they were.
std::string EncryptionConfigYaml(const std::string& key);

// AuditPolicyYaml is the audit policy (audit.k8s.io/v1): every request at Metadata
// level (who, what, which object, when; never a request or response body, so no
// Secret's value reaches the log), except the health probes and the lease renewals of
// the controller-manager, the scheduler and the kubelets, which are not logged.
std::string AuditPolicyYaml();

}  // namespace sprout::kube
