// `sprout-firstboot backup now | list` and the scheduled backups a control-plane node
// takes while it runs (docs/backup.md). The decisions are in lib/backup; this file
// wires them to the node's settings, its etcd and the clock.
#pragma once

#include <csignal>
#include <string>
#include <thread>

#include "node/settings.h"

namespace sprout::firstboot {

// BackupFlags are the backup settings of the command line.
struct BackupFlags {
  std::string sink;                 // the folder bundles go to; "" : no backups
  int keep = 7;                     // retention: the newest good bundles kept
  long interval = 0;                // seconds between scheduled snapshots; 0: none
  std::string etcdctl = "etcdctl";  // for the test restore and the restore
};

// BackupNow takes one manual backup on this node; returns the exit code.
int BackupNow(const node::NodeSettings& settings, const BackupFlags& b);

// BackupList prints the bundles of this cluster in the sink, newest first, with size,
// time, revision, sha256, and whether each opens with this node's secret.
int BackupList(const node::NodeSettings& settings, const BackupFlags& b);

// BackupStatusLines is what `status` says about backups (from <state>/backup.json).
std::string BackupStatusLines(const std::filesystem::path& state_dir);

// StartBackupScheduler runs scheduled backups until *stop (nothing when b has no sink
// or interval): every few seconds it asks the local etcd who leads and lets the leader
// take each slot's snapshot.
std::thread StartBackupScheduler(const node::NodeSettings& settings, const BackupFlags& b,
                                 const volatile std::sig_atomic_t* stop);

}  // namespace sprout::firstboot
