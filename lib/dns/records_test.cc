#include "dns/records.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace sprout;
using namespace sprout::dns;
using nlohmann::json;

namespace {

// Objects as kube-apiserver 1.20 serves them, trimmed to what DNS reads.
json ServiceJson(const std::string& ns, const std::string& name, const json& spec) {
  return {{"metadata", {{"namespace", ns}, {"name", name}}}, {"spec", spec}};
}

json SliceJson(const std::string& ns, const std::string& name, const std::string& service, const json& endpoints,
               const json& ports) {
  return {{"metadata", {{"namespace", ns}, {"name", name}, {"labels", {{"kubernetes.io/service-name", service}}}}},
          {"addressType", "IPv4"},
          {"endpoints", endpoints},
          {"ports", ports}};
}

bool Has(const Records& r, const std::string& name, const std::string& type, const std::string& data) {
  for (const auto& x : r.records) {
    if (x.name == name && x.type == type && x.data == data) return true;
  }
  return false;
}

std::size_t Count(const Records& r, const std::string& name) {
  std::size_t n = 0;
  for (const auto& x : r.records) n += x.name == name ? 1 : 0;
  return n;
}

Objects Cluster() {
  Objects o;
  REQUIRE(Apply(o, Kind::kService,
                ServiceJson("default", "kubernetes",
                            {{"clusterIP", "10.96.0.1"},
                             {"clusterIPs", {"10.96.0.1"}},
                             {"type", "ClusterIP"},
                             {"ports", {{{"name", "https"}, {"protocol", "TCP"}, {"port", 443}}}}}),
                false));
  REQUIRE(
      Apply(o, Kind::kService,
            ServiceJson("shop", "db",
                        {{"clusterIP", "None"}, {"ports", {{{"name", "pg"}, {"protocol", "TCP"}, {"port", 5432}}}}}),
            false));
  REQUIRE(Apply(o, Kind::kEndpointSlice,
                SliceJson("shop", "db-abcde", "db",
                          {{{"addresses", {"10.244.1.5"}}, {"hostname", "db-0"}, {"conditions", {{"ready", true}}}},
                           {{"addresses", {"10.244.2.7"}}, {"conditions", {{"ready", true}}}},
                           {{"addresses", {"10.244.2.9"}}, {"conditions", {{"ready", false}}}}},
                          {{{"name", "pg"}, {"protocol", "TCP"}, {"port", 5432}}}),
                false));
  REQUIRE(Apply(o, Kind::kService,
                ServiceJson("shop", "mail", {{"type", "ExternalName"}, {"externalName", "smtp.example.org"}}), false));
  REQUIRE(Apply(o, Kind::kPod,
                {{"metadata", {{"namespace", "shop"}, {"name", "web-1"}}},
                 {"spec", {{"containers", json::array()}}},
                 {"status", {{"podIP", "10.244.1.9"}, {"podIPs", {{{"ip", "10.244.1.9"}}}}}}},
                false));
  REQUIRE(Apply(o, Kind::kPod,
                {{"metadata", {{"namespace", "kube-system"}, {"name", "etcd-node-1"}}},
                 {"spec", {{"hostNetwork", true}}},
                 {"status", {{"podIP", "198.18.0.11"}}}},
                false));
  return o;
}

}  // namespace

TEST_CASE("dns: a ClusterIP Service has its A, SRV for named ports and PTR records", "[dns]") {
  auto r = ClusterRecords(Cluster(), "cluster.local");
  CHECK(Has(r, "dns-version.cluster.local.", "TXT", "\"1.1.0\""));
  CHECK(Has(r, "kubernetes.default.svc.cluster.local.", "A", "10.96.0.1"));
  CHECK(Has(r, "_https._tcp.kubernetes.default.svc.cluster.local.", "SRV",
            "0 100 443 kubernetes.default.svc.cluster.local."));
  CHECK(Has(r, "1.0.96.10.in-addr.arpa.", "PTR", "kubernetes.default.svc.cluster.local."));
  CHECK(r.skipped.empty());
}

TEST_CASE("dns: a headless Service answers with its ready endpoints and their host records", "[dns]") {
  auto r = ClusterRecords(Cluster(), "cluster.local");
  const std::string svc = "db.shop.svc.cluster.local.";
  CHECK(Has(r, svc, "A", "10.244.1.5"));
  CHECK(Has(r, svc, "A", "10.244.2.7"));
  CHECK_FALSE(Has(r, svc, "A", "10.244.2.9"));  // not ready
  // hostname.subdomain for a pod with both set; the dashed address for the others.
  CHECK(Has(r, "db-0." + svc, "A", "10.244.1.5"));
  CHECK(Has(r, "10-244-2-7." + svc, "A", "10.244.2.7"));
  CHECK(Has(r, "_pg._tcp." + svc, "SRV", "0 100 5432 db-0." + svc));
  CHECK(Has(r, "_pg._tcp." + svc, "SRV", "0 100 5432 10-244-2-7." + svc));
  CHECK(Has(r, "5.1.244.10.in-addr.arpa.", "PTR", "db-0." + svc));
  CHECK(Count(r, "9.2.244.10.in-addr.arpa.") == 0);
}

TEST_CASE("dns: publishNotReadyAddresses publishes endpoints that are not ready", "[dns]") {
  Objects o = Cluster();
  o.services["shop/db"].publish_not_ready = true;
  auto r = ClusterRecords(o, "cluster.local");
  CHECK(Has(r, "db.shop.svc.cluster.local.", "A", "10.244.2.9"));
}

TEST_CASE("dns: ExternalName is a CNAME; pods have their dashed-address records", "[dns]") {
  auto r = ClusterRecords(Cluster(), "cluster.local");
  CHECK(Has(r, "mail.shop.svc.cluster.local.", "CNAME", "smtp.example.org."));
  CHECK(Has(r, "10-244-1-9.shop.pod.cluster.local.", "A", "10.244.1.9"));
  // A host-network pod has the node's address: no pod record for it.
  CHECK(Count(r, "198-18-0-11.kube-system.pod.cluster.local.") == 0);
}

TEST_CASE("dns: a deleted Service and its slices leave no record", "[dns]") {
  Objects o = Cluster();
  REQUIRE(Apply(o, Kind::kService, ServiceJson("default", "kubernetes", json::object()), true));
  REQUIRE(Apply(o, Kind::kEndpointSlice, SliceJson("shop", "db-abcde", "db", json::array(), json::array()), true));
  auto r = ClusterRecords(o, "cluster.local");
  CHECK(Count(r, "kubernetes.default.svc.cluster.local.") == 0);
  CHECK(Count(r, "1.0.96.10.in-addr.arpa.") == 0);
  CHECK(Count(r, "db.shop.svc.cluster.local.") == 0);
}

TEST_CASE("dns: a list replaces every object of its kind", "[dns]") {
  Objects o = Cluster();
  json list = {{"kind", "ServiceList"},
               {"items", {ServiceJson("default", "kubernetes", {{"clusterIP", "10.96.0.1"}})}}};
  REQUIRE(ReplaceAll(o, Kind::kService, list));
  CHECK(o.services.size() == 1);
  CHECK(o.pods.size() == 2);  // other kinds untouched
}

TEST_CASE("dns: fields that could inject a line into a zone file are left out and named", "[dns]") {
  Objects o;
  REQUIRE(
      Apply(o, Kind::kService,
            ServiceJson("x", "evil", {{"type", "ExternalName"}, {"externalName", "a.example.\n$INCLUDE /etc/shadow"}}),
            false));
  REQUIRE(Apply(o, Kind::kService, ServiceJson("x", "spaces", {{"type", "ExternalName"}, {"externalName", "a b.c"}}),
                false));
  REQUIRE(Apply(o, Kind::kService, ServiceJson("x", "ip", {{"type", "ExternalName"}, {"externalName", "10.0.0.1"}}),
                false));
  REQUIRE(Apply(o, Kind::kService,
                ServiceJson("x", "port", {{"clusterIP", "10.96.0.9"}, {"ports", {{{"name", "a\nb"}, {"port", 1}}}}}),
                false));
  REQUIRE(Apply(o, Kind::kService, ServiceJson("x", "headless", {{"clusterIP", "None"}}), false));
  REQUIRE(Apply(
      o, Kind::kEndpointSlice,
      SliceJson("x", "headless-1", "headless",
                {{{"addresses", {"10.244.0.3"}}, {"hostname", "h;x"}}, {{"addresses", {"not-an-ip"}}}}, json::array()),
      false));
  auto r = ClusterRecords(o, "cluster.local");
  for (const auto& rec : r.records) {
    CHECK(rec.name.find_first_of(" \n;$") == std::string::npos);
    CHECK(rec.data.find_first_of("\n;$") == std::string::npos);
  }
  CHECK(r.skipped.size() == 5);
  CHECK(Count(r, "port.x.svc.cluster.local.") == 0);
}

TEST_CASE("dns: objects that are not what the API serves are errors naming the field", "[dns]") {
  Objects o;
  auto bad = Apply(o, Kind::kService, ServiceJson("x", "y", {{"clusterIP", 7}}), false);
  REQUIRE_FALSE(bad);
  CHECK(bad.error() == "Service x/y: spec.clusterIP is not a string");
  auto not_bool = Apply(o, Kind::kService, ServiceJson("x", "y", {{"publishNotReadyAddresses", "yes"}}), false);
  REQUIRE_FALSE(not_bool);
  CHECK(not_bool.error() == "Service x/y: spec.publishNotReadyAddresses is not a boolean");
  auto host =
      Apply(o, Kind::kPod, {{"metadata", {{"namespace", "x"}, {"name", "p"}}}, {"spec", {{"hostNetwork", 1}}}}, false);
  REQUIRE_FALSE(host);
  CHECK(host.error() == "Pod x/p: spec.hostNetwork is not a boolean");
  auto no_name = Apply(o, Kind::kPod, {{"metadata", {{"namespace", "x"}}}}, false);
  REQUIRE_FALSE(no_name);
  CHECK(no_name.error() == "a Pod has no metadata.name");
  CHECK(o.services.empty());
}

TEST_CASE("dns: names and reverse names", "[dns]") {
  CHECK(ValidName("kubernetes.default.svc.cluster.local."));
  CHECK_FALSE(ValidName("-a.b"));
  CHECK_FALSE(ValidName(std::string(64, 'a') + ".b"));
  CHECK_FALSE(ValidName("a..b"));
  CHECK(ReverseName("10.96.0.10") == "10.0.96.10.in-addr.arpa.");
  CHECK(ReverseName("fd00::1").ends_with("0.0.d.f.ip6.arpa."));
  CHECK(ReverseName("nope").empty());
}

TEST_CASE("dns: EndpointSlices are listed at v1 first, and a node's own Pods by a field selector", "[dns]") {
  using sprout::dns::Kind;
  const auto slices = sprout::dns::ListPaths(Kind::kEndpointSlice);
  REQUIRE(slices.size() == 2);
  CHECK(slices[0] == "/apis/discovery.k8s.io/v1/endpointslices");
  CHECK(slices[1] == "/apis/discovery.k8s.io/v1beta1/endpointslices");
  CHECK(sprout::dns::ListPaths(Kind::kPod) == std::vector<std::string>{"/api/v1/pods"});
  CHECK(sprout::dns::OwnPodsPath("node-2") == "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-2");
  CHECK(sprout::dns::OwnPodsPath("a b&c") == "/api/v1/pods?fieldSelector=spec.nodeName%3Da%20b%26c");
}
