#include "settings/settings.h"

#include <set>

#include "backup/sink.h"
#include "formation/auth.h"
#include "pki/pki.h"

namespace sprout::settings {
namespace {

// TrimNewlines drops the line ends a secret file may end with.
std::string TrimNewlines(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

// StripPrefix drops a "/24" from an address with prefix length.
std::string StripPrefix(const std::string& a) { return a.substr(0, a.find('/')); }

std::vector<std::string> SplitAddresses(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    std::size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(StripPrefix(s.substr(start, end - start)));
    start = end + 1;
  }
  return out;
}

// FromConfig names a node config key and the source that set it, for origins and errors.
std::string FromConfig(const NodeConfig& config, const std::string& key) {
  auto it = config.origin.find(key);
  return "sprout." + key + " (" + (it != config.origin.end() ? it->second : std::string("node config")) + ")";
}

std::string ConfigOrigin(const NodeConfig& config, const std::string& key) {
  auto it = config.origin.find(key);
  return it != config.origin.end() ? "node config (" + it->second + ")" : std::string("node config");
}

// Resolver holds the inputs and fills the output one setting at a time.
class Resolver {
 public:
  Resolver(const RunFlags& flags, const NodeConfig& config, const ClusterRecord& record, const HostFacts& facts)
      : flags_(flags), config_(config), record_(record), facts_(facts) {}

  Resolved Run() {
    auto& o = out_.settings.formation;
    o.state_dir = flags_.state_dir;
    Role();
    Secret();
    Listen();
    Name();
    Peers();
    Expected();
    Electorate();
    ClusterName();
    EtcdDataDir();
    Port();
    EtcdLaunchMode();
    Backup();
    o.etcd_bin = flags_.etcd_bin;
    o.pki_dir = flags_.pki_dir;
    o.group = flags_.group;
    // A node without a secret or an address idles rather than failing (they may come
    // with the next boot: fw_cfg, the kernel command line), and with nothing to form it
    // has no use for the other settings, so their errors wait until then. An unreadable
    // secret file is an error even so (the secret was meant to be there), and so is a
    // control-plane node given only a worker secret.
    if (!out_.settings.idle_reason.empty() && !keep_secret_errors_) out_.errors.clear();
    return std::move(out_);
  }

 private:
  void Origin(const std::string& setting, const std::string& where) { out_.settings.origin[setting] = where; }
  void Error(std::string setting, std::string source, std::string problem, std::string fix) {
    out_.errors.push_back({std::move(setting), std::move(source), std::move(problem), std::move(fix)});
  }
  void Idle(const std::string& reason) {
    if (out_.settings.idle_reason.empty()) out_.settings.idle_reason = reason;
  }

  // SecretFile is the secret in the file a flag names (source), without its trailing
  // newlines; when the file was not read, the error goes to setting and there is none.
  std::optional<std::string> SecretFile(const std::string& setting, const std::string& source,
                                        const std::optional<std::string>& text, const std::string& read_error,
                                        const std::string& fix) {
    if (read_error.empty() && text) return TrimNewlines(*text);
    Error(setting, source, read_error.empty() ? "the file was not read" : read_error, fix);
    keep_secret_errors_ = true;
    return std::nullopt;
  }

  // Secret gives the daemon the secret the role needs, and no more: a control-plane
  // node the cluster secret (it derives the worker secret), a worker the worker secret
  // alone (given, or derived here from a cluster secret it was given, which then goes
  // no further). A control-plane node given only a worker secret is an error: that
  // secret cannot prove a control-plane node.
  void Secret() {
    std::string secret;
    std::string secret_source;
    if (!flags_.secret_file.empty()) {
      secret_source = "--secret-file " + flags_.secret_file;
      auto text = SecretFile("secret", secret_source, facts_.secret_file_text, facts_.secret_file_error,
                             "fix the path, or leave --secret-file out to use sprout.cluster-secret");
      if (!text) return;
      secret = *text;
      Origin("secret", "flag");
    } else if (config_.cluster_secret) {
      secret = *config_.cluster_secret;
      secret_source = FromConfig(config_, "cluster-secret");
      Origin("secret", ConfigOrigin(config_, "cluster-secret"));
    } else {
      Origin("secret", "default");
    }
    std::string worker;
    std::string worker_source;
    if (!flags_.worker_secret_file.empty()) {
      worker_source = "--worker-secret-file " + flags_.worker_secret_file;
      auto text =
          SecretFile("worker secret", worker_source, facts_.worker_secret_file_text, facts_.worker_secret_file_error,
                     "fix the path, or leave --worker-secret-file out to use sprout.worker-secret");
      if (!text) return;
      worker = *text;
      Origin("worker secret", "flag");
      if (!formation::ValidWorkerSecret(worker)) {
        Error("worker secret", worker_source, "is not 64 lower-case hex digits",
              "write the output of `sprout worker-secret --cluster-secret FILE` into it");
        keep_secret_errors_ = true;
        return;
      }
    } else if (config_.worker_secret) {
      worker = *config_.worker_secret;
      worker_source = FromConfig(config_, "worker-secret");
      Origin("worker secret", ConfigOrigin(config_, "worker-secret"));
    }
    if (!secret.empty() && !worker.empty() && formation::WorkerSecret(secret) != worker) {
      Error("worker secret", worker_source,
            "is not the worker secret of the cluster secret (from " + secret_source + ")",
            "give one of them, or both of the same cluster");
    }
    auto& o = out_.settings.formation;
    if (o.control_plane) {
      if (secret.empty() && !worker.empty()) {
        Error("secret", worker_source,
              "a control-plane node needs the cluster secret, and it was given only a worker secret, which proves "
              "a worker and nothing more",
              "give it the cluster secret (sprout.cluster-secret or --secret-file), or set sprout.role=worker");
        keep_secret_errors_ = true;  // an error even though the node would otherwise idle
        return;
      }
      if (secret.empty()) Idle("no cluster secret configured");
      o.secret = secret;
      if (!secret.empty()) {
        o.worker_secret = formation::WorkerSecret(secret);
        Origin("worker secret", "derived from the cluster secret (" + out_.settings.origin["secret"] + ")");
      }
      return;
    }
    if (worker.empty() && !secret.empty()) {
      worker = formation::WorkerSecret(secret);
      Origin("worker secret", "derived from the cluster secret (" + out_.settings.origin["secret"] + ")");
    }
    if (worker.empty()) Idle("no worker secret configured");
    CaCertHash(secret);
    o.secret.clear();  // a worker's daemon never holds the cluster secret
    o.worker_secret = worker;
  }

  // CaCertHash is a worker's pin of the cluster CA: the flag, else the node config's
  // (sprout personalize --role worker writes it), else the hash of the CA a founder makes
  // from the cluster secret when the worker was given that secret, else none (the daemon
  // then trusts the first CA it is handed, and warns).
  void CaCertHash(const std::string& secret) {
    auto& o = out_.settings.formation;
    if (!flags_.ca_cert_hash.empty()) {
      auto parsed = ParseNodeConfig("ca-cert-hash=" + flags_.ca_cert_hash + "\n", "--ca-cert-hash");
      if (!parsed || !parsed->ca_cert_hash) {
        Error("ca cert hash", "--ca-cert-hash", "'" + flags_.ca_cert_hash + "' is not sha256:<64 hex digits>",
              "give the hash `sprout-firstboot status` prints on a control-plane node, or `sprout ca-cert-hash "
              "--cluster-secret FILE`");
        return;
      }
      o.ca_cert_hash = *parsed->ca_cert_hash;
      o.ca_cert_hash_source = "--ca-cert-hash";
      Origin("ca cert hash", "flag");
    } else if (config_.ca_cert_hash) {
      o.ca_cert_hash = *config_.ca_cert_hash;
      o.ca_cert_hash_source = FromConfig(config_, "ca-cert-hash");
      Origin("ca cert hash", ConfigOrigin(config_, "ca-cert-hash"));
    } else if (!secret.empty()) {
      auto hash = pki::ClusterCaCertHash(secret);
      if (!hash) {
        Error("ca cert hash", out_.settings.origin["secret"], hash.error(), "give --ca-cert-hash");
        return;
      }
      o.ca_cert_hash = *hash;
      o.ca_cert_hash_source = "derived from the cluster secret (" + out_.settings.origin["secret"] + ")";
      Origin("ca cert hash", o.ca_cert_hash_source);
    } else {
      Origin("ca cert hash", "none");
    }
  }

  void Listen() {
    auto& listen = out_.settings.formation.listen;
    if (!flags_.listen.empty()) {
      listen = flags_.listen;
      Origin("listen", "flag");
    } else if (config_.address) {
      listen = StripPrefix(*config_.address);
      Origin("listen", ConfigOrigin(config_, "address"));
    } else {
      Origin("listen", "default");
    }
    if (listen.empty()) Idle("no node address configured (sprout.address or --listen)");
  }

  void Name() {
    auto& name = out_.settings.formation.name;
    if (!flags_.name.empty()) {
      name = flags_.name;
      Origin("name", "flag");
    } else if (config_.hostname && !config_.hostname->empty()) {
      name = *config_.hostname;
      Origin("name", ConfigOrigin(config_, "hostname"));
    } else {
      name = facts_.host_name;
      Origin("name", "host");
    }
  }

  void Peers() {
    auto& peers = out_.settings.formation.peers;
    if (!flags_.peers.empty()) {
      peers = SplitAddresses(flags_.peers);
      Origin("peers", "flag");
    } else if (config_.peers) {
      for (const auto& p : *config_.peers) peers.push_back(StripPrefix(p));
      Origin("peers", ConfigOrigin(config_, "peers"));
    } else {
      Origin("peers", "default");
    }
  }

  // Expected: the flag, else every static peer plus this node, else the Shoot's
  // control-plane count, else DaemonOptions' default.
  void Expected() {
    auto& o = out_.settings.formation;
    if (flags_.expected > 0) {
      o.expected = flags_.expected;
      Origin("expected", "flag");
    } else if (!o.peers.empty()) {
      std::set<std::string> all(o.peers.begin(), o.peers.end());
      all.insert(o.listen);
      o.expected = static_cast<int>(all.size());
      Origin("expected", "peers");
    } else if (record_.expected_control_planes > 0) {
      o.expected = record_.expected_control_planes;
      Origin("expected", "cluster record");
    } else {
      Origin("expected", "default");
    }
  }

  // Electorate: the flag, else the Shoot's control-plane maximum, else N. Only without a
  // static peer list does it matter: the list is the electorate when there is one.
  void Electorate() {
    auto& o = out_.settings.formation;
    if (flags_.electorate > 0) {
      o.electorate = flags_.electorate;
      Origin("max control planes", "flag");
    } else if (record_.max_control_planes > 0) {
      o.electorate = record_.max_control_planes;
      Origin("max control planes", "cluster record");
    } else {
      // No default: taking M = N founds two clusters when more than N nodes power on
      // split. Without a static list this node then refuses to found (formation/daemon).
      o.electorate = 0;
      Origin("max control planes", "none");
    }
    // A static list is the electorate, so M only has to cover N without one.
    if (o.peers.empty() && o.electorate > 0 && o.electorate < o.expected) {
      Error("max control planes", flags_.electorate > 0 ? "--max-control-planes" : "cluster record",
            std::to_string(o.electorate) + " is below the expected control-plane count " + std::to_string(o.expected),
            "give at least " + std::to_string(o.expected) + ", or lower --expected");
    }
  }

  void Role() {
    auto& role = out_.settings.role;
    std::string source;
    if (!flags_.role.empty()) {
      role = flags_.role;
      source = "--role";
      Origin("role", "flag");
    } else if (config_.role) {
      role = *config_.role;
      source = FromConfig(config_, "role");
      Origin("role", ConfigOrigin(config_, "role"));
    } else {
      role = "control-plane";
      Origin("role", "default");
    }
    if (role != "control-plane" && role != "worker") {
      Error("role", source, "'" + role + "' is neither 'control-plane' nor 'worker'",
            "set it to control-plane or worker");
    }
    out_.settings.formation.control_plane = role != "worker";
  }

  void ClusterName() {
    auto& name = out_.settings.formation.cluster_name;
    if (!flags_.cluster_name.empty()) {
      name = flags_.cluster_name;
      Origin("cluster name", "flag");
    } else if (!record_.name.empty()) {
      name = record_.name;
      Origin("cluster name", "cluster record");
    } else {
      name = "sprout";
      Origin("cluster name", "default");
    }
  }

  void EtcdDataDir() {
    auto& dir = out_.settings.formation.etcd_data_dir;
    if (!flags_.etcd_data_dir.empty()) {
      dir = flags_.etcd_data_dir;
      Origin("etcd data dir", "flag");
    } else {
      dir = flags_.state_dir / "etcd";
      Origin("etcd data dir", "default");
    }
  }

  void Port() {
    if (flags_.port <= 0 || flags_.port > 65535) {
      Error("port", "--port", std::to_string(flags_.port) + " is not a UDP port", "give a port from 1 to 65535");
      return;
    }
    out_.settings.formation.port = static_cast<std::uint16_t>(flags_.port);
    Origin("port", flags_.port == formation::kDefaultPort ? "default" : "flag");
  }

  // EtcdLaunchMode: etcd runs as a static pod (podman-kube@) when the image carries
  // the etcd template and a preloaded etcd image, else as a child process (tests,
  // development hosts).
  void EtcdLaunchMode() {
    const std::string& mode = flags_.etcd_launch;
    const bool pod_possible = record_.images.count("etcd") != 0 && facts_.etcd_template;
    auto& launch = out_.settings.etcd_launch;
    if (mode == "auto") {
      launch = pod_possible ? EtcdLaunch::kStaticPod : EtcdLaunch::kProcess;
      Origin("etcd launch", pod_possible ? "cluster record" : "default");
    } else if (mode == "process") {
      launch = EtcdLaunch::kProcess;
      Origin("etcd launch", "flag");
    } else if (mode == "static-pod") {
      launch = EtcdLaunch::kStaticPod;
      Origin("etcd launch", "flag");
      if (!pod_possible) {
        Error("etcd launch", "--etcd-launch=static-pod",
              "a static pod needs " + (kStaticPodTemplates / "etcd.yaml").string() + " and an etcd image in " +
                  flags_.cluster_file.string(),
              "use --etcd-launch=process, or an image built with the etcd static pod");
      }
    } else {
      Error("etcd launch", "--etcd-launch", "'" + mode + "' is not a way to run etcd",
            "use auto, process or static-pod");
    }
  }

  // Backup: the sink from the flag, the node config (a share's address and uid/gid are
  // per node) or the profile (the cluster record); schedule and retention from the flag
  // or the profile; restore-from from the flag or the node config.
  void Backup() {
    auto& b = out_.settings.backup;
    std::string source;
    if (!flags_.backup_dir.empty()) {
      b.sink = flags_.backup_dir;
      source = "--backup-dir";
      Origin("backup dir", "flag");
    } else if (config_.backup_dir) {
      b.sink = *config_.backup_dir;
      source = FromConfig(config_, "backup-dir");
      Origin("backup dir", ConfigOrigin(config_, "backup-dir"));
    } else if (!record_.backup_dir.empty()) {
      b.sink = record_.backup_dir;
      source = "backup.dir of " + flags_.cluster_file.string();
      Origin("backup dir", "cluster record");
    } else {
      Origin("backup dir", "default");
    }
    if (!b.sink.empty()) {
      if (auto loc = backup::ParseSinkLocation(b.sink); !loc) {
        Error("backup dir", source, loc.error(), "give a folder or nfs://HOST/PATH[?uid=N&gid=N]");
      }
    }
    std::string interval_source;
    if (flags_.backup_interval) {
      b.interval = *flags_.backup_interval;
      interval_source = "--backup-interval";
      Origin("backup interval", "flag");
    } else if (record_.backup_interval > 0) {
      b.interval = record_.backup_interval;
      interval_source = "backup.interval of " + flags_.cluster_file.string();
      Origin("backup interval", "cluster record");
    } else {
      Origin("backup interval", "default");
    }
    if (b.interval < 0) {
      Error("backup interval", interval_source, std::to_string(b.interval) + " is not a number of seconds",
            "give 0 (no scheduled backups) or more");
    } else if (b.interval > 0 && b.sink.empty()) {
      // A generic image may carry the profile's schedule while the share is given per
      // node: until it is, no scheduled backups, and formation goes on (no human step).
      b.interval = 0;
      Origin("backup interval", out_.settings.origin["backup interval"] + ", off: no sink (give sprout.backup-dir)");
    }
    if (flags_.backup_keep) {
      b.keep = *flags_.backup_keep;
      Origin("backup keep", "flag");
      if (b.keep < 1)
        Error("backup keep", "--backup-keep", std::to_string(b.keep) + " keeps nothing", "give 1 or more");
    } else if (record_.backup_keep > 0) {
      b.keep = record_.backup_keep;
      Origin("backup keep", "cluster record");
    } else {
      Origin("backup keep", "default");
    }
    std::string restore_source;
    if (!flags_.restore_from.empty()) {
      b.restore_from = flags_.restore_from;
      restore_source = "--restore-from";
      Origin("restore from", "flag");
    } else if (config_.restore_from) {
      b.restore_from = *config_.restore_from;
      restore_source = FromConfig(config_, "restore-from");
      Origin("restore from", ConfigOrigin(config_, "restore-from"));
    } else {
      Origin("restore from", "default");
    }
    if (!b.restore_from.empty()) {
      if (auto at = backup::SplitBundleLocation(b.restore_from); !at) {
        Error("restore from", restore_source, at.error(), "give a bundle's path or nfs://HOST/PATH/NAME");
      }
    }
  }

  const RunFlags& flags_;
  const NodeConfig& config_;
  const ClusterRecord& record_;
  const HostFacts& facts_;
  Resolved out_;
  bool keep_secret_errors_ = false;
};

}  // namespace

std::string Describe(const SettingError& e) {
  std::string line = e.setting + ": " + e.problem;
  if (!e.source.empty()) line += " (from " + e.source + ")";
  if (!e.fix.empty()) line += "; " + e.fix;
  return line;
}

Result<NodeConfig> SecretsForRole(NodeConfig config) {
  const bool worker = config.role && *config.role == "worker";
  if (!worker && config.ca_cert_hash) {
    config.ca_cert_hash.reset();  // a control-plane node holds the CA; it pins nothing
    config.origin.erase("ca-cert-hash");
  }
  if (worker && config.cluster_secret) {
    if (!config.ca_cert_hash) {
      auto hash = pki::ClusterCaCertHash(*config.cluster_secret);
      if (!hash) return Fail(hash.error());
      config.ca_cert_hash = *hash;
      config.origin["ca-cert-hash"] = "derived from the cluster secret";
    }
    config.worker_secret = formation::WorkerSecret(*config.cluster_secret);
    config.cluster_secret.reset();
    config.origin.erase("cluster-secret");
  } else if (!worker && config.cluster_secret) {
    config.worker_secret.reset();
    config.origin.erase("worker-secret");
  } else if (!worker && config.worker_secret) {
    return Fail(std::string("a control-plane node (role ") +
                (config.role ? *config.role : "control-plane, the default") +
                ") needs the cluster secret, and this one would have only a worker secret; give --cluster-secret, or "
                "--role worker");
  }
  return config;
}

Resolved ResolveSettings(const RunFlags& flags, const NodeConfig& config, const ClusterRecord& record,
                         const HostFacts& facts) {
  return Resolver(flags, config, record, facts).Run();
}

}  // namespace sprout::settings
