// The workloads an image carries, as objects (docs/workloads.md): manifests split into
// their documents, checked against the APIs the image's Kubernetes serves, namespaces
// filled in, the images their pods run checked against the preload, put in the order a
// cluster applies them, and baked as the files the nodes read. Pure: text in, text out;
// builder/workloads.cc reads the files and runs Helm.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/diag.h"
#include "workloads/apis.h"

namespace sprout::workloads {

// Object is one Kubernetes object of a workload, as the cluster will get it. (clang-tidy
// sees a throw in the implicit move of any struct holding a nlohmann::json, whose
// assignment takes its argument by value; moving one does not throw.)
struct Object {  // NOLINT(bugprone-exception-escape)
  nlohmann::ordered_json body;
  std::string api_version, kind, ns, name;  // ns: after FillNamespaces; "" for a cluster-scoped object
  std::string file;                         // the manifest file, or the chart template that rendered it
  int line = 0;                             // its document's first line in file; 0 when rendered by a chart
  std::size_t workload = 0;                 // the index of its workload
  std::vector<std::string> images;          // the images its pods run, sorted, each once (CheckImages)
};

// Text is a manifest stream and where it came from.
struct Text {
  std::string file;       // the manifest file; for a chart's output, the chart as shown to the user
  bool rendered = false;  // a chart's output: `# Source:` comments name each document's template
  bool folder = false;    // rendered by a chart folder: its templates are files below file
  std::size_t workload = 0;
};

// Describe names an object for messages: "Deployment demo/web", "ClusterRole reader".
std::string Describe(const Object& o);

// At is where an object is, for messages.
Location At(const Object& o);

// ParseObjects splits text into its YAML documents (at `---` lines), drops the empty ones,
// expands a v1 List into its items, and reports each document that is not valid YAML,
// not a mapping, or has no apiVersion, kind or metadata.name.
std::vector<Object> ParseObjects(std::string_view text, const Text& from, Diagnostics& diags);

// IsHelmHook says whether o is a Helm hook (annotation helm.sh/hook): Helm runs those
// around its own install and upgrade, a moment a cluster that applies objects has not.
bool IsHelmHook(const Object& o);

// AddCrds adds to apis the kinds that the CustomResourceDefinitions among objects define,
// reporting a CRD that lacks a group, kind, scope or served version, or whose name is not
// PLURAL.GROUP.
void AddCrds(const std::vector<Object>& objects, ServedApis& apis, Diagnostics& diags);

// CheckServed reports each object whose apiVersion and kind apis does not serve, with the
// fix, and each that the cluster answers but does not keep (a review, a binding).
void CheckServed(const std::vector<Object>& objects, const ServedApis& apis, Diagnostics& diags);

// FillNamespaces gives each namespaced object that names no namespace the namespace of
// its workload (namespace_of[o.workload]), and takes it from a cluster-scoped object that
// names one (the API server drops it too).
void FillNamespaces(std::vector<Object>& objects, const std::vector<std::string>& namespace_of, const ServedApis& apis);

// CheckDuplicates reports each object that another one before it already is (the same
// group, kind, namespace and name): both would be applied, and the later would win.
void CheckDuplicates(const std::vector<Object>& objects, Diagnostics& diags);

// MissingNamespaces are Namespace objects for the namespaces objects use that neither
// Kubernetes (default, kube-system, ...) nor the objects themselves make, each in the
// workload that uses it first; applied like the rest, so a chart's namespace exists.
std::vector<Object> MissingNamespaces(const std::vector<Object>& objects);

// ImageUse is one image a pod of an object runs.
struct ImageUse {
  std::string image;        // as the manifest writes it
  std::string where;        // "spec.template.spec.containers[0]"
  std::string container;    // its name
  std::string pull_policy;  // as written; "" when left to the default
};

// PodImages lists the images of an object's pods: containers, init containers and
// ephemeral containers (and image volumes) of a Pod, and of the pod template of a
// Deployment, StatefulSet, DaemonSet, ReplicaSet, ReplicationController, PodTemplate, Job
// and CronJob (spec.jobTemplate.spec.template). Other kinds run no pods of their own.
std::vector<ImageUse> PodImages(const Object& o);

// CanonicalImage is an image reference as the container runtime resolves it: docker.io
// for a name without a registry, library/ before a one-part docker.io name, the tag
// latest when it has neither tag nor digest; nullopt when it is no reference.
std::optional<std::string> CanonicalImage(std::string_view ref);

// CheckImages sets each object's images and reports each image that is not among
// preloaded (the profile's `images:` references, compared canonically; an image pinned
// by digest matches an entry of that repository and digest), and each container whose
// pull policy would make the kubelet pull at every start (Always, or an image of the tag
// latest with no policy).
void CheckImages(std::vector<Object>& objects, const std::vector<std::string>& preloaded, Diagnostics& diags);

// Order puts the CustomResourceDefinitions first, then the Namespaces, then everything
// else, each group in the order given (the workloads' order, then their documents').
void Order(std::vector<Object>& objects);

// Workload is one workload as the index describes it.
struct Workload {
  std::string name;
  std::string type;    // "chart" or "manifests"
  std::string source;  // the chart or the manifests as the profile wrote them
  std::string release;
  std::string ns;
  std::string chart_version;  // "" for manifests
};

// Baked is what goes into the root under /usr/lib/sprout/workloads.
struct Baked {
  std::string index_json;            // index.json
  std::vector<std::string> objects;  // objects/0001.json, ...: one compact JSON object each, in order
  std::string digest;                // "sha256:" over the object files, concatenated in order
};

// ObjectFile is the name of the n-th object file (from 0): "objects/0001.json".
std::string ObjectFile(std::size_t n);

// Bake writes the index and the object files of ordered objects (Order's result).
Baked Bake(const std::vector<Workload>& workloads, const std::vector<Object>& ordered);

}  // namespace sprout::workloads
