#include "workloads/objects.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "oci/reference.h"
#include "util/sha256.h"
#include "util/text.h"
#include "util/yaml_json.h"

namespace sprout::workloads {

namespace {

using Json = nlohmann::ordered_json;

// Chunk is one YAML document of a stream, before it is parsed.
struct Chunk {
  std::string text;
  int first_line = 1;   // its first line in the stream, from 1
  std::string source;   // a chart's output: the template that rendered it (`# Source:`)
  int source_line = 0;  // the line of that comment within the chunk, from 0
};

bool IsSeparator(std::string_view line, std::string_view marker) {
  if (!line.starts_with(marker)) return false;
  return line.size() == marker.size() || line[marker.size()] == ' ' || line[marker.size()] == '\t' ||
         line[marker.size()] == '\r';
}

std::vector<Chunk> SplitDocuments(std::string_view text) {
  std::vector<Chunk> chunks(1);
  int number = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    ++number;
    if (IsSeparator(line, "---") || IsSeparator(line, "...")) {
      chunks.push_back({});
      chunks.back().first_line = number;
      // What follows the marker on its line belongs to the next document; the marker
      // becomes spaces, so columns stay right.
      chunks.back().text = std::string(3, ' ') + std::string(line.substr(3)) + "\n";
    } else {
      Chunk& c = chunks.back();
      if (c.source.empty() && line.starts_with("# Source: ")) {
        c.source = std::string(Trim(line.substr(10)));
        c.source_line = static_cast<int>(std::count(c.text.begin(), c.text.end(), '\n'));
      }
      c.text += std::string(line) + "\n";
    }
    start = end + 1;
  }
  return chunks;
}

// Place says where in a stream a problem is, and words it for a chart's output, whose
// lines are not the template's.
class Place {
 public:
  Place(const Text& from, const Chunk& chunk) : from_(from), chunk_(chunk) {
    if (!from.rendered || chunk.source.empty()) {
      file_ = from.file;
    } else if (from.folder) {
      // "sprout-demo/templates/x.yaml" is the file templates/x.yaml of the chart folder.
      auto slash = chunk.source.find('/');
      file_ = from.file + "/" + (slash == std::string::npos ? chunk.source : chunk.source.substr(slash + 1));
    } else {
      file_ = from.file + ": " + chunk.source;
    }
  }

  const std::string& file() const { return file_; }

  // At is the place of a line within the chunk (from 0) and a column (from 1).
  Location At(int chunk_line, int column) const {
    if (from_.rendered) return {file_, 0, 0};
    return {file_, chunk_.first_line + chunk_line, column};
  }

  // Say adds, for a chart's output, which line of it the problem is on.
  std::string Say(const std::string& message, int chunk_line) const {
    if (!from_.rendered) return message;
    const int line = chunk_line - chunk_.source_line;
    return message + " (line " + std::to_string(line) + " of what the chart renders" +
           (chunk_.source.empty() ? "" : " for " + chunk_.source) + ")";
  }

  int FirstLine() const { return from_.rendered ? 0 : chunk_.first_line; }

 private:
  const Text& from_;
  const Chunk& chunk_;
  std::string file_;
};

std::optional<std::string> StringField(const Json& o, const char* key) {
  if (!o.is_object()) return std::nullopt;
  auto it = o.find(key);
  if (it == o.end() || !it->is_string() || it->get<std::string>().empty()) return std::nullopt;
  return it->get<std::string>();
}

// TakeObject checks one object (a document, or an item of a List) and adds it to out.
void TakeObject(const YAML::Node& node, Json body, const Place& place, const Text& from, std::vector<Object>& out,
                Diagnostics& diags) {
  const int line = std::max(0, node.Mark().line);
  const int column = std::max(0, node.Mark().column) + 1;
  auto report = [&](const std::string& message, const std::string& hint) {
    diags.Error(place.At(line, column), place.Say(message, line), hint);
  };
  if (!body.is_object()) {
    report(std::string("a manifest must be a mapping (one Kubernetes object), but this document is ") +
               (body.is_array() ? "a list" : "a single value"),
           "write one object per document, separated by lines of '---'");
    return;
  }
  auto api_version = StringField(body, "apiVersion");
  auto kind = StringField(body, "kind");
  if (!api_version || !kind) {
    std::string missing = !api_version && !kind ? "apiVersion or kind" : !api_version ? "apiVersion" : "kind";
    report("this object has no " + missing,
           "every object names its 'apiVersion' and 'kind', such as 'apiVersion: apps/v1' and 'kind: Deployment'");
    return;
  }
  if (*api_version == "v1" && *kind == "List") {
    auto items = body.find("items");
    YAML::Node yaml_items = node["items"];
    if (items == body.end() || !items->is_array()) {
      report("this List has no 'items'", "put the objects under 'items:', or write them as documents");
      return;
    }
    for (std::size_t i = 0; i < items->size(); ++i) {
      TakeObject(yaml_items[i], (*items)[i], place, from, out, diags);
    }
    return;
  }
  const auto metadata = body.find("metadata");
  auto name = metadata == body.end() ? std::nullopt : StringField(*metadata, "name");
  if (!name) {
    const bool generated = metadata != body.end() && StringField(*metadata, "generateName").has_value();
    report(*kind + (generated ? " has a metadata.generateName, but no metadata.name" : " has no metadata.name"),
           generated ? "give it a fixed name: the cluster applies objects by name, and a generated one would be a new "
                       "object at every apply"
                     : "add 'metadata: {name: ...}'");
    return;
  }
  Object o;
  o.api_version = *api_version;
  o.kind = *kind;
  o.name = *name;
  o.ns = StringField(*metadata, "namespace").value_or("");
  o.file = place.file();
  o.line = from.rendered ? 0 : place.FirstLine() + line;
  o.workload = from.workload;
  o.body = std::move(body);
  out.push_back(std::move(o));
}

const Json* Field(const Json& o, std::initializer_list<const char*> path) {
  const Json* at = &o;
  for (const char* key : path) {
    if (!at->is_object()) return nullptr;
    auto it = at->find(key);
    if (it == at->end()) return nullptr;
    at = &*it;
  }
  return at;
}

// Identity is what makes two objects the same object for the API: group, kind,
// namespace and name (not the version).
std::tuple<std::string, std::string, std::string, std::string> Identity(const Object& o) {
  return {GroupOf(o.api_version), o.kind, o.ns, o.name};
}

bool IsCrd(const Object& o) {
  return o.api_version == "apiextensions.k8s.io/v1" && o.kind == "CustomResourceDefinition";
}
bool IsNamespace(const Object& o) { return o.api_version == "v1" && o.kind == "Namespace"; }

}  // namespace

std::string Describe(const Object& o) { return o.kind + " " + (o.ns.empty() ? o.name : o.ns + "/" + o.name); }

Location At(const Object& o) { return {o.file, o.line, o.line > 0 ? 1 : 0}; }

std::vector<Object> ParseObjects(std::string_view text, const Text& from, Diagnostics& diags) {
  std::vector<Object> out;
  for (const Chunk& chunk : SplitDocuments(text)) {
    Place place(from, chunk);
    YAML::Node doc;
    try {
      doc = YAML::Load(chunk.text);
    } catch (const YAML::Exception& e) {
      diags.Error(place.At(e.mark.line, e.mark.column + 1), place.Say("this is not valid YAML: " + e.msg, e.mark.line),
                  from.rendered ? "check the template's indentation and quoting (`helm template` shows what it "
                                  "renders)"
                                : "check the indentation and quoting around this place");
      continue;
    }
    if (doc.IsNull()) continue;  // an empty document, or one of comments only
    Diagnostics converting;
    auto body = YamlToJson(doc, place.file(), chunk.first_line - 1, converting);
    if (!body) {
      for (const auto& d : converting.all()) {
        if (!from.rendered) {
          diags.Error(d.where, d.message, d.hint);
        } else {
          diags.Error(place.At(0, 0), place.Say(d.message, d.where.line - chunk.first_line), d.hint);
        }
      }
      continue;
    }
    TakeObject(doc, std::move(*body), place, from, out, diags);
  }
  return out;
}

bool IsHelmHook(const Object& o) {
  const Json* a = Field(o.body, {"metadata", "annotations"});
  return a && a->is_object() && a->contains("helm.sh/hook");
}

void AddCrds(const std::vector<Object>& objects, ServedApis& apis, Diagnostics& diags) {
  for (const auto& o : objects) {
    if (!IsCrd(o)) continue;
    const Json* spec = Field(o.body, {"spec"});
    auto group = spec ? StringField(*spec, "group") : std::nullopt;
    const Json* names = Field(o.body, {"spec", "names"});
    auto kind = names ? StringField(*names, "kind") : std::nullopt;
    auto plural = names ? StringField(*names, "plural") : std::nullopt;
    auto scope = spec ? StringField(*spec, "scope") : std::nullopt;
    std::vector<std::string> served;
    if (const Json* versions = Field(o.body, {"spec", "versions"}); versions && versions->is_array()) {
      for (const auto& v : *versions) {
        auto name = StringField(v, "name");
        auto on = v.is_object() ? v.find("served") : v.end();
        if (name && on != v.end() && on->is_boolean() && on->get<bool>()) served.push_back(*name);
      }
    }
    std::vector<std::string> missing;
    if (!group) missing.emplace_back("spec.group");
    if (!kind) missing.emplace_back("spec.names.kind");
    if (!plural) missing.emplace_back("spec.names.plural");
    if (!scope || (*scope != "Namespaced" && *scope != "Cluster"))
      missing.emplace_back("spec.scope (Namespaced or Cluster)");
    if (served.empty()) missing.emplace_back("a version with 'served: true' in spec.versions");
    if (!missing.empty()) {
      diags.Error(At(o), "CustomResourceDefinition " + o.name + " has no " + Join(missing, ", "),
                  "the API server refuses a CRD without them; see the CRD's apiextensions.k8s.io/v1 schema");
      continue;
    }
    if (o.name != *plural + "." + *group) {
      diags.Error(At(o), "CustomResourceDefinition " + o.name + " must be named " + *plural + "." + *group,
                  "a CRD's metadata.name is spec.names.plural, a dot, and spec.group");
      continue;
    }
    apis.AddCrd(*group, *kind, *scope, served);
  }
}

void CheckServed(const std::vector<Object>& objects, const ServedApis& apis, Diagnostics& diags) {
  const std::string k8s = "Kubernetes 1." + std::to_string(kServedMinor);
  for (const auto& o : objects) {
    const ApiKind* served = apis.Find(o.api_version, o.kind);
    if (!served) {
      diags.Error(At(o), Describe(o) + ": " + k8s + " does not serve " + o.kind + " in " + o.api_version,
                  apis.Suggest(o.api_version, o.kind));
    } else if (!served->stored) {
      diags.Error(At(o), Describe(o) + ": a " + o.kind + " is a request the API answers, not an object it keeps",
                  "remove it from the workloads: server-side apply cannot keep it applied");
    }
  }
}

void FillNamespaces(std::vector<Object>& objects, const std::vector<std::string>& namespace_of,
                    const ServedApis& apis) {
  for (auto& o : objects) {
    const ApiKind* served = apis.Find(o.api_version, o.kind);
    const bool namespaced = served ? served->namespaced : true;
    if (namespaced && o.ns.empty() && o.workload < namespace_of.size()) {
      o.ns = namespace_of[o.workload];
      o.body["metadata"]["namespace"] = o.ns;
    } else if (!namespaced && !o.ns.empty()) {
      o.ns.clear();
      o.body["metadata"].erase("namespace");
    }
  }
}

void CheckDuplicates(const std::vector<Object>& objects, Diagnostics& diags) {
  std::map<std::tuple<std::string, std::string, std::string, std::string>, const Object*> seen;
  for (const auto& o : objects) {
    auto [it, fresh] = seen.emplace(Identity(o), &o);
    if (fresh) continue;
    const Object& first = *it->second;
    const Location w = At(first);
    diags.Error(At(o),
                Describe(o) + " is already in the workloads (" + w.file +
                    (w.line > 0 ? ":" + std::to_string(w.line) : "") + ")",
                "keep one of them: both would be applied, and the later one would win");
  }
}

std::vector<Object> MissingNamespaces(const std::vector<Object>& objects) {
  std::set<std::string> made;
  for (const auto& o : objects) {
    if (IsNamespace(o)) made.insert(o.name);
  }
  std::vector<Object> out;
  for (const auto& o : objects) {
    if (o.ns.empty() || IsBuiltinNamespace(o.ns) || !made.insert(o.ns).second) continue;
    Object n;
    n.api_version = "v1";
    n.kind = "Namespace";
    n.name = o.ns;
    n.file = "(made by sprout: no object of the workloads makes namespace " + o.ns + ")";
    n.workload = o.workload;
    n.body = {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", o.ns}}}};
    out.push_back(std::move(n));
  }
  return out;
}

std::vector<ImageUse> PodImages(const Object& o) {
  const std::string group = GroupOf(o.api_version);
  std::vector<const char*> path;
  if (group.empty() && o.kind == "Pod") {
    path = {"spec"};
  } else if (group.empty() && o.kind == "PodTemplate") {
    path = {"template", "spec"};
  } else if ((group.empty() && o.kind == "ReplicationController") ||
             (group == "apps" &&
              (o.kind == "Deployment" || o.kind == "StatefulSet" || o.kind == "DaemonSet" || o.kind == "ReplicaSet")) ||
             (group == "batch" && o.kind == "Job")) {
    path = {"spec", "template", "spec"};
  } else if (group == "batch" && o.kind == "CronJob") {
    path = {"spec", "jobTemplate", "spec", "template", "spec"};
  } else {
    return {};
  }
  const Json* spec = &o.body;
  std::string where;
  for (const char* key : path) {
    if (!spec->is_object() || !spec->contains(key)) return {};
    spec = &(*spec)[key];
    where += (where.empty() ? "" : ".") + std::string(key);
  }
  std::vector<ImageUse> out;
  for (const char* list : {"initContainers", "containers", "ephemeralContainers"}) {
    auto it = spec->find(list);
    if (it == spec->end() || !it->is_array()) continue;
    for (std::size_t i = 0; i < it->size(); ++i) {
      const Json& c = (*it)[i];
      ImageUse use;
      use.where = where + "." + list + "[" + std::to_string(i) + "]";
      use.image = StringField(c, "image").value_or("");
      use.container = StringField(c, "name").value_or("");
      use.pull_policy = StringField(c, "imagePullPolicy").value_or("");
      out.push_back(std::move(use));
    }
  }
  // An image volume mounts an image's files; the kubelet pulls it like a container's.
  if (auto it = spec->find("volumes"); it != spec->end() && it->is_array()) {
    for (std::size_t i = 0; i < it->size(); ++i) {
      const Json* image = Field((*it)[i], {"image"});
      if (!image || !image->is_object()) continue;
      ImageUse use;
      use.where = where + ".volumes[" + std::to_string(i) + "].image";
      use.image = StringField(*image, "reference").value_or("");
      use.container = StringField((*it)[i], "name").value_or("");
      use.pull_policy = StringField(*image, "pullPolicy").value_or("");
      out.push_back(std::move(use));
    }
  }
  return out;
}

std::optional<std::string> CanonicalImage(std::string_view ref) {
  auto parsed = oci::ParseReference(ref);
  if (!parsed) {
    // The runtime's default registry; a one-part name is in docker.io's library.
    std::string with_registry = "docker.io/" + std::string(ref);
    parsed = oci::ParseReference(with_registry);
    if (!parsed) return std::nullopt;
  }
  if (parsed->registry == "docker.io" && parsed->repository.find('/') == std::string::npos) {
    parsed->repository = "library/" + parsed->repository;
  }
  return parsed->String();
}

void CheckImages(std::vector<Object>& objects, const std::vector<std::string>& preloaded, Diagnostics& diags) {
  // What the preload provides, canonically: each reference, and for one with a digest
  // also REPOSITORY@DIGEST (the node names every image that way too, docs/images.md).
  std::set<std::string> have;
  for (const auto& ref : preloaded) {
    auto parsed = oci::ParseReference(ref);
    auto canonical = CanonicalImage(ref);
    if (!parsed || !canonical) continue;
    have.insert(*canonical);
    if (!parsed->digest.empty()) {
      auto bare = oci::ParseReference(*canonical);
      if (bare) {
        bare->tag.clear();
        have.insert(bare->String());
      }
    }
  }
  for (auto& o : objects) {
    std::set<std::string> images;
    for (const auto& use : PodImages(o)) {
      const std::string who = Describe(o) + ": " +
                              (use.where.find("volumes[") != std::string::npos ? "image volume '" : "container '") +
                              use.container + "' (" + use.where + ")";
      if (use.image.empty()) {
        diags.Error(At(o), who + " names no image", "give it 'image:', one that the profile preloads");
        continue;
      }
      images.insert(use.image);
      auto canonical = CanonicalImage(use.image);
      if (!canonical) {
        auto why = oci::ParseReference(use.image);
        diags.Error(
            At(o),
            who + " runs '" + use.image + "', which is no image reference" + (why ? std::string() : ": " + why.error()),
            "write it as registry/repository:tag, as in the profile's 'images:'");
        continue;
      }
      auto parsed = oci::ParseReference(*canonical);
      std::string match = *canonical;
      if (parsed && !parsed->digest.empty()) {
        parsed->tag.clear();
        if (have.contains(parsed->String())) match = parsed->String();
      }
      if (!have.contains(match)) {
        diags.Error(At(o), who + " runs image '" + use.image + "', which the profile does not preload",
                    "add '- ref: " + *canonical +
                        "' to the profile's 'images:' (docs/images.md); an air-gapped node could only pull it");
      }
      const bool latest = parsed && parsed->digest.empty() && parsed->tag == "latest";
      if (use.pull_policy == "Always") {
        diags.Error(At(o),
                    who + " has imagePullPolicy Always: the kubelet would pull '" + use.image +
                        "' from its registry at every start, which an air-gapped node cannot reach",
                    "set 'imagePullPolicy: IfNotPresent'; the image is preloaded");
      } else if (use.pull_policy.empty() && latest) {
        diags.Error(At(o),
                    who + " runs '" + use.image +
                        "' (the tag latest) with no imagePullPolicy, so the kubelet would pull it at every start",
                    "pin a tag (and preload that one), or set 'imagePullPolicy: IfNotPresent'");
      }
    }
    o.images.assign(images.begin(), images.end());
  }
}

void Order(std::vector<Object>& objects) {
  std::stable_partition(objects.begin(), objects.end(), IsCrd);
  auto rest = std::find_if_not(objects.begin(), objects.end(), IsCrd);
  std::stable_partition(rest, objects.end(), IsNamespace);
}

std::string ObjectFile(std::size_t n) {
  std::string number = std::to_string(n + 1);
  if (number.size() < 4) number.insert(0, 4 - number.size(), '0');
  return "objects/" + number + ".json";
}

Baked Bake(const std::vector<Workload>& workloads, const std::vector<Object>& ordered) {
  Baked out;
  Sha256 all;
  std::vector<Json> lists(workloads.size(), Json::array());
  for (std::size_t n = 0; n < ordered.size(); ++n) {
    const Object& o = ordered[n];
    std::string file = o.body.dump() + "\n";
    all.Update(file);
    out.objects.push_back(std::move(file));
    if (o.workload >= lists.size()) continue;
    lists[o.workload].push_back(Json{{"file", ObjectFile(n)},
                                     {"apiVersion", o.api_version},
                                     {"kind", o.kind},
                                     {"namespace", o.ns},
                                     {"name", o.name},
                                     {"images", o.images}});
  }
  out.digest = "sha256:" + all.HexDigest();
  Json index{{"version", 1}, {"digest", out.digest}, {"workloads", Json::array()}};
  for (std::size_t i = 0; i < workloads.size(); ++i) {
    const Workload& w = workloads[i];
    index["workloads"].push_back(Json{{"name", w.name},
                                      {"type", w.type},
                                      {"source", w.source},
                                      {"release", w.release},
                                      {"namespace", w.ns},
                                      {"chartVersion", w.chart_version},
                                      {"objects", std::move(lists[i])}});
  }
  out.index_json = index.dump(2) + "\n";
  return out;
}

}  // namespace sprout::workloads
