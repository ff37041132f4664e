#include "kube/workloads.h"

#include <algorithm>
#include <cctype>

#include "util/json_field.h"
#include "util/text.h"

namespace sprout::kube {

namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

const json& Field(const json& o, const char* key) {
  static const json kNull;
  if (!o.is_object()) return kNull;
  auto it = o.find(key);
  return it == o.end() ? kNull : *it;
}

bool IsSha256Digest(const std::string& d) {
  if (!d.starts_with("sha256:") || d.size() != 7 + 64) return false;
  return std::all_of(d.begin() + 7, d.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
}

// SafeRelative is true for a path inside the folder: relative, no "..", no empty part.
bool SafeRelative(const std::string& p) {
  if (p.empty() || p.front() == '/') return false;
  for (const auto& part : Split(p, '/')) {
    if (part.empty() || part == "." || part == "..") return false;
  }
  return true;
}

}  // namespace

std::string GroupOf(const std::string& api_version) {
  const auto slash = api_version.find('/');
  return slash == std::string::npos ? "" : api_version.substr(0, slash);
}

std::string IdentityOf(const ObjectRef& r) { return GroupOf(r.api_version) + "/" + r.kind + "/" + r.ns + "/" + r.name; }

std::string Describe(const ObjectRef& r) { return r.kind + " " + (r.ns.empty() ? "" : r.ns + "/") + r.name; }

Result<WorkloadIndex> ParseWorkloadIndex(const std::string& text, const std::string& file) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return Fail(file + ": not a JSON object; the image's workloads index is damaged (rebuild the image)");
  }
  std::vector<std::string> problems;
  const auto version = JsonUnsigned(j, "version");
  if (!version) {
    problems.emplace_back("no version number");
  } else if (*version != 1) {
    problems.push_back("version " + std::to_string(*version) +
                       " is not 1, the one this sprout-firstboot reads (a newer builder wrote it)");
  }
  WorkloadIndex index;
  index.digest = JsonString(j, "digest").value_or("");
  if (!IsSha256Digest(index.digest)) problems.push_back("digest '" + index.digest + "' is not sha256:<64 hex digits>");
  if (j.contains("serial")) {
    if (auto s = JsonUnsigned(j, "serial")) {
      index.serial = static_cast<std::int64_t>(*s);
    } else {
      problems.emplace_back("serial is not a whole number");
    }
  }
  const json& workloads = Field(j, "workloads");
  if (!workloads.is_array()) {
    problems.emplace_back("workloads is not a list");
    return Fail(file + ": " + Join(problems, "; "));
  }
  std::map<std::string, std::string> seen;  // identity -> where
  std::set<std::string> names;
  for (std::size_t w = 0; w < workloads.size(); ++w) {
    const json& wj = workloads[w];
    const std::string at = "workloads[" + std::to_string(w) + "]";
    if (!wj.is_object()) {
      problems.push_back(at + " is not an object");
      continue;
    }
    Workload wl;
    wl.name = JsonString(wj, "name").value_or("");
    wl.type = JsonString(wj, "type").value_or("");
    wl.source = JsonString(wj, "source").value_or("");
    wl.release = JsonString(wj, "release").value_or("");
    wl.ns = JsonString(wj, "namespace").value_or("");
    wl.chart_version = JsonString(wj, "chartVersion").value_or("");
    if (wl.name.empty()) problems.push_back(at + ": no name");
    if (!wl.name.empty() && !names.insert(wl.name).second) problems.push_back(at + ": the name " + wl.name + " twice");
    if (wl.type != "chart" && wl.type != "manifests") {
      problems.push_back(at + ": type '" + wl.type + "' is neither chart nor manifests");
    }
    const json& objects = Field(wj, "objects");
    if (!objects.is_array()) {
      problems.push_back(at + ": objects is not a list");
      continue;
    }
    for (std::size_t i = 0; i < objects.size(); ++i) {
      const json& oj = objects[i];
      std::string where = at + ".objects[" + std::to_string(i) + "]";
      if (!oj.is_object()) {
        problems.push_back(where + " is not an object");
        continue;
      }
      WorkloadObject o;
      o.file = JsonString(oj, "file").value_or("");
      if (!o.file.empty()) where += " (" + o.file + ")";
      o.ref.api_version = JsonString(oj, "apiVersion").value_or("");
      o.ref.kind = JsonString(oj, "kind").value_or("");
      o.ref.ns = JsonString(oj, "namespace").value_or("");
      o.ref.name = JsonString(oj, "name").value_or("");
      std::vector<std::string> missing;
      if (o.file.empty()) missing.emplace_back("file");
      if (o.ref.api_version.empty()) missing.emplace_back("apiVersion");
      if (o.ref.kind.empty()) missing.emplace_back("kind");
      if (o.ref.name.empty()) missing.emplace_back("name");
      if (!missing.empty()) problems.push_back(where + ": no " + Join(missing, ", no "));
      if (!o.file.empty() && !SafeRelative(o.file)) {
        problems.push_back(where + ": the file must be a relative path inside the workloads folder");
      }
      const json& images = Field(oj, "images");
      if (images.is_array()) {
        for (const auto& im : images) {
          if (im.is_string()) o.images.push_back(im.get<std::string>());
        }
      }
      if (missing.empty()) {
        auto [it, fresh] = seen.emplace(IdentityOf(o.ref), where);
        if (!fresh) problems.push_back(where + ": " + Describe(o.ref) + " is listed twice (also " + it->second + ")");
      }
      wl.objects.push_back(std::move(o));
    }
    index.workloads.push_back(std::move(wl));
  }
  if (!problems.empty()) return Fail(file + ": " + Join(problems, "; "));
  return index;
}

std::vector<ObjectRef> RefsOf(const WorkloadIndex& index) {
  std::vector<ObjectRef> out;
  for (const auto& w : index.workloads) {
    for (const auto& o : w.objects) out.push_back(o.ref);
  }
  return out;
}

std::optional<Resource> BuiltinResource(const std::string& group, const std::string& kind) {
  struct Row {
    const char* group;
    const char* kind;
    const char* plural;
    bool namespaced;
  };
  static const Row kRows[] = {
      {"", "Namespace", "namespaces", false},
      {"", "ConfigMap", "configmaps", true},
      {"", "Secret", "secrets", true},
      {"", "Service", "services", true},
      {"", "ServiceAccount", "serviceaccounts", true},
      {"", "Pod", "pods", true},
      {"", "PodTemplate", "podtemplates", true},
      {"", "PersistentVolumeClaim", "persistentvolumeclaims", true},
      {"", "PersistentVolume", "persistentvolumes", false},
      {"", "Endpoints", "endpoints", true},
      {"", "LimitRange", "limitranges", true},
      {"", "ResourceQuota", "resourcequotas", true},
      {"", "ReplicationController", "replicationcontrollers", true},
      {"", "Event", "events", true},
      {"", "Node", "nodes", false},
      {"apps", "Deployment", "deployments", true},
      {"apps", "StatefulSet", "statefulsets", true},
      {"apps", "DaemonSet", "daemonsets", true},
      {"apps", "ReplicaSet", "replicasets", true},
      {"apps", "ControllerRevision", "controllerrevisions", true},
      {"batch", "Job", "jobs", true},
      {"batch", "CronJob", "cronjobs", true},
      {"autoscaling", "HorizontalPodAutoscaler", "horizontalpodautoscalers", true},
      {"policy", "PodDisruptionBudget", "poddisruptionbudgets", true},
      {"rbac.authorization.k8s.io", "Role", "roles", true},
      {"rbac.authorization.k8s.io", "RoleBinding", "rolebindings", true},
      {"rbac.authorization.k8s.io", "ClusterRole", "clusterroles", false},
      {"rbac.authorization.k8s.io", "ClusterRoleBinding", "clusterrolebindings", false},
      {"networking.k8s.io", "Ingress", "ingresses", true},
      {"networking.k8s.io", "IngressClass", "ingressclasses", false},
      {"networking.k8s.io", "NetworkPolicy", "networkpolicies", true},
      {"discovery.k8s.io", "EndpointSlice", "endpointslices", true},
      {"coordination.k8s.io", "Lease", "leases", true},
      {"events.k8s.io", "Event", "events", true},
      {"scheduling.k8s.io", "PriorityClass", "priorityclasses", false},
      {"storage.k8s.io", "StorageClass", "storageclasses", false},
      {"storage.k8s.io", "CSIDriver", "csidrivers", false},
      {"storage.k8s.io", "CSINode", "csinodes", false},
      {"storage.k8s.io", "VolumeAttachment", "volumeattachments", false},
      {"node.k8s.io", "RuntimeClass", "runtimeclasses", false},
      {"apiextensions.k8s.io", "CustomResourceDefinition", "customresourcedefinitions", false},
      {"apiregistration.k8s.io", "APIService", "apiservices", false},
      {"admissionregistration.k8s.io", "MutatingWebhookConfiguration", "mutatingwebhookconfigurations", false},
      {"admissionregistration.k8s.io", "ValidatingWebhookConfiguration", "validatingwebhookconfigurations", false},
      {"admissionregistration.k8s.io", "ValidatingAdmissionPolicy", "validatingadmissionpolicies", false},
      {"admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings", false},
      {"certificates.k8s.io", "CertificateSigningRequest", "certificatesigningrequests", false},
      {"flowcontrol.apiserver.k8s.io", "FlowSchema", "flowschemas", false},
      {"flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration", "prioritylevelconfigurations", false},
  };
  for (const auto& r : kRows) {
    if (group == r.group && kind == r.kind) return Resource{r.group, r.kind, r.plural, r.namespaced};
  }
  return std::nullopt;
}

std::optional<CrdNames> CrdResource(const json& crd) {
  if (JsonString(crd, "kind").value_or("") != "CustomResourceDefinition") return std::nullopt;
  if (GroupOf(JsonString(crd, "apiVersion").value_or("")) != "apiextensions.k8s.io") return std::nullopt;
  const json& spec = Field(crd, "spec");
  const json& names = Field(spec, "names");
  CrdNames c;
  c.name = JsonString(Field(crd, "metadata"), "name").value_or("");
  c.resource.group = JsonString(spec, "group").value_or("");
  c.resource.kind = JsonString(names, "kind").value_or("");
  c.resource.plural = JsonString(names, "plural").value_or("");
  c.resource.namespaced = JsonString(spec, "scope").value_or("Namespaced") != "Cluster";
  if (c.resource.group.empty() || c.resource.kind.empty() || c.resource.plural.empty()) return std::nullopt;
  const json& versions = Field(spec, "versions");
  if (versions.is_array()) {
    for (const auto& v : versions) {
      const json& storage = Field(v, "storage");
      if (storage.is_boolean() && storage.get<bool>()) c.version = JsonString(v, "name").value_or("");
    }
    if (c.version.empty()) {
      for (const auto& v : versions) {
        const json& served = Field(v, "served");
        if (c.version.empty() && served.is_boolean() && served.get<bool>()) {
          c.version = JsonString(v, "name").value_or("");
        }
      }
    }
  }
  return c;
}

Result<std::vector<Resource>> ParseApiResourceList(const std::string& text) {
  const json j = json::parse(text, nullptr, false);
  const json& resources = Field(j, "resources");
  if (!resources.is_array()) return Fail("the API's discovery answer is not an APIResourceList");
  const std::string group = GroupOf(JsonString(j, "groupVersion").value_or(""));
  std::vector<Resource> out;
  for (const auto& r : resources) {
    Resource res;
    res.group = group;
    res.plural = JsonString(r, "name").value_or("");
    res.kind = JsonString(r, "kind").value_or("");
    const json& namespaced = Field(r, "namespaced");
    res.namespaced = namespaced.is_boolean() && namespaced.get<bool>();
    if (res.plural.empty() || res.kind.empty() || res.plural.find('/') != std::string::npos) continue;
    bool list = false;
    const json& verbs = Field(r, "verbs");
    if (verbs.is_array()) {
      for (const auto& v : verbs) list |= v.is_string() && v.get<std::string>() == "list";
    }
    if (list) out.push_back(std::move(res));
  }
  return out;
}

Result<std::vector<std::string>> ParseApiGroupList(const std::string& text) {
  const json j = json::parse(text, nullptr, false);
  const json& groups = Field(j, "groups");
  if (!groups.is_array()) return Fail("the API's discovery answer is not an APIGroupList");
  std::vector<std::string> out;
  for (const auto& g : groups) {
    auto gv = JsonString(Field(g, "preferredVersion"), "groupVersion");
    if (gv && !gv->empty()) out.push_back(*gv);
  }
  return out;
}

std::string CollectionPath(const std::string& api_version, const Resource& res, const std::string& ns) {
  std::string path = res.group.empty() ? "/api/" + api_version : "/apis/" + api_version;
  if (res.namespaced && !ns.empty()) path += "/namespaces/" + ns;
  return path + "/" + res.plural;
}

Result<std::string> ObjectPath(const ObjectRef& r, const Resource& res) {
  if (res.namespaced && r.ns.empty()) {
    return Fail(Describe(r) + ": the kind " + r.kind + " is namespaced, and the object names no namespace");
  }
  // The core group's apiVersion is "v1"; a group's is "GROUP/VERSION".
  if (res.group.empty() != (r.api_version.find('/') == std::string::npos)) {
    return Fail(Describe(r) + ": apiVersion " + r.api_version + " is not of the group '" + res.group + "'");
  }
  return CollectionPath(r.api_version, res, r.ns) + "/" + r.name;
}

Phase PhaseOf(const ObjectRef& r) {
  const std::string group = GroupOf(r.api_version);
  if (group == "apiextensions.k8s.io" && r.kind == "CustomResourceDefinition") return Phase::kCrd;
  if (group.empty() && r.kind == "Namespace") return Phase::kNamespace;
  return Phase::kRest;
}

std::string CheckObject(const WorkloadObject& entry, const json& body) {
  if (!body.is_object()) return "the file does not hold one JSON object";
  const json& meta = Field(body, "metadata");
  ObjectRef got{JsonString(body, "apiVersion").value_or(""), JsonString(body, "kind").value_or(""),
                JsonString(meta, "namespace").value_or(""), JsonString(meta, "name").value_or("")};
  std::vector<std::string> differ;
  if (got.api_version != entry.ref.api_version) differ.push_back("apiVersion '" + got.api_version + "'");
  if (got.kind != entry.ref.kind) differ.push_back("kind '" + got.kind + "'");
  if (got.name != entry.ref.name) differ.push_back("name '" + got.name + "'");
  if (!got.ns.empty() && got.ns != entry.ref.ns) differ.push_back("namespace '" + got.ns + "'");
  if (differ.empty()) return "";
  return "the file holds " + Join(differ, ", ") + " where the index says " + Describe(entry.ref) + " (" +
         entry.ref.api_version + "); the image's workloads are damaged (rebuild it)";
}

std::string ApplyBody(const json& body, const std::string& workload) {
  json out = body;
  if (!out.is_object()) return out.dump();
  if (!out.contains("metadata") || !out["metadata"].is_object()) out["metadata"] = json::object();
  json& meta = out["metadata"];
  if (!meta.contains("annotations") || !meta["annotations"].is_object()) meta["annotations"] = json::object();
  meta["annotations"][kWorkloadAnnotation] = workload;
  return out.dump();
}

std::vector<ApplyStep> ApplyOrder(const std::vector<LoadedObject>& objects) {
  std::map<std::string, std::string> crd_of;  // "GROUP/KIND" -> the CRD's name
  for (const auto& o : objects) {
    if (!o.problem.empty() || PhaseOf(o.entry.ref) != Phase::kCrd) continue;
    if (auto c = CrdResource(o.body)) crd_of[c->resource.group + "/" + c->resource.kind] = c->name;
  }
  std::vector<ApplyStep> steps;
  for (std::size_t i = 0; i < objects.size(); ++i) {
    ApplyStep s;
    s.object = i;
    s.phase = PhaseOf(objects[i].entry.ref);
    auto it = crd_of.find(GroupOf(objects[i].entry.ref.api_version) + "/" + objects[i].entry.ref.kind);
    if (it != crd_of.end()) s.crd = it->second;
    steps.push_back(s);
  }
  std::stable_sort(steps.begin(), steps.end(), [](const ApplyStep& a, const ApplyStep& b) {
    return static_cast<int>(a.phase) < static_cast<int>(b.phase);
  });
  return steps;
}

ResourceTable::ResourceTable(const std::vector<LoadedObject>& objects) {
  for (const auto& o : objects) {
    if (!o.problem.empty() || PhaseOf(o.entry.ref) != Phase::kCrd) continue;
    if (auto c = CrdResource(o.body)) Add(c->resource);
  }
}

std::optional<Resource> ResourceTable::Find(const std::string& group, const std::string& kind) const {
  if (auto r = BuiltinResource(group, kind)) return r;
  auto it = extra_.find(group + "/" + kind);
  if (it != extra_.end()) return it->second;
  return std::nullopt;
}

void ResourceTable::Add(const Resource& r) { extra_[r.group + "/" + r.kind] = r; }

bool CrdEstablished(const std::string& crd_json) {
  const json j = json::parse(crd_json, nullptr, false);
  const json& conditions = Field(Field(j, "status"), "conditions");
  if (!conditions.is_array()) return false;
  for (const auto& c : conditions) {
    if (JsonString(c, "type").value_or("") == "Established") return JsonString(c, "status").value_or("") == "True";
  }
  return false;
}

std::string ApiMessage(long status, const std::string& body) {
  const json j = json::parse(body, nullptr, false);
  if (JsonString(j, "kind").value_or("") == "Status") {
    if (auto m = JsonString(j, "message"); m && !m->empty()) return *m;
  }
  std::string start = body.substr(0, 200);
  for (char& c : start) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return "HTTP " + std::to_string(status) + (start.empty() ? "" : ": " + start);
}

bool AppliedBySprout(const json& object) {
  const json& fields = Field(Field(object, "metadata"), "managedFields");
  if (!fields.is_array()) return false;
  return std::any_of(fields.begin(), fields.end(),
                     [](const json& f) { return JsonString(f, "manager").value_or("") == kWorkloadsFieldManager; });
}

namespace {

ojson RefJson(const ObjectRef& r) {
  ojson o;
  o["apiVersion"] = r.api_version;
  o["kind"] = r.kind;
  o["namespace"] = r.ns;
  o["name"] = r.name;
  return o;
}

}  // namespace

Result<WorkloadRecord> ParseRecord(const std::string& configmap_json) {
  const json j = json::parse(configmap_json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Fail("the record ConfigMap is not JSON");
  const json& data = Field(j, "data");
  if (!data.is_object()) return Fail("the record ConfigMap has no data");
  WorkloadRecord r;
  r.digest = JsonString(data, "digest").value_or("");
  r.node = JsonString(data, "node").value_or("");
  const std::string serial = JsonString(data, "serial").value_or("");
  if (!serial.empty()) {
    if (!std::all_of(serial.begin(), serial.end(), [](char c) { return c >= '0' && c <= '9'; }) || serial.size() > 18) {
      return Fail("the record's serial '" + serial + "' is not a whole number");
    }
    r.serial = std::stoll(serial);
  }
  const json objects = json::parse(JsonString(data, "objects").value_or(""), nullptr, false);
  if (!objects.is_array()) return Fail("the record's objects are not a JSON list");
  for (const auto& o : objects) {
    ObjectRef ref{JsonString(o, "apiVersion").value_or(""), JsonString(o, "kind").value_or(""),
                  JsonString(o, "namespace").value_or(""), JsonString(o, "name").value_or("")};
    if (ref.api_version.empty() || ref.kind.empty() || ref.name.empty()) {
      return Fail("the record names an object without apiVersion, kind or name");
    }
    r.objects.push_back(std::move(ref));
  }
  for (const auto& line : Split(JsonString(data, "status").value_or(""), '\n')) {
    const auto colon = line.find(": ");
    if (colon != std::string::npos) r.status[line.substr(0, colon)] = line.substr(colon + 2);
  }
  return r;
}

std::string RecordConfigMap(const WorkloadRecord& r) {
  ojson cm;
  cm["apiVersion"] = "v1";
  cm["kind"] = "ConfigMap";
  cm["metadata"]["name"] = kWorkloadsRecord;
  cm["metadata"]["namespace"] = kWorkloadsNamespace;
  cm["metadata"]["labels"]["app.kubernetes.io/managed-by"] = "sprout";
  auto objects = ojson::array();
  for (const auto& o : r.objects) objects.push_back(RefJson(o));
  std::string status;
  for (const auto& [name, line] : r.status) status += name + ": " + line + "\n";
  cm["data"]["digest"] = r.digest;
  cm["data"]["serial"] = r.serial > 0 ? std::to_string(r.serial) : "";
  cm["data"]["node"] = r.node;
  cm["data"]["objects"] = objects.dump();
  cm["data"]["status"] = status;
  return cm.dump();
}

std::vector<ObjectRef> NextRecord(const std::vector<ObjectRef>& old_record, const std::vector<ObjectRef>& index,
                                  const std::set<std::string>& applied_now, const std::set<std::string>& forgotten) {
  std::set<std::string> old_ids;
  for (const auto& o : old_record) old_ids.insert(IdentityOf(o));
  std::set<std::string> in_index;
  std::vector<ObjectRef> out;
  for (const auto& o : index) {
    const std::string id = IdentityOf(o);
    in_index.insert(id);
    if ((applied_now.count(id) != 0 || old_ids.count(id) != 0) && forgotten.count(id) == 0) out.push_back(o);
  }
  for (const auto& o : old_record) {
    const std::string id = IdentityOf(o);
    if (in_index.count(id) == 0 && forgotten.count(id) == 0) out.push_back(o);
  }
  return out;
}

std::vector<ObjectRef> PruneSet(const std::vector<ObjectRef>& record, const std::vector<ObjectRef>& index) {
  std::set<std::string> carried;
  for (const auto& o : index) carried.insert(IdentityOf(o));
  std::vector<ObjectRef> out;
  for (const auto& o : record) {
    if (carried.count(IdentityOf(o)) == 0) out.push_back(o);
  }
  std::stable_sort(out.begin(), out.end(), [](const ObjectRef& a, const ObjectRef& b) {
    return static_cast<int>(PhaseOf(a)) > static_cast<int>(PhaseOf(b));
  });
  return out;
}

std::vector<std::string> ForeignObjects(const std::string& list_json, const std::string& api_version,
                                        const Resource& res, const std::set<std::string>& sprout_set) {
  std::vector<std::string> out;
  if (res.group.empty() && (res.kind == "Event" || res.kind == "Endpoints")) return out;
  if (res.group == "events.k8s.io") return out;
  const json j = json::parse(list_json, nullptr, false);
  const json& items = Field(j, "items");
  if (!items.is_array()) return out;
  for (const auto& item : items) {
    const json& meta = Field(item, "metadata");
    const ObjectRef ref{api_version, res.kind, JsonString(meta, "namespace").value_or(""),
                        JsonString(meta, "name").value_or("")};
    const json& owners = Field(meta, "ownerReferences");
    if (owners.is_array() && !owners.empty()) continue;
    if (res.group.empty() && res.kind == "ServiceAccount" && ref.name == "default") continue;
    if (res.group.empty() && res.kind == "ConfigMap" && ref.name == "kube-root-ca.crt") continue;
    if (sprout_set.count(IdentityOf(ref)) != 0) continue;
    out.push_back(Describe(ref));
  }
  return out;
}

ApplyDecision Decide(const std::optional<WorkloadRecord>& record, const WorkloadIndex& image, bool at_start) {
  if (!record) {
    return {Decision::kApply,
            "the cluster has no record of applied workloads (a fresh cluster, or one restored from a backup older "
            "than them)"};
  }
  if (record->serial > image.serial) {
    return {Decision::kSkip, "the cluster's workloads come from a newer build (serial " +
                                 std::to_string(record->serial) + ", " + record->digest + ", applied by " +
                                 (record->node.empty() ? "another node" : record->node) + "); this node's build has " +
                                 (image.serial > 0 ? "serial " + std::to_string(image.serial) : "no serial") +
                                 ", so it applies nothing until it runs that build or a newer one"};
  }
  if (at_start) {
    return {Decision::kApply, record->digest == image.digest
                                  ? "at start (server-side apply changes nothing that is in shape)"
                                  : "at start: this image's workloads (" + image.digest +
                                        ") differ from the record's (" + record->digest + ")"};
  }
  if (record->digest == image.digest) return {Decision::kInSync, "the record is this image's (" + image.digest + ")"};
  if (image.serial > record->serial) {
    return {Decision::kApply, "the record comes from an older build (" + record->digest + ", serial " +
                                  std::to_string(record->serial) + "); this image brings other versions"};
  }
  return {Decision::kSkip, "another build of the same serial applied other workloads (" + record->digest + ", by " +
                               (record->node.empty() ? "another node" : record->node) +
                               "); this node applies its own (" + image.digest + ") only at its start"};
}

std::string StatusLine(const std::vector<std::size_t>& objects, const std::vector<LoadedObject>& loaded,
                       const std::vector<ObjectResult>& results) {
  std::size_t failed = 0, pending = 0;
  std::string first_failed, first_pending;
  for (auto i : objects) {
    const auto& r = results.at(i);
    const std::string what = Describe(loaded.at(i).entry.ref) + ": " + r.message;
    if (r.state == ObjectState::kFailed && failed++ == 0) first_failed = what;
    if (r.state == ObjectState::kPending && pending++ == 0) first_pending = what;
  }
  const std::string of = " of " + std::to_string(objects.size()) + " objects: ";
  if (failed > 0) return "failed: " + std::to_string(failed) + of + first_failed;
  if (pending > 0) return "pending: " + std::to_string(pending) + of + first_pending;
  return "applied (" + std::to_string(objects.size()) + (objects.size() == 1 ? " object)" : " objects)");
}

std::string StateOf(const std::string& status_line) {
  for (const char* s : {"applied", "pending", "failed"}) {
    if (status_line.starts_with(s)) return s;
  }
  return "unknown";
}

Result<LeaseView> ParseLease(const std::string& text) {
  const json j = json::parse(text, nullptr, false);
  if (JsonString(j, "kind").value_or("") != "Lease") return Fail("the answer is not a Lease");
  const json& spec = Field(j, "spec");
  LeaseView l;
  l.holder = JsonString(spec, "holderIdentity").value_or("");
  const json& d = Field(spec, "leaseDurationSeconds");
  l.duration = d.is_number_integer() ? d.get<std::int64_t>() : 0;
  const json& t = Field(spec, "leaseTransitions");
  l.transitions = t.is_number_integer() ? t.get<std::int64_t>() : 0;
  l.acquire_time = JsonString(spec, "acquireTime").value_or("");
  l.resource_version = JsonString(Field(j, "metadata"), "resourceVersion").value_or("");
  return l;
}

std::string LeaseBody(const std::string& holder, std::int64_t duration, const std::string& resource_version,
                      std::int64_t transitions, const std::string& acquire_time, const std::string& now_micro) {
  ojson l;
  l["apiVersion"] = "coordination.k8s.io/v1";
  l["kind"] = "Lease";
  l["metadata"]["name"] = kWorkloadsLease;
  l["metadata"]["namespace"] = kWorkloadsNamespace;
  if (!resource_version.empty()) l["metadata"]["resourceVersion"] = resource_version;
  l["spec"] = ojson::object();
  if (!holder.empty()) l["spec"]["holderIdentity"] = holder;
  l["spec"]["leaseDurationSeconds"] = duration;
  if (!acquire_time.empty()) l["spec"]["acquireTime"] = acquire_time;
  l["spec"]["renewTime"] = now_micro;
  l["spec"]["leaseTransitions"] = transitions;
  return l.dump();
}

LeaseStep DecideLease(const std::optional<LeaseView>& lease, const std::string& me, std::int64_t now, LeaseSeen& seen) {
  if (!lease) return LeaseStep::kCreate;
  if (lease->holder == me) return LeaseStep::kRenew;
  if (lease->holder.empty()) return LeaseStep::kTakeOver;
  if (lease->resource_version != seen.resource_version) {
    seen.resource_version = lease->resource_version;
    seen.since = now;
    return LeaseStep::kWait;
  }
  return now - seen.since >= std::max<std::int64_t>(lease->duration, 1) ? LeaseStep::kTakeOver : LeaseStep::kWait;
}

std::string EventBody(const std::string& reason, const std::string& message, bool warning, const std::string& node,
                      const std::string& now) {
  ojson e;
  e["apiVersion"] = "v1";
  e["kind"] = "Event";
  e["metadata"]["generateName"] = std::string(kWorkloadsRecord) + ".";
  e["metadata"]["namespace"] = kWorkloadsNamespace;
  e["involvedObject"] = {
      {"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"namespace", kWorkloadsNamespace}, {"name", kWorkloadsRecord}};
  e["reason"] = reason;
  e["message"] = message.size() > 1000 ? message.substr(0, 1000) : message;
  e["type"] = warning ? "Warning" : "Normal";
  e["source"] = {{"component", "sprout-firstboot"}, {"host", node}};
  e["reportingComponent"] = "sprout-firstboot";
  e["reportingInstance"] = node;
  e["firstTimestamp"] = now;
  e["lastTimestamp"] = now;
  e["count"] = 1;
  return e.dump();
}

std::int64_t RetryDelay(int attempt) {
  std::int64_t d = 5;
  for (int i = 1; i < attempt && d < 300; ++i) d *= 2;
  return std::min<std::int64_t>(d, 300);
}

}  // namespace sprout::kube
