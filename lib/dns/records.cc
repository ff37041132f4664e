#include "dns/records.h"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <nlohmann/json.hpp>
#include <set>

namespace sprout::dns {

namespace {

using nlohmann::json;

const json* Member(const json* obj, const char* key) {
  if (obj == nullptr || !obj->is_object()) return nullptr;
  auto it = obj->find(key);
  return it == obj->end() || it->is_null() ? nullptr : &*it;
}

// Reader reads fields of one object; where ("Service default/web") goes into errors.
struct Reader {
  std::string where;

  Error Wrong(const std::string& field, const char* expected) const {
    return Fail(where + ": " + field + " is not " + expected);
  }
  Result<std::string> String(const json* obj, const char* key, const std::string& field) const {
    const json* v = Member(obj, key);
    if (v == nullptr) return std::string();
    if (!v->is_string()) return Wrong(field, "a string");
    return v->get<std::string>();
  }
  // Bool: the boolean at key, or otherwise when it is absent.
  Result<bool> Bool(const json* obj, const char* key, const std::string& field, bool otherwise) const {
    const json* v = Member(obj, key);
    if (v == nullptr) return otherwise;
    if (!v->is_boolean()) return Wrong(field, "a boolean");
    return v->get<bool>();
  }
  Result<std::vector<std::string>> Strings(const json* obj, const char* key, const std::string& field) const {
    std::vector<std::string> out;
    const json* v = Member(obj, key);
    if (v == nullptr) return out;
    if (!v->is_array()) return Wrong(field, "an array");
    for (const auto& s : *v) {
      if (!s.is_string()) return Wrong(field, "an array of strings");
      out.push_back(s.get<std::string>());
    }
    return out;
  }
  Result<std::vector<Port>> Ports(const json* obj, const std::string& field) const {
    std::vector<Port> out;
    const json* v = Member(obj, "ports");
    if (v == nullptr) return out;
    if (!v->is_array()) return Wrong(field, "an array");
    for (std::size_t i = 0; i < v->size(); ++i) {
      const json& p = (*v)[i];
      const std::string at = field + "[" + std::to_string(i) + "]";
      Port port;
      auto name = String(&p, "name", at + ".name");
      auto protocol = String(&p, "protocol", at + ".protocol");
      if (!name) return Fail(name.error());
      if (!protocol) return Fail(protocol.error());
      port.name = *name;
      if (!protocol->empty()) port.protocol = *protocol;
      const json* number = Member(&p, "port");
      if (number != nullptr && !number->is_number_integer()) return Wrong(at + ".port", "an integer");
      if (number != nullptr) port.port = number->get<int>();
      out.push_back(port);
    }
    return out;
  }
};

// Meta reads metadata.namespace and metadata.name, which every object must have.
Result<std::pair<std::string, std::string>> Meta(const json& object, Kind kind) {
  if (!object.is_object()) return Fail(std::string("a ") + KindName(kind) + " is not a JSON object");
  Reader r{KindName(kind)};
  const json* meta = Member(&object, "metadata");
  auto ns = r.String(meta, "namespace", "metadata.namespace");
  auto name = r.String(meta, "name", "metadata.name");
  if (!ns) return Fail(ns.error());
  if (!name) return Fail(name.error());
  if (name->empty()) return Fail(std::string("a ") + KindName(kind) + " has no metadata.name");
  return std::pair{*ns, *name};
}

Result<Service> ParseService(const json& object, const std::string& ns, const std::string& name) {
  Reader r{"Service " + ns + "/" + name};
  Service s;
  s.ns = ns;
  s.name = name;
  const json* spec = Member(&object, "spec");
  auto type = r.String(spec, "type", "spec.type");
  auto ip = r.String(spec, "clusterIP", "spec.clusterIP");
  auto ips = r.Strings(spec, "clusterIPs", "spec.clusterIPs");
  auto external = r.String(spec, "externalName", "spec.externalName");
  auto ports = r.Ports(spec, "spec.ports");
  for (const auto* e : {&type, &ip, &external}) {
    if (!*e) return Fail(e->error());
  }
  if (!ips) return Fail(ips.error());
  if (!ports) return Fail(ports.error());
  s.type = type->empty() ? "ClusterIP" : *type;
  s.external_name = *external;
  s.ports = *ports;
  std::vector<std::string> all = *ips;
  if (all.empty() && !ip->empty()) all.push_back(*ip);
  for (const auto& a : all) {
    if (a != "None" && !a.empty()) s.cluster_ips.push_back(a);
  }
  auto publish = r.Bool(spec, "publishNotReadyAddresses", "spec.publishNotReadyAddresses", false);
  if (!publish) return Fail(publish.error());
  s.publish_not_ready = *publish;
  return s;
}

Result<EndpointSlice> ParseSlice(const json& object, const std::string& ns, const std::string& name) {
  Reader r{"EndpointSlice " + ns + "/" + name};
  EndpointSlice s;
  s.ns = ns;
  s.name = name;
  const json* labels = Member(Member(&object, "metadata"), "labels");
  auto service = r.String(labels, "kubernetes.io/service-name", "label kubernetes.io/service-name");
  auto type = r.String(&object, "addressType", "addressType");
  auto ports = r.Ports(&object, "ports");
  if (!service) return Fail(service.error());
  if (!type) return Fail(type.error());
  if (!ports) return Fail(ports.error());
  s.service = *service;
  s.address_type = *type;
  s.ports = *ports;
  const json* endpoints = Member(&object, "endpoints");
  if (endpoints != nullptr && !endpoints->is_array()) return r.Wrong("endpoints", "an array");
  for (std::size_t i = 0; endpoints != nullptr && i < endpoints->size(); ++i) {
    const json& e = (*endpoints)[i];
    const std::string at = "endpoints[" + std::to_string(i) + "]";
    Endpoint ep;
    auto addresses = r.Strings(&e, "addresses", at + ".addresses");
    auto hostname = r.String(&e, "hostname", at + ".hostname");
    if (!addresses) return Fail(addresses.error());
    if (!hostname) return Fail(hostname.error());
    ep.addresses = *addresses;
    ep.hostname = *hostname;
    auto ready = r.Bool(Member(&e, "conditions"), "ready", at + ".conditions.ready", true);
    if (!ready) return Fail(ready.error());
    ep.ready = *ready;
    s.endpoints.push_back(ep);
  }
  return s;
}

Result<Pod> ParsePod(const json& object, const std::string& ns, const std::string& name) {
  Reader r{"Pod " + ns + "/" + name};
  Pod p;
  p.ns = ns;
  p.name = name;
  const json* spec = Member(&object, "spec");
  auto host = r.Bool(spec, "hostNetwork", "spec.hostNetwork", false);
  if (!host) return Fail(host.error());
  p.host_network = *host;
  const json* status = Member(&object, "status");
  if (const json* ips = Member(status, "podIPs")) {
    if (!ips->is_array()) return r.Wrong("status.podIPs", "an array");
    for (std::size_t i = 0; i < ips->size(); ++i) {
      auto ip = r.String(&(*ips)[i], "ip", "status.podIPs[" + std::to_string(i) + "].ip");
      if (!ip) return Fail(ip.error());
      if (!ip->empty()) p.ips.push_back(*ip);
    }
  }
  auto ip = r.String(status, "podIP", "status.podIP");
  if (!ip) return Fail(ip.error());
  if (p.ips.empty() && !ip->empty()) p.ips.push_back(*ip);
  return p;
}

template <typename T>
void Put(std::map<std::string, T>& map, const std::string& key, Result<T>&& value, bool deleted) {
  if (deleted) {
    map.erase(key);
  } else {
    map[key] = std::move(value.value());
  }
}

// Family is 4 or 6 for an address, 0 for anything else.
int Family(const std::string& ip) {
  std::array<unsigned char, 16> buf{};
  if (inet_pton(AF_INET, ip.c_str(), buf.data()) == 1) return 4;
  if (inet_pton(AF_INET6, ip.c_str(), buf.data()) == 1) return 6;
  return 0;
}

// Dashed is an address as one label: 10.244.1.5 -> 10-244-1-5, fd00::5 -> fd00--5.
std::string Dashed(const std::string& ip) {
  std::string out = ip;
  std::replace(out.begin(), out.end(), '.', '-');
  std::replace(out.begin(), out.end(), ':', '-');
  return out;
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// Builder collects records and the objects left out.
struct Builder {
  Records out;

  void Address(const std::string& name, const std::string& ip) {
    const int family = Family(ip);
    if (family != 0) out.records.push_back({name, family == 4 ? "A" : "AAAA", ip});
  }
  void Ptr(const std::string& ip, const std::string& name) {
    const std::string owner = ReverseName(ip);
    if (!owner.empty()) out.records.push_back({owner, "PTR", name});
  }
  void Srv(const std::string& base, const Port& port, const std::string& target) {
    if (port.name.empty() || port.port <= 0 || port.port > 65535) return;
    out.records.push_back({"_" + port.name + "._" + Lower(port.protocol) + "." + base, "SRV",
                           "0 100 " + std::to_string(port.port) + " " + target});
  }
};

// KindFacts are a watched kind's name in messages and the paths of its cluster-wide
// list, newest first.
struct KindFacts {
  const char* name;
  std::vector<std::string> list_paths;
};

KindFacts FactsOf(Kind kind) {
  switch (kind) {
    case Kind::kService:
      return {"Service", {"/api/v1/services"}};
    case Kind::kEndpointSlice:
      return {"EndpointSlice",
              {"/apis/discovery.k8s.io/v1/endpointslices", "/apis/discovery.k8s.io/v1beta1/endpointslices"}};
    case Kind::kPod:
      return {"Pod", {"/api/v1/pods"}};
  }
  return {"?", {}};
}

}  // namespace

const char* KindName(Kind kind) { return FactsOf(kind).name; }

std::vector<std::string> ListPaths(Kind kind) { return FactsOf(kind).list_paths; }

std::string OwnPodsPath(const std::string& node_name) {
  std::string escaped;
  for (const unsigned char c : node_name) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_') {
      escaped += static_cast<char>(c);
    } else {
      static const char* hex = "0123456789ABCDEF";
      escaped += {'%', hex[c >> 4], hex[c & 15]};
    }
  }
  return "/api/v1/pods?fieldSelector=spec.nodeName%3D" + escaped;
}

Status Apply(Objects& objects, Kind kind, const json& object, bool deleted) {
  auto meta = Meta(object, kind);
  if (!meta) return Fail(meta.error());
  const auto& [ns, name] = *meta;
  const std::string key = ns + "/" + name;
  switch (kind) {
    case Kind::kService: {
      auto s = ParseService(object, ns, name);
      if (!s && !deleted) return Fail(s.error());
      Put(objects.services, key, std::move(s), deleted);
      break;
    }
    case Kind::kEndpointSlice: {
      auto s = ParseSlice(object, ns, name);
      if (!s && !deleted) return Fail(s.error());
      Put(objects.slices, key, std::move(s), deleted);
      break;
    }
    case Kind::kPod: {
      auto p = ParsePod(object, ns, name);
      if (!p && !deleted) return Fail(p.error());
      Put(objects.pods, key, std::move(p), deleted);
      break;
    }
  }
  return Ok{};
}

Status ReplaceAll(Objects& objects, Kind kind, const json& list) {
  const json* items = Member(&list, "items");
  if (items != nullptr && !items->is_array()) return Fail(std::string("the ") + KindName(kind) + "List has no items");
  Objects fresh = objects;
  switch (kind) {
    case Kind::kService:
      fresh.services.clear();
      break;
    case Kind::kEndpointSlice:
      fresh.slices.clear();
      break;
    case Kind::kPod:
      fresh.pods.clear();
      break;
  }
  for (std::size_t i = 0; items != nullptr && i < items->size(); ++i) {
    if (auto s = Apply(fresh, kind, (*items)[i], false); !s) return s;
  }
  objects = std::move(fresh);
  return Ok{};
}

bool ValidLabel(const std::string& label) {
  if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') return false;
  return std::all_of(label.begin(), label.end(),
                     [](unsigned char c) { return std::isalnum(c) != 0 || c == '-' || c == '_'; });
}

bool ValidName(const std::string& name) {
  std::string n = name;
  if (n.ends_with('.')) n.pop_back();
  if (n.empty() || n.size() > 253) return false;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = n.find('.', start);
    if (!ValidLabel(n.substr(start, dot == std::string::npos ? std::string::npos : dot - start))) return false;
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

std::string ReverseName(const std::string& ip) {
  std::array<unsigned char, 16> b{};
  if (inet_pton(AF_INET, ip.c_str(), b.data()) == 1) {
    return std::to_string(b[3]) + "." + std::to_string(b[2]) + "." + std::to_string(b[1]) + "." + std::to_string(b[0]) +
           ".in-addr.arpa.";
  }
  if (inet_pton(AF_INET6, ip.c_str(), b.data()) == 1) {
    static const char* kHex = "0123456789abcdef";
    std::string out;
    for (int i = 15; i >= 0; --i) {
      out += kHex[b[i] & 0xf];
      out += '.';
      out += kHex[b[i] >> 4];
      out += '.';
    }
    return out + "ip6.arpa.";
  }
  return "";
}

Records ClusterRecords(const Objects& objects, const std::string& domain) {
  Builder b;
  const std::string zone = domain + ".";
  b.out.records.push_back({"dns-version." + zone, "TXT", "\"1.1.0\""});
  // Slices by their Service, so a headless Service finds its endpoints.
  std::map<std::string, std::vector<const EndpointSlice*>> slices_of;
  for (const auto& [key, s] : objects.slices) {
    if (!s.service.empty()) slices_of[s.ns + "/" + s.service].push_back(&s);
  }
  for (const auto& [key, s] : objects.services) {
    if (!ValidLabel(s.ns) || !ValidLabel(s.name)) {
      b.out.skipped.push_back("Service " + key + ": its name or namespace is not a DNS label");
      continue;
    }
    const std::string base = s.name + "." + s.ns + ".svc." + zone;
    bool bad_port = false;
    for (const auto& p : s.ports) {
      bad_port = bad_port || (!p.name.empty() && !ValidLabel(p.name)) || !ValidLabel(Lower(p.protocol));
    }
    if (bad_port) {
      b.out.skipped.push_back("Service " + key + ": a port name is not a DNS label");
      continue;
    }
    if (s.type == "ExternalName") {
      std::string target = s.external_name;
      if (!ValidName(target) || Family(target) != 0) {
        b.out.skipped.push_back("Service " + key + ": externalName '" + target + "' is not a DNS name");
        continue;
      }
      if (!target.ends_with('.')) target += '.';
      b.out.records.push_back({base, "CNAME", target});
      continue;
    }
    if (!s.cluster_ips.empty()) {
      for (const auto& ip : s.cluster_ips) {
        b.Address(base, ip);
        b.Ptr(ip, base);
      }
      for (const auto& p : s.ports) b.Srv(base, p, base);
      continue;
    }
    // Headless: the endpoints themselves.
    for (const EndpointSlice* slice : slices_of[key]) {
      if (slice->address_type == "FQDN") continue;
      for (const auto& e : slice->endpoints) {
        if (!e.ready && !s.publish_not_ready) continue;
        for (const auto& ip : e.addresses) {
          if (Family(ip) == 0) continue;
          const std::string host = e.hostname.empty() ? Dashed(ip) : e.hostname;
          if (!ValidLabel(host)) {
            b.out.skipped.push_back("EndpointSlice " + slice->ns + "/" + slice->name + ": hostname '" + host +
                                    "' is not a DNS label");
            continue;
          }
          const std::string target = host + "." + base;
          b.Address(base, ip);
          b.Address(target, ip);
          b.Ptr(ip, target);
          for (const auto& p : slice->ports) {
            if (ValidLabel(p.name) && ValidLabel(Lower(p.protocol))) b.Srv(base, p, target);
          }
        }
      }
    }
  }
  for (const auto& [key, p] : objects.pods) {
    if (p.host_network || !ValidLabel(p.ns)) continue;
    for (const auto& ip : p.ips) b.Address(Dashed(ip) + "." + p.ns + ".pod." + zone, ip);
  }
  std::sort(b.out.records.begin(), b.out.records.end());
  b.out.records.erase(std::unique(b.out.records.begin(), b.out.records.end()), b.out.records.end());
  return std::move(b.out);
}

}  // namespace sprout::dns
