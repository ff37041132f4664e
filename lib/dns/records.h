// Cluster DNS records (pure): the Kubernetes objects the DNS controller watches, read
// from the API server's JSON into plain structs, and the records of the Kubernetes
// DNS-Based Service Discovery specification (schema 1.1.0) made from them. docs/dns.md.
#pragma once

#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "util/result.h"

namespace sprout::dns {

// Port is a Service's or an EndpointSlice's port.
struct Port {
  std::string name;              // "" for an unnamed port (no SRV record)
  std::string protocol = "TCP";  // TCP, UDP or SCTP
  int port = 0;
};

// Service is what DNS needs of a v1 Service.
struct Service {
  std::string ns;
  std::string name;
  std::string type;                      // ClusterIP, NodePort, LoadBalancer, ExternalName
  std::vector<std::string> cluster_ips;  // empty for a headless Service (clusterIP None)
  std::string external_name;             // for type ExternalName
  bool publish_not_ready = false;        // spec.publishNotReadyAddresses
  std::vector<Port> ports;
};

// Endpoint is one endpoint of an EndpointSlice.
struct Endpoint {
  std::vector<std::string> addresses;
  bool ready = true;     // conditions.ready; unset counts as ready, as the API says
  std::string hostname;  // set for a pod with hostname and subdomain
};

// EndpointSlice is what DNS needs of a discovery.k8s.io EndpointSlice.
struct EndpointSlice {
  std::string ns;
  std::string name;
  std::string service;       // label kubernetes.io/service-name
  std::string address_type;  // IPv4, IPv6 or FQDN (FQDN slices are ignored)
  std::vector<Endpoint> endpoints;
  std::vector<Port> ports;
};

// Pod is what DNS needs of a v1 Pod.
struct Pod {
  std::string ns;
  std::string name;
  std::vector<std::string> ips;  // status.podIPs (or status.podIP)
  bool host_network = false;
};

// Kind is a watched kind; its API paths are ListPaths(kind).
enum class Kind { kService, kEndpointSlice, kPod };
const char* KindName(Kind kind);
// ListPaths are the paths of the cluster-wide list of kind, the newest API version
// first: EndpointSlices are discovery.k8s.io/v1 from 1.21 (the only one from 1.25),
// v1beta1 on 1.20. The watcher takes the first the server does not answer 404, and
// reads both (their fields that sprout reads are the same).
std::vector<std::string> ListPaths(Kind kind);
// OwnPodsPath lists only the Pods of the node named node_name (a spec.nodeName field
// selector): all that the node authorizer of Kubernetes 1.32+ lets a node list.
std::string OwnPodsPath(const std::string& node_name);

// Objects is the controller's whole view: every object of the three kinds by
// "namespace/name".
struct Objects {
  std::map<std::string, Service> services;
  std::map<std::string, EndpointSlice> slices;
  std::map<std::string, Pod> pods;
};

// Apply puts one object (an item of a list, or a watch event's object) into objects:
// replaced when present, removed when deleted is set. An object that does not parse is
// an error naming the kind and the field; objects is then unchanged.
Status Apply(Objects& objects, Kind kind, const nlohmann::json& object, bool deleted);

// ReplaceAll replaces every object of kind with the items of a list response.
Status ReplaceAll(Objects& objects, Kind kind, const nlohmann::json& list);

// Record is one resource record: an absolute name (with the final dot), a type and its
// data in zone-file form.
struct Record {
  std::string name;
  std::string type;  // A, AAAA, CNAME, SRV, PTR, TXT
  std::string data;
  bool operator==(const Record& o) const { return name == o.name && type == o.type && data == o.data; }
  bool operator<(const Record& o) const {
    return name != o.name ? name < o.name : type != o.type ? type < o.type : data < o.data;
  }
};

// Records is the cluster's records, sorted and without duplicates, and how many objects
// were left out because a name or an address in them is not valid DNS or IP (which
// also keeps a crafted field from ever reaching a zone file).
struct Records {
  std::vector<Record> records;
  std::vector<std::string> skipped;  // "Service ns/name: externalName ... is not a DNS name"
};

// ClusterRecords makes the records of domain ("cluster.local") for objects.
Records ClusterRecords(const Objects& objects, const std::string& domain);

// ValidLabel is a DNS label sprout writes into a zone: 1-63 bytes of letters, digits,
// '-' and '_', not starting or ending with '-'.
bool ValidLabel(const std::string& label);
// ValidName is a domain name of valid labels (a final dot allowed), at most 253 bytes.
bool ValidName(const std::string& name);

// ReverseName is the PTR owner of an IPv4 or IPv6 address ("5.0.96.10.in-addr.arpa.");
// "" when ip is not an address.
std::string ReverseName(const std::string& ip);

}  // namespace sprout::dns
