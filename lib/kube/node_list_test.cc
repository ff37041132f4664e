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

  std::vector<NodeView> more = {{"c", "10.244.9.0/24", "10.0.0.3"},
                                {"a", "10.244.10.0/24", "10.0.0.1"},
                                {"self", "10.244.2.0/24", "10.0.0.9"},
                                {"no-ip", "10.244.3.0/24", ""}};
  CHECK(PeerRoutes("self", more, kNets).routes ==
        std::vector<PodRoute>{{"10.244.10.0/24", "10.0.0.1"}, {"10.244.9.0/24", "10.0.0.3"}});
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
  // The other networks are optional: without them only networking.pods bounds.
  CHECK(Routed(PeerRoutes("node-1", nodes, PodNetworks{"10.244.0.0/16", "", ""})) ==
        std::vector<std::string>{"10.244.1.0/24 via 198.18.0.12"});
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
