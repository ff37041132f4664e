#include "kube/node_list.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "shoot/shoot.h"

using namespace sprout;
using namespace sprout::kube;

namespace {

// A NodeList as kube-apiserver v1.20 returns it, trimmed: node-1 is the control plane
// (tainted, labelled), node-2 a ready worker, node-3 a worker that just registered and
// has no pod subnet yet.
const char* kNodeList = R"({
  "kind": "NodeList",
  "apiVersion": "v1",
  "metadata": {"resourceVersion": "1234"},
  "items": [
    {
      "metadata": {
        "name": "node-1",
        "uid": "7c2b1c9e-0000-4000-8000-000000000001",
        "creationTimestamp": "2026-12-01T23:55:51Z",
        "labels": {
          "kubernetes.io/hostname": "node-1",
          "kubernetes.io/os": "linux",
          "node-role.kubernetes.io/control-plane": "",
          "node-role.kubernetes.io/master": ""
        }
      },
      "spec": {
        "podCIDR": "10.244.0.0/24",
        "podCIDRs": ["10.244.0.0/24"],
        "taints": [{"key": "node-role.kubernetes.io/master", "effect": "NoSchedule"}]
      },
      "status": {
        "addresses": [
          {"type": "InternalIP", "address": "198.18.0.11"},
          {"type": "Hostname", "address": "node-1"}
        ],
        "conditions": [
          {"type": "MemoryPressure", "status": "False"},
          {"type": "Ready", "status": "True", "reason": "KubeletReady"}
        ]
      }
    },
    {
      "metadata": {"name": "node-2", "labels": {"kubernetes.io/hostname": "node-2"}},
      "spec": {"podCIDR": "10.244.1.0/24"},
      "status": {
        "addresses": [
          {"type": "Hostname", "address": "node-2"},
          {"type": "InternalIP", "address": "198.18.0.12"},
          {"type": "InternalIP", "address": "198.18.1.12"}
        ],
        "conditions": [{"type": "Ready", "status": "True"}]
      }
    },
    {
      "metadata": {"name": "node-3"},
      "spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]},
      "status": {
        "addresses": [{"type": "InternalIP", "address": "198.18.0.13"}],
        "conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}]
      }
    }
  ]
})";

}  // namespace

TEST_CASE("kube: ParseNodeList reads names, subnets, addresses, labels, taints and readiness", "[kube]") {
  auto nodes = ParseNodeList(kNodeList);
  REQUIRE(nodes);
  REQUIRE(nodes->size() == 3);
  const NodeView& cp = (*nodes)[0];
  CHECK(cp.name == "node-1");
  CHECK(cp.pod_cidr == "10.244.0.0/24");
  CHECK(cp.internal_ip == "198.18.0.11");
  CHECK(cp.labels.at("kubernetes.io/os") == "linux");
  CHECK(cp.taint_keys == std::vector<std::string>{"node-role.kubernetes.io/master"});
  CHECK(cp.ready);
  CHECK(cp.created == "2026-12-01T23:55:51Z");
  CHECK_FALSE(NeedsControlPlaneLabel(cp));

  const NodeView& worker = (*nodes)[1];
  CHECK(worker.internal_ip == "198.18.0.12");  // the first InternalIP, not the Hostname
  CHECK(worker.ready);
  CHECK(worker.taint_keys.empty());
  CHECK(NeedsControlPlaneLabel(worker));

  const NodeView& fresh = (*nodes)[2];
  CHECK(fresh.pod_cidr.empty());
  CHECK(fresh.labels.empty());
  CHECK(fresh.taint_keys == std::vector<std::string>{"node.kubernetes.io/not-ready"});
  CHECK_FALSE(fresh.ready);
}

TEST_CASE("kube: ParseNodeList accepts an empty list", "[kube]") {
  auto nodes = ParseNodeList(R"({"kind":"NodeList","apiVersion":"v1","metadata":{},"items":[]})");
  REQUIRE(nodes);
  CHECK(nodes->empty());
}

TEST_CASE("kube: ParseNodeList says what is wrong with a bad NodeList", "[kube]") {
  auto error = [](const std::string& json) {
    auto r = ParseNodeList(json);
    REQUIRE_FALSE(r);
    return r.error();
  };
  CHECK(error(R"({"kind": "NodeList", "items": [)") == "the NodeList is not valid JSON");
  CHECK(error("[]") == "the NodeList is not a JSON object");
  CHECK(error(R"({"kind":"NodeList"})") == "the NodeList has no items array");
  CHECK(error(R"({"kind":"Status","status":"Failure","message":"nodes is forbidden: User \"system:anonymous\" )"
              R"(cannot list resource \"nodes\"","code":403})") ==
        "expected a NodeList, got a \"Status\": nodes is forbidden: User \"system:anonymous\" cannot list resource "
        "\"nodes\"");
  CHECK(error(R"({"items":[{"metadata":{}}]})") == "the NodeList's items[0] has no metadata.name");
  CHECK(error(R"({"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"},"spec":{"podCIDR":7}}]})") ==
        "the NodeList's items[1] (b): spec.podCIDR is not a string");
  CHECK(error(R"({"items":[{"metadata":{"name":"a"},"spec":{"taints":{}}}]})") ==
        "the NodeList's items[0] (a): spec.taints is not an array");
  CHECK(error(R"({"items":[{"metadata":{"name":"a","labels":{"x":1}}}]})") ==
        "the NodeList's items[0] (a): label x is not a string");
  CHECK(error(R"({"items":[{"metadata":{"name":"a"},"status":{"addresses":[{"type":"InternalIP"},)"
              R"({"type":"InternalIP","address":false}]}}]})") ==
        "the NodeList's items[0] (a): status.addresses[1].address is not a string");
  CHECK(error(R"({"items":[3]})") == "the NodeList's items[0] is not an object");
  CHECK(error(R"({"items":[{"metadata":{"name":"a","creationTimestamp":5}}]})") ==
        "the NodeList's items[0] (a): metadata.creationTimestamp is not a string");
}

namespace {

const PodNetworks kNets{"10.244.0.0/16", "198.18.0.0/24", "10.96.0.0/12"};

// Routed is the "CIDR via IP" of each route, for short comparisons.
std::vector<std::string> Routed(const PodRoutePlan& plan) {
  std::vector<std::string> out;
  for (const auto& r : plan.routes) out.push_back(r.cidr + " via " + r.via);
  return out;
}

std::vector<std::string> SkippedNodes(const PodRoutePlan& plan) {
  std::vector<std::string> out;
  for (const auto& s : plan.skipped) out.push_back(s.node);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("kube: PeerRoutes reach every other node with a pod subnet, sorted", "[kube]") {
  auto nodes = ParseNodeList(kNodeList);
  REQUIRE(nodes);
  CHECK(PeerRoutes("node-2", *nodes, kNets).routes == std::vector<PodRoute>{{"10.244.0.0/24", "198.18.0.11"}});
  CHECK(PeerRoutes("node-3", *nodes, kNets).routes ==
        std::vector<PodRoute>{{"10.244.0.0/24", "198.18.0.11"}, {"10.244.1.0/24", "198.18.0.12"}});
  CHECK(PeerRoutes("node-3", *nodes, kNets).skipped.empty());

  std::vector<NodeView> more = {{"c", "10.244.9.0/24", "198.18.0.3"},
                                {"a", "10.244.10.0/24", "198.18.0.1"},
                                {"self", "10.244.2.0/24", "198.18.0.9"},
                                {"no-ip", "10.244.3.0/24", ""}};
  CHECK(PeerRoutes("self", more, kNets).routes ==
        std::vector<PodRoute>{{"10.244.10.0/24", "198.18.0.1"}, {"10.244.9.0/24", "198.18.0.3"}});
  CHECK(PeerRoutes("self", {}, kNets).routes.empty());
}

TEST_CASE("kube: PeerRoutes never routes a hostile Node's pod subnet", "[kube]") {
  // Each row: the Node list a bootstrap-token holder could make (node-1 is this node,
  // node-2 an honest peer), what is routed and which Nodes are refused. Before the
  // check, every one of these subnets was installed with `ip route replace`.
  const NodeView self{"node-1", "10.244.0.0/24", "198.18.0.11"};
  const NodeView honest{"node-2", "10.244.1.0/24", "198.18.0.12"};
  struct Row {
    const char* what;
    NodeView evil;
    std::vector<std::string> routed;
    std::vector<std::string> refused;
    const char* why;
  };
  const std::vector<Row> rows = {
      {"a /32 on node-2's address (reroutes etcd and the apiserver)",
       {"evil", "198.18.0.12/32", "198.18.0.66"},
       {"10.244.1.0/24 via 198.18.0.12"},
       {"evil"},
       "not inside networking.pods"},
      {"a /8 covering every private address",
       {"evil", "10.0.0.0/8", "198.18.0.66"},
       {"10.244.1.0/24 via 198.18.0.12"},
       {"evil"},
       "not inside networking.pods"},
      {"the default route",
       {"evil", "0.0.0.0/0", "198.18.0.66"},
       {"10.244.1.0/24 via 198.18.0.12"},
       {"evil"},
       "not inside networking.pods"},
      {"the whole pod network (overlaps every node's subnet)",
       {"evil", "10.244.0.0/16", "198.18.0.66"},
       {"10.244.1.0/24 via 198.18.0.12"},
       {"evil"},
       "overlaps this node's own pod subnet"},
      {"node-2's subnet again: an overlap routes neither",
       {"evil", "10.244.1.0/24", "198.18.0.66"},
       {},
       {"evil", "node-2"},
       "neither is routed"},
      {"a /25 inside node-2's subnet: neither",
       {"evil", "10.244.1.128/25", "198.18.0.66"},
       {},
       {"evil", "node-2"},
       "neither is routed"},
      {"a subnet inside this node's own",
       {"evil", "10.244.0.128/25", "198.18.0.66"},
       {"10.244.1.0/24 via 198.18.0.12"},
       {"evil"},
       "overlaps this node's own pod subnet"},
      {"the service network",
       {"evil", "10.96.0.0/12", "198.18.0.66"},
       {"10.244.1.0/24 via 198.18.0.12"},
       {"evil"},
       "not inside networking.pods"},
      {"an IPv6 subnet (the pod network is IPv4)",
       {"evil", "fd00::/64", "198.18.0.66"},
       {"10.244.1.0/24 via 198.18.0.12"},
       {"evil"},
       "not inside networking.pods"},
      {"IPv6 everything",
       {"evil", "::/0", "fd00::66"},
       {"10.244.1.0/24 via 198.18.0.12"},
       {"evil"},
       "not inside networking.pods"},
      {"not a network: host bits set",
       {"evil", "10.244.7.1/24", "198.18.0.66"},
       {"10.244.1.0/24 via 198.18.0.12"},
       {"evil"},
       "not a network"},
      {"not a network: text",
       {"evil", "10.244.7.0/24 dev eth0", "198.18.0.66"},
       {"10.244.1.0/24 via 198.18.0.12"},
       {"evil"},
       "not a network"},
      {"a leading-zero prefix (/026 is a /22 to iproute2, which reads it as octal)",
       {"evil", "10.244.8.0/026", "198.18.0.66"},
       {"10.244.1.0/24 via 198.18.0.12"},
       {"evil"},
       "not a network"},
      {"an address spelled with a leading zero",
       {"evil", "10.244.08.0/24", "198.18.0.66"},
       {"10.244.1.0/24 via 198.18.0.12"},
       {"evil"},
       "not a network"},
      {"a fresh honest subnet is routed",
       {"node-3", "10.244.2.0/24", "198.18.0.13"},
       {"10.244.1.0/24 via 198.18.0.12", "10.244.2.0/24 via 198.18.0.13"},
       {},
       ""},
  };
  for (const auto& row : rows) {
    INFO(row.what);
    auto plan = PeerRoutes("node-1", {self, honest, row.evil}, kNets);
    CHECK(Routed(plan) == row.routed);
    CHECK(SkippedNodes(plan) == row.refused);
    for (const auto& s : plan.skipped) CHECK_THAT(s.why, Catch::Contains(row.why));
  }
}

TEST_CASE("kube: PeerRoutes routes only the canonical spelling of a subnet", "[kube]") {
  // An IPv6 pod network: "fd00:10::1:0:0:0/80" is the network fd00:10:0:0:1::/80 written
  // another way; only the spelling the kernel shows is installed, so the route that is
  // installed is the text that was checked.
  const PodNetworks v6{"fd00:10::/64", "fd00:1::/64", "fd00:96::/108"};
  std::vector<NodeView> nodes = {{"node-1", "fd00:10::/80", "fd00:1::11"},
                                 {"node-2", "fd00:10::1:0:0:0/80", "fd00:1::12"},
                                 {"node-3", "FD00:10:0:0:2::/80", "fd00:1::13"},
                                 {"node-4", "fd00:10:0:0:3::/80", "fd00:1::14"}};
  auto plan = PeerRoutes("node-1", nodes, v6);
  CHECK(Routed(plan) == std::vector<std::string>{"fd00:10:0:0:3::/80 via fd00:1::14"});
  CHECK(SkippedNodes(plan) == std::vector<std::string>{"node-2", "node-3"});
  for (const auto& s : plan.skipped) CHECK_THAT(s.why, Catch::Contains("canonical form fd00:10:0:0:"));
  auto cidr = sprout::ParseCidr("10.244.1.0/24");
  REQUIRE(cidr);
  CHECK(sprout::FormatCidr(*cidr) == "10.244.1.0/24");
  CHECK(sprout::FormatCidr(*sprout::ParseCidr("FD00:10::2:0:0:0/80")) == "fd00:10:0:0:2::/80");
  CHECK_FALSE(sprout::ParseCidr("10.244.1.0/024"));
  CHECK(sprout::ParseCidr("0.0.0.0/0"));
}

TEST_CASE("kube: PeerRoutes keeps subnets off the node and service networks even inside the pod network", "[kube]") {
  // A misconfigured record whose pod network contains the others: the overlap checks
  // still hold.
  const PodNetworks wide{"10.0.0.0/8", "10.1.0.0/24", "10.96.0.0/12"};
  std::vector<NodeView> nodes = {{"node-1", "10.244.0.0/24", "10.1.0.11"},
                                 {"a", "10.1.0.0/25", "10.1.0.12"},
                                 {"b", "10.96.0.0/24", "10.1.0.13"},
                                 {"c", "10.244.1.0/24", "10.1.0.14"}};
  auto plan = PeerRoutes("node-1", nodes, wide);
  CHECK(Routed(plan) == std::vector<std::string>{"10.244.1.0/24 via 10.1.0.14"});
  REQUIRE(plan.skipped.size() == 2);
  CHECK(plan.skipped[0] == SkippedRoute{"a", "10.1.0.0/25", "it overlaps networking.nodes 10.1.0.0/24"});
  CHECK(plan.skipped[1] == SkippedRoute{"b", "10.96.0.0/24", "it overlaps networking.services 10.96.0.0/12"});
}

TEST_CASE("kube: PeerRoutes routes nothing without a pod network to check against", "[kube]") {
  std::vector<NodeView> nodes = {{"node-1", "10.244.0.0/24", "198.18.0.11"}, {"b", "10.244.1.0/24", "198.18.0.12"}};
  for (const char* pods : {"", "10.244.0.0", "banana/16"}) {
    INFO(pods);
    auto plan = PeerRoutes("node-1", nodes, PodNetworks{pods, "", ""});
    CHECK(plan.routes.empty());
    REQUIRE(plan.skipped.size() == 1);
    CHECK_THAT(plan.skipped[0].why, Catch::Contains("no valid networking.pods"));
  }
  // networking.services is optional: without it networking.pods and networking.nodes
  // bound. networking.nodes is not: without it no next hop can be checked.
  CHECK(Routed(PeerRoutes("node-1", nodes, PodNetworks{"10.244.0.0/16", "198.18.0.0/24", ""})) ==
        std::vector<std::string>{"10.244.1.0/24 via 198.18.0.12"});
  for (const char* node_net : {"", "198.18.0.12", "banana/24"}) {
    INFO(node_net);
    auto plan = PeerRoutes("node-1", nodes, PodNetworks{"10.244.0.0/16", node_net, ""});
    CHECK(plan.routes.empty());
    REQUIRE(plan.skipped.size() == 1);
    CHECK_THAT(plan.skipped[0].why, Catch::Contains("no valid networking.nodes"));
  }
}

TEST_CASE("kube: CniConfList is a bridge on the node's pod subnet plus portmap", "[kube]") {
  const std::string text = CniConfList("10.244.1.0/24");
  CHECK(text == CniConfList("10.244.1.0/24"));
  CHECK(text.ends_with("}\n"));
  auto j = nlohmann::json::parse(text);
  CHECK(j["cniVersion"] == "0.4.0");
  CHECK(j["name"] == "sprout");
  REQUIRE(j["plugins"].size() == 2);
  const auto& bridge = j["plugins"][0];
  CHECK(bridge["type"] == "bridge");
  CHECK(bridge["bridge"] == "cni0");
  CHECK(bridge["isGateway"] == true);
  CHECK(bridge["ipMasq"] == false);
  CHECK(bridge["hairpinMode"] == true);
  CHECK(bridge["ipam"]["type"] == "host-local");
  CHECK(bridge["ipam"]["ranges"][0][0]["subnet"] == "10.244.1.0/24");
  CHECK(bridge["ipam"]["routes"][0]["dst"] == "0.0.0.0/0");
  CHECK(j["plugins"][1]["type"] == "portmap");
  CHECK(j["plugins"][1]["capabilities"]["portMappings"] == true);
}

TEST_CASE("kube: ControlPlaneLabelPatch labels a node so NeedsControlPlaneLabel is satisfied", "[kube]") {
  auto patch = nlohmann::json::parse(ControlPlaneLabelPatch());
  NodeView node{"node-1"};
  CHECK(NeedsControlPlaneLabel(node));
  for (const auto& [key, value] : patch["metadata"]["labels"].items()) node.labels[key] = value.get<std::string>();
  CHECK(node.labels.size() == 2);
  CHECK(node.labels.at("node-role.kubernetes.io/control-plane").empty());
  CHECK_FALSE(NeedsControlPlaneLabel(node));
  node.labels.erase("node-role.kubernetes.io/master");
  CHECK(NeedsControlPlaneLabel(node));
}

TEST_CASE("kube: from 1.24 a control-plane node carries no master label", "[kube]") {
  CHECK(WantsMasterLabel("1.20.2"));
  CHECK(WantsMasterLabel("v1.23.0"));
  CHECK_FALSE(WantsMasterLabel("1.24.0"));
  CHECK_FALSE(WantsMasterLabel("v1.36.5"));
  CHECK(WantsMasterLabel(""));  // unknown: as before
  auto patch = nlohmann::json::parse(ControlPlaneLabelPatch(false));
  CHECK(patch["metadata"]["labels"]["node-role.kubernetes.io/control-plane"] == "");
  CHECK(patch["metadata"]["labels"]["node-role.kubernetes.io/master"].is_null());  // a merge patch's null removes it
  NodeView node{"node-1"};
  node.labels["node-role.kubernetes.io/control-plane"] = "";
  CHECK_FALSE(NeedsControlPlaneLabel(node, false));
  node.labels["node-role.kubernetes.io/master"] = "";
  CHECK(NeedsControlPlaneLabel(node, false));  // the old label goes
}

TEST_CASE("kube: ServiceRoute is networking.services when it is a network, else nothing", "[kube]") {
  CHECK(ServiceRoute(PodNetworks{"10.244.0.0/16", "198.18.0.0/24", "10.96.0.0/12"}) == "10.96.0.0/12");
  CHECK(ServiceRoute(PodNetworks{"fd00:10:244::/56", "", "fd00:10:96::/112"}) == "fd00:10:96::/112");
  // No Service network in the cluster record, or one that is not a network: no route.
  CHECK_FALSE(ServiceRoute(PodNetworks{"10.244.0.0/16", "", ""}));
  CHECK_FALSE(ServiceRoute(PodNetworks{"10.244.0.0/16", "", "10.96.0.1/12"}));
  CHECK_FALSE(ServiceRoute(PodNetworks{"10.244.0.0/16", "", "10.96.0.0"}));
  CHECK_FALSE(ServiceRoute(PodNetworks{"10.244.0.0/16", "", "10.96.0.0/12 dev lo"}));
}

TEST_CASE("kube: MissingRoutes installs what the kernel lacks or holds with another next hop", "[kube]") {
  // What `ip route show` printed on a node after someone ran `ip route flush
  // 10.244.1.0/24` and a Node's address changed: the flushed route and the moved one are
  // installed again, the one in place is left alone.
  const std::string table =
      "default via 198.18.0.1 dev eth0 proto static\n"
      "10.96.0.0/12 dev eth0 scope link\n"
      "10.244.2.0/24 via 198.18.0.13 dev eth0\n"
      "10.244.3.0/24 via 198.18.0.66 dev eth0\n"
      "198.18.0.0/24 dev eth0 proto kernel scope link src 198.18.0.11\n"
      "198.18.0.99 via 198.18.0.12 dev eth0\n";
  auto kernel = KernelRoutes(table);
  CHECK(kernel.at("0.0.0.0/0") == "198.18.0.1");
  CHECK(kernel.at("198.18.0.99/32") == "198.18.0.12");
  CHECK_FALSE(kernel.contains("10.96.0.0/12"));  // no next hop: not a pod route
  const std::vector<PodRoute> planned = {
      {"10.244.1.0/24", "198.18.0.12"}, {"10.244.2.0/24", "198.18.0.13"}, {"10.244.3.0/24", "198.18.0.14"}};
  CHECK(MissingRoutes(planned, kernel) ==
        std::vector<PodRoute>{{"10.244.1.0/24", "198.18.0.12"}, {"10.244.3.0/24", "198.18.0.14"}});
  const std::string repaired =
      "10.244.1.0/24 via 198.18.0.12 dev eth0\n"
      "10.244.2.0/24 via 198.18.0.13 dev eth0\n"
      "10.244.3.0/24 via 198.18.0.14 dev eth0\n";
  CHECK(MissingRoutes(planned, KernelRoutes(repaired)).empty());
  auto v6 = KernelRoutes("fd00:10::3:0:0/80 via fd00:1::14 dev eth0 metric 1024 pref medium\n");
  CHECK(v6.at("fd00:10::3:0:0/80") == "fd00:1::14");
}

namespace {

// A Node as the tests below write it: name, pod subnet, InternalIP, creationTimestamp.
NodeView N(const char* name, const char* cidr, const char* ip, const char* created = "") {
  NodeView n{name, cidr, ip};
  n.created = created;
  return n;
}

// Formation's record of the three control-plane nodes (the etcd member list).
const KnownAddresses kMembers{{"node-1", "198.18.0.11"}, {"node-2", "198.18.0.12"}, {"node-3", "198.18.0.13"}};

}  // namespace

TEST_CASE("kube: PeerRoutes never routes via a next hop outside the node network", "[kube]") {
  // node-2's kubelet certificate is within reach of any worker-secret holder, and with it
  // node-2's status: each row is node-2's InternalIP rewritten. Before the check, every
  // one was installed as the next hop for node-2's pods.
  const NodeView self = N("node-1", "10.244.0.0/24", "198.18.0.11");
  struct Row {
    const char* ip;
    const char* why;
  };
  for (const auto& row : std::vector<Row>{{"10.0.0.66", "is not inside networking.nodes 198.18.0.0/24"},
                                          {"198.18.1.12", "is not inside networking.nodes"},
                                          {"fd00::12", "is not inside networking.nodes"},
                                          {"198.18.0.012", "is not an address"},
                                          {"198.18.0.12 dev eth0", "is not an address"},
                                          {"198.18.0.0/24", "is not an address"},
                                          {"::ffff:198.18.0.12", "is not inside networking.nodes"}}) {
    INFO(row.ip);
    for (const KnownAddresses& known : {KnownAddresses{}, kMembers}) {
      RouteMemory memory;
      auto plan = PeerRoutes("node-1", {self, N("node-2", "10.244.1.0/24", row.ip)}, kNets, known, memory);
      CHECK(plan.routes.empty());
      REQUIRE(plan.skipped.size() == 1);
      CHECK(plan.skipped[0].node == "node-2");
      CHECK_THAT(plan.skipped[0].why, Catch::Contains(row.why));
      CHECK(plan.memory.first_seen.empty());  // a refused next hop is not remembered either
    }
  }
  // IPv6: the next hop is checked against an IPv6 node network the same way.
  const PodNetworks v6{"fd00:10::/64", "fd00:1::/64", "fd00:96::/108"};
  auto plan =
      PeerRoutes("node-1",
                 {N("node-1", "fd00:10::/80", "fd00:1::11"), N("node-2", "fd00:10:0:0:1::/80", "fd00:2::12"),
                  N("node-3", "fd00:10:0:0:2::/80", "FD00:1::13"), N("node-4", "fd00:10:0:0:3::/80", "fd00:1::14")},
                 v6);
  CHECK(Routed(plan) == std::vector<std::string>{"fd00:10:0:0:3::/80 via fd00:1::14"});
  REQUIRE(plan.skipped.size() == 2);
  CHECK(plan.skipped[0].why == "its next hop fd00:2::12 is not inside networking.nodes fd00:1::/64");
  CHECK_THAT(plan.skipped[1].why, Catch::Contains("not written in its canonical form fd00:1::13"));
}

TEST_CASE("kube: PeerRoutes routes a control-plane node only via the address formation's record names", "[kube]") {
  const NodeView self = N("node-1", "10.244.0.0/24", "198.18.0.11");
  const NodeView node3 = N("node-3", "10.244.2.0/24", "198.18.0.13");
  // node-2's InternalIP rewritten to an attacker's address inside the node network: the
  // node-network check passes, the record does not.
  auto plan = PeerRoutes("node-1", {self, N("node-2", "10.244.1.0/24", "198.18.0.66"), node3}, kNets, kMembers);
  CHECK(Routed(plan) == std::vector<std::string>{"10.244.2.0/24 via 198.18.0.13"});
  REQUIRE(plan.skipped.size() == 1);
  CHECK(plan.skipped[0] ==
        SkippedRoute{"node-2", "10.244.1.0/24",
                     "formation's record gives node node-2 the address 198.18.0.12, not its InternalIP 198.18.0.66"});
  CHECK(plan.memory.first_seen == std::map<std::string, std::string>{{"node-3", "198.18.0.13"}});
  // Memory does not outvote the record: an agent that first saw node-2 at the attacker's
  // address (before it could read etcd) still refuses it once the record says otherwise.
  RouteMemory poisoned{{{"node-2", "198.18.0.66"}}};
  plan = PeerRoutes("node-1", {self, N("node-2", "10.244.1.0/24", "198.18.0.66"), node3}, kNets, kMembers, poisoned);
  CHECK(Routed(plan) == std::vector<std::string>{"10.244.2.0/24 via 198.18.0.13"});
  CHECK(SkippedNodes(plan) == std::vector<std::string>{"node-2"});
  // and the genuine address is routed, and remembered in place of the poisoned one.
  plan = PeerRoutes("node-1", {self, N("node-2", "10.244.1.0/24", "198.18.0.12"), node3}, kNets, kMembers, poisoned);
  CHECK(Routed(plan) == std::vector<std::string>{"10.244.1.0/24 via 198.18.0.12", "10.244.2.0/24 via 198.18.0.13"});
  CHECK(plan.memory.first_seen.at("node-2") == "198.18.0.12");
}

TEST_CASE("kube: PeerRoutes refuses a Node whose address changed after it was routed", "[kube]") {
  const NodeView self = N("node-1", "10.244.0.0/24", "198.18.0.11");
  // Round 1: worker-4, of which formation has no record, is seen first at .14 and routed.
  auto first = PeerRoutes("node-1", {self, N("worker-4", "10.244.4.0/24", "198.18.0.14")}, kNets, kMembers);
  CHECK(Routed(first) == std::vector<std::string>{"10.244.4.0/24 via 198.18.0.14"});
  CHECK(first.memory.first_seen == std::map<std::string, std::string>{{"worker-4", "198.18.0.14"}});
  // The agent restarts: the memory comes back from pod-routes.json.
  auto kept = ParseRouteMemory(RenderRouteMemory(first.memory));
  REQUIRE(kept);
  CHECK(*kept == first.memory);
  // Round 2: worker-4's InternalIP rewritten to another address inside the node network.
  auto moved = PeerRoutes("node-1", {self, N("worker-4", "10.244.4.0/24", "198.18.0.66")}, kNets, kMembers, *kept);
  CHECK(moved.routes.empty());
  REQUIRE(moved.skipped.size() == 1);
  CHECK(moved.skipped[0].why ==
        "its InternalIP changed from 198.18.0.14, the address it was first seen with, to 198.18.0.66; a changed next "
        "hop is routed only when formation's record names it, and formation has no record of worker-4");
  CHECK(moved.memory == *kept);  // the first address stays
  // Deleting the Node and creating it again (which its kubelet certificate allows) does not
  // reset the memory.
  auto gone = PeerRoutes("node-1", {self}, kNets, kMembers, moved.memory);
  auto back = PeerRoutes("node-1", {self, N("worker-4", "10.244.4.0/24", "198.18.0.66")}, kNets, kMembers, gone.memory);
  CHECK(back.routes.empty());
  // Round 3: the address back as first seen is routed again.
  auto again = PeerRoutes("node-1", {self, N("worker-4", "10.244.4.0/24", "198.18.0.14")}, kNets, kMembers, *kept);
  CHECK(Routed(again) == std::vector<std::string>{"10.244.4.0/24 via 198.18.0.14"});
  // A control-plane node replaced at a new address: its etcd member now names that
  // address, so the change is followed and remembered.
  RouteMemory cp{{{"node-2", "198.18.0.12"}}};
  KnownAddresses replaced = kMembers;
  replaced["node-2"] = "198.18.0.22";
  auto followed = PeerRoutes("node-1", {self, N("node-2", "10.244.1.0/24", "198.18.0.22")}, kNets, replaced, cp);
  CHECK(Routed(followed) == std::vector<std::string>{"10.244.1.0/24 via 198.18.0.22"});
  CHECK(followed.memory.first_seen.at("node-2") == "198.18.0.22");
  // A Node's address is remembered even before it has a pod subnet.
  auto early = PeerRoutes("node-1", {self, N("worker-5", "", "198.18.0.15")}, kNets);
  CHECK(early.memory.first_seen.at("worker-5") == "198.18.0.15");
  CHECK(early.skipped.empty());
}

TEST_CASE("kube: PeerRoutes remembers at most kMaxRememberedNodes Nodes", "[kube]") {
  RouteMemory full;
  for (std::size_t i = 0; i < kMaxRememberedNodes; ++i) full.first_seen["n" + std::to_string(i)] = "198.18.0.200";
  auto plan = PeerRoutes("node-1",
                         {N("node-1", "10.244.0.0/24", "198.18.0.11"), N("new", "10.244.1.0/24", "198.18.0.14"),
                          N("n7", "10.244.2.0/24", "198.18.0.200")},
                         kNets, {}, full);
  CHECK(Routed(plan) == std::vector<std::string>{"10.244.2.0/24 via 198.18.0.200"});
  REQUIRE(plan.skipped.size() == 1);
  CHECK_THAT(plan.skipped[0].why, Catch::Contains("the most it keeps"));
  CHECK(plan.memory == full);
}

TEST_CASE("kube: of two overlapping pod subnets the known, else the older Node's is routed", "[kube]") {
  const NodeView self = N("node-1", "10.244.0.0/24", "198.18.0.11", "2026-01-01T00:00:00Z");
  // A forger's Node made before node-2's, with node-2's subnet: formation's record names
  // node-2's address, so node-2 wins although it is newer.
  auto plan = PeerRoutes("node-1",
                         {self, N("evil", "10.244.1.0/24", "198.18.0.66", "2026-01-01T00:00:01Z"),
                          N("node-2", "10.244.1.0/24", "198.18.0.12", "2026-01-01T00:05:00Z")},
                         kNets, kMembers);
  CHECK(Routed(plan) == std::vector<std::string>{"10.244.1.0/24 via 198.18.0.12"});
  REQUIRE(plan.skipped.size() == 1);
  CHECK(plan.skipped[0] == SkippedRoute{"evil", "10.244.1.0/24",
                                        "it overlaps the pod subnet 10.244.1.0/24 of node node-2, whose address "
                                        "formation's record names (this one's it does not); node-2's is routed"});
  // Two workers, neither in the record: the older Node keeps its subnet, in either order
  // and for a subnet inside the other's.
  const NodeView worker = N("worker-4", "10.244.4.0/24", "198.18.0.14", "2026-01-02T08:00:00Z");
  for (const char* cidr : {"10.244.4.0/24", "10.244.4.128/25", "10.244.0.0/21"}) {
    INFO(cidr);
    const NodeView evil = N("evil", cidr, "198.18.0.66", "2026-03-04T10:00:00Z");
    for (const auto& nodes : {std::vector<NodeView>{self, worker, evil}, std::vector<NodeView>{self, evil, worker}}) {
      plan = PeerRoutes("node-1", nodes, kNets, kMembers);
      if (std::string(cidr) == "10.244.0.0/21") {
        // this one overlaps this node's own subnet too: refused on its own
        CHECK(Routed(plan) == std::vector<std::string>{"10.244.4.0/24 via 198.18.0.14"});
        continue;
      }
      CHECK(Routed(plan) == std::vector<std::string>{"10.244.4.0/24 via 198.18.0.14"});
      REQUIRE(plan.skipped.size() == 1);
      CHECK(plan.skipped[0].node == "evil");
      CHECK_THAT(plan.skipped[0].why, Catch::Contains("an older Node (created 2026-01-02T08:00:00Z, this one created "
                                                      "2026-03-04T10:00:00Z); worker-4's is routed"));
    }
  }
  // A Node with no (or a malformed) creationTimestamp counts as the newest.
  plan = PeerRoutes("node-1", {self, N("evil", "10.244.4.0/24", "198.18.0.66", "yesterday"), worker}, kNets);
  CHECK(Routed(plan) == std::vector<std::string>{"10.244.4.0/24 via 198.18.0.14"});
  CHECK_THAT(plan.skipped.at(0).why, Catch::Contains("this one gives no creationTimestamp"));
  // Nothing tells two apart: neither.
  plan = PeerRoutes("node-1",
                    {self, N("a", "10.244.4.0/24", "198.18.0.14", "2026-01-02T08:00:00Z"),
                     N("b", "10.244.4.0/25", "198.18.0.15", "2026-01-02T08:00:00Z")},
                    kNets);
  CHECK(plan.routes.empty());
  CHECK(SkippedNodes(plan) == std::vector<std::string>{"a", "b"});
  for (const auto& s : plan.skipped) CHECK_THAT(s.why, Catch::Contains("neither is routed"));
  // One beaten Node does not take a third down with it: b (a /23) overlaps the older a
  // and the younger c, which do not overlap each other; a and c are routed.
  plan = PeerRoutes("node-1",
                    {self, N("c", "10.244.5.0/24", "198.18.0.16", "2026-01-03T00:00:00Z"),
                     N("b", "10.244.4.0/23", "198.18.0.15", "2026-01-02T12:00:00Z"),
                     N("a", "10.244.4.0/24", "198.18.0.14", "2026-01-02T08:00:00Z")},
                    kNets);
  CHECK(Routed(plan) == std::vector<std::string>{"10.244.4.0/24 via 198.18.0.14", "10.244.5.0/24 via 198.18.0.16"});
  CHECK(SkippedNodes(plan) == std::vector<std::string>{"b"});
}

TEST_CASE("kube: a normal cluster of three control-plane nodes and a worker routes every peer", "[kube]") {
  const std::vector<NodeView> nodes = {N("node-1", "10.244.0.0/24", "198.18.0.11", "2026-12-01T10:00:00Z"),
                                       N("node-2", "10.244.1.0/24", "198.18.0.12", "2026-12-01T10:01:00Z"),
                                       N("node-3", "10.244.2.0/24", "198.18.0.13", "2026-12-01T10:01:02Z"),
                                       N("worker-1", "10.244.3.0/24", "198.18.0.21", "2026-12-01T10:03:00Z")};
  for (const auto& self : nodes) {
    INFO(self.name);
    // A control-plane node holds the etcd member list; a worker has no record.
    const KnownAddresses known = self.name == "worker-1" ? KnownAddresses{} : kMembers;
    RouteMemory memory;
    for (int round = 0; round < 3; ++round) {
      auto plan = PeerRoutes(self.name, nodes, kNets, known, memory);
      CHECK(plan.skipped.empty());
      REQUIRE(plan.routes.size() == 3);
      for (const auto& n : nodes) {
        if (n.name == self.name) continue;
        CHECK(std::count(plan.routes.begin(), plan.routes.end(), PodRoute{n.pod_cidr, n.internal_ip}) == 1);
        CHECK(plan.memory.first_seen.at(n.name) == n.internal_ip);
      }
      CHECK(plan.memory.first_seen.size() == 3);
      memory = plan.memory;
    }
  }
}

TEST_CASE("kube: ParseRouteMemory reads what RenderRouteMemory writes and refuses the rest", "[kube]") {
  RouteMemory m{{{"node-2", "198.18.0.12"}, {"node-v6", "fd00:1::12"}}};
  const std::string text = RenderRouteMemory(m);
  auto back = ParseRouteMemory(text);
  REQUIRE(back);
  CHECK(*back == m);
  CHECK(ParseRouteMemory(R"({"version":1})")->first_seen.empty());
  auto error = [](const std::string& json) {
    auto r = ParseRouteMemory(json);
    REQUIRE_FALSE(r);
    return r.error();
  };
  CHECK(error("{") == "pod-routes.json is not valid JSON");
  CHECK(error("[]") == "pod-routes.json is not a JSON object");
  CHECK_THAT(error(R"({"firstSeen":{}})"), Catch::Contains("no \"version\": 1"));
  CHECK_THAT(error(R"({"version":2,"firstSeen":{}})"), Catch::Contains("no \"version\": 1"));
  CHECK_THAT(error(R"({"version":1.0})"), Catch::Contains("no \"version\": 1"));
  CHECK(error(R"({"version":1,"firstSeen":[]})") == "pod-routes.json: firstSeen is not an object");
  CHECK(error(R"({"version":1,"firstSeen":{"":"198.18.0.1"}})") ==
        "pod-routes.json: firstSeen has an entry with an empty node name");
  CHECK(error(R"({"version":1,"firstSeen":{"a":7}})") == "pod-routes.json: firstSeen.a is not a string");
  CHECK(error(R"({"version":1,"firstSeen":{"a":"198.18.0.01"}})") ==
        "pod-routes.json: firstSeen.a '198.18.0.01' is not an address in its canonical form");
  CHECK_THAT(error(R"({"version":1,"firstSeen":{"a":"FD00::1"}})"), Catch::Contains("canonical form"));
  nlohmann::json many = {{"version", 1}, {"firstSeen", nlohmann::json::object()}};
  for (std::size_t i = 0; i <= kMaxRememberedNodes; ++i) many["firstSeen"]["n" + std::to_string(i)] = "198.18.0.1";
  CHECK_THAT(error(many.dump()), Catch::Contains("more than the 4096 kept"));
}
