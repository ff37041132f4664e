#include "shoot/shoot.h"

#include <arpa/inet.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "util/fs.h"
#include "util/text.h"
#include "util/yamlpos.h"

namespace sprout {

namespace {

constexpr const char* kApiVersion = "core.gardener.cloud/v1beta1";

// ShootParser walks the YAML once, taking the fields it knows and warning about the rest.
class ShootParser {
 public:
  ShootParser(std::string file, Diagnostics& diags) : file_(std::move(file)), diags_(diags) {}

  std::optional<Shoot> Parse(const YAML::Node& root) {
    Shoot shoot;
    shoot.file = file_;
    if (!root.IsMap()) {
      diags_.Error(At(root), "a Shoot manifest must be a YAML mapping",
                   "start from the example in docs/shoot.md (apiVersion, kind, metadata, spec)");
      return std::nullopt;
    }
    Known(root, "", {"apiVersion", "kind", "metadata", "spec", "status"});
    auto api = Required(root, "apiVersion", "the manifest");
    if (api && *api != kApiVersion) {
      diags_.Error(At(root["apiVersion"]), "apiVersion is '" + *api + "', but sprout reads " + kApiVersion,
                   std::string("write 'apiVersion: ") + kApiVersion + "'");
    }
    auto kind = Required(root, "kind", "the manifest");
    if (kind && *kind != "Shoot") {
      diags_.Error(At(root["kind"]), "kind is '" + *kind + "', but sprout reads a Shoot", "write 'kind: Shoot'");
    }
    if (auto meta = Map(root, "metadata", "the manifest")) {
      Known(*meta, "metadata.",
            {"name", "namespace", "labels", "annotations", "uid", "resourceVersion", "generation", "creationTimestamp",
             "finalizers", "managedFields"});
      if (auto name = Required(*meta, "name", "metadata")) {
        if (!DnsLabel(*name)) {
          diags_.Error(At((*meta)["name"]), "metadata.name '" + *name + "' is not a DNS label",
                       "use 1-63 characters of a-z, 0-9 and '-', starting and ending with a letter or digit");
        }
        shoot.name = *name;
      }
      if (auto ns = Required(*meta, "namespace", "metadata")) shoot.ns = *ns;
    }
    auto spec = Map(root, "spec", "the manifest");
    if (!spec) return Finish(std::move(shoot));
    Known(*spec, "spec.", {"kubernetes", "networking", "provider"});
    if (auto kube = Map(*spec, "kubernetes", "spec")) {
      Known(*kube, "spec.kubernetes.", {"version"});
      if (auto v = Required(*kube, "version", "spec.kubernetes")) {
        if (!KubeVersion(*v)) {
          diags_.Error(At((*kube)["version"]), "spec.kubernetes.version '" + *v + "' is not a Kubernetes version",
                       "write MAJOR.MINOR.PATCH, such as \"1.31.1\" (quoted, so YAML keeps it a string)");
        }
        shoot.kubernetes_version = *v;
      }
    }
    if (auto net = Map(*spec, "networking", "spec")) {
      Known(*net, "spec.networking.", {"pods", "services", "nodes"});
      std::vector<std::pair<std::string, Cidr>> nets;
      for (auto [key, out] : {std::pair<const char*, std::string*>{"pods", &shoot.pods_cidr},
                              {"services", &shoot.services_cidr},
                              {"nodes", &shoot.nodes_cidr}}) {
        auto v = Required(*net, key, "spec.networking");
        if (!v) continue;
        auto cidr = ParseCidr(*v);
        if (!cidr) {
          diags_.Error(At((*net)[key]), std::string("spec.networking.") + key + " '" + *v + "' is not a network",
                       "write an address and prefix length with the host bits zero, such as 10.96.0.0/12");
          continue;
        }
        for (const auto& [other, other_cidr] : nets) {
          if (CidrsOverlap(*cidr, other_cidr)) {
            diags_.Error(At((*net)[key]),
                         std::string("spec.networking.") + key + " " + *v + " overlaps spec.networking." + other,
                         "give pods, services and nodes separate address ranges");
          }
        }
        nets.emplace_back(key, *cidr);
        *out = *v;
      }
    }
    if (auto provider = Map(*spec, "provider", "spec")) {
      Known(*provider, "spec.provider.", {"workers"});
      ParseWorkers(*provider, shoot);
    }
    return Finish(std::move(shoot));
  }

 private:
  std::optional<Shoot> Finish(Shoot shoot) {
    if (diags_.has_errors()) return std::nullopt;
    return shoot;
  }

  void ParseWorkers(const YAML::Node& provider, Shoot& shoot) {
    auto workers = provider["workers"];
    if (!workers) {
      diags_.Error(At(provider), "spec.provider has no 'workers'",
                   "add a worker pool with 'controlPlane: {}' whose minimum/maximum give the control-plane count");
      return;
    }
    if (!workers.IsSequence()) {
      diags_.Error(At(workers), "spec.provider.workers must be a list of worker pools",
                   "write one pool per item, each starting with '- name:'");
      return;
    }
    bool have_cp = false;
    std::set<std::string> names;
    for (const auto& item : workers) {
      if (!item.IsMap()) {
        diags_.Error(At(item), "a worker pool must be a mapping", "write 'name:', 'minimum:' and 'maximum:' below it");
        continue;
      }
      Known(item, "spec.provider.workers[].", {"name", "minimum", "maximum", "controlPlane"});
      WorkerPool pool;
      pool.where = At(item);
      if (auto n = Required(item, "name", "a worker pool")) {
        pool.name = *n;
        if (!names.insert(*n).second) {
          diags_.Error(At(item["name"]), "worker pool '" + *n + "' appears twice", "give each pool its own name");
        }
      }
      auto minimum = Int(item, "minimum");
      auto maximum = Int(item, "maximum");
      if (minimum && maximum && *minimum > *maximum) {
        diags_.Error(At(item["minimum"]),
                     "pool '" + pool.name + "' has minimum " + std::to_string(*minimum) + " above its maximum " +
                         std::to_string(*maximum),
                     "make minimum at most maximum");
      }
      pool.minimum = minimum.value_or(0);
      pool.maximum = maximum.value_or(0);
      if (auto cp = item["controlPlane"]) {
        pool.control_plane = true;
        if (!cp.IsMap() && !cp.IsNull()) {
          diags_.Error(At(cp), "controlPlane must be an empty mapping", "write 'controlPlane: {}'");
        } else if (cp.IsMap()) {
          Known(cp, "spec.provider.workers[].controlPlane.", {});
        }
        if (have_cp) {
          diags_.Error(At(cp), "a second pool '" + pool.name + "' is marked controlPlane",
                       "mark exactly one worker pool with 'controlPlane: {}'");
          continue;
        }
        have_cp = true;
        if (minimum && *minimum < 1) {
          diags_.Error(At(item["minimum"]), "the control-plane pool needs at least one node",
                       "set minimum to 1 or more (3 for a cluster that survives the loss of a node)");
        }
        if (minimum && maximum && *minimum >= 1 && *minimum <= *maximum && *minimum % 2 == 0) {
          diags_.Warning(At(item["minimum"]),
                         "the control-plane pool has an even minimum of " + std::to_string(*minimum) +
                             ": etcd tolerates no more failures than with " + std::to_string(*minimum - 1) +
                             " members, yet every write waits for one more member, and a network split into two "
                             "equal halves leaves neither with a quorum",
                         "use an odd count (1, 3 or 5)");
        }
        shoot.control_plane = pool;
      } else {
        shoot.workers.push_back(pool);
      }
    }
    if (!have_cp) {
      diags_.Error(At(workers), "no worker pool is marked 'controlPlane: {}'",
                   "add 'controlPlane: {}' to the pool whose nodes run etcd and the API server");
    }
  }

  // Known warns about every key of map that sprout does not read (silently accepting the
  // metadata sprout ignores on purpose).
  void Known(const YAML::Node& map, const std::string& prefix, const std::vector<std::string>& keys) {
    static const std::set<std::string> kQuiet = {"status",
                                                 "metadata.labels",
                                                 "metadata.annotations",
                                                 "metadata.uid",
                                                 "metadata.resourceVersion",
                                                 "metadata.generation",
                                                 "metadata.creationTimestamp",
                                                 "metadata.finalizers",
                                                 "metadata.managedFields"};
    for (auto it = map.begin(); it != map.end(); ++it) {
      if (!it->first.IsScalar()) continue;
      const std::string key = it->first.Scalar();
      const std::string path = prefix + key;
      if (kQuiet.count(path) != 0) continue;
      if (std::find(keys.begin(), keys.end(), key) != keys.end()) continue;
      if (!warned_.insert(path).second) continue;
      auto guess = ClosestMatch(key, keys);
      if (guess && EditDistance(key, *guess) <= 2) {
        diags_.Warning(At(it->first), "sprout does not know '" + path + "'; it is ignored",
                       "did you mean '" + *guess + "'?");
      } else {
        diags_.Warning(At(it->first), "sprout does not use '" + path + "'; it is ignored",
                       "see docs/shoot.md for the fields sprout reads");
      }
    }
  }

  std::optional<YAML::Node> Map(const YAML::Node& parent, const char* key, const std::string& where) {
    auto n = parent[key];
    if (!n) {
      diags_.Error(At(parent), where + " has no '" + key + "'", std::string("add '") + key + ":' (docs/shoot.md)");
      return std::nullopt;
    }
    if (!n.IsMap()) {
      diags_.Error(At(n), std::string("'") + key + "' must be a mapping", "indent its fields below it");
      return std::nullopt;
    }
    return n;
  }

  std::optional<std::string> Required(const YAML::Node& parent, const char* key, const std::string& where) {
    auto n = parent[key];
    if (!n) {
      diags_.Error(At(parent), where + " has no '" + key + "'", std::string("add '") + key + ": ...' (docs/shoot.md)");
      return std::nullopt;
    }
    if (!n.IsScalar() || n.Scalar().empty()) {
      diags_.Error(At(n), std::string("'") + key + "' must be a single value", "write it as 'key: value'");
      return std::nullopt;
    }
    return n.Scalar();
  }

  std::optional<int> Int(const YAML::Node& parent, const char* key) {
    auto n = parent[key];
    if (!n) {
      diags_.Error(At(parent), std::string("a worker pool has no '") + key + "'", std::string("add '") + key + ": N'");
      return std::nullopt;
    }
    const std::string s = n.IsScalar() ? n.Scalar() : "";
    if (s.empty() || s.size() > 6 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      diags_.Error(At(n), std::string("'") + key + "' must be a whole number; got '" + s + "'",
                   "write a count such as 3");
      return std::nullopt;
    }
    return std::stoi(s);
  }

  Location At(const YAML::Node& n) const { return YamlAt(file_, n); }

  static bool DnsLabel(const std::string& s) {
    if (s.empty() || s.size() > 63 || s.front() == '-' || s.back() == '-') return false;
    return std::all_of(s.begin(), s.end(),
                       [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; });
  }

  static bool KubeVersion(const std::string& s) {
    auto parts = Split(s, '.');
    if (parts.size() < 2 || parts.size() > 3) return false;
    return std::all_of(parts.begin(), parts.end(), [](const std::string& p) {
      return !p.empty() && p.size() <= 4 &&
             std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; });
    });
  }

  std::string file_;
  Diagnostics& diags_;
  std::set<std::string> warned_;
};

}  // namespace

std::optional<Shoot> ParseShoot(std::string_view text, const std::string& file, Diagnostics& diags) {
  auto root = LoadYaml(text, file, "this", "fix the YAML syntax at this place", diags);
  if (!root) return std::nullopt;
  Diagnostics mine;
  auto shoot = ShootParser(file, mine).Parse(*root);
  diags.Append(mine);
  return shoot;
}

std::optional<Shoot> LoadShoot(const std::filesystem::path& path, Diagnostics& diags) {
  auto text = ReadFile(path);
  if (!text) {
    diags.Error({path.string(), 0, 0}, "cannot read the Shoot manifest: " + text.error(),
                "check the 'shoot:' path in the profile");
    return std::nullopt;
  }
  return ParseShoot(*text, path.string(), diags);
}

std::optional<Cidr> ParseCidr(std::string_view text) {
  auto slash = text.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  std::string addr(text.substr(0, slash));
  std::string len(text.substr(slash + 1));
  if (len.empty() || len.size() > 3 || (len.size() > 1 && len[0] == '0') ||
      !std::all_of(len.begin(), len.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  Cidr c;
  c.prefix = std::stoi(len);
  if (inet_pton(AF_INET, addr.c_str(), c.addr) == 1) {
    c.v6 = false;
    if (c.prefix > 32) return std::nullopt;
  } else if (inet_pton(AF_INET6, addr.c_str(), c.addr) == 1) {
    c.v6 = true;
    if (c.prefix > 128) return std::nullopt;
  } else {
    return std::nullopt;
  }
  const int bits = c.v6 ? 128 : 32;
  for (int b = c.prefix; b < bits; ++b) {
    if ((c.addr[b / 8] >> (7 - b % 8)) & 1) return std::nullopt;  // host bits must be zero
  }
  return c;
}

std::string FormatCidr(const Cidr& cidr) {
  char text[INET6_ADDRSTRLEN] = {};
  if (inet_ntop(cidr.v6 ? AF_INET6 : AF_INET, cidr.addr, text, sizeof text) == nullptr) return "";
  return std::string(text) + "/" + std::to_string(cidr.prefix);
}

bool CidrsOverlap(const Cidr& a, const Cidr& b) {
  if (a.v6 != b.v6) return false;
  const int common = std::min(a.prefix, b.prefix);
  for (int bit = 0; bit < common; ++bit) {
    if (((a.addr[bit / 8] >> (7 - bit % 8)) & 1) != ((b.addr[bit / 8] >> (7 - bit % 8)) & 1)) return false;
  }
  return true;
}

std::string NthAddress(const Cidr& net, unsigned n) {
  const int bits = net.v6 ? 128 : 32;
  const int host_bits = bits - net.prefix;
  if (host_bits < 32 && n >= (1u << host_bits)) return "";
  unsigned char out[16];
  std::copy(std::begin(net.addr), std::end(net.addr), out);
  const int bytes = net.v6 ? 16 : 4;
  unsigned carry = n;
  for (int i = bytes - 1; i >= 0 && carry != 0; --i) {
    const unsigned sum = out[i] + (carry & 0xff);
    out[i] = static_cast<unsigned char>(sum & 0xff);
    carry = (carry >> 8) + (sum >> 8);
  }
  char buf[INET6_ADDRSTRLEN];
  if (inet_ntop(net.v6 ? AF_INET6 : AF_INET, out, buf, sizeof buf) == nullptr) return "";
  return buf;
}

std::string ShootToJson(const Shoot& shoot) {
  nlohmann::ordered_json j;
  j["name"] = shoot.name;
  j["namespace"] = shoot.ns;
  j["kubernetesVersion"] = shoot.kubernetes_version;
  j["networking"] = {{"pods", shoot.pods_cidr}, {"services", shoot.services_cidr}, {"nodes", shoot.nodes_cidr}};
  j["controlPlane"] = {{"pool", shoot.control_plane.name},
                       {"minimum", shoot.control_plane.minimum},
                       {"maximum", shoot.control_plane.maximum}};
  auto pools = nlohmann::ordered_json::array();
  for (const auto& w : shoot.workers) {
    pools.push_back({{"name", w.name}, {"minimum", w.minimum}, {"maximum", w.maximum}});
  }
  j["workerPools"] = pools;
  return j.dump(2) + "\n";
}

}  // namespace sprout
