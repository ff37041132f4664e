#include "dns/zone.h"

#include <catch2/catch.hpp>

using namespace sprout;
using namespace sprout::dns;

TEST_CASE("dns: reverse zones cover a network on octet boundaries", "[dns]") {
  auto twelve = ReverseZones("10.96.0.0/12");
  REQUIRE(twelve);
  REQUIRE(twelve->size() == 16);
  CHECK(twelve->front() == "96.10.in-addr.arpa");
  CHECK(twelve->back() == "111.10.in-addr.arpa");
  auto sixteen = ReverseZones("10.244.0.0/16");
  REQUIRE(sixteen);
  CHECK(*sixteen == std::vector<std::string>{"244.10.in-addr.arpa"});
  auto host_bits = ReverseZones("10.244.1.0/23");
  REQUIRE(host_bits);
  CHECK(*host_bits == std::vector<std::string>{"0.244.10.in-addr.arpa", "1.244.10.in-addr.arpa"});
  CHECK(ReverseZones("10.0.0.0/7")->size() == 2);
  CHECK(ReverseZones("10.244.0.0/17")->size() == 128);
  CHECK_FALSE(ReverseZones("fd00::/64"));
  CHECK_FALSE(ReverseZones("10.0.0.0"));
  CHECK_FALSE(ReverseZones("10.0.0.0/33"));
}

TEST_CASE("dns: the config round-trips and each record lands in its zone", "[dns]") {
  auto c = MakeDnsConfig("cluster.local", {"10.96.0.0/12", "10.244.0.0/16"});
  REQUIRE(c);
  CHECK(c->zones.size() == 18);
  auto back = ParseDnsConfig(DnsConfigJson(*c));
  REQUIRE(back);
  CHECK(back->zones == c->zones);
  CHECK(ZoneOf(*c, "a.b.svc.cluster.local.") == "cluster.local");
  CHECK(ZoneOf(*c, "1.0.96.10.in-addr.arpa.") == "96.10.in-addr.arpa");
  CHECK(ZoneOf(*c, "11.0.18.198.in-addr.arpa.").empty());
  CHECK(ZoneOf(*c, "xcluster.local.").empty());

  std::vector<Record> records{{"kubernetes.default.svc.cluster.local.", "A", "10.96.0.1"},
                              {"1.0.96.10.in-addr.arpa.", "PTR", "kubernetes.default.svc.cluster.local."},
                              {"11.0.18.198.in-addr.arpa.", "PTR", "x.y.svc.cluster.local."}};
  auto files = ZoneFiles(*c, records, 42);
  REQUIRE(files.size() == 18);
  const std::string& main = files["cluster.local"];
  CHECK(main.find("$ORIGIN cluster.local.\n") != std::string::npos);
  CHECK(main.find("@ SOA ns.dns.cluster.local. hostmaster.cluster.local. 42 60 10 3600 5\n") != std::string::npos);
  CHECK(main.find("ns.dns.cluster.local. A 169.254.20.10\n") != std::string::npos);
  CHECK(main.find("kubernetes.default.svc.cluster.local. A 10.96.0.1\n") != std::string::npos);
  CHECK(files["96.10.in-addr.arpa"].find("1.0.96.10.in-addr.arpa. PTR kubernetes") != std::string::npos);
  for (const auto& [zone, text] : files) CHECK(text.find("198.in-addr") == std::string::npos);
}

TEST_CASE("dns: a config that is not sprout's is refused", "[dns]") {
  CHECK_FALSE(ParseDnsConfig("[]"));
  CHECK_FALSE(ParseDnsConfig(R"({"domain":"cluster.local","listen":"x","port":53,"zones":["other"]})"));
  CHECK_FALSE(ParseDnsConfig(R"({"domain":"cluster.local","listen":"x","port":53,"zones":["cluster.local","a b"]})"));
  CHECK_FALSE(MakeDnsConfig("bad domain", {}));
}

TEST_CASE("dns: knotd's configuration lists every zone and listens on the node-local address", "[dns]") {
  auto c = MakeDnsConfig("cluster.local", {"10.244.0.0/16"});
  REQUIRE(c);
  const std::string conf = KnotConfig(*c, "/var/lib/sprout/dns/zones", "/var/lib/sprout/dns/db", "/run/sprout-dns");
  CHECK(conf.find("    listen: 169.254.20.10@53\n") != std::string::npos);
  CHECK(conf.find("  - domain: cluster.local\n  - domain: 244.10.in-addr.arpa\n") != std::string::npos);
  CHECK(conf.find("    rundir: /run/sprout-dns\n") != std::string::npos);
}
