// The formation daemon: drives the pure Node with real time, UDP frames and an etcd
// child process. Everything protocol-related stays in node.*; the daemon's loop only
// dispatches, to one piece per concern: beacons.h (frame I/O), join_endpoint.h (the
// join server and its credentials), membership.h (background tasks against etcd),
// etcd_supervisor.h (keeping etcd running) and status.h (STATUS= and state.json).
#pragma once

#include <csignal>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "formation/auth.h"
#include "formation/election.h"
#include "formation/join.h"
#include "formationd/etcd.h"
#include "formationd/journal.h"
#include "formationd/options.h"
#include "formationd/status.h"
#include "formationd/transport.h"
#include "util/result.h"

namespace sprout::formation {

// Journal and Field are declared in journal.h, StatusLine in status.h.

// NodeKeys is every key a node derives from the secret it holds.
struct NodeKeys {
  FrameKeys frames;               // its formation keys (beacons.h seals and checks frames under them)
  JoinKey join;                   // how it authenticates to a join endpoint
  std::optional<JoinKeys> serve;  // control-plane nodes: what its join endpoint accepts
};

// DeriveNodeKeys derives the keys of the node of o: a control-plane node from the
// cluster secret (both PSKs, both formation keys); a worker from the worker secret alone
// (derived from the cluster secret when only that is given), so it holds no key that
// proves a control-plane node. Pure.
Result<NodeKeys> DeriveNodeKeys(const DaemonOptions& o);

// LoadFormationState reads <dir>/formation.state; a missing file is a fresh node.
Result<PersistedState> LoadFormationState(const std::filesystem::path& dir);
// SaveFormationState writes <dir>/formation.state atomically and durably (fsync, rename).
Status SaveFormationState(const std::filesystem::path& dir, const PersistedState& state);

// RunDaemon runs formation until *stop becomes non-zero; it reports READY=1 as soon as
// its loop runs. Returns the process exit code.
int RunDaemon(const DaemonOptions& options, const volatile std::sig_atomic_t* stop);

// RunIdle reports READY=1 with STATUS "ready; formation disabled: <reason>" and waits
// for *stop.
int RunIdle(const std::string& reason, const volatile std::sig_atomic_t* stop);

}  // namespace sprout::formation
