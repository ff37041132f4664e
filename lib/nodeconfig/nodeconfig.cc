#include "nodeconfig/nodeconfig.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>

#include "util/text.h"

namespace sprout {

const std::vector<std::string>& NodeConfigKeys() {
  static const std::vector<std::string> kKeys{"hostname",      "role",         "address",
                                              "gateway",       "peers",        "cluster-secret",
                                              "worker-secret", "ca-cert-hash", "ssh-authorized-key",
                                              "backup-dir",    "restore-from"};
  return kKeys;
}

namespace {

bool ValidLabel(std::string_view s) {
  if (s.empty() || s.size() > 63 || s.front() == '-' || s.back() == '-') return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; });
}

bool ValidAddress(std::string_view s, bool need_prefix) {
  auto slash = s.find('/');
  if (need_prefix != (slash != std::string_view::npos)) return false;
  std::string_view ip = s.substr(0, slash);
  if (ip.empty()) return false;
  bool v6 = ip.find(':') != std::string_view::npos;
  bool ok = std::all_of(ip.begin(), ip.end(), [&](char c) {
    return std::isxdigit(static_cast<unsigned char>(c)) || c == (v6 ? ':' : '.') || (v6 && c == '.');
  });
  if (!ok) return false;
  if (slash != std::string_view::npos) {
    std::string_view prefix = s.substr(slash + 1);
    if (prefix.empty() || prefix.size() > 3 ||
        !std::all_of(prefix.begin(), prefix.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return false;
    }
    int p = std::stoi(std::string(prefix));
    if (p > (v6 ? 128 : 32)) return false;
  }
  return true;
}

// Set validates one key's value and stores it; it returns an error text or "".
std::string Set(NodeConfig& c, const std::string& key, const std::string& value, const std::string& source) {
  if (key == "hostname") {
    if (!ValidLabel(value)) return "hostname must be a DNS label (a-z, 0-9, '-', at most 63); got '" + value + "'";
    c.hostname = value;
  } else if (key == "role") {
    if (value != "control-plane" && value != "worker") {
      return "role must be 'control-plane' or 'worker'; got '" + value + "'";
    }
    c.role = value;
  } else if (key == "address") {
    if (!ValidAddress(value, true))
      return "address must be an IP address with a prefix, such as 198.18.0.10/24; got '" + value + "'";
    c.address = value;
  } else if (key == "gateway") {
    if (!ValidAddress(value, false)) return "gateway must be an IP address; got '" + value + "'";
    c.gateway = value;
  } else if (key == "peers") {
    std::vector<std::string> peers;
    for (const auto& p : Split(value, ',')) {
      std::string peer(Trim(p));
      if (peer.empty()) continue;
      if (!ValidAddress(peer, false)) return "peers must be IP addresses separated by commas; got '" + peer + "'";
      peers.push_back(peer);
    }
    c.peers = peers;
  } else if (key == "cluster-secret") {
    auto raw = Base64Decode(value);
    if (!raw || raw->size() < 16) return "cluster-secret must be base64 of at least 16 bytes";
    c.cluster_secret = *raw;
  } else if (key == "worker-secret") {
    // The form formation::WorkerSecret gives (nodeconfig does not depend on formation).
    bool hex = value.size() == 64 && std::all_of(value.begin(), value.end(), [](char ch) {
                 return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f');
               });
    if (!hex) {
      return "worker-secret must be the 64 lower-case hex digits that `sprout worker-secret` prints; got " +
             std::to_string(value.size()) + " characters";
    }
    c.worker_secret = value;
  } else if (key == "ca-cert-hash") {
    // pki::ValidSpkiSha256's form (nodeconfig does not depend on pki); hex digits of
    // either case are taken, as kubeadm does, and kept in lower case.
    std::string hash = value;
    std::transform(hash.begin(), hash.end(), hash.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    const std::string_view prefix = "sha256:";
    const bool ok = hash.size() == prefix.size() + 64 && hash.starts_with(prefix) &&
                    std::all_of(hash.begin() + static_cast<std::ptrdiff_t>(prefix.size()), hash.end(),
                                [](char ch) { return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'); });
    if (!ok) {
      return "ca-cert-hash must be 'sha256:' and the 64 hex digits of the cluster CA's public-key hash, as "
             "`sprout-firstboot status` on a control-plane node prints it (kubeadm's --discovery-token-ca-cert-hash "
             "form); got '" +
             value.substr(0, 80) + "'";
    }
    c.ca_cert_hash = hash;
  } else if (key == "ssh-authorized-key") {
    if (!value.starts_with("ssh-") && !value.starts_with("ecdsa-")) {
      return "ssh-authorized-key must be one public key line, such as 'ssh-ed25519 AAAA... me@laptop'";
    }
    c.ssh_authorized_key = value;
  } else if (key == "backup-dir" || key == "restore-from") {
    // The full check (sprout-firstboot's backup::ParseSinkLocation) runs at resolution;
    // here only the form, so a typo is reported with its source line.
    bool nfs = value.starts_with("nfs://") && value.size() > 6;
    if (!nfs && !value.starts_with("/"))
      return key + " must be an absolute path or nfs://HOST/PATH; got '" + value + "'";
    (key == "backup-dir" ? c.backup_dir : c.restore_from) = value;
  } else {
    auto guess = ClosestMatch(key, NodeConfigKeys());
    return "unknown setting '" + key + "'" +
           (guess ? "; did you mean '" + *guess + "'?" : "; known: " + Join(NodeConfigKeys(), ", "));
  }
  c.origin[key] = source;
  return "";
}

}  // namespace

Result<NodeConfig> ParseNodeConfig(std::string_view text, const std::string& source) {
  text = text.substr(0, text.find('\0'));
  NodeConfig c;
  std::vector<std::string> errors;
  int line_no = 0;
  for (const auto& raw : Split(text, '\n')) {
    ++line_no;
    std::string_view line = Trim(raw);
    if (line.empty() || line.front() == '#') continue;
    auto eq = line.find('=');
    if (eq == std::string_view::npos) {
      errors.push_back(source + ":" + std::to_string(line_no) + ": expected 'key=value', got '" + std::string(line) +
                       "'");
      continue;
    }
    std::string key(Trim(line.substr(0, eq)));
    std::string value(Trim(line.substr(eq + 1)));
    std::string err = Set(c, key, value, source);
    if (!err.empty()) errors.push_back(source + ":" + std::to_string(line_no) + ": " + err);
  }
  if (!errors.empty()) return Fail(Join(errors, "\n"));
  return c;
}

Result<NodeConfig> ParseCmdline(std::string_view cmdline) {
  NodeConfig c;
  std::vector<std::string> errors;
  for (const auto& word : Split(Trim(cmdline), ' ')) {
    if (!word.starts_with("sprout.")) continue;
    auto eq = word.find('=');
    if (eq == std::string::npos) continue;
    std::string key = word.substr(7, eq - 7);
    // Boot-plumbing parameters (roothash, verity, state, config) are the initrd's.
    if (std::find(NodeConfigKeys().begin(), NodeConfigKeys().end(), key) == NodeConfigKeys().end()) continue;
    std::string err = Set(c, key, word.substr(eq + 1), "kernel command line");
    if (!err.empty()) errors.push_back("kernel command line: sprout." + key + ": " + err);
  }
  if (!errors.empty()) return Fail(Join(errors, "\n"));
  return c;
}

NodeConfig MergeNodeConfig(const std::vector<NodeConfig>& lowest_first) {
  NodeConfig out;
  for (const auto& c : lowest_first) {
    if (c.cluster_secret) out.cluster_secret = c.cluster_secret;
    if (c.worker_secret) out.worker_secret = c.worker_secret;
    if (c.ca_cert_hash) out.ca_cert_hash = c.ca_cert_hash;
    if (c.hostname) out.hostname = c.hostname;
    if (c.role) out.role = c.role;
    if (c.address) out.address = c.address;
    if (c.gateway) out.gateway = c.gateway;
    if (c.peers) out.peers = c.peers;
    if (c.ssh_authorized_key) out.ssh_authorized_key = c.ssh_authorized_key;
    if (c.backup_dir) out.backup_dir = c.backup_dir;
    if (c.restore_from) out.restore_from = c.restore_from;
    for (const auto& [k, v] : c.origin) out.origin[k] = v;
  }
  return out;
}

std::string RenderNodeConfig(const NodeConfig& c) {
  std::string out = "# sprout node configuration (sprout personalize); key=value per line\n";
  if (c.hostname) out += "hostname=" + *c.hostname + "\n";
  if (c.role) out += "role=" + *c.role + "\n";
  if (c.address) out += "address=" + *c.address + "\n";
  if (c.gateway) out += "gateway=" + *c.gateway + "\n";
  if (c.peers) out += "peers=" + Join(*c.peers, ",") + "\n";
  if (c.cluster_secret) out += "cluster-secret=" + Base64Encode(*c.cluster_secret) + "\n";
  if (c.worker_secret) out += "worker-secret=" + *c.worker_secret + "\n";
  if (c.ca_cert_hash) out += "ca-cert-hash=" + *c.ca_cert_hash + "\n";
  if (c.ssh_authorized_key) out += "ssh-authorized-key=" + *c.ssh_authorized_key + "\n";
  if (c.backup_dir) out += "backup-dir=" + *c.backup_dir + "\n";
  if (c.restore_from) out += "restore-from=" + *c.restore_from + "\n";
  return out;
}

}  // namespace sprout
