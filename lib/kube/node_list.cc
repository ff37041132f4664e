#include "kube/node_list.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <tuple>

#include "shoot/shoot.h"

namespace sprout::kube {

namespace {

using nlohmann::json;

constexpr const char* kControlPlaneLabel = "node-role.kubernetes.io/control-plane";
constexpr const char* kMasterLabel = "node-role.kubernetes.io/master";

// Member is obj[key], or nullptr when obj is null, not an object, or has no key or a
// null one (the API server omits empty fields; some clients write null).
const json* Member(const json* obj, const char* key) {
  if (obj == nullptr || !obj->is_object()) return nullptr;
  auto it = obj->find(key);
  return it == obj->end() || it->is_null() ? nullptr : &*it;
}

// Is says whether obj[key] is the string value.
bool Is(const json* obj, const char* key, const char* value) {
  const json* v = Member(obj, key);
  return v != nullptr && *v == value;
}

// NodeParser reads one item; where names it in every error ("items[2] (node-3)").
struct NodeParser {
  std::string where;

  Error Wrong(const std::string& field, const char* expected) const {
    return Fail("the NodeList's " + where + ": " + field + " is not " + expected);
  }

  // String is obj[key] as a string; absent is "".
  Result<std::string> String(const json* obj, const char* key, const std::string& field) const {
    const json* v = Member(obj, key);
    if (v == nullptr) return std::string();
    if (!v->is_string()) return Wrong(field, "a string");
    return v->get<std::string>();
  }

  // Array is obj[key] as an array; absent is an empty one.
  Result<json> Array(const json* obj, const char* key, const std::string& field) const {
    const json* v = Member(obj, key);
    if (v == nullptr) return json::array();
    if (!v->is_array()) return Wrong(field, "an array");
    return *v;
  }

  Result<NodeView> Parse(const json& item) {
    if (!item.is_object()) return Fail("the NodeList's " + where + " is not an object");
    NodeView n;
    const json* meta = Member(&item, "metadata");
    auto name = String(meta, "name", "metadata.name");
    if (!name) return Fail(name.error());
    if (name->empty()) return Fail("the NodeList's " + where + " has no metadata.name");
    n.name = *name;
    where += " (" + n.name + ")";
    auto created = String(meta, "creationTimestamp", "metadata.creationTimestamp");
    if (!created) return Fail(created.error());
    n.created = *created;
    if (const json* labels = Member(meta, "labels")) {
      if (!labels->is_object()) return Wrong("metadata.labels", "an object");
      for (const auto& [key, value] : labels->items()) {
        if (!value.is_string()) return Wrong("label " + key, "a string");
        n.labels[key] = value.get<std::string>();
      }
    }

    const json* spec = Member(&item, "spec");
    auto cidr = String(spec, "podCIDR", "spec.podCIDR");
    if (!cidr) return Fail(cidr.error());
    n.pod_cidr = *cidr;
    auto taints = Array(spec, "taints", "spec.taints");
    if (!taints) return Fail(taints.error());
    for (std::size_t i = 0; i < taints->size(); ++i) {
      auto key = String(&(*taints)[i], "key", "spec.taints[" + std::to_string(i) + "].key");
      if (!key) return Fail(key.error());
      n.taint_keys.push_back(*key);
    }

    const json* status = Member(&item, "status");
    auto addresses = Array(status, "addresses", "status.addresses");
    if (!addresses) return Fail(addresses.error());
    for (std::size_t i = 0; i < addresses->size(); ++i) {
      const json* a = &(*addresses)[i];
      if (!Is(a, "type", "InternalIP")) continue;
      auto ip = String(a, "address", "status.addresses[" + std::to_string(i) + "].address");
      if (!ip) return Fail(ip.error());
      if (ip->empty()) continue;
      n.internal_ip = *ip;
      break;  // the kubelet lists the node's primary address first
    }
    auto conditions = Array(status, "conditions", "status.conditions");
    if (!conditions) return Fail(conditions.error());
    for (const auto& c : *conditions) {
      if (Is(&c, "type", "Ready")) n.ready = Is(&c, "status", "True");
    }
    return n;
  }
};

}  // namespace

Result<std::vector<NodeView>> ParseNodeList(const std::string& text) {
  auto j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return Fail("the NodeList is not valid JSON");
  if (!j.is_object()) return Fail("the NodeList is not a JSON object");
  // An error reply is a Status object; its message says more than "no items" would.
  if (const json* kind = Member(&j, "kind"); kind != nullptr && *kind != "NodeList") {
    std::string message;
    if (const json* m = Member(&j, "message"); m != nullptr && m->is_string()) message = ": " + m->get<std::string>();
    return Fail("expected a NodeList, got a " + kind->dump() + message);
  }
  const json* items = Member(&j, "items");
  if (items == nullptr || !items->is_array()) return Fail("the NodeList has no items array");
  std::vector<NodeView> out;
  for (std::size_t i = 0; i < items->size(); ++i) {
    NodeParser p{"items[" + std::to_string(i) + "]"};
    auto n = p.Parse((*items)[i]);
    if (!n) return Fail(n.error());
    out.push_back(std::move(*n));
  }
  return out;
}

std::string CniConfList(const std::string& pod_cidr) {
  // ordered_json keeps the keys in the order written here, so the file is stable and
  // reads like the CNI documentation's examples.
  using nlohmann::ordered_json;
  ordered_json ipam = {{"type", "host-local"},
                       {"ranges", ordered_json::array({ordered_json::array({{{"subnet", pod_cidr}}})})},
                       {"routes", ordered_json::array({{{"dst", "0.0.0.0/0"}}})}};
  // No ipMasq: it would rewrite pod-to-pod traffic between nodes to the node address,
  // and the pod subnets are routed between nodes (PeerRoutes) instead. hairpinMode
  // lets a pod reach itself through its own Service address.
  ordered_json bridge = {{"type", "bridge"}, {"bridge", "cni0"},    {"isGateway", true},
                         {"ipMasq", false},  {"hairpinMode", true}, {"ipam", ipam}};
  ordered_json portmap = {{"type", "portmap"}, {"capabilities", {{"portMappings", true}}}};
  ordered_json conf = {
      {"cniVersion", "0.4.0"}, {"name", "sprout"}, {"plugins", ordered_json::array({bridge, portmap})}};
  return conf.dump(2) + "\n";
}

namespace {

// Inside says whether inner lies wholly within outer.
bool Inside(const Cidr& inner, const Cidr& outer) {
  return inner.v6 == outer.v6 && inner.prefix >= outer.prefix && CidrsOverlap(inner, outer);
}

// Host is an address as a /32 (or /128) network, or nothing when it is not an address.
std::optional<Cidr> Host(const std::string& address) {
  if (address.empty() || address.find('/') != std::string::npos) return std::nullopt;
  return ParseCidr(address + (address.find(':') == std::string::npos ? "/32" : "/128"));
}

// HostText is an address's canonical spelling (inet_ntop's).
std::string HostText(const Cidr& host) {
  std::string text = FormatCidr(host);
  return text.substr(0, text.find('/'));
}

// Timestamp is creationTimestamp when it has the one form the API server writes
// (RFC 3339 in UTC to the second, "2026-12-01T23:55:51Z"), which then sorts as text;
// anything else is "".
std::string Timestamp(const std::string& t) {
  static constexpr const char* kForm = "dddd-dd-ddTdd:dd:ddZ";
  if (t.size() != 20) return "";
  for (std::size_t i = 0; i < t.size(); ++i) {
    const bool digit = t[i] >= '0' && t[i] <= '9';
    if (kForm[i] == 'd' ? !digit : t[i] != kForm[i]) return "";
  }
  return t;
}

// NextHop checks n's InternalIP as a next hop and, when it passes and memory has no
// entry for n yet, remembers it. The result is "" (fine) or why not; known_out says
// whether formation's record names it.
std::string NextHop(const NodeView& n, const std::optional<Cidr>& node_net, const PodNetworks& networks,
                    const KnownAddresses& known, RouteMemory& memory, bool& known_out) {
  known_out = false;
  const std::string& ip = n.internal_ip;
  auto host = Host(ip);
  if (!node_net) {
    return "the cluster record gives no valid networking.nodes ('" + networks.nodes + "') to check its next hop " + ip +
           " against";
  }
  if (!host) return "its next hop (InternalIP) " + ip + " is not an address";
  if (HostText(*host) != ip) {
    return "its next hop " + ip + " is not written in its canonical form " + HostText(*host) +
           "; only that spelling is routed";
  }
  if (!Inside(*host, *node_net)) return "its next hop " + ip + " is not inside networking.nodes " + networks.nodes;
  auto& seen = memory.first_seen;
  if (auto rec = known.find(n.name); rec != known.end()) {
    auto want = Host(rec->second);
    if (!want || HostText(*want) != ip) {
      return "formation's record gives node " + n.name + " the address " + rec->second + ", not its InternalIP " + ip;
    }
    // The record proves the address: memory follows it (a control-plane node replaced
    // at a new address, its stale etcd member removed and the new one added).
    if (seen.count(n.name) != 0 || seen.size() < kMaxRememberedNodes) seen[n.name] = ip;
    known_out = true;
    return "";
  }
  if (auto it = seen.find(n.name); it != seen.end()) {
    if (it->second == ip) return "";
    return "its InternalIP changed from " + it->second + ", the address it was first seen with, to " + ip +
           "; a changed next hop is routed only when formation's record names it, and formation has no record "
           "of " +
           n.name;
  }
  if (seen.size() >= kMaxRememberedNodes) {
    return "this node remembers " + std::to_string(seen.size()) +
           " Nodes' first addresses already, the most it keeps, and routes no Node it has not seen before";
  }
  seen.emplace(n.name, ip);
  return "";
}

}  // namespace

Result<RouteMemory> ParseRouteMemory(const std::string& text) {
  auto j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return Fail("pod-routes.json is not valid JSON");
  if (!j.is_object()) return Fail("pod-routes.json is not a JSON object");
  const json* version = Member(&j, "version");
  if (version == nullptr || !version->is_number_integer() || *version != 1) {
    return Fail("pod-routes.json has no \"version\": 1 (a version this sprout-firstboot does not know)");
  }
  RouteMemory m;
  const json* seen = Member(&j, "firstSeen");
  if (seen == nullptr) return m;
  if (!seen->is_object()) return Fail("pod-routes.json: firstSeen is not an object");
  if (seen->size() > kMaxRememberedNodes) {
    return Fail("pod-routes.json: firstSeen has " + std::to_string(seen->size()) + " entries, more than the " +
                std::to_string(kMaxRememberedNodes) + " kept");
  }
  for (const auto& [name, address] : seen->items()) {
    if (name.empty()) return Fail("pod-routes.json: firstSeen has an entry with an empty node name");
    if (!address.is_string()) return Fail("pod-routes.json: firstSeen." + name + " is not a string");
    const std::string ip = address.get<std::string>();
    auto host = Host(ip);
    if (!host || HostText(*host) != ip) {
      return Fail("pod-routes.json: firstSeen." + name + " '" + ip + "' is not an address in its canonical form");
    }
    m.first_seen.emplace(name, ip);
  }
  return m;
}

std::string RenderRouteMemory(const RouteMemory& memory) {
  json seen = json::object();
  for (const auto& [name, ip] : memory.first_seen) seen[name] = ip;
  json j = {{"version", 1}, {"firstSeen", seen}};
  return j.dump(2) + "\n";
}

PodRoutePlan PeerRoutes(const std::string& self, const std::vector<NodeView>& nodes, const PodNetworks& networks,
                        const KnownAddresses& known, const RouteMemory& memory) {
  PodRoutePlan plan;
  plan.memory = memory;
  auto pods = ParseCidr(networks.pods);
  auto node_net = ParseCidr(networks.nodes);
  auto services = ParseCidr(networks.services);
  // First every candidate on its own, then the overlaps between those that passed.
  struct Candidate {
    const NodeView* node;
    Cidr cidr;
    bool known = false;   // formation's record names its address
    std::string created;  // Timestamp(creationTimestamp), "" when it gives none
    bool tied = false;    // refused: an overlap with a Node nothing tells apart from it
    bool beaten = false;  // refused: an overlap with a Node kept
  };
  std::vector<Candidate> candidates;
  std::optional<Cidr> own;
  for (const auto& n : nodes) {
    if (n.name == self) own = ParseCidr(n.pod_cidr);
  }
  for (const auto& n : nodes) {
    if (n.name == self || n.internal_ip.empty()) continue;
    bool is_known = false;
    const std::string hop = NextHop(n, node_net, networks, known, plan.memory, is_known);
    if (n.pod_cidr.empty()) continue;
    auto skip = [&](const std::string& why) { plan.skipped.push_back({n.name, n.pod_cidr, why}); };
    auto cidr = ParseCidr(n.pod_cidr);
    if (!pods) {
      skip("the cluster record gives no valid networking.pods ('" + networks.pods + "') to check it against");
    } else if (!cidr) {
      skip("it is not a network (an address and a decimal prefix length with no leading zero, the host bits zero)");
    } else if (FormatCidr(*cidr) != n.pod_cidr) {
      skip("it is not written in its canonical form " + FormatCidr(*cidr) +
           "; only that spelling is routed, so that the route installed is the network checked");
    } else if (!Inside(*cidr, *pods)) {
      skip("it is not inside networking.pods " + networks.pods);
    } else if (node_net && CidrsOverlap(*cidr, *node_net)) {
      skip("it overlaps networking.nodes " + networks.nodes);
    } else if (services && CidrsOverlap(*cidr, *services)) {
      skip("it overlaps networking.services " + networks.services);
    } else if (own && CidrsOverlap(*cidr, *own)) {
      skip("it overlaps this node's own pod subnet");
    } else if (!hop.empty()) {
      skip(hop);
    } else {
      candidates.push_back({&n, *cidr, is_known, Timestamp(n.created)});
    }
  }
  // Overlaps, in tiers of equal precedence (formation's record first, then the older
  // Node; one with no timestamp counts as the newest): a candidate that overlaps one
  // kept from a tier before is beaten; of the rest, two of one tier that overlap are
  // tied and neither is kept.
  auto rank = [](const Candidate& c) { return std::tuple(c.known ? 0 : 1, c.created.empty() ? 1 : 0, c.created); };
  std::stable_sort(candidates.begin(), candidates.end(),
                   [&](const Candidate& a, const Candidate& b) { return rank(a) < rank(b); });
  std::vector<const Candidate*> kept;
  for (std::size_t tier = 0; tier < candidates.size();) {
    std::size_t end = tier;
    while (end < candidates.size() && rank(candidates[end]) == rank(candidates[tier])) ++end;
    for (std::size_t i = tier; i < end; ++i) {
      Candidate& c = candidates[i];
      for (const Candidate* k : kept) {
        if (!CidrsOverlap(c.cidr, k->cidr)) continue;
        c.beaten = true;
        const std::string other = "it overlaps the pod subnet " + k->node->pod_cidr + " of node " + k->node->name;
        plan.skipped.push_back({c.node->name, c.node->pod_cidr,
                                k->known && !c.known
                                    ? other + ", whose address formation's record names (this one's it does not); " +
                                          k->node->name + "'s is routed"
                                    : other + ", an older Node (created " + k->created + ", this one " +
                                          (c.created.empty() ? "gives no creationTimestamp" : "created " + c.created) +
                                          "); " + k->node->name + "'s is routed"});
        break;
      }
    }
    for (std::size_t i = tier; i < end; ++i) {
      Candidate& c = candidates[i];
      if (c.beaten) continue;
      for (std::size_t j = tier; j < end; ++j) {
        const Candidate& d = candidates[j];
        if (i == j || d.beaten || !CidrsOverlap(c.cidr, d.cidr)) continue;
        c.tied = true;
        plan.skipped.push_back({c.node->name, c.node->pod_cidr,
                                "it overlaps the pod subnet " + d.node->pod_cidr + " of node " + d.node->name +
                                    ", and neither formation's record nor the Nodes' age tells the genuine one; "
                                    "neither is routed"});
        break;
      }
    }
    for (std::size_t i = tier; i < end; ++i) {
      if (!candidates[i].beaten && !candidates[i].tied) kept.push_back(&candidates[i]);
    }
    tier = end;
  }
  for (const Candidate* k : kept) plan.routes.push_back({k->node->pod_cidr, k->node->internal_ip});
  std::sort(plan.routes.begin(), plan.routes.end(),
            [](const PodRoute& a, const PodRoute& b) { return a.cidr != b.cidr ? a.cidr < b.cidr : a.via < b.via; });
  return plan;
}

std::map<std::string, std::string> KernelRoutes(const std::string& ip_route_output) {
  std::map<std::string, std::string> out;
  std::istringstream lines(ip_route_output);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string dest, word, via;
    if (!(words >> dest)) continue;
    while (words >> word) {
      if (word == "via") {
        words >> via;
        if (via == "inet" || via == "inet6") words >> via;  // "via inet6 ADDR" on a mixed route
        break;
      }
    }
    if (via.empty()) continue;
    if (dest == "default") dest = via.find(':') == std::string::npos ? "0.0.0.0/0" : "::/0";
    if (dest.find('/') == std::string::npos) dest += dest.find(':') == std::string::npos ? "/32" : "/128";
    out.emplace(dest, via);
  }
  return out;
}

std::vector<PodRoute> MissingRoutes(const std::vector<PodRoute>& planned,
                                    const std::map<std::string, std::string>& kernel) {
  std::vector<PodRoute> out;
  for (const auto& r : planned) {
    auto it = kernel.find(r.cidr);
    if (it == kernel.end() || it->second != r.via) out.push_back(r);
  }
  return out;
}

std::optional<std::string> ServiceRoute(const PodNetworks& networks) {
  if (!ParseCidr(networks.services)) return std::nullopt;
  return networks.services;
}

std::string ControlPlaneLabelPatch(bool master) {
  json patch = {{"metadata", {{"labels", {{kControlPlaneLabel, ""}, {kMasterLabel, master ? json("") : json()}}}}}};
  return patch.dump();
}

bool NeedsControlPlaneLabel(const NodeView& node, bool master) {
  return !node.labels.contains(kControlPlaneLabel) || node.labels.contains(kMasterLabel) != master;
}

bool WantsMasterLabel(const std::string& kubernetes_version) {
  const std::string v = kubernetes_version.rfind('v', 0) == 0 ? kubernetes_version.substr(1) : kubernetes_version;
  int major = 0;
  int minor = 0;
  if (std::sscanf(v.c_str(), "%d.%d", &major, &minor) != 2) return true;
  return major == 1 && minor < 24;
}

}  // namespace sprout::kube
