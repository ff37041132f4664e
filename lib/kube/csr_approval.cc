#include "kube/csr_approval.h"

#include <algorithm>
#include <ctime>
#include <nlohmann/json.hpp>

#include "pki/csr.h"
#include "shoot/shoot.h"
#include "util/json_field.h"
#include "util/text.h"

namespace sprout::kube {

namespace {

using json = nlohmann::json;

std::vector<std::string> Strings(const json& o, const char* key) {
  std::vector<std::string> out;
  if (!o.is_object()) return out;
  auto it = o.find(key);
  if (it == o.end() || !it->is_array()) return out;
  for (const auto& v : *it) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

const json* Object(const json& o, const char* key) {
  if (!o.is_object()) return nullptr;
  auto it = o.find(key);
  return it == o.end() || !it->is_object() ? nullptr : &*it;
}

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// A DNS-1123 label: what sprout's node names are (lib/settings), and all a name in a
// certificate's subject needs to be to be safe to record.
bool NodeName(const std::string& s) {
  if (s.empty() || s.size() > 63 || s.front() == '-' || s.back() == '-') return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; });
}

bool KeyHash(const std::string& s) {
  if (s.size() != 71 || s.rfind("sha256:", 0) != 0) return false;
  return std::all_of(s.begin() + 7, s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

constexpr const char* kNodePrefix = "system:node:";

// Seconds reads a whole number of Unix seconds, or 0.
std::int64_t Seconds(const std::string& s) {
  if (s.empty() || s.size() > 12 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return 0;
  }
  return std::stoll(s);
}

// Rfc3339Seconds reads the UTC times the API writes ("2026-12-04T19:05:03.123456Z", the
// fraction optional) as Unix seconds, or 0.
std::int64_t Rfc3339Seconds(const std::string& t) {
  static constexpr const char* kForm = "dddd-dd-ddTdd:dd:dd";
  if (t.size() < 20 || t.back() != 'Z') return 0;
  for (std::size_t i = 0; i < 19; ++i) {
    const bool digit = t[i] >= '0' && t[i] <= '9';
    if (kForm[i] == 'd' ? !digit : t[i] != kForm[i]) return 0;
  }
  for (std::size_t i = 19; i + 1 < t.size(); ++i) {
    if (!(i == 19 ? t[i] == '.' : t[i] >= '0' && t[i] <= '9')) return 0;
  }
  std::tm tm{};
  tm.tm_year = std::stoi(t.substr(0, 4)) - 1900;
  tm.tm_mon = std::stoi(t.substr(5, 2)) - 1;
  tm.tm_mday = std::stoi(t.substr(8, 2));
  tm.tm_hour = std::stoi(t.substr(11, 2));
  tm.tm_min = std::stoi(t.substr(14, 2));
  tm.tm_sec = std::stoi(t.substr(17, 2));
  const std::time_t s = ::timegm(&tm);
  return s < 0 ? 0 : static_cast<std::int64_t>(s);
}

// Usages checks spec.usages: the one it needs and nothing beyond key usages.
std::string UsagesProblem(const std::vector<std::string>& usages, const std::string& needed) {
  if (!Has(usages, needed)) return "it does not ask for the usage '" + needed + "'";
  for (const auto& u : usages) {
    if (u != needed && u != "digital signature" && u != "key encipherment") return "it asks for the usage '" + u + "'";
  }
  return "";
}

// SubjectProblem checks what both kinds of request share: a request that parses, is
// signed by its own key, has one CN system:node:X with X a node name and O system:nodes.
std::string SubjectProblem(const CsrView& c, std::string& node) {
  if (!c.request_problem.empty()) return "its request cannot be read: " + c.request_problem;
  if (!c.signature_ok) return "its request is not signed by its own key";
  if (c.common_names != 1 || c.common_name.rfind(kNodePrefix, 0) != 0) {
    return "its subject is not one CN system:node:NAME";
  }
  node = c.common_name.substr(std::char_traits<char>::length(kNodePrefix));
  if (!NodeName(node)) return "'" + node + "' is not a node name (a DNS label)";
  if (c.organizations != std::vector<std::string>{"system:nodes"}) return "its subject's O is not system:nodes alone";
  return "";
}

CsrDecision Deny(std::string why) { return {CsrDecision::kDeny, std::move(why), std::nullopt}; }

CsrDecision DecideClient(const CsrView& c, const ApprovalFacts& f) {
  const bool bootstrap = c.username.rfind("system:bootstrap:", 0) == 0 && Has(c.groups, "system:bootstrappers");
  if (!bootstrap) return {};  // a node renewing (the controller-manager's), or a user's own request
  std::string node;
  if (auto p = SubjectProblem(c, node); !p.empty()) return Deny("a bootstrap request refused: " + p);
  if (!c.dns_names.empty() || !c.ips.empty() || c.other_names != 0) {
    return Deny("a bootstrap request refused: a node client certificate names no hosts, and it asks for some");
  }
  if (auto p = UsagesProblem(c.usages, "client auth"); !p.empty()) return Deny("a bootstrap request refused: " + p);
  const std::string who = "system:node:" + node;
  if (f.control_plane.count(node) != 0) {
    return Deny("refused " + who +
                ": it is a control-plane node's name (formation's record), and a control-plane "
                "node makes its own certificate");
  }
  // Open again after a restore: bound (or registered) before it, and not heard from since.
  const auto renewed = f.lease_renewed.find(node);
  const bool silent_since_restore =
      f.record.restored_at > 0 && (renewed == f.lease_renewed.end() || renewed->second < f.record.restored_at);
  const auto bound = f.record.bound_at.find(node);
  const std::int64_t bound_at = bound == f.record.bound_at.end() ? 0 : bound->second;
  if (auto it = f.record.key_of.find(node); it != f.record.key_of.end()) {
    if (it->second == c.key_sha256) {
      return {CsrDecision::kApprove, who + " again for the key it was first approved for (" + c.key_sha256 + ")",
              std::nullopt};
    }
    if (silent_since_restore && bound_at < f.record.restored_at) {
      return {CsrDecision::kApprove,
              "the name " + node + ", bound before the restore of " + UtcTime(f.record.restored_at, "%FT%TZ") +
                  " and not heard from since, bound again to the key " + c.key_sha256,
              std::pair{node, c.key_sha256}};
    }
    return Deny("refused " + who + ": the name was first approved for another key (" + it->second +
                "), this request's is " + c.key_sha256 +
                "; a node that lost its key is given its name back by deleting its Node and its entry in "
                "kube-system/sprout-node-identities");
  }
  if (f.nodes.count(node) != 0 && !silent_since_restore) {
    return Deny("refused " + who +
                ": a Node of that name exists and the record holds no key for it; delete the "
                "Node first if the name is to be given to a new node");
  }
  if (f.record.key_of.size() >= kMaxIdentityRecords) {
    return Deny("refused " + who + ": the record of node names is full (" + std::to_string(kMaxIdentityRecords) +
                " names)");
  }
  return {CsrDecision::kApprove, "the new node name " + node + ", bound to the key " + c.key_sha256,
          std::pair{node, c.key_sha256}};
}

CsrDecision DecideServing(const CsrView& c, const ApprovalFacts& f) {
  if (c.username.rfind(kNodePrefix, 0) != 0 || !Has(c.groups, "system:nodes")) {
    return Deny("a kubelet serving request refused: only a node asks for its own serving certificate, and " +
                c.username + " is not one");
  }
  std::string node;
  if (auto p = SubjectProblem(c, node); !p.empty()) return Deny("a kubelet serving request refused: " + p);
  if (c.common_name != c.username) {
    return Deny("a kubelet serving request refused: " + c.username + " asks for " + c.common_name);
  }
  if (auto p = UsagesProblem(c.usages, "server auth"); !p.empty()) {
    return Deny("a kubelet serving request refused: " + p);
  }
  if (c.other_names != 0) return Deny("a kubelet serving request refused: it names hosts other than DNS names and IPs");
  for (const auto& d : c.dns_names) {
    if (d != node) return Deny("a kubelet serving request refused: node " + node + " asks for the name " + d);
  }
  auto net = ParseCidr(f.node_network);
  if (!net) {
    return Deny("a kubelet serving request refused: the cluster record gives no valid networking.nodes ('" +
                f.node_network + "') to check its addresses against");
  }
  if (c.ips.empty()) return Deny("a kubelet serving request refused: it names no address");
  const auto known = f.known.find(node);
  bool has_known = false;
  for (const auto& ip : c.ips) {
    auto host = ParseCidr(ip + (ip.find(':') == std::string::npos ? "/32" : "/128"));
    if (!host || host->v6 != net->v6 || host->prefix < net->prefix || !CidrsOverlap(*host, *net)) {
      return Deny("a kubelet serving request refused: node " + node + " asks for the address " + ip +
                  ", outside networking.nodes " + f.node_network);
    }
    if (known != f.known.end() && ip == known->second) has_known = true;
  }
  if (known != f.known.end() && (!has_known || c.ips.size() != 1)) {
    return Deny("a kubelet serving request refused: formation's record gives node " + node + " the address " +
                known->second + " alone, and it asks for " + Join(c.ips, ", "));
  }
  return {CsrDecision::kApprove, "the serving certificate of node " + node + " for " + Join(c.ips, ", "), std::nullopt};
}

}  // namespace

Result<std::vector<CsrView>> ParseCsrList(const std::string& text) {
  auto j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Fail("the CertificateSigningRequestList is not a JSON object");
  if (auto kind = JsonString(j, "kind"); kind && *kind != "CertificateSigningRequestList") {
    return Fail("listing the certificate signing requests answered a " + *kind + ": " +
                JsonString(j, "message").value_or(""));
  }
  std::vector<CsrView> out;
  auto items = j.find("items");
  if (items == j.end() || !items->is_array()) return out;
  for (const auto& item : *items) {
    if (!item.is_object()) continue;
    CsrView c;
    c.json = item.dump();
    if (const json* meta = Object(item, "metadata")) c.name = JsonString(*meta, "name").value_or("");
    if (const json* status = Object(item, "status")) {
      auto conditions = status->find("conditions");
      if (conditions != status->end() && conditions->is_array()) {
        for (const auto& cond : *conditions) {
          auto type = JsonString(cond, "type");
          if (type == "Approved" || type == "Denied" || type == "Failed") c.decided = true;
        }
      }
    }
    const json* spec = Object(item, "spec");
    if (spec == nullptr) {
      c.request_problem = "it has no spec";
      out.push_back(std::move(c));
      continue;
    }
    c.signer = JsonString(*spec, "signerName").value_or("");
    c.username = JsonString(*spec, "username").value_or("");
    c.groups = Strings(*spec, "groups");
    c.usages = Strings(*spec, "usages");
    auto request = JsonString(*spec, "request");
    auto pem = request ? Base64Decode(*request) : std::nullopt;
    if (!pem) {
      c.request_problem = "spec.request is not base64";
    } else if (auto info = pki::ParseCsr(*pem); !info) {
      c.request_problem = info.error();
    } else {
      c.common_name = info->common_name;
      c.common_names = info->common_names;
      c.organizations = info->organizations;
      c.dns_names = info->dns_names;
      c.ips = info->ips;
      c.other_names = info->other_names;
      c.key_sha256 = info->key_sha256;
      c.signature_ok = info->signature_ok;
    }
    out.push_back(std::move(c));
  }
  return out;
}

Result<IdentityRecord> ParseIdentityRecord(const std::string& text) {
  auto j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Fail("kube-system/sprout-node-identities is not a JSON object");
  if (auto kind = JsonString(j, "kind"); kind != "ConfigMap") {
    return Fail("kube-system/sprout-node-identities is not a ConfigMap");
  }
  IdentityRecord r;
  r.exists = true;
  if (const json* meta = Object(j, "metadata")) r.resource_version = JsonString(*meta, "resourceVersion").value_or("");
  if (const json* meta = Object(j, "metadata")) {
    if (const json* annotations = Object(*meta, "annotations")) {
      r.restored_at = Seconds(JsonString(*annotations, "sprout.dev/restored-at").value_or(""));
    }
  }
  if (const json* data = Object(j, "data")) {
    for (const auto& [name, value] : data->items()) {
      if (!value.is_string()) continue;
      const std::string v = value.get<std::string>();
      const auto at = v.find('@');
      const std::string key = v.substr(0, at);
      r.key_of[name] = KeyHash(key) ? key : "unreadable:" + key.substr(0, 80);
      r.bound_at[name] = at == std::string::npos ? 0 : Seconds(v.substr(at + 1));
    }
  }
  return r;
}

Result<std::map<std::string, std::int64_t>> ParseLeaseRenewals(const std::string& text) {
  auto j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Fail("the LeaseList of kube-node-lease is not a JSON object");
  if (auto kind = JsonString(j, "kind"); kind && *kind != "LeaseList") {
    return Fail("listing kube-node-lease answered a " + *kind + ": " + JsonString(j, "message").value_or(""));
  }
  std::map<std::string, std::int64_t> out;
  auto items = j.find("items");
  if (items == j.end() || !items->is_array()) return out;
  for (const auto& item : *items) {
    const json* meta = Object(item, "metadata");
    const json* spec = Object(item, "spec");
    if (meta == nullptr || spec == nullptr) continue;
    auto name = JsonString(*meta, "name");
    const std::int64_t t = Rfc3339Seconds(JsonString(*spec, "renewTime").value_or(""));
    if (name && t > 0) out[*name] = t;
  }
  return out;
}

std::string IdentityRecordBody(const IdentityRecord& record) {
  nlohmann::ordered_json j;
  j["apiVersion"] = "v1";
  j["kind"] = "ConfigMap";
  j["metadata"]["name"] = "sprout-node-identities";
  j["metadata"]["namespace"] = "kube-system";
  j["metadata"]["annotations"]["sprout.dev/about"] =
      "the key each node name was first approved for (docs/formation.md); sprout approves a bootstrap request for a "
      "name here only from that key";
  if (record.restored_at > 0)
    j["metadata"]["annotations"]["sprout.dev/restored-at"] = std::to_string(record.restored_at);
  if (record.exists && !record.resource_version.empty()) j["metadata"]["resourceVersion"] = record.resource_version;
  j["data"] = nlohmann::ordered_json::object();
  for (const auto& [name, key] : record.key_of) {
    auto at = record.bound_at.find(name);
    j["data"][name] = key + "@" + std::to_string(at == record.bound_at.end() ? 0 : at->second);
  }
  return j.dump();
}

CsrDecision DecideCsr(const CsrView& csr, const ApprovalFacts& facts) {
  if (csr.decided) return {};
  if (csr.signer == kClientKubeletSigner) return DecideClient(csr, facts);
  if (csr.signer == kKubeletServingSigner) return DecideServing(csr, facts);
  return {};
}

Result<std::string> ApprovalBody(const std::string& csr_json, bool approve, const std::string& message) {
  auto j = json::parse(csr_json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Fail("the certificate signing request is not a JSON object");
  json& status = j["status"];
  if (!status.is_object()) status = json::object();
  json& conditions = status["conditions"];
  if (!conditions.is_array()) conditions = json::array();
  conditions.push_back({{"type", approve ? "Approved" : "Denied"},
                        {"status", "True"},
                        {"reason", approve ? "SproutApproved" : "SproutDenied"},
                        {"message", message}});
  return j.dump();
}

}  // namespace sprout::kube
