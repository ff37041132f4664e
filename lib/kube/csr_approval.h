// sprout's approver of kubelet certificate signing requests (docs/formation.md, "A node's
// name is its own"). kubeadm's RBAC lets kube-controller-manager approve every node
// client request a bootstrap token makes, for any node name: so any holder of the worker
// secret could get system:node:node-2 and speak for node-2 (patch its addresses, read
// its pods' Secrets, take its kubectl exec). sprout takes that approval away from the
// controller-manager and decides itself, on the control-plane nodes:
//   - a bootstrap request for system:node:X is approved only when X is new (no Node X,
//     not a control-plane node's name, not in the record) or when it comes from the very
//     key X was first approved for; the approval is written first to the record, the
//     ConfigMap kube-system/sprout-node-identities (name -> key hash), so it lives in etcd
//     and survives a restore, and two approvers cannot give one name to two keys;
//   - a kubelet serving request is approved only from system:node:X itself, for the
//     name X and addresses inside the Shoot's node network (the one formation knows for
//     X, when it knows one), so the apiserver may verify kubelets against the cluster CA.
// Renewals of a node's client certificate (system:node:X asking for itself) stay with
// the controller-manager's own approver, which checks exactly that. Pure over plain
// structs and JSON text; firstboot/kube_agent.cc does the API calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kube/node_list.h"
#include "util/result.h"

namespace sprout::kube {

inline constexpr const char* kClientKubeletSigner = "kubernetes.io/kube-apiserver-client-kubelet";
inline constexpr const char* kKubeletServingSigner = "kubernetes.io/kubelet-serving";
inline constexpr const char* kIdentityRecordPath = "/api/v1/namespaces/kube-system/configmaps/sprout-node-identities";

// kMaxIdentityRecords bounds the record: a holder of the worker secret may claim new
// names, and each is a line in one ConfigMap (at most 1 MiB in etcd). Past it no new
// name is approved.
inline constexpr std::size_t kMaxIdentityRecords = 5000;

// CsrView is the part of a certificates.k8s.io/v1 CertificateSigningRequest the
// approver reads, with its PEM request decoded and parsed (pki::ParseCsr).
struct CsrView {
  std::string name;                 // metadata.name
  std::string signer;               // spec.signerName
  std::string username;             // spec.username: who created it, as the apiserver authenticated them
  std::vector<std::string> groups;  // spec.groups
  std::vector<std::string> usages;  // spec.usages
  bool decided = false;             // status.conditions holds Approved, Denied or Failed
  std::string request_problem;      // why spec.request could not be read ("" when it was)
  std::string common_name;          // of the request's subject
  int common_names = 0;
  std::vector<std::string> organizations;
  std::vector<std::string> dns_names;
  std::vector<std::string> ips;
  int other_names = 0;     // SANs that are neither DNS names nor addresses
  std::string key_sha256;  // "sha256:HEX" of the request's public key
  bool signature_ok = false;
  std::string json;  // the item as listed, for ApprovalBody
};

// ParseCsrList reads a CertificateSigningRequestList; items that are not objects are
// skipped, a request that does not decode has request_problem set. Never throws.
Result<std::vector<CsrView>> ParseCsrList(const std::string& json);

// IdentityRecord is kube-system/sprout-node-identities: the key each node name was
// first approved for, and when. exists is false when the ConfigMap is not there yet (404).
// restored_at is the latest time a control-plane node founded the cluster again from a
// backup (its annotation sprout.dev/restored-at): a restore means the nodes' disks, and
// so their keys, may be gone, so a worker name bound before it whose node has not been
// heard from since (its Lease in kube-node-lease not renewed) is open to first use
// again, once.
struct IdentityRecord {
  bool exists = false;
  std::string resource_version;                  // for a compare-and-swap update
  std::map<std::string, std::string> key_of;     // node name -> "sha256:HEX"
  std::map<std::string, std::int64_t> bound_at;  // node name -> Unix time of the approval (0: unknown)
  std::int64_t restored_at = 0;
};

// ParseIdentityRecord reads the ConfigMap (each value "sha256:HEX@UNIX-SECONDS"); an
// entry whose key is not "sha256:" and 64 hex digits is kept (it still binds its name)
// but never matches a key.
Result<IdentityRecord> ParseIdentityRecord(const std::string& json);

// ParseLeaseRenewals reads a LeaseList of kube-node-lease: each lease's name (the node's)
// and its spec.renewTime in Unix seconds. A lease without a readable time is left out.
Result<std::map<std::string, std::int64_t>> ParseLeaseRenewals(const std::string& json);

// IdentityRecordBody is the ConfigMap to create (POST, exists false) or to replace (PUT
// with the resourceVersion read, so a concurrent change makes it fail with 409).
std::string IdentityRecordBody(const IdentityRecord& record);

// What the approver knows of the cluster besides the request.
struct ApprovalFacts {
  std::set<std::string> nodes;          // names of the Node objects there are
  std::set<std::string> control_plane;  // formation's record: the etcd members' names
  KnownAddresses known;                 // and their addresses
  std::string node_network;             // the Shoot's networking.nodes ("" when it gives none)
  IdentityRecord record;
  std::map<std::string, std::int64_t> lease_renewed;  // node name -> its Lease's last renewal (ParseLeaseRenewals)
  std::int64_t now = 0;                               // Unix seconds, for the record's bound_at
};

struct CsrDecision {
  enum Kind { kLeave, kApprove, kDeny } kind = kLeave;
  std::string reason;  // for the condition's message and the log
  // With kApprove of a bootstrap request for a name the record lacks: the entry to add to
  // the record (and to write) before the approval.
  std::optional<std::pair<std::string, std::string>> record;
};

// DecideCsr decides one request. kLeave: not the approver's to decide (decided already,
// another signer, a renewal the controller-manager approves, a request from a user
// other than a bootstrap token or a node).
CsrDecision DecideCsr(const CsrView& csr, const ApprovalFacts& facts);

// ApprovalBody is the CSR object (its JSON as listed) with an Approved or Denied
// condition appended, for PUT .../certificatesigningrequests/NAME/approval.
Result<std::string> ApprovalBody(const std::string& csr_json, bool approve, const std::string& message);

}  // namespace sprout::kube
