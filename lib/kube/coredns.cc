#include "kube/coredns.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "dns/zone.h"
#include "shoot/shoot.h"
#include "util/json_field.h"

namespace sprout::kube {

namespace {

using ojson = nlohmann::ordered_json;

constexpr const char* kNamespace = "kube-system";
constexpr const char* kCustomDir = "/etc/coredns-custom";

ojson Meta(const std::string& name, bool namespaced = true) {
  ojson m;
  m["name"] = name;
  if (namespaced) m["namespace"] = kNamespace;
  m["labels"] = {{"k8s-app", "kube-dns"}, {"app.kubernetes.io/managed-by", "sprout"}};
  return m;
}

ApiObject Object(const std::string& path, const ojson& j) {
  const std::string ns = j["metadata"].contains("namespace") ? j["metadata"]["namespace"].get<std::string>() + "/" : "";
  return {path, j["kind"].get<std::string>() + " " + ns + j["metadata"]["name"].get<std::string>(), j.dump()};
}

ojson Port(const std::string& name, int port, const std::string& protocol, const char* port_key) {
  return {{"name", name}, {port_key, port}, {"protocol", protocol}};
}

ojson Deployment(const CoreDnsInput& in) {
  ojson container;
  container["name"] = "coredns";
  container["image"] = in.image;
  // Preloaded by digest: never pulled (an air-gapped node has nowhere to pull from).
  container["imagePullPolicy"] = "IfNotPresent";
  container["args"] = {"-conf", "/etc/coredns/Corefile"};
  container["resources"] = {{"requests", {{"cpu", "100m"}, {"memory", "70Mi"}}}, {"limits", {{"memory", "170Mi"}}}};
  container["ports"] = {Port("dns", 53, "UDP", "containerPort"), Port("dns-tcp", 53, "TCP", "containerPort"),
                        Port("metrics", 9153, "TCP", "containerPort")};
  container["volumeMounts"] = {{{"name", "config-volume"}, {"mountPath", "/etc/coredns"}, {"readOnly", true}},
                               {{"name", "custom-config-volume"}, {"mountPath", kCustomDir}, {"readOnly", true}}};
  container["livenessProbe"] = {{"httpGet", {{"path", "/health"}, {"port", 8080}, {"scheme", "HTTP"}}},
                                {"initialDelaySeconds", 60},
                                {"timeoutSeconds", 5},
                                {"successThreshold", 1},
                                {"failureThreshold", 5}};
  container["readinessProbe"] = {{"httpGet", {{"path", "/ready"}, {"port", 8181}, {"scheme", "HTTP"}}}};
  // Only the right to bind port 53; nothing written, no way to gain more.
  container["securityContext"] = {{"allowPrivilegeEscalation", false},
                                  {"capabilities", {{"add", {"NET_BIND_SERVICE"}}, {"drop", {"ALL"}}}},
                                  {"readOnlyRootFilesystem", true}};
  ojson pod;
  pod["priorityClassName"] = "system-cluster-critical";
  pod["serviceAccountName"] = "coredns";
  // Its own upstream is the node's resolv.conf, never itself.
  pod["dnsPolicy"] = "Default";
  pod["nodeSelector"] = {{"kubernetes.io/os", "linux"}};
  pod["tolerations"] = {{{"key", "CriticalAddonsOnly"}, {"operator", "Exists"}},
                        {{"key", "node-role.kubernetes.io/control-plane"}, {"effect", "NoSchedule"}}};
  // One replica a node where it can: a node's power loss takes one server, not both.
  pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = {
      {{"weight", 100},
       {"podAffinityTerm",
        {{"labelSelector",
          {{"matchExpressions", {{{"key", "k8s-app"}, {"operator", "In"}, {"values", {"kube-dns"}}}}}}},
         {"topologyKey", "kubernetes.io/hostname"}}}}};
  pod["containers"] = ojson::array({container});  // not {container}: clang reads that as a copy (CWG 2137)
  pod["volumes"] = {
      {{"name", "config-volume"},
       {"configMap", {{"name", "coredns"}, {"items", {{{"key", "Corefile"}, {"path", "Corefile"}}}}}}},
      {{"name", "custom-config-volume"}, {"configMap", {{"name", "coredns-custom"}, {"optional", true}}}}};
  ojson j;
  j["apiVersion"] = "apps/v1";
  j["kind"] = "Deployment";
  j["metadata"] = Meta("coredns");
  j["spec"]["replicas"] = in.replicas;
  j["spec"]["strategy"] = {{"type", "RollingUpdate"}, {"rollingUpdate", {{"maxUnavailable", 1}}}};
  j["spec"]["selector"]["matchLabels"] = {{"k8s-app", "kube-dns"}};
  j["spec"]["template"]["metadata"]["labels"] = {{"k8s-app", "kube-dns"}};
  j["spec"]["template"]["spec"] = pod;
  return j;
}

}  // namespace

std::string Corefile(const CoreDnsInput& in) {
  const std::string ttl = std::to_string(in.ttl);
  std::string zones = in.domain;
  for (const auto& z : in.reverse_zones) zones += " " + z;
  std::string out;
  out += ".:53 {\n";
  out += "    errors\n";
  out += "    health {\n        lameduck 5s\n    }\n";
  out += "    ready\n";
  out += "    kubernetes " + zones + " {\n";
  out += "        pods verified\n";
  out += "        ttl " + ttl + "\n";
  out += "    }\n";
  out += "    prometheus :9153\n";
  out += "    cache " + ttl + "\n";
  out += "    reload\n";
  out += "    loadbalance\n";
  out += std::string("    import ") + kCustomDir + "/*.override\n";
  out += "}\n";
  out += std::string("import ") + kCustomDir + "/*.server\n";
  return out;
}

Result<std::string> CoreDnsServiceIp(const std::string& services_cidr) {
  auto net = ParseCidr(services_cidr);
  if (!net) return Fail("the services network '" + services_cidr + "' is not a CIDR");
  std::string ip = NthAddress(*net, 10);
  if (ip.empty()) return Fail("the services network " + services_cidr + " has no 10th address for kube-dns");
  return ip;
}

Result<CoreDnsInput> CoreDnsInputFor(const std::map<std::string, std::string>& images, const std::string& services_cidr,
                                     const std::string& pods_cidr) {
  const auto image = images.find("coredns");
  if (image == images.end()) return Fail("the image preloads no CoreDNS (no images.coredns in its cluster record)");
  auto ip = CoreDnsServiceIp(services_cidr);
  if (!ip) return Fail(ip.error());
  CoreDnsInput in;
  in.image = image->second;
  in.service_ip = *ip;
  auto zones = dns::MakeDnsConfig(in.domain, {services_cidr, pods_cidr});
  if (!zones) return Fail("the Shoot's networks give no reverse zones: " + zones.error());
  in.reverse_zones.assign(zones->zones.begin() + 1, zones->zones.end());  // the domain comes first
  return in;
}

Result<std::vector<ApiObject>> CoreDnsObjects(const CoreDnsInput& in) {
  if (in.image.empty()) return Fail("no CoreDNS image: the image preloads none (cluster.json's images.coredns)");
  if (in.service_ip.empty()) return Fail("no address for the kube-dns Service");
  std::vector<ApiObject> out;

  ojson sa = {{"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", Meta("coredns")}};
  out.push_back(Object("/api/v1/namespaces/kube-system/serviceaccounts", sa));

  // What the kubernetes plugin lists and watches, and nothing else.
  ojson role = {{"apiVersion", "rbac.authorization.k8s.io/v1"},
                {"kind", "ClusterRole"},
                {"metadata", Meta("system:coredns", false)}};
  role["rules"] = {
      {{"apiGroups", {""}},
       {"resources", {"endpoints", "services", "pods", "namespaces"}},
       {"verbs", {"list", "watch"}}},
      {{"apiGroups", {"discovery.k8s.io"}}, {"resources", {"endpointslices"}}, {"verbs", {"list", "watch"}}}};
  out.push_back(Object("/apis/rbac.authorization.k8s.io/v1/clusterroles", role));

  ojson binding = {{"apiVersion", "rbac.authorization.k8s.io/v1"},
                   {"kind", "ClusterRoleBinding"},
                   {"metadata", Meta("system:coredns", false)}};
  binding["roleRef"] = {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "ClusterRole"}, {"name", "system:coredns"}};
  binding["subjects"] = {{{"kind", "ServiceAccount"}, {"name", "coredns"}, {"namespace", kNamespace}}};
  out.push_back(Object("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding));

  ojson config = {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", Meta("coredns")}};
  config["data"]["Corefile"] = Corefile(in);
  out.push_back(Object("/api/v1/namespaces/kube-system/configmaps", config));

  out.push_back(Object("/apis/apps/v1/namespaces/kube-system/deployments", Deployment(in)));

  ojson pdb = {{"apiVersion", "policy/v1"}, {"kind", "PodDisruptionBudget"}, {"metadata", Meta("coredns")}};
  pdb["spec"] = {{"maxUnavailable", 1}, {"selector", {{"matchLabels", {{"k8s-app", "kube-dns"}}}}}};
  out.push_back(Object("/apis/policy/v1/namespaces/kube-system/poddisruptionbudgets", pdb));

  ojson svc = {{"apiVersion", "v1"}, {"kind", "Service"}, {"metadata", Meta("kube-dns")}};
  svc["metadata"]["labels"]["kubernetes.io/name"] = "CoreDNS";
  svc["metadata"]["labels"]["kubernetes.io/cluster-service"] = "true";
  svc["metadata"]["annotations"] = {{"prometheus.io/port", "9153"}, {"prometheus.io/scrape", "true"}};
  svc["spec"]["selector"] = {{"k8s-app", "kube-dns"}};
  svc["spec"]["clusterIP"] = in.service_ip;
  svc["spec"]["ports"] = {Port("dns", 53, "UDP", "port"), Port("dns-tcp", 53, "TCP", "port"),
                          Port("metrics", 9153, "TCP", "port")};
  out.push_back(Object("/api/v1/namespaces/kube-system/services", svc));
  return out;
}

Result<std::vector<DnsPod>> ParseDnsPods(const std::string& json) {
  auto j = nlohmann::json::parse(json, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("items") || !j["items"].is_array()) {
    return Fail("the CoreDNS pod list is not a v1 PodList");
  }
  std::vector<DnsPod> out;
  for (const auto& item : j["items"]) {
    if (!item.is_object()) return Fail("the CoreDNS pod list has an item that is not an object");
    DnsPod p;
    const auto empty = nlohmann::json::object();
    const auto& meta = item.contains("metadata") ? item["metadata"] : empty;
    p.name = JsonString(meta, "name").value_or("");
    p.terminating = meta.is_object() && meta.contains("deletionTimestamp") && !meta["deletionTimestamp"].is_null();
    p.node = item.contains("spec") ? JsonString(item["spec"], "nodeName").value_or("") : "";
    const auto& status = item.contains("status") ? item["status"] : empty;
    if (status.is_object() && status.contains("conditions") && status["conditions"].is_array()) {
      for (const auto& c : status["conditions"]) {
        if (JsonString(c, "type").value_or("") == "Ready") p.ready = JsonString(c, "status").value_or("") == "True";
      }
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::string CoreDnsPodToMove(const std::vector<DnsPod>& pods, const std::vector<NodeView>& nodes) {
  std::map<std::string, std::vector<std::string>> on;  // node -> its CoreDNS pods, in name order
  for (const auto& p : pods) {
    if (p.node.empty() || !p.ready || p.terminating) return "";
    on[p.node].push_back(p.name);
  }
  bool free_node = false;
  for (const auto& n : nodes) {
    const bool tolerated = std::all_of(n.taint_keys.begin(), n.taint_keys.end(), [](const std::string& k) {
      return k == "node-role.kubernetes.io/control-plane" || k == "CriticalAddonsOnly";
    });
    if (n.ready && tolerated && on.count(n.name) == 0) free_node = true;
  }
  if (!free_node) return "";
  for (auto& [node, names] : on) {
    if (names.size() < 2) continue;
    std::sort(names.begin(), names.end());
    return names.back();
  }
  return "";
}

Result<std::string> CoreDnsList(const CoreDnsInput& in) {
  auto objects = CoreDnsObjects(in);
  if (!objects) return Fail(objects.error());
  ojson list = {{"apiVersion", "v1"}, {"kind", "List"}, {"items", ojson::array()}};
  for (const auto& o : *objects) list["items"].push_back(ojson::parse(o.json));
  return list.dump(2) + "\n";
}

}  // namespace sprout::kube
