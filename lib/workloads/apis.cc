#include "workloads/apis.h"

#include <algorithm>
#include <set>

#include "util/text.h"

namespace sprout::workloads {

namespace {

// The table, one group/version a line: its namespaced kinds, then its cluster-scoped
// ones, then the requests and read-only views among them.
struct GroupVersion {
  const char* api_version;
  std::vector<const char*> namespaced;
  std::vector<const char*> cluster;
  std::vector<const char*> not_stored;
};

const std::vector<GroupVersion>& Table() {
  static const std::vector<GroupVersion> table{
      {"v1",
       {"Pod", "PodTemplate", "ReplicationController", "Service", "Endpoints", "Event", "LimitRange", "ResourceQuota",
        "Secret", "ServiceAccount", "PersistentVolumeClaim", "ConfigMap", "Binding"},
       {"Node", "Namespace", "PersistentVolume", "ComponentStatus"},
       {"Binding", "ComponentStatus"}},
      {"admissionregistration.k8s.io/v1",
       {},
       {"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding", "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"},
       {}},
      {"apiextensions.k8s.io/v1", {}, {"CustomResourceDefinition"}, {}},
      {"apiregistration.k8s.io/v1", {}, {"APIService"}, {}},
      {"apps/v1", {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "ControllerRevision"}, {}, {}},
      {"authentication.k8s.io/v1", {}, {"TokenReview", "SelfSubjectReview"}, {"TokenReview", "SelfSubjectReview"}},
      {"authorization.k8s.io/v1",
       {"LocalSubjectAccessReview"},
       {"SelfSubjectRulesReview", "SelfSubjectAccessReview", "SubjectAccessReview"},
       {"LocalSubjectAccessReview", "SelfSubjectRulesReview", "SelfSubjectAccessReview", "SubjectAccessReview"}},
      {"autoscaling/v1", {"HorizontalPodAutoscaler"}, {}, {}},
      {"autoscaling/v2", {"HorizontalPodAutoscaler"}, {}, {}},
      {"batch/v1", {"Job", "CronJob"}, {}, {}},
      {"certificates.k8s.io/v1", {}, {"CertificateSigningRequest"}, {}},
      {"coordination.k8s.io/v1", {"Lease"}, {}, {}},
      {"discovery.k8s.io/v1", {"EndpointSlice"}, {}, {}},
      {"events.k8s.io/v1", {"Event"}, {}, {}},
      {"flowcontrol.apiserver.k8s.io/v1", {}, {"FlowSchema", "PriorityLevelConfiguration"}, {}},
      {"networking.k8s.io/v1", {"Ingress", "NetworkPolicy"}, {"IngressClass", "IPAddress", "ServiceCIDR"}, {}},
      {"node.k8s.io/v1", {}, {"RuntimeClass"}, {}},
      {"policy/v1", {"PodDisruptionBudget"}, {}, {}},
      {"rbac.authorization.k8s.io/v1", {"Role", "RoleBinding"}, {"ClusterRole", "ClusterRoleBinding"}, {}},
      {"resource.k8s.io/v1", {"ResourceClaim", "ResourceClaimTemplate"}, {"DeviceClass", "ResourceSlice"}, {}},
      {"scheduling.k8s.io/v1", {}, {"PriorityClass"}, {}},
      {"storage.k8s.io/v1",
       {"CSIStorageCapacity"},
       {"StorageClass", "VolumeAttachment", "CSINode", "CSIDriver", "VolumeAttributesClass"},
       {}},
  };
  return table;
}

std::vector<ApiKind> MakeBuiltins() {
  std::vector<ApiKind> out;
  for (const auto& gv : Table()) {
    auto stored = [&](const char* k) {
      return std::none_of(gv.not_stored.begin(), gv.not_stored.end(),
                          [&](const char* n) { return n == std::string(k); });
    };
    for (const char* k : gv.namespaced) out.push_back({gv.api_version, k, true, stored(k)});
    for (const char* k : gv.cluster) out.push_back({gv.api_version, k, false, stored(k)});
  }
  return out;
}

}  // namespace

const std::vector<ApiKind>& BuiltinApis() {
  static const std::vector<ApiKind> builtins = MakeBuiltins();
  return builtins;
}

std::string GroupOf(const std::string& api_version) {
  auto slash = api_version.find('/');
  return slash == std::string::npos ? "" : api_version.substr(0, slash);
}

bool IsBuiltinNamespace(const std::string& ns) {
  return ns == "default" || ns == "kube-system" || ns == "kube-public" || ns == "kube-node-lease";
}

ServedApis::ServedApis() : kinds_(BuiltinApis()) {}

void ServedApis::AddCrd(const std::string& group, const std::string& kind, const std::string& scope,
                        const std::vector<std::string>& served_versions) {
  for (const auto& v : served_versions) {
    if (Find(group + "/" + v, kind)) continue;
    kinds_.push_back({group + "/" + v, kind, scope != "Cluster", true});
  }
}

const ApiKind* ServedApis::Find(const std::string& api_version, const std::string& kind) const {
  for (const auto& k : kinds_) {
    if (k.api_version == api_version && k.kind == kind) return &k;
  }
  return nullptr;
}

std::string ServedApis::Suggest(const std::string& api_version, const std::string& kind) const {
  if (kind == "PodSecurityPolicy") {
    return "PodSecurityPolicy was removed in Kubernetes 1.25; Pod Security admission replaces it (the namespace "
           "label pod-security.kubernetes.io/enforce)";
  }
  const std::string group = GroupOf(api_version);
  // The kind where the cluster serves it now: in the same group (its newest version,
  // the last in the table), else in every other group that has it.
  std::string same_group;
  std::vector<std::string> elsewhere;
  for (const auto& k : kinds_) {
    if (k.kind != kind) continue;
    if (GroupOf(k.api_version) == group) {
      same_group = k.api_version;
    } else if (std::find(elsewhere.begin(), elsewhere.end(), k.api_version) == elsewhere.end()) {
      elsewhere.push_back(k.api_version);
    }
  }
  const std::string served = "Kubernetes 1." + std::to_string(kServedMinor) + " serves " + kind;
  if (!same_group.empty()) return "use 'apiVersion: " + same_group + "'; " + served + " there";
  if (elsewhere.size() == 1) return "use 'apiVersion: " + elsewhere[0] + "'; " + served + " there";
  if (!elsewhere.empty()) return "use one of the apiVersions that serve " + kind + ": " + Join(elsewhere, ", ");
  // A served group/version without that kind: a typo of one of its kinds?
  std::vector<std::string> kinds_here;
  for (const auto& k : kinds_) {
    if (k.api_version == api_version) kinds_here.push_back(k.kind);
  }
  if (!kinds_here.empty()) {
    if (auto guess = ClosestMatch(kind, kinds_here)) return "did you mean '" + *guess + "'?";
    return api_version + " serves " + Join(kinds_here, ", ");
  }
  return "no CustomResourceDefinition in the workloads defines " + kind + " in " + api_version +
         ": add the CRD to the workloads, or correct the apiVersion";
}

std::vector<std::string> ServedApis::HelmApiVersions() const {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& k : kinds_) {
    if (seen.insert(k.api_version).second) out.push_back(k.api_version);
    out.push_back(k.api_version + "/" + k.kind);
  }
  return out;
}

}  // namespace sprout::workloads
