// The join protocol's pure part (formation/join.h): requests and responses as text, the
// answer a request gets, bootstrap and worker tokens, the PSKs. The endpoint itself is
// join_server.cc and join_client.cc.
#include "formation/join.h"

#include <arpa/inet.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

namespace sprout::formation {

namespace {

constexpr std::string_view kPskLabel = "sprout join psk v1";

bool ValidName(const std::string& n) {
  if (n.empty() || n.size() > 63) return false;
  for (char c : n) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
    if (!ok) return false;
  }
  return true;
}

bool ValidAddress(const std::string& a) {
  unsigned char buf[16];
  return ::inet_pton(AF_INET, a.c_str(), buf) == 1 || ::inet_pton(AF_INET6, a.c_str(), buf) == 1;
}

// CA file names a control-plane response carries, as in pki::CAFiles.
const char* const kCaFiles[] = {
    "ca.crt", "ca.key", "etcd/ca.crt", "etcd/ca.key", "front-proxy-ca.crt", "front-proxy-ca.key", "sa.key", "sa.pub"};

}  // namespace

const char* JoinAuthorityName(JoinAuthority authority) {
  return authority == JoinAuthority::kControlPlane ? "control-plane" : "worker";
}

std::string RenderJoinRequest(const JoinRequest& r) {
  nlohmann::json j{{"version", r.version},
                   {"role", r.control_plane ? "control-plane" : "worker"},
                   {"name", r.name},
                   {"address", r.address}};
  if (r.copy) j["copy"] = {{"bundle", r.copy->bundle}, {"size", r.copy->size}};
  return j.dump() + "\n";
}

bool ValidBundleFileName(std::string_view n) {
  constexpr std::string_view kSuffix = ".sprout-backup";
  if (n.size() <= kSuffix.size() || n.size() > 200 || n.front() == '.' || !n.ends_with(kSuffix)) return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
           c == '_';
  });
}

Status MayStoreCopy(const JoinRequest& request, JoinAuthority authority, bool keeps_copies) {
  if (!request.copy) return Fail("not a backup copy");
  if (authority != JoinAuthority::kControlPlane) {
    return Fail("a backup copy is taken only from a control-plane node (this sender proved the worker key)");
  }
  if (!keeps_copies) return Fail("this node keeps no backup copies");
  return Ok{};
}

Result<JoinRequest> ParseJoinRequest(std::string_view text) {
  if (text.size() > kMaxJoinRequest) {
    return Fail("join request of " + std::to_string(text.size()) + " bytes is over the limit of " +
                std::to_string(kMaxJoinRequest));
  }
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Fail("join request is not a JSON object");
  JoinRequest r;
  auto version = j.find("version");
  if (version == j.end() || !version->is_number_integer() || version->get<long long>() != kJoinVersion) {
    return Fail("join request has no \"version\": " + std::to_string(kJoinVersion) + "; update the joining node");
  }
  auto field = [&](const char* key) -> std::string {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  std::string role = field("role");
  if (role != "control-plane" && role != "worker") {
    return Fail("join request \"role\" must be \"control-plane\" or \"worker\", not \"" + role.substr(0, 32) + "\"");
  }
  r.control_plane = role == "control-plane";
  r.name = field("name");
  if (!ValidName(r.name)) return Fail("join request \"name\" must be 1-63 characters of [A-Za-z0-9._-]");
  r.address = field("address");
  if (!ValidAddress(r.address)) return Fail("join request \"address\" must be an IPv4 or IPv6 address");
  if (auto copy = j.find("copy"); copy != j.end()) {
    if (!copy->is_object()) return Fail("join request \"copy\" must be an object");
    auto bundle = copy->find("bundle");
    auto size = copy->find("size");
    BackupCopyOffer offer;
    if (bundle == copy->end() || !bundle->is_string() || !ValidBundleFileName(bundle->get<std::string>())) {
      return Fail("backup copy \"bundle\" must be a bundle's file name (NAME.sprout-backup, [A-Za-z0-9._-])");
    }
    offer.bundle = bundle->get<std::string>();
    if (size == copy->end() || !size->is_number_unsigned() || size->get<std::uint64_t>() == 0 ||
        size->get<std::uint64_t>() > kMaxBackupCopy) {
      return Fail("backup copy \"size\" must be 1 to " + std::to_string(kMaxBackupCopy) + " bytes");
    }
    offer.size = size->get<std::uint64_t>();
    if (!r.control_plane) return Fail("a backup copy comes from a control-plane node (role control-plane)");
    r.copy = offer;
  }
  return r;
}

JoinResponse AnswerJoin(const JoinRequest& request, JoinAuthority authority, const Credentials& served,
                        std::int64_t now) {
  JoinResponse out;
  if (request.control_plane && authority != JoinAuthority::kControlPlane) {
    out.error =
        "control-plane credentials need the cluster secret, and this joiner proved only the worker secret; a worker "
        "joins with role worker";
    return out;
  }
  // A control-plane joiner gets the base token (it makes the worker tokens' Secrets
  // itself); a worker only the worker token of this window, which expires.
  std::string token = served.bootstrap_token;
  if (!request.control_plane) {
    auto worker = WorkerToken(served.bootstrap_token, WorkerTokenWindow(now));
    if (!worker) {
      out.error = "this node cannot derive the worker token: " + worker.error();
      return out;
    }
    token = *worker;
  }
  out.ok = true;
  out.control_plane = request.control_plane;
  out.bootstrap_token = token;
  out.api_endpoints = served.api_endpoints;
  if (request.control_plane) {
    for (const auto& f : pki::CAFiles(served.cas)) out.ca[f.path] = f.content;
  } else {
    out.ca_bundle = served.cas.kubernetes_ca.cert_pem;
  }
  return out;
}

std::string RenderJoinResponse(const JoinResponse& r) {
  nlohmann::json j{{"ok", r.ok}};
  if (!r.ok) {
    j["error"] = r.error;
    return j.dump();
  }
  j["role"] = r.control_plane ? "control-plane" : "worker";
  j["bootstrap_token"] = r.bootstrap_token;
  j["api_endpoints"] = r.api_endpoints;
  if (r.control_plane) {
    j["ca"] = r.ca;
  } else {
    j["ca_bundle"] = r.ca_bundle;
  }
  return j.dump();
}

Result<JoinResponse> ParseJoinResponse(std::string_view text) {
  try {
    auto j = nlohmann::json::parse(text);
    JoinResponse r;
    r.ok = j.at("ok").get<bool>();
    if (!r.ok) {
      r.error = j.value("error", "no reason given");
      return r;
    }
    r.control_plane = j.at("role").get<std::string>() == "control-plane";
    r.bootstrap_token = j.at("bootstrap_token").get<std::string>();
    r.api_endpoints = j.at("api_endpoints").get<std::vector<std::string>>();
    if (r.control_plane) {
      r.ca = j.at("ca").get<std::map<std::string, std::string>>();
    } else {
      r.ca_bundle = j.at("ca_bundle").get<std::string>();
    }
    if (!ValidBootstrapToken(r.bootstrap_token)) return Fail("the join response carries a malformed bootstrap token");
    return r;
  } catch (const std::exception& e) {
    return Fail(std::string("the join response is not what this version expects: ") + e.what());
  }
}

Result<Credentials> CredentialsFrom(const JoinResponse& r) {
  if (!r.ok || !r.control_plane) return Fail("the join response carries no control-plane credentials");
  for (const char* name : kCaFiles) {
    if (r.ca.count(name) == 0) return Fail(std::string("the join response lacks ") + name);
  }
  Credentials c;
  c.cas.kubernetes_ca = {r.ca.at("ca.crt"), r.ca.at("ca.key")};
  c.cas.etcd_ca = {r.ca.at("etcd/ca.crt"), r.ca.at("etcd/ca.key")};
  c.cas.front_proxy_ca = {r.ca.at("front-proxy-ca.crt"), r.ca.at("front-proxy-ca.key")};
  c.cas.service_account = {r.ca.at("sa.key"), r.ca.at("sa.pub")};
  // The encryption key comes with the CAs, from a founder that made one; a cluster
  // founded before sprout made one has none (docs/control-plane.md).
  if (auto key = r.ca.find(pki::kEncryptionKeyFile); key != r.ca.end()) {
    std::string k = key->second;
    while (!k.empty() && (k.back() == '\n' || k.back() == '\r')) k.pop_back();
    if (!pki::ValidEncryptionKey(k)) return Fail("the encryption key in the join response is not base64 of 32 bytes");
    c.cas.encryption_key = k;
  }
  for (const auto* ck : {&c.cas.kubernetes_ca, &c.cas.etcd_ca, &c.cas.front_proxy_ca}) {
    if (!pki::KeyMatches(ck->cert_pem, ck->key_pem)) return Fail("a CA key in the join response does not match");
  }
  c.bootstrap_token = r.bootstrap_token;
  c.api_endpoints = r.api_endpoints;
  return c;
}

Result<std::string> MakeBootstrapToken() {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  unsigned char raw[22];
  if (RAND_bytes(raw, sizeof raw) != 1) return Fail("no randomness for the bootstrap token");
  std::string out;
  for (std::size_t i = 0; i < sizeof raw; ++i) {
    if (i == 6) out += '.';
    out += kAlphabet[raw[i] % 36];  // a slight bias of 256 % 36; the token has 113 bits
  }
  return out;
}

bool ValidBootstrapToken(std::string_view t) {
  if (t.size() != 23 || t[6] != '.') return false;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (i == 6) continue;
    char c = t[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) return false;
  }
  return true;
}

std::int64_t WorkerTokenWindow(std::int64_t unix_seconds) {
  // Floor division: a clock before 1970 still gives a consistent window.
  std::int64_t w = unix_seconds / kWorkerTokenWindowSeconds;
  if (unix_seconds % kWorkerTokenWindowSeconds < 0) --w;
  return w;
}

std::int64_t WorkerTokenExpiry(std::int64_t window) { return (window + 2) * kWorkerTokenWindowSeconds; }

Result<std::string> WorkerToken(const std::string& base, std::int64_t window) {
  if (!ValidBootstrapToken(base)) return Fail("the bootstrap token is not of the form [a-z0-9]{6}.[a-z0-9]{16}");
  const std::string label = "sprout worker bootstrap token v1 " + std::to_string(window);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), base.data(), static_cast<int>(base.size()),
           reinterpret_cast<const unsigned char*>(label.data()), label.size(), mac, &len) == nullptr ||
      len < 22)
    return Fail("HMAC-SHA256 failed while deriving the worker token");
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string out;
  for (unsigned int i = 0; i < 22; ++i) {
    if (i == 6) out += '.';
    out += kAlphabet[mac[i] % 36];  // a slight bias of 256 % 36, as MakeBootstrapToken
  }
  OPENSSL_cleanse(mac, sizeof mac);
  return out;
}

Key JoinPsk(const Key& formation_key) {
  std::span<const std::uint8_t> label(reinterpret_cast<const std::uint8_t*>(kPskLabel.data()), kPskLabel.size());
  Mac m = ComputeMac(formation_key, label);
  Key out{};
  std::copy(m.begin(), m.begin() + static_cast<std::ptrdiff_t>(out.size()), out.begin());
  return out;
}

WorkerCaVerdict CheckWorkerCa(const WorkerCaTrust& trust, const std::string& endpoint, const std::string& ca_pem) {
  WorkerCaVerdict v;
  const std::string prefix = "worker: refused the credentials of the join endpoint " + endpoint + ": ";
  const std::string next = "; nothing was saved, trying the next endpoint";
  auto offered = pki::SpkiSha256(ca_pem);
  if (!offered) {
    v.refusal = prefix + "its CA certificate is unusable (" + offered.error() + ")" + next;
    return v;
  }
  v.offered = *offered;
  if (!trust.pin.empty()) {
    v.keep = v.offered == trust.pin;
    if (!v.keep) {
      v.refusal = prefix + "it hands out the cluster CA " + v.offered + ", and this worker pins " + trust.pin + " (" +
                  trust.pin_source + ")" + next +
                  ". That endpoint holds the worker secret but not this cluster's CA: another worker posing as the "
                  "control plane, or the pin is wrong. If `sprout-firstboot status` on a control-plane node of this "
                  "cluster prints " +
                  v.offered +
                  " (a cluster formed before workers pinned the CA), pin that: sprout personalize IMAGE "
                  "--ca-cert-hash " +
                  v.offered + " (or sprout.ca-cert-hash= in fw_cfg)";
    }
    return v;
  }
  if (trust.trusted.empty()) {
    v.keep = true;
    v.first_use = true;
    return v;
  }
  v.keep = v.offered == trust.trusted;
  if (!v.keep) {
    v.refusal = prefix + "it hands out the cluster CA " + v.offered + ", and this worker trusted " + trust.trusted +
                " on first use (" + trust.trusted_from + ")" + next +
                ". If the cluster's CA really changed (this worker now belongs to a new cluster), pin the new one: "
                "sprout personalize IMAGE --ca-cert-hash HASH with the hash `sprout-firstboot status` prints on a "
                "control-plane node";
  }
  return v;
}

std::string NoCaPinWarning(const std::string& trusted, const std::string& trusted_from) {
  std::string what = trusted.empty() ? "it will trust the first CA a join endpoint hands it"
                                     : "it trusts the CA " + trusted + " it was handed first (" + trusted_from + ")";
  return "worker: no pin of the cluster CA (ca-cert-hash): " + what +
         ", and any holder of the worker secret can pose as a join endpoint; pin it: sprout personalize IMAGE "
         "--role worker --cluster-secret FILE writes the pin of a cluster formed with that secret, or give "
         "--ca-cert-hash sha256:HEX (sprout.ca-cert-hash=) with the hash `sprout-firstboot status` prints on a "
         "control-plane node";
}

}  // namespace sprout::formation
