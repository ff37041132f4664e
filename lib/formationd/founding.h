// How a founding member starts (docs/formation.md, "Founding"; docs/backup.md, "Restore
// as formation"): with the PKI it holds or makes, with one it must fetch from the other
// founding members, or from a backup bundle. The daemon's loop asks, then serves or
// fetches; these functions install files and log, and start nothing themselves.
#pragma once

#include "formation/election.h"
#include "formation/join.h"
#include "formationd/etcd.h"
#include "formationd/options.h"

namespace sprout::formation {

// FoundingPlan is what a founding member does next: serve credentials (then etcd
// starts with args), fetch them from the other founding members first, or nothing
// (a failure, already logged and shown in STATUS=; a restart tries again).
struct FoundingPlan {
  enum Kind { kNothing, kServe, kFetch };
  Kind kind = kNothing;
  Credentials credentials;  // kServe: the cluster's CAs, bootstrap token and API endpoints
  EtcdArgs args;            // how etcd starts, once the credentials are in place
};

// PlanFounding decides for the founding s (DecideFounderPki): the founder makes the
// PKI once and installs it, a node whose PKI cannot be used fetches it, and a node with
// a restore plan and no etcd data restores (PlanRestore).
FoundingPlan PlanFounding(const DaemonOptions& o, const EtcdConfig& etcd_config, const StartEtcdNew& s);

// PlanRestore installs the bundle's PKI and fills etcd's data from its snapshot, with
// this founding's initial cluster and a token of the restore.
FoundingPlan PlanRestore(const DaemonOptions& o, const StartEtcdNew& s, EtcdArgs args);

}  // namespace sprout::formation
