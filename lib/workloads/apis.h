// The APIs an image's Kubernetes serves: kube-apiserver 1.36's with its default
// --runtime-config, and the kinds the workloads' own CustomResourceDefinitions add.
#pragma once

#include <string>
#include <vector>

namespace sprout::workloads {

// kServedMinor is the Kubernetes minor the built-in table is written for.
inline constexpr int kServedMinor = 36;

// kServedVersion is the version charts render against when the profile names none (the
// 1.36 stack's, docs/stack.md).
inline constexpr const char* kServedVersion = "1.36.5";

// ApiKind is one kind served at one group/version.
struct ApiKind {
  std::string api_version;  // "apps/v1", "v1"
  std::string kind;
  bool namespaced = true;
  // false: a request the API answers or a read-only view (TokenReview, ComponentStatus),
  // nothing a cluster stores and server-side apply could keep applied.
  bool stored = true;
};

// BuiltinApis is Kubernetes 1.36's table: every group/version kube-apiserver enables by
// default (pkg/controlplane's DefaultAPIResourceConfigSource: the GA versions, no beta or
// alpha), with apiextensions.k8s.io/v1 and apiregistration.k8s.io/v1, and their kinds (the
// top-level types k8s.io/api registers, less lists and options).
const std::vector<ApiKind>& BuiltinApis();

// GroupOf is the API group of an apiVersion ("" for the core group's "v1").
std::string GroupOf(const std::string& api_version);

// IsBuiltinNamespace says whether Kubernetes makes namespace ns itself.
bool IsBuiltinNamespace(const std::string& ns);

// ServedApis is what the image's cluster serves: the built-in table and the kinds that
// CRDs of the workloads define.
class ServedApis {
 public:
  ServedApis();

  // AddCrd adds the served versions of a CRD's kind; scope is "Namespaced" or "Cluster".
  void AddCrd(const std::string& group, const std::string& kind, const std::string& scope,
              const std::vector<std::string>& served_versions);

  // Find is the served kind, or nullptr.
  const ApiKind* Find(const std::string& api_version, const std::string& kind) const;

  // Suggest is the fix for an apiVersion and kind that are not served: the apiVersion
  // that serves the kind now (in the same group first), the nearest kind of a served
  // apiVersion, or the CRD to add.
  std::string Suggest(const std::string& api_version, const std::string& kind) const;

  // HelmApiVersions are the values of `helm template --api-versions`: each served
  // group/version, and each group/version/Kind, as .Capabilities.APIVersions holds them.
  std::vector<std::string> HelmApiVersions() const;

 private:
  std::vector<ApiKind> kinds_;
};

}  // namespace sprout::workloads
