#include "staticpod/staticpod.h"

#include <yaml-cpp/yaml.h>

#include <set>

#include "util/text.h"
#include "util/yamlpos.h"

namespace sprout {

namespace {

// UrlHost brackets an IPv6 address for use in a URL.
std::string UrlHost(const std::string& ip) { return ip.find(':') != std::string::npos ? "[" + ip + "]" : ip; }

}  // namespace

const std::vector<std::string>& ControlPlaneComponents() {
  static const std::vector<std::string> kComponents = {"etcd", "kube-apiserver", "kube-controller-manager",
                                                       "kube-scheduler"};
  return kComponents;
}

std::string EtcdInitialCluster(const std::vector<EtcdPeer>& members) {
  std::vector<std::string> parts;
  parts.reserve(members.size());
  for (const auto& m : members) parts.push_back(m.name + "=https://" + UrlHost(m.ip) + ":2380");
  return Join(parts, ",");
}

std::map<std::string, std::string> TemplateValues(const StaticPodInput& in) {
  std::map<std::string, std::string> v;
  v["node_name"] = in.node_name;
  v["node_ip"] = in.node_ip;
  v["cluster_name"] = in.cluster_name;
  v["kubernetes_version"] = in.kubernetes_version;
  v["pods_cidr"] = in.pods_cidr;
  v["services_cidr"] = in.services_cidr;
  v["etcd_initial_cluster"] = EtcdInitialCluster(in.etcd_members);
  v["etcd_initial_cluster_state"] = in.etcd_initial_cluster_state;
  v["etcd_cluster_token"] = in.etcd_cluster_token;
  std::vector<std::string> servers;
  for (const auto& m : in.etcd_members) servers.push_back("https://" + UrlHost(m.ip) + ":2379");
  v["etcd_servers"] = Join(servers, ",");
  v["pki_dir"] = in.pki_dir;
  v["kubernetes_dir"] = in.kubernetes_dir;
  v["etcd_data_dir"] = in.etcd_data_dir;
  v["audit_log_dir"] = in.audit_log_dir;
  for (const auto& [component, image] : in.images) {
    std::string key = "image_" + component;
    for (char& c : key) {
      if (c == '-') c = '_';
    }
    v[key] = image;
  }
  return v;
}

Result<std::string> RenderTemplate(std::string_view text, const std::map<std::string, std::string>& values,
                                   const std::string& name) {
  std::string out;
  out.reserve(text.size() + 256);
  std::vector<std::string> problems;
  size_t pos = 0;
  int line = 1;
  while (pos < text.size()) {
    size_t open = text.find("{{", pos);
    size_t upto = open == std::string_view::npos ? text.size() : open;
    for (size_t i = pos; i < upto; ++i) line += text[i] == '\n' ? 1 : 0;
    out.append(text.substr(pos, upto - pos));
    if (open == std::string_view::npos) break;
    size_t close = text.find("}}", open + 2);
    size_t newline = text.find('\n', open);
    if (close == std::string_view::npos || (newline != std::string_view::npos && newline < close)) {
      problems.push_back(name + ":" + std::to_string(line) + ": '{{' without a closing '}}' on the same line");
      pos = open + 2;
      continue;
    }
    std::string key(Trim(text.substr(open + 2, close - open - 2)));
    auto it = values.find(key);
    if (it == values.end()) {
      std::string hint;
      if (key.rfind("image_", 0) == 0) {
        hint = " (no preloaded image for this component: add it to the profile's images)";
      } else {
        std::vector<std::string> known;
        known.reserve(values.size());
        for (const auto& [k, unused] : values) known.push_back(k);
        auto guess = ClosestMatch(key, known);
        hint = guess ? " (did you mean '" + *guess + "'?)" : " (docs/shoot.md lists the placeholders)";
      }
      problems.push_back(name + ":" + std::to_string(line) + ": unknown placeholder '{{" + key + "}}'" + hint);
    } else if (it->second.empty()) {
      problems.push_back(name + ":" + std::to_string(line) + ": placeholder '{{" + key + "}}' has no value here");
    } else {
      out += it->second;
    }
    pos = close + 2;
  }
  if (!problems.empty()) return Fail(Join(problems, "\n"));
  return out;
}

namespace {

Location At(const std::string& file, const YAML::Node& n) { return YamlAt(file, n); }

std::string ScalarOr(const YAML::Node& n, const char* key) {
  auto v = n[key];
  return v && v.IsScalar() ? v.Scalar() : "";
}

}  // namespace

void ValidatePod(std::string_view yaml, const std::string& name, Diagnostics& diags) {
  auto loaded = LoadYaml(yaml, name, "the manifest", "check the template and the values put into it", diags);
  if (!loaded) return;
  YAML::Node root = *loaded;
  if (!root.IsMap()) {
    diags.Error({name, 0, 0}, "a static pod manifest must be a YAML mapping", "start it with 'apiVersion: v1'");
    return;
  }
  if (ScalarOr(root, "apiVersion") != "v1") {
    diags.Error(At(name, root), "apiVersion must be 'v1'", "write 'apiVersion: v1'");
  }
  if (ScalarOr(root, "kind") != "Pod") diags.Error(At(name, root), "kind must be 'Pod'", "write 'kind: Pod'");
  auto meta = root["metadata"];
  if (!meta || !meta.IsMap() || ScalarOr(meta, "name").empty()) {
    diags.Error(At(name, meta ? meta : root), "metadata.name is missing", "give the pod a name");
  }
  auto spec = root["spec"];
  if (!spec || !spec.IsMap()) {
    diags.Error(At(name, root), "spec is missing", "add 'spec:' with 'containers:'");
    return;
  }
  std::set<std::string> volumes;
  if (auto vols = spec["volumes"]) {
    if (!vols.IsSequence()) {
      diags.Error(At(name, vols), "spec.volumes must be a list", "write one volume per item");
    } else {
      for (const auto& v : vols) {
        const std::string vname = v.IsMap() ? ScalarOr(v, "name") : "";
        if (vname.empty()) {
          diags.Error(At(name, v), "a volume has no name", "give every volume a name");
        } else if (!volumes.insert(vname).second) {
          diags.Error(At(name, v), "volume '" + vname + "' is defined twice", "give each volume its own name");
        }
      }
    }
  }
  auto containers = spec["containers"];
  if (!containers || !containers.IsSequence() || containers.size() == 0) {
    diags.Error(At(name, containers ? containers : spec), "spec.containers is empty", "add at least one container");
    return;
  }
  std::set<std::string> names;
  for (const auto& c : containers) {
    if (!c.IsMap()) {
      diags.Error(At(name, c), "a container must be a mapping", "give it 'name:' and 'image:'");
      continue;
    }
    const std::string cname = ScalarOr(c, "name");
    if (cname.empty()) {
      diags.Error(At(name, c), "a container has no name", "give every container a name");
    } else if (!names.insert(cname).second) {
      diags.Error(At(name, c["name"]), "container name '" + cname + "' is used twice",
                  "give each container in the pod its own name");
    }
    if (ScalarOr(c, "image").empty()) {
      diags.Error(At(name, c), "container '" + cname + "' has no image", "set 'image:' to a preloaded image");
    }
    if (auto mounts = c["volumeMounts"]) {
      for (const auto& m : mounts) {
        const std::string vname = m.IsMap() ? ScalarOr(m, "name") : "";
        if (volumes.count(vname) == 0) {
          diags.Error(At(name, m), "container '" + cname + "' mounts volume '" + vname + "', which is not defined",
                      "add it to spec.volumes, or fix the name");
        }
      }
    }
  }
}

Result<std::string> RenderStaticPod(std::string_view text, const StaticPodInput& in, const std::string& name) {
  auto rendered = RenderTemplate(text, TemplateValues(in), name);
  if (!rendered) return rendered;
  Diagnostics diags;
  ValidatePod(*rendered, name, diags);
  if (diags.has_errors()) return Fail("the rendered manifest " + name + " is not a valid Pod:\n" + diags.Render());
  return rendered;
}

Result<std::string> ForPodman(std::string_view pod_yaml) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(pod_yaml));
  } catch (const YAML::Exception& e) {
    return Fail("cannot adapt the manifest for podman: " + e.msg);
  }
  auto containers = root["spec"]["containers"];
  if (containers && containers.IsSequence()) {
    for (auto c : containers) {
      for (const char* probe : {"livenessProbe", "readinessProbe", "startupProbe"}) {
        if (c[probe]) c.remove(probe);
      }
    }
  }
  YAML::Emitter out;
  out << root;
  return std::string(out.c_str()) + "\n";
}

}  // namespace sprout
