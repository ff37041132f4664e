// Cluster DNS zones (pure): which zones a node's server is authoritative for, each
// zone's file from the cluster's records, and the server's configuration. docs/dns.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dns/records.h"
#include "util/result.h"

namespace sprout::dns {

// kNodeLocalAddress is where every node's DNS server listens and what the kubelet gives
// pods as their nameserver: a link-local address on a dummy link of the node's own.
inline constexpr const char* kNodeLocalAddress = "169.254.20.10";
// kTtl is every record's TTL and the zones' negative-answer TTL, in seconds.
inline constexpr int kTtl = 5;

// DnsConfig is what the build bakes for the node (/usr/lib/sprout/dns/dns.json) and the
// controller reads: the cluster domain, the zones, where the server listens.
struct DnsConfig {
  std::string domain = "cluster.local";
  std::vector<std::string> zones;  // origins without the final dot: the domain first, then reverse zones
  std::string listen = kNodeLocalAddress;
  int port = 53;
};

// ReverseZones is the octet-aligned in-addr.arpa zones that together cover cidr
// ("10.96.0.0/12" -> 96.10.in-addr.arpa … 111.10.in-addr.arpa), at most 256 of them;
// an error names a CIDR that is not IPv4 or that would need more.
Result<std::vector<std::string>> ReverseZones(const std::string& cidr);

// MakeDnsConfig is the configuration for a cluster with these networks.
Result<DnsConfig> MakeDnsConfig(const std::string& domain, const std::vector<std::string>& cidrs);

std::string DnsConfigJson(const DnsConfig& c);
Result<DnsConfig> ParseDnsConfig(const std::string& json_text);

// ZoneOf is the zone of config that holds name (the longest matching origin), or "".
std::string ZoneOf(const DnsConfig& config, const std::string& name);

// ZoneFiles is every zone's file text for records: SOA (with serial) and NS first,
// then the zone's records in order. A record that falls in no zone is left out.
std::map<std::string, std::string> ZoneFiles(const DnsConfig& config, const std::vector<Record>& records,
                                             std::uint32_t serial);

// KnotConfig is knotd's configuration: listening on config's address, zone files in
// zones_dir, its database in db_dir, its PID file and control socket (knot.sock) in
// run_dir.
std::string KnotConfig(const DnsConfig& config, const std::string& zones_dir, const std::string& db_dir,
                       const std::string& run_dir);

// The node's files for DNS, baked by `sprout build` into a Kubernetes image (their
// paths are the units' and the controller's defaults).
inline constexpr const char* kDnsConfigPath = "usr/lib/sprout/dns/dns.json";
inline constexpr const char* kKnotConfigPath = "usr/lib/sprout/dns/knot.conf";

// KnotUnit runs knotd as its own user with the baked configuration, after giving the
// node the dummy link sprout-dns (the loopback where the kernel has none) with config's
// address; it starts before the kubelet.
std::string KnotUnit(const DnsConfig& config);
// ControllerUnit runs `sprout-firstboot dns` beside it.
std::string ControllerUnit();

}  // namespace sprout::dns
