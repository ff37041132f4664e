#include "dns/zone.h"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>

namespace sprout::dns {

Result<std::vector<std::string>> ReverseZones(const std::string& cidr) {
  const auto slash = cidr.find('/');
  std::array<unsigned char, 4> b{};
  int bits = -1;
  if (slash != std::string::npos) {
    try {
      std::size_t used = 0;
      bits = std::stoi(cidr.substr(slash + 1), &used);
      if (used != cidr.size() - slash - 1) bits = -1;
    } catch (const std::exception&) {
      bits = -1;
    }
  }
  if (slash == std::string::npos || inet_pton(AF_INET, cidr.substr(0, slash).c_str(), b.data()) != 1 || bits < 0 ||
      bits > 32) {
    return Fail("'" + cidr + "' is not an IPv4 network in CIDR form (like 10.96.0.0/12)");
  }
  // The zones are on octet boundaries: round the prefix up to the next multiple of 8
  // (a /12 is sixteen /16 zones), with at least one octet of the address in the name.
  const int octets = std::max(1, (bits + 7) / 8);
  const int free_bits = octets * 8 - bits;
  if (free_bits > 8) return Fail("'" + cidr + "' would need more than 256 reverse zones");
  const std::uint32_t address =
      (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) | std::uint32_t{b[3]};
  const std::uint32_t mask = bits == 0 ? 0 : ~std::uint32_t{0} << (32 - bits);
  const std::uint32_t first = address & mask;
  std::vector<std::string> zones;
  const std::uint32_t count = std::uint32_t{1} << free_bits;
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::uint32_t net = first + (i << (32 - octets * 8));
    std::string name;
    for (int o = octets - 1; o >= 0; --o) name += std::to_string((net >> (24 - 8 * o)) & 0xff) + ".";
    zones.push_back(name + "in-addr.arpa");
  }
  return zones;
}

Result<DnsConfig> MakeDnsConfig(const std::string& domain, const std::vector<std::string>& cidrs) {
  DnsConfig c;
  if (!ValidName(domain)) return Fail("the cluster domain '" + domain + "' is not a DNS name");
  c.domain = domain;
  c.zones.push_back(domain);
  for (const auto& cidr : cidrs) {
    auto zones = ReverseZones(cidr);
    if (!zones) return Fail(zones.error());
    for (const auto& z : *zones) {
      if (std::find(c.zones.begin(), c.zones.end(), z) == c.zones.end()) c.zones.push_back(z);
    }
  }
  return c;
}

std::string DnsConfigJson(const DnsConfig& c) {
  nlohmann::ordered_json j;
  j["domain"] = c.domain;
  j["listen"] = c.listen;
  j["port"] = c.port;
  j["zones"] = c.zones;
  return j.dump(2) + "\n";
}

Result<DnsConfig> ParseDnsConfig(const std::string& json_text) {
  auto j = nlohmann::json::parse(json_text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Fail("the DNS configuration is not a JSON object");
  DnsConfig c;
  try {
    c.domain = j.at("domain").get<std::string>();
    c.listen = j.at("listen").get<std::string>();
    c.port = j.at("port").get<int>();
    c.zones = j.at("zones").get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& e) {
    return Fail(std::string("the DNS configuration lacks a field: ") + e.what());
  }
  if (c.zones.empty() || c.zones.front() != c.domain)
    return Fail("the DNS configuration's first zone is not its domain");
  for (const auto& z : c.zones) {
    if (!ValidName(z)) return Fail("the DNS configuration names a zone that is not a DNS name: '" + z + "'");
  }
  return c;
}

std::string ZoneOf(const DnsConfig& config, const std::string& name) {
  std::string best;
  for (const auto& z : config.zones) {
    const std::string origin = z + ".";
    if ((name == origin || name.ends_with("." + origin)) && z.size() > best.size()) best = z;
  }
  return best;
}

std::map<std::string, std::string> ZoneFiles(const DnsConfig& config, const std::vector<Record>& records,
                                             std::uint32_t serial) {
  std::map<std::string, std::string> files;
  const std::string ttl = std::to_string(kTtl);
  // The server names itself inside the cluster domain; it needs no address record
  // there, since nothing delegates to it.
  const std::string ns = "ns.dns." + config.domain + ".";
  for (const auto& z : config.zones) {
    files[z] = "; written by sprout-firstboot dns from the Kubernetes API (docs/dns.md)\n$ORIGIN " + z + ".\n$TTL " +
               ttl + "\n@ SOA " + ns + " hostmaster." + config.domain + ". " + std::to_string(serial) + " 60 10 3600 " +
               ttl + "\n@ NS " + ns + "\n";
  }
  // The name server's own address, inside the domain zone (its glue).
  files[config.domain] += ns + " A " + config.listen + "\n";
  for (const auto& r : records) {
    const std::string zone = ZoneOf(config, r.name);
    if (zone.empty()) continue;
    files[zone] += r.name + " " + r.type + " " + r.data + "\n";
  }
  return files;
}

std::string KnotConfig(const DnsConfig& config, const std::string& zones_dir, const std::string& db_dir,
                       const std::string& run_dir) {
  std::string out =
      "# knotd for the cluster's DNS, written by sprout (docs/dns.md): authoritative for the\n"
      "# cluster domain and the reverse zones of its networks; the zone files come from\n"
      "# sprout-firstboot dns.\n"
      "server:\n"
      "    rundir: " +
      run_dir +
      "\n"
      "    listen: " +
      config.listen + "@" + std::to_string(config.port) +
      "\n"
      "    udp-workers: 1\n"
      "    tcp-workers: 1\n"
      "    background-workers: 1\n"
      "    identity: \"\"\n"
      "    version: \"\"\n"
      "control:\n"
      "    listen: knot.sock\n"
      "database:\n"
      "    storage: " +
      db_dir +
      "\n"
      "log:\n"
      "  - target: syslog\n"
      "    any: notice\n"
      "template:\n"
      "  - id: default\n"
      "    storage: " +
      zones_dir +
      "\n"
      "    file: \"%s.zone\"\n"
      "    zonefile-sync: -1\n"
      "    zonefile-load: whole\n"
      "    journal-content: none\n"
      "    semantic-checks: off\n"
      "zone:\n";
  for (const auto& z : config.zones) out += "  - domain: " + z + "\n";
  return out;
}

std::string KnotUnit(const DnsConfig& config) {
  return "[Unit]\n"
         "Description=cluster DNS: knotd answers the cluster's names at " +
         config.listen +
         " (configured by sprout)\n"
         "Documentation=file:/usr/share/doc/sprout/dns.md\n"
         "Before=kubelet.service\n"
         "\n"
         "[Service]\n"
         "User=knot\n"
         "Group=knot\n"
         "AmbientCapabilities=CAP_NET_BIND_SERVICE\n"
         "RuntimeDirectory=sprout-dns\n"
         "StateDirectory=sprout-dns\n"
         "# The address every pod asks (the kubelet's clusterDNS), on a link of the node's own:\n"
         "# the dummy link sprout-dns, or the loopback where the kernel has no dummy links\n"
         "# (a container node on such a host); either way an address of this node alone.\n"
         "ExecStartPre=+/bin/sh -c 'link=sprout-dns; ip link show $link >/dev/null 2>&1 || "
         "ip link add $link type dummy 2>/dev/null || link=lo; ip addr replace " +
         config.listen +
         "/32 dev $link && ip link set $link up'\n"
         "ExecStart=/usr/sbin/knotd -c /" +
         std::string(kKnotConfigPath) +
         "\n"
         "Restart=always\n"
         "RestartSec=2\n"
         "\n"
         "[Install]\n"
         "WantedBy=multi-user.target\n";
}

std::string ControllerUnit() {
  return R"([Unit]
Description=cluster DNS controller: keeps knotd's zones current from the Kubernetes API (sprout-firstboot dns)
Documentation=file:/usr/share/doc/sprout/dns.md
Wants=sprout-dns.service
After=sprout-dns.service

[Service]
ExecStart=/usr/bin/sprout-firstboot dns
Restart=always
RestartSec=5

[Install]
WantedBy=multi-user.target
)";
}

}  // namespace sprout::dns
