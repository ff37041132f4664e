#include "kube/coredns.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

namespace sprout::kube {
namespace {

const std::string kImage = "localhost/sprout/coredns@sha256:" + std::string(64, 'a');

TEST_CASE("kube-dns sits on the services network's 10th address") {
  CHECK(CoreDnsServiceIp("10.96.0.0/12").value() == "10.96.0.10");
  CHECK(CoreDnsServiceIp("10.100.4.0/24").value() == "10.100.4.10");
  CHECK(CoreDnsServiceIp("fd00:10::/108").value() == "fd00:10::a");
  CHECK_FALSE(CoreDnsServiceIp("10.96.0.0/29").ok());  // 8 addresses: no 10th
  CHECK_FALSE(CoreDnsServiceIp("10.96.0.1/12").ok());  // host bits set
  CHECK_FALSE(CoreDnsServiceIp("").ok());
}

TEST_CASE("The CoreDNS objects: rights and configuration first, the Deployment behind kube-dns") {
  auto objects = CoreDnsObjects({kImage, "10.96.0.10"});
  REQUIRE(objects.ok());
  std::vector<std::string> kinds;
  for (const auto& o : *objects) kinds.push_back(nlohmann::json::parse(o.json)["kind"]);
  CHECK(kinds == std::vector<std::string>{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap",
                                          "Deployment", "PodDisruptionBudget", "Service"});
  auto deploy = nlohmann::json::parse((*objects)[4].json);
  CHECK((*objects)[4].path == "/apis/apps/v1/namespaces/kube-system/deployments");
  CHECK((*objects)[4].name == "Deployment kube-system/coredns");
  CHECK(deploy["metadata"]["labels"]["k8s-app"] == "kube-dns");
  CHECK(deploy["spec"]["replicas"] == 2);
  const auto& pod = deploy["spec"]["template"]["spec"];
  CHECK(deploy["spec"]["template"]["metadata"]["labels"]["k8s-app"] == "kube-dns");
  CHECK(pod["containers"][0]["image"] == kImage);
  CHECK(pod["serviceAccountName"] == "coredns");
  CHECK(pod["dnsPolicy"] == "Default");
  CHECK(pod["containers"][0]["securityContext"]["capabilities"]["drop"][0] == "ALL");
  CHECK(pod["containers"][0]["securityContext"]["capabilities"]["add"][0] == "NET_BIND_SERVICE");
  bool tolerates_control_plane = false;
  for (const auto& t : pod["tolerations"])
    tolerates_control_plane |= t.value("key", "") == "node-role.kubernetes.io/control-plane";
  CHECK(tolerates_control_plane);
  CHECK(pod["volumes"][1]["configMap"]["name"] == "coredns-custom");
  CHECK(pod["volumes"][1]["configMap"]["optional"] == true);

  auto svc = nlohmann::json::parse(objects->back().json);
  CHECK(svc["metadata"]["name"] == "kube-dns");
  CHECK(svc["metadata"]["namespace"] == "kube-system");
  CHECK(svc["spec"]["clusterIP"] == "10.96.0.10");
  CHECK(svc["spec"]["selector"]["k8s-app"] == "kube-dns");
  CHECK(svc["spec"]["ports"].size() == 3);
  CHECK(svc["spec"]["ports"][0]["protocol"] == "UDP");
  CHECK(svc["spec"]["ports"][1]["protocol"] == "TCP");

  auto role = nlohmann::json::parse((*objects)[1].json);
  CHECK(role["metadata"].contains("namespace") == false);
  CHECK(role["rules"][1]["resources"][0] == "endpointslices");
  for (const auto& rule : role["rules"]) CHECK(rule["verbs"] == nlohmann::json({"list", "watch"}));
  auto binding = nlohmann::json::parse((*objects)[2].json);
  CHECK(binding["subjects"][0]["name"] == "coredns");
  CHECK(binding["subjects"][0]["namespace"] == "kube-system");
}

TEST_CASE("The Corefile serves the cluster domain and the reverse zones, with the site's additions imported") {
  CoreDnsInput in{kImage, "10.96.0.10"};
  in.domain = "plant.local";
  in.reverse_zones = {"96.10.in-addr.arpa", "244.10.in-addr.arpa"};
  in.ttl = 7;
  const std::string c = Corefile(in);
  CHECK(c.find("kubernetes plant.local 96.10.in-addr.arpa 244.10.in-addr.arpa {") != std::string::npos);
  // Authoritative for the cluster's own networks: nothing to fall through to, nothing to loop through.
  CHECK(c.find("fallthrough") == std::string::npos);
  CHECK(c.find("loop") == std::string::npos);
  CHECK(c.find("pods verified") != std::string::npos);
  CHECK(c.find("ttl 7\n") != std::string::npos);
  CHECK(c.find("cache 7\n") != std::string::npos);
  CHECK(c.find("import /etc/coredns-custom/*.override") != std::string::npos);
  CHECK(c.find("import /etc/coredns-custom/*.server") != std::string::npos);
  CHECK(c.find("forward") == std::string::npos);  // air-gapped: no upstream unless the site adds one
  auto objects = CoreDnsObjects(in).value();
  CHECK(nlohmann::json::parse(objects[3].json)["data"]["Corefile"] == c);
}

TEST_CASE("CoreDNS objects need an image and an address; the List holds them all") {
  CHECK_FALSE(CoreDnsObjects({"", "10.96.0.10"}).ok());
  CHECK_FALSE(CoreDnsObjects({kImage, ""}).ok());
  auto list = nlohmann::json::parse(CoreDnsList({kImage, "10.96.0.10"}).value());
  CHECK(list["kind"] == "List");
  CHECK(list["items"].size() == 7);
}

TEST_CASE("The input comes from the cluster record's images and the services network") {
  auto in = CoreDnsInputFor({{"coredns", kImage}, {"pause", "x@sha256:1"}}, "10.96.0.0/12", "10.244.0.0/16");
  REQUIRE(in.ok());
  CHECK(in->image == kImage);
  CHECK(in->service_ip == "10.96.0.10");
  REQUIRE(in->reverse_zones.size() == 17);  // 16 for the /12, 1 for the /16
  CHECK(in->reverse_zones.front() == "96.10.in-addr.arpa");
  CHECK(in->reverse_zones.back() == "244.10.in-addr.arpa");
  auto none = CoreDnsInputFor({{"pause", "x@sha256:1"}}, "10.96.0.0/12", "10.244.0.0/16");
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().find("preloads no CoreDNS") != std::string::npos);
  CHECK_FALSE(CoreDnsInputFor({{"coredns", kImage}}, "10.96.0.0/29", "10.244.0.0/16").ok());
}

TEST_CASE("CoreDNS pods are spread: one of two on a node moves once another node may take it") {
  const auto node = [](const std::string& name, bool ready, std::vector<std::string> taints) {
    NodeView n{name};
    n.ready = ready;
    n.taint_keys = std::move(taints);
    return n;
  };
  const std::string cp = "node-role.kubernetes.io/control-plane";
  std::vector<DnsPod> both_on_1 = {{"coredns-b", "node-1", true, false}, {"coredns-a", "node-1", true, false}};
  // Only node-1 Ready: nowhere to go.
  CHECK(CoreDnsPodToMove(both_on_1, {node("node-1", true, {cp}), node("node-2", false, {cp})}).empty());
  // node-2 Ready and tolerated: the last by name moves, whoever decides.
  CHECK(CoreDnsPodToMove(both_on_1, {node("node-1", true, {cp}), node("node-2", true, {cp})}) == "coredns-b");
  // A worker with no taint takes one too; a cordoned node does not.
  CHECK(CoreDnsPodToMove(both_on_1, {node("node-1", true, {cp}), node("node-4", true, {})}) == "coredns-b");
  CHECK(CoreDnsPodToMove(both_on_1,
                         {node("node-1", true, {cp}), node("node-2", true, {"node.kubernetes.io/unschedulable"})})
            .empty());
  // Already spread, or a replica not Ready, terminating or unscheduled: nothing moves.
  const std::vector<NodeView> three = {node("node-1", true, {cp}), node("node-2", true, {cp}),
                                       node("node-3", true, {cp})};
  CHECK(CoreDnsPodToMove({{"a", "node-1", true, false}, {"b", "node-2", true, false}}, three).empty());
  CHECK(CoreDnsPodToMove({{"a", "node-1", true, false}, {"b", "node-1", false, false}}, three).empty());
  CHECK(CoreDnsPodToMove({{"a", "node-1", true, false}, {"b", "node-1", true, true}}, three).empty());
  CHECK(CoreDnsPodToMove({{"a", "node-1", true, false}, {"b", "", false, false}}, three).empty());
  CHECK(CoreDnsPodToMove({}, three).empty());
}

TEST_CASE("The CoreDNS pod list is read from a PodList") {
  auto pods = ParseDnsPods(R"({"kind": "PodList", "items": [
    {"metadata": {"name": "coredns-x"}, "spec": {"nodeName": "node-1"},
     "status": {"conditions": [{"type": "Ready", "status": "True"}]}},
    {"metadata": {"name": "coredns-y", "deletionTimestamp": "2026-12-02T10:00:00Z"}, "spec": {},
     "status": {"conditions": [{"type": "Ready", "status": "False"}]}}]})");
  REQUIRE(pods.ok());
  REQUIRE(pods->size() == 2);
  CHECK((*pods)[0].name == "coredns-x");
  CHECK((*pods)[0].node == "node-1");
  CHECK((*pods)[0].ready);
  CHECK_FALSE((*pods)[0].terminating);
  CHECK((*pods)[1].node.empty());
  CHECK_FALSE((*pods)[1].ready);
  CHECK((*pods)[1].terminating);
  CHECK_FALSE(ParseDnsPods("{}").ok());
  CHECK_FALSE(ParseDnsPods("not json").ok());
}

TEST_CASE("A PodList with fields of the wrong type is read without throwing") {
  auto odd = ParseDnsPods(R"({"items": [{"metadata": {"name": 7}, "spec": [], "status": {"conditions": [3,
    {"type": "Ready", "status": true}]}}]})");
  REQUIRE(odd.ok());
  REQUIRE(odd->size() == 1);
  CHECK((*odd)[0].name.empty());
  CHECK((*odd)[0].node.empty());
  CHECK_FALSE((*odd)[0].ready);
  CHECK_FALSE(ParseDnsPods(R"({"items": [5]})").ok());
}

}  // namespace
}  // namespace sprout::kube
