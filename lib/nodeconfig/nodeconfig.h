// Per-node settings given at flashing or boot time (not at build time), from several
// sources merged by precedence: kernel command line > QEMU fw_cfg > the image's config
// area > the config area's copy kept in the encrypted state > nothing.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"
#include "util/text.h"  // Base64Encode, Base64Decode

namespace sprout {

// NodeConfig is the merged view; unset fields fall back to the image's defaults.
struct NodeConfig {
  std::optional<std::string> cluster_secret;  // raw bytes
  std::optional<std::string> worker_secret;   // 64 lower-case hex digits: a worker's only secret
  // A worker's pin of the cluster CA: "sha256:" and 64 lower-case hex digits of its
  // SubjectPublicKeyInfo's SHA-256, as kubeadm's discovery hash (public, not a secret).
  std::optional<std::string> ca_cert_hash;
  std::optional<std::string> hostname;
  std::optional<std::string> role;     // "control-plane" or "worker"
  std::optional<std::string> address;  // IPv4/IPv6 address with prefix, "198.18.0.10/24"
  std::optional<std::string> gateway;
  std::optional<std::vector<std::string>> peers;
  std::optional<std::string> ssh_authorized_key;
  std::optional<std::string> backup_dir;      // where bundles go: a folder or nfs://HOST/PATH[?uid=N&gid=N]
  std::optional<std::string> restore_from;    // a bundle a fresh control-plane node forms from
  std::map<std::string, std::string> origin;  // key -> the source that set it
};

// The keys of the text form, in the order they are written.
const std::vector<std::string>& NodeConfigKeys();

// ParseNodeConfig reads the text form: one "key=value" per line, '#' comments, blank
// lines; reading stops at the first NUL (the rest of the config area). Every error
// names the source and line; all are reported at once.
Result<NodeConfig> ParseNodeConfig(std::string_view text, const std::string& source);

// ParseCmdline reads "sprout.<key>=value" words of a kernel command line (the other
// words are ignored).
Result<NodeConfig> ParseCmdline(std::string_view cmdline);

// MergeNodeConfig applies sources from lowest to highest precedence; a later source's
// set fields win.
NodeConfig MergeNodeConfig(const std::vector<NodeConfig>& lowest_first);

// RenderNodeConfig writes the text form (the secret base64-encoded).
std::string RenderNodeConfig(const NodeConfig& config);

}  // namespace sprout
