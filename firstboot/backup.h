// `sprout-firstboot backup now | list` and the scheduled backups a control-plane node
// takes while it runs (docs/backup.md). The decisions are in lib/backup; this file
// wires them to the node's settings, its etcd and the clock.
#pragma once

#include <csignal>
#include <string>
#include <thread>

#include "formationd/daemon.h"
#include "settings/settings.h"
#include "util/result.h"

namespace sprout::firstboot {

// BackupFlags are what a backup needs: the resolved settings (sink, schedule,
// retention, restore-from: settings::BackupSettings, copied by WithSettings) and the
// command line's own (etcdctl, --scheduled).
struct BackupFlags {
  std::string sink;                 // a folder or nfs://HOST/PATH; "" : no backups
  int keep = 7;                     // retention: the newest good bundles kept
  long interval = 0;                // seconds between scheduled snapshots; 0: none
  std::string etcdctl = "etcdctl";  // for the test restore and the restore
  std::string restore_from;         // run: a bundle a founding member forms from
  bool scheduled = false;           // backup now: take the current slot's scheduled bundle, not a manual one
};

// WithSettings is flags with the resolved backup settings filled in.
BackupFlags WithSettings(BackupFlags flags, const settings::NodeSettings& settings);

// BackupNow takes one manual backup on this node; returns the exit code.
int BackupNow(const settings::NodeSettings& settings, const BackupFlags& b);

// BackupList prints the bundles of this cluster in the sink, newest first, with size,
// time, revision, sha256, and whether each opens with this node's secret.
int BackupList(const settings::NodeSettings& settings, const BackupFlags& b);

// BackupStatusLines is what `status` says about backups (from <state>/backup.json).
std::string BackupStatusLines(const std::filesystem::path& state_dir);

// PrepareRestore opens the bundle b.restore_from with the node's secret and cluster
// name (a corrupt or mismatched bundle is an error that says why), stages its snapshot
// and PKI under <state>/restore (0700) and returns the daemon's plan.
Result<formation::RestorePlan> PrepareRestore(const settings::NodeSettings& settings, const BackupFlags& b);

// StartBackupScheduler runs scheduled backups until *stop (nothing when b has no sink
// or interval): every few seconds it asks the local etcd who leads and lets the leader
// take each slot's snapshot.
// BackupCopyStoreFor is how a control-plane node keeps the bundles its peers copy to it:
// a bundle of this cluster that opens with its secret is written atomically to
// <state>/backup-copies (0700), and the newest keep are kept there.
formation::BackupCopyStore BackupCopyStoreFor(const settings::NodeSettings& settings, int keep);

std::thread StartBackupScheduler(const settings::NodeSettings& settings, const BackupFlags& b,
                                 const volatile std::sig_atomic_t* stop);

}  // namespace sprout::firstboot
