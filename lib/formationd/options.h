// What `sprout-firstboot run` hands the formation daemon (DaemonOptions), and what the
// daemon hands back when this node becomes a member (MemberInfo). At the bottom of the
// daemon's pieces: membership.h and the daemon's top (daemon.h) both include it, and it
// includes none of them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "formation/join.h"
#include "formationd/etcd.h"
#include "formationd/transport.h"
#include "util/result.h"

namespace sprout::formation {

// MemberInfo is what the daemon knows when this node becomes a voting etcd member.
struct MemberInfo {
  bool founding = false;    // true: a founding member; false: a learner just promoted
  bool founder = false;     // true: the founding member that made the cluster's PKI
  EtcdArgs etcd;            // how its etcd was started (data dir, URLs, certificates)
  Credentials credentials;  // the cluster's CAs, bootstrap token and API endpoints
};

// RestorePlan makes a founding member form from a backup instead of from nothing
// (docs/backup.md, "Restore as formation"): it installs the bundle's PKI instead of
// making or fetching one, and make_data_dir fills its empty etcd data dir from the
// snapshot with the founding's initial cluster. The token suffix keeps a member that
// started empty out of the restored cluster (another token, another cluster ID).
struct RestorePlan {
  Credentials credentials;   // the bundle's CAs, service-account key and bootstrap token
  std::string token_suffix;  // appended to the founding's token ("-r" + snapshot digest)
  std::string source;        // the bundle, for the log
  // make_data_dir restores the snapshot into args.data_dir (which does not exist yet).
  std::function<Status(const EtcdArgs& args)> make_data_dir;
};

// DaemonOptions is everything `sprout-firstboot run` resolved from flags and node config.
struct DaemonOptions {
  std::filesystem::path state_dir;  // formation.state, state.json and etcd.log live here
  std::string name;                 // node name, also the etcd member name
  std::string listen;               // node IPv4 address (etcd URLs, multicast interface)
  std::vector<std::string> peers;   // static peer addresses (may include this node)
  int expected = 3;                 // N: expected control-plane count
  int electorate = 0;               // M: most control-plane nodes voting at once; 0 (none given)
                                    // with no static list: this node never founds
  bool control_plane = true;        // workers never found
  std::string secret;               // cluster secret: control-plane nodes need it; a worker never uses it
  std::string worker_secret;        // WorkerSecret(secret): all a worker needs (derived from secret when empty)
  // A worker's pin of the cluster CA (pki::SpkiSha256 form): a join endpoint that hands it
  // another CA is refused. "": none, trust on first use (CheckWorkerCa in formation/join.h).
  std::string ca_cert_hash;
  std::string ca_cert_hash_source;      // where the pin came from, for the log ("sprout.ca-cert-hash (fw_cfg)")
  std::string cluster_name = "sprout";  // cluster identity
  std::string etcd_bin = "etcd";        // etcd executable
  std::filesystem::path etcd_data_dir;  // etcd --data-dir (default: <state>/etcd)
  std::filesystem::path pki_dir = "/etc/kubernetes/pki";  // kubeadm's layout (lib/pki)
  std::uint16_t port = kDefaultPort;  // formation UDP port; the TLS join endpoint is on this TCP port
  std::string group = kDefaultGroup;  // multicast group ("" disables multicast)
  // make_launcher makes how etcd runs; empty = as a child process (ChildEtcdLauncher).
  std::function<std::unique_ptr<EtcdLauncher>()> make_launcher;
  // on_member, when set, is called from the daemon's loop once per run, when this node
  // is a voting etcd member: a founding member once its etcd is started, a learner once
  // promoted. It must return soon (the loop waits for it).
  std::function<void(const MemberInfo&)> on_member;
  // restore, when set: a founding member with no etcd data forms from a backup.
  std::optional<RestorePlan> restore;
  // store_backup_copy, when set, keeps the backup copies control-plane peers send to
  // this node's join endpoint (docs/backup.md); empty: copies are refused.
  BackupCopyStore store_backup_copy;
};

}  // namespace sprout::formation
