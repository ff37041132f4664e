// Resolving the settings of `sprout-firstboot run`: one pure function from the
// command line, the node config and the image's cluster record to the formation
// options, or to errors that name the setting, where it came from and the fix.
// Precedence, for every setting: flag > node config > cluster record > default.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "formationd/daemon.h"
#include "formationd/transport.h"
#include "nodeconfig/nodeconfig.h"
#include "settings/cluster.h"

namespace sprout::settings {

// kStaticPodTemplates is where an image keeps the control-plane templates.
inline const std::filesystem::path kStaticPodTemplates = "/usr/share/sprout/staticpods";

// RunFlags is what the command line of `sprout-firstboot run` says; "" and 0 mean
// "not given", so the node config, the cluster record or a default decides.
struct RunFlags {
  std::filesystem::path state_dir = "/var/lib/sprout";
  std::string name;
  std::string listen;
  std::string peers;  // comma-separated addresses, a "/24" suffix allowed
  int expected = 0;
  int electorate = 0;  // --max-control-planes
  std::string secret_file;
  std::string worker_secret_file;  // a worker's secret (WorkerSecret of the cluster secret)
  std::string ca_cert_hash;        // --ca-cert-hash: a worker's pin of the cluster CA
  std::string cluster_name;
  std::filesystem::path cluster_file = "/usr/share/sprout/cluster.json";
  std::string etcd_launch = "auto";  // auto | process | static-pod
  std::string etcd_bin = "etcd";
  std::string etcd_data_dir;
  std::string pki_dir = "/etc/kubernetes/pki";
  std::string role;
  std::string group = formation::kDefaultGroup;
  int port = formation::kDefaultPort;
  std::filesystem::path templates_dir = kStaticPodTemplates;          // the control plane's templates
  std::filesystem::path manifests_dir = "/etc/kubernetes/manifests";  // where the pod host reads them
  std::filesystem::path audit_log_dir = "/var/log/kubernetes/audit";  // the apiserver's audit log
  bool apply_system = false;            // touch this host: hostname, address, SSH key (the unit says so)
  std::string backup_dir;               // --backup-dir: a folder or nfs://HOST/PATH
  std::optional<long> backup_interval;  // --backup-interval, seconds
  std::optional<int> backup_keep;       // --backup-keep
  std::string restore_from;             // --restore-from: a bundle (a path or nfs:// URL)
};

// HostFacts are what the edge read from the host before resolving, so that
// resolution itself reads nothing.
struct HostFacts {
  std::string host_name;                               // gethostname()
  std::optional<std::string> secret_file_text;         // the bytes of flags.secret_file, when it was read
  std::string secret_file_error;                       // why flags.secret_file could not be read
  std::optional<std::string> worker_secret_file_text;  // the bytes of flags.worker_secret_file, when it was read
  std::string worker_secret_file_error;                // why flags.worker_secret_file could not be read
  bool etcd_template = false;                          // kStaticPodTemplates/etcd.yaml exists
};

// EtcdLaunch is how etcd runs: a child process, or a static pod (podman-kube@).
enum class EtcdLaunch { kProcess, kStaticPod };

// BackupSettings is where a control-plane node's bundles go, how often, how many stay,
// and the bundle a fresh node forms from (docs/backup.md).
struct BackupSettings {
  std::string sink;          // a folder or nfs://HOST/PATH[?uid=N&gid=N]; "" no backups
  long interval = 0;         // seconds between scheduled snapshots; 0 none
  int keep = 7;              // good bundles retention keeps
  std::string restore_from;  // "" none
};

// NodeSettings is the resolved result.
struct NodeSettings {
  formation::DaemonOptions formation;  // make_launcher is left empty: the edge makes it from etcd_launch
  std::string role;                    // "control-plane" or "worker"
  EtcdLaunch etcd_launch = EtcdLaunch::kProcess;
  std::string idle_reason;  // non-empty: formation stays off and the node idles (no secret, no address)
  BackupSettings backup;
  // origin says where each setting came from: "flag", "node config (<source>)",
  // "cluster record", "peers", "host" or "default".
  std::map<std::string, std::string> origin;
};

// SettingError is one setting that cannot be used.
struct SettingError {
  std::string setting;  // "role"
  std::string source;   // "--role", "sprout.role (kernel command line)"
  std::string problem;  // "'boss' is neither 'control-plane' nor 'worker'"
  std::string fix;      // "use control-plane or worker"
};

// Describe renders an error as one line: "role: 'boss' is ... (from --role); use ...".
std::string Describe(const SettingError& error);

// Resolved is the settings, or every setting error found at once.
struct [[nodiscard]] Resolved {
  NodeSettings settings;
  std::vector<SettingError> errors;
  bool ok() const { return errors.empty(); }
};

// SecretsForRole keeps in config only the secret its role needs, for an image's config
// area: a worker's cluster secret is replaced by the worker secret derived from it (so a
// worker's personalization holds no control-plane secret) and, unless config pins one
// already, by the pin of the CA a cluster formed with that secret has
// (pki::ClusterCaCertHash); a control-plane node's worker secret and CA pin are dropped
// (it derives the one and holds the CA). A control-plane role (also by default) with only
// a worker secret is an error that names the fix. Pure.
Result<NodeConfig> SecretsForRole(NodeConfig config);

// ResolveSettings merges the flags, the node config and the cluster record by
// precedence and validates the result. A missing secret or address is not an error:
// the node idles (idle_reason) until it is configured. Pure: no I/O.
Resolved ResolveSettings(const RunFlags& flags, const NodeConfig& config, const ClusterRecord& record,
                         const HostFacts& facts);

}  // namespace sprout::settings
