// The site's workloads on the node (docs/workloads-node.md): what the build baked under
// /usr/lib/sprout/workloads (index.json and one object a file), and what the applier on a
// control-plane node decides from it and from the API: each object's REST path, the
// order of the applies, what to prune, whether to apply at all, and the Lease that lets
// one node at a time do it. Pure over plain structs and JSON text; the HTTP side is
// firstboot/workloads.cc over kube/api.h.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "util/result.h"

namespace sprout::kube {

// The names sprout uses in the cluster.
inline constexpr const char* kWorkloadsFieldManager = "sprout";
inline constexpr const char* kWorkloadsNamespace = "kube-system";
inline constexpr const char* kWorkloadsRecord = "sprout-workloads";  // the ConfigMap
inline constexpr const char* kWorkloadsLease = "sprout-workloads";   // the Lease

// ObjectRef names one object. Two refs are the same object when their group (the
// apiVersion without its version), kind, namespace and name are: a new build that moves
// a Deployment from one version of its group to another carries the same object.
struct ObjectRef {
  std::string api_version;  // apps/v1, v1
  std::string kind;
  std::string ns;  // "" for a cluster-scoped object
  std::string name;
  bool operator==(const ObjectRef&) const = default;
};

// GroupOf is "apps" for "apps/v1" and "" (the core group) for "v1".
std::string GroupOf(const std::string& api_version);

// IdentityOf is "GROUP/KIND/NAMESPACE/NAME", what ObjectRef's sameness compares.
std::string IdentityOf(const ObjectRef& r);

// Describe is "Deployment demo/web" or "Namespace demo", for messages.
std::string Describe(const ObjectRef& r);

// WorkloadObject is one entry of a workload's objects in index.json.
struct WorkloadObject {
  std::string file;  // relative to the workloads folder: objects/0001.json
  ObjectRef ref;
  std::vector<std::string> images;
};

// Workload is one entry of index.json's workloads: a chart or a set of manifests.
struct Workload {
  std::string name;
  std::string type;  // chart | manifests
  std::string source;
  std::string release;
  std::string ns;
  std::string chart_version;
  std::vector<WorkloadObject> objects;
};

// WorkloadIndex is index.json: version 1, the digest of the whole set, the workloads.
// serial is the build's update serial when the index carries one (0: unknown).
struct WorkloadIndex {
  std::string digest;
  std::int64_t serial = 0;
  std::vector<Workload> workloads;
};

// ParseWorkloadIndex reads index.json; file names it in the errors. Every problem is
// collected into one error ("FILE: workloads[0].objects[2]: no kind; ..."); it never
// throws. An object's file must stay inside the folder (relative, no ".."), and no object
// may be listed twice.
Result<WorkloadIndex> ParseWorkloadIndex(const std::string& json, const std::string& file);

// RefsOf is every object of the index, in the index's order.
std::vector<ObjectRef> RefsOf(const WorkloadIndex& index);

// Resource is where the API serves a kind: its plural and whether it is namespaced.
struct Resource {
  std::string group;
  std::string kind;
  std::string plural;
  bool namespaced = true;
};

// BuiltinResource is the built-in table of the common kinds of Kubernetes 1.36 (core,
// apps, batch, RBAC, networking, policy, storage, admission, ...); nullopt for others.
std::optional<Resource> BuiltinResource(const std::string& group, const std::string& kind);

// CrdResource is what a CustomResourceDefinition declares: spec.group, spec.names.kind,
// spec.names.plural and spec.scope. version is its storage version (else the first
// served one). nullopt when crd is not a CRD with those fields.
struct CrdNames {
  Resource resource;
  std::string name;  // metadata.name (PLURAL.GROUP)
  std::string version;
};
std::optional<CrdNames> CrdResource(const nlohmann::json& crd);

// ParseApiResourceList reads a discovery APIResourceList (GET /api/v1, /apis/G/V): its
// top-level resources (not subresources) that can be listed, with their group.
Result<std::vector<Resource>> ParseApiResourceList(const std::string& json);

// ParseApiGroupList reads GET /apis: the preferred groupVersion of each group.
Result<std::vector<std::string>> ParseApiGroupList(const std::string& json);

// ObjectPath is the REST path of one object (/api/v1/namespaces/NS/configmaps/NAME,
// /apis/apps/v1/namespaces/NS/deployments/NAME, /apis/G/V/PLURAL/NAME for a
// cluster-scoped one). A namespaced kind with no namespace is an error; a cluster-scoped
// kind ignores one.
Result<std::string> ObjectPath(const ObjectRef& r, const Resource& res);

// CollectionPath is the list path of a resource: in namespace ns, or of all namespaces
// (or cluster-scoped) when ns is "".
std::string CollectionPath(const std::string& api_version, const Resource& res, const std::string& ns);

// Phase is where an object goes in the apply order.
enum class Phase { kCrd, kNamespace, kRest };
Phase PhaseOf(const ObjectRef& r);

// LoadedObject is an index entry with its file read: the object to send, and what went
// wrong reading it ("" when nothing). (clang-tidy takes nlohmann::json's special
// members for ones that may throw.)
struct LoadedObject {  // NOLINT(bugprone-exception-escape)
  std::string workload;
  WorkloadObject entry;
  nlohmann::json body;
  std::string problem;
};

// CheckObject is "" when body is one Kubernetes object that matches its index entry
// (apiVersion, kind, name, and namespace where it has one), else what differs.
std::string CheckObject(const WorkloadObject& entry, const nlohmann::json& body);

// kWorkloadAnnotation names, on every object sprout applies, the workload it belongs
// to. It is the one thing the node adds to what the build rendered: it gives sprout a
// field of its own in every object, so that its managedFields name sprout even when the
// object sets nothing else (a Namespace with only a name has no managed field at all,
// and its managedFields would not say who applied it).
inline constexpr const char* kWorkloadAnnotation = "sprout/workload";

// ApplyBody is the body of the server-side apply of an object of workload: the object as
// baked, with kWorkloadAnnotation set.
std::string ApplyBody(const nlohmann::json& body, const std::string& workload);

// ApplyStep is one object in the apply order: CRDs, then Namespaces, then the rest, each
// in the index's order. crd is the name of the CRD in the set that defines its kind
// ("" when none does): it is applied only once that CRD is Established.
struct ApplyStep {
  std::size_t object = 0;  // index into the loaded objects
  Phase phase = Phase::kRest;
  std::string crd;
};
std::vector<ApplyStep> ApplyOrder(const std::vector<LoadedObject>& objects);

// ResourceTable is where each kind of the set is served: the built-in table, then what
// the set's CRDs declare, then what discovery found (added by the applier).
class ResourceTable {
 public:
  explicit ResourceTable(const std::vector<LoadedObject>& objects);
  std::optional<Resource> Find(const std::string& group, const std::string& kind) const;
  void Add(const Resource& r);

 private:
  std::map<std::string, Resource> extra_;  // "GROUP/KIND"
};

// CrdEstablished is true when a CRD's status.conditions say Established True.
bool CrdEstablished(const std::string& crd_json);

// ApiMessage is what the API said: a Status's message when the body is one, else the
// HTTP status with the start of the body.
std::string ApiMessage(long status, const std::string& body);

// AppliedBySprout is true when an object's metadata.managedFields has an entry of manager
// "sprout": sprout applied it (an object a user made by hand has none).
bool AppliedBySprout(const nlohmann::json& object);

// The record: the ConfigMap kube-system/sprout-workloads, written after each pass.
struct WorkloadRecord {
  std::string digest;                         // of the index whose objects were applied
  std::int64_t serial = 0;                    // that build's serial (0: unknown)
  std::string node;                           // the node that wrote it
  std::vector<ObjectRef> objects;             // what sprout applied and has not pruned
  std::map<std::string, std::string> status;  // workload name -> "applied (5 objects)", "failed: ..."
};

// ParseRecord reads the record from a ConfigMap's JSON; never throws.
Result<WorkloadRecord> ParseRecord(const std::string& configmap_json);

// RecordConfigMap is the record as a v1 ConfigMap for a server-side apply.
std::string RecordConfigMap(const WorkloadRecord& r);

// NextRecord is what the record holds after a pass: the objects of the index that were
// applied now or were in the old record (applied earlier), and the old record's objects
// the index no longer carries that were not pruned (still to do, or kept) — never an
// object sprout has not applied. forgotten are dropped: pruned, gone, or taken over by
// someone else.
std::vector<ObjectRef> NextRecord(const std::vector<ObjectRef>& old_record, const std::vector<ObjectRef>& index,
                                  const std::set<std::string>& applied_now, const std::set<std::string>& forgotten);

// PruneSet is the objects of the record that the index does not carry, in the order to
// delete them: the rest first, then Namespaces, then CRDs (deleting those deletes what
// they hold, so they go once their own objects are gone).
std::vector<ObjectRef> PruneSet(const std::vector<ObjectRef>& record, const std::vector<ObjectRef>& index);

// ForeignObjects are the items of a List (of one resource, in a Namespace or of a CRD's
// kind) that would go with it but that sprout would not delete itself: not in sprout_set
// (identities), not owned by another object (ownerReferences: they go with their owner,
// which is counted itself), and not what Kubernetes makes in every namespace (the
// ServiceAccount default, the ConfigMap kube-root-ca.crt, Events, Endpoints). Each as
// Describe() gives it.
std::vector<std::string> ForeignObjects(const std::string& list_json, const std::string& api_version,
                                        const Resource& res, const std::set<std::string>& sprout_set);

// The decision whether to apply, from the record in the cluster and this node's image.
enum class Decision { kApply, kInSync, kSkip };
struct ApplyDecision {
  Decision decision = Decision::kApply;
  std::string why;
};

// Decide applies when there is no record (a fresh cluster, or a restore from a backup
// older than the workloads), at every start of the applier (server-side apply is
// idempotent), and when the record comes from another build of a lower serial (an
// update brings new versions). It never applies over a record of a higher serial (a node
// not yet updated, during a rolling update, must not bring the old versions back); and
// between builds of one serial (or unknown serials) with different digests it applies
// only at its start, so two such nodes do not take turns for ever.
ApplyDecision Decide(const std::optional<WorkloadRecord>& record, const WorkloadIndex& image, bool at_start);

// WorkloadState is one workload's state after a pass.
enum class ObjectState { kApplied, kPending, kFailed };
struct ObjectResult {
  ObjectState state = ObjectState::kPending;
  std::string message;  // the API's message (failed) or what it waits for (pending)
};

// StatusLine is a workload's state in one line: "applied (5 objects)", "pending: 1 of 5
// objects: Widget demo/w1: waiting for ...", "failed: 1 of 5 objects: ConfigMap demo/x:
// <the API's message>". results is by object index; objects the workload's.
std::string StatusLine(const std::vector<std::size_t>& objects, const std::vector<LoadedObject>& loaded,
                       const std::vector<ObjectResult>& results);

// StateOf is "applied", "pending" or "failed", the first word of a status line.
std::string StateOf(const std::string& status_line);

// The Lease kube-system/sprout-workloads (coordination.k8s.io/v1).
struct LeaseView {
  std::string holder;  // spec.holderIdentity ("" released)
  std::int64_t duration = 0;
  std::string resource_version;
  std::int64_t transitions = 0;
  std::string acquire_time;
};
Result<LeaseView> ParseLease(const std::string& json);

// LeaseBody is the Lease held by holder ("" releases it), renewed at now_micro (a
// MicroTime, RFC 3339 with microseconds); resource_version "" for a create.
std::string LeaseBody(const std::string& holder, std::int64_t duration, const std::string& resource_version,
                      std::int64_t transitions, const std::string& acquire_time, const std::string& now_micro);

// LeaseSeen is what this node saw of another holder's Lease: its resourceVersion and when
// (seconds of this node's monotonic clock) it last changed. Expiry is judged by this
// node's own clock, never by the renewTime another node wrote: the nodes' clocks may
// differ.
struct LeaseSeen {
  std::string resource_version;
  std::int64_t since = 0;
};

enum class LeaseStep { kCreate, kRenew, kTakeOver, kWait };

// DecideLease: create a missing Lease; renew one held by this node; take over one
// released, or one whose resourceVersion has not changed for its duration as seen
// here (its holder stopped renewing); else wait. seen is updated.
LeaseStep DecideLease(const std::optional<LeaseView>& lease, const std::string& me, std::int64_t now, LeaseSeen& seen);

// EventBody is a v1 Event in kube-system about the record ConfigMap (kubectl get events
// -n kube-system shows it): reason (Applied, ApplyFailed, ApplyPending, Pruned,
// PruneKept), a Warning when warning, from sprout-firstboot on node, at now (RFC 3339).
std::string EventBody(const std::string& reason, const std::string& message, bool warning, const std::string& node,
                      const std::string& now);

// RetryDelay is the wait before retry number attempt (1, 2, ...): 5 s doubling to 5 min.
std::int64_t RetryDelay(int attempt);

// kMaxRetries bounds the retries of one start; the next start tries again.
inline constexpr int kMaxRetries = 20;

}  // namespace sprout::kube
