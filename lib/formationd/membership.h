// Membership tasks: the daemon's background work against the cluster, so the beacon
// loop never blocks on it. Each task runs on its own thread and ends soon after Stop:
//   - fetching credentials from a founding member's join endpoint (a founding member
//     that is not the founder, a learner, a worker);
//   - adding this node as an etcd learner through a member's gateway (removing a stale
//     entry of this node first), and promoting it once etcd allows;
//   - refreshing the API endpoints the join endpoint names from this node's etcd.
// The loop starts a task and later takes its result; the decisions inside a task over
// a member list are pure functions, tested without etcd.
#pragma once

#include <atomic>
#include <cstdint>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include "formation/auth.h"
#include "formation/election.h"
#include "formation/join.h"
#include "formationd/etcd.h"
#include "formationd/join_endpoint.h"
#include "formationd/options.h"

namespace sprout::formation {

// CredentialFiles is where the node of o keeps its credentials.
NodeCredentialFiles CredentialFiles(const DaemonOptions& o);

// BackoffMs is how long to wait before retry number attempt (from 0): 250 ms doubling
// up to 4 s.
int BackoffMs(int attempt);

// FindSelf is this node's entry in a member list: the last one with its peer URL, or
// with its name once started; nullptr when there is none.
const EtcdMember* FindSelf(const std::vector<EtcdMember>& members, const std::string& name,
                           const std::string& peer_url);

// FindByPeerUrl is the last entry with peer_url among its peer URLs, or nullptr.
const EtcdMember* FindByPeerUrl(const std::vector<EtcdMember>& members, const std::string& peer_url);

// WorkerTrust is what the worker of o holds against a join endpoint's CA: its pin
// (o.ca_cert_hash), and the CA it kept before (<state>/worker/ca.crt), if any.
WorkerCaTrust WorkerTrust(const DaemonOptions& o);

// MemberStart is what a start task hands back: the credentials this node now has and
// how to start its etcd.
struct MemberStart {
  Credentials credentials;  // what this node serves once etcd runs
  EtcdArgs args;            // how to start etcd
};

// Membership runs the background tasks of one daemon run. At most one task of each
// kind runs at a time; starting one while its kind runs replaces the result it waits for.
class Membership {
 public:
  // Membership works for the node of o, authenticating to join endpoints with psk (the
  // control-plane PSK on a control-plane node, the worker PSK on a worker);
  // etcd is how this node's etcd is set up.
  Membership(const DaemonOptions& o, const JoinKey& psk, EtcdConfig etcd);
  Membership(const Membership&) = delete;
  Membership& operator=(const Membership&) = delete;
  // ~Membership asks the tasks to stop and waits for them.
  ~Membership();

  // FetchFoundingCredentials fetches the cluster's credentials from another founding
  // member of f (the founder first); the result pairs them with args.
  void FetchFoundingCredentials(const Founding& f, const EtcdArgs& args);
  // StartLearner gets credentials (local or fetched) and adds this node as a learner
  // of the cluster j through a member's gateway.
  void StartLearner(const JoinAsLearner& j);
  // StartPromote promotes this learner once etcd accepts that (it must catch up).
  void StartPromote(const Founding& f);
  // StartWorker fetches worker credentials into <state>/worker, keeping only those whose
  // CA the worker trusts (CheckWorkerCa: its pin, else the CA kept first); true when they
  // are there already (and no task starts). Saved credentials whose CA the pin refuses
  // are fetched again.
  bool StartWorker(const JoinAsWorker& w);
  // RefreshEndpoints starts asking this node's etcd for the voting members' API
  // endpoints, every 15 s while ready (serving, with etcd started).
  void RefreshEndpoints(std::uint64_t now, bool ready);

  // TakeStarted is the result of a finished credentials fetch or learner add; empty
  // while it runs, and when it failed or was stopped.
  std::optional<MemberStart> TakeStarted();
  // TakePromoted is true once, when a promotion succeeded.
  bool TakePromoted();
  // TakeWorker is whether the worker credentials were saved, once that task finished.
  std::optional<bool> TakeWorker();
  // TakeEndpoints is the API endpoint list of a finished refresh (empty when etcd
  // did not answer).
  std::optional<std::vector<std::string>> TakeEndpoints();

  // Stop asks every task to end soon; they end at their next step.
  void Stop() { stop_ = true; }

 private:
  const DaemonOptions& o_;
  JoinKey psk_;
  EtcdConfig etcd_;
  std::atomic<bool> stop_{false};  // declared before the futures: they may use it until they end
  std::future<std::optional<MemberStart>> start_;
  std::future<bool> promote_;
  std::future<bool> worker_;
  std::future<std::vector<std::string>> endpoints_;
  std::uint64_t next_endpoints_ = 0;
};

}  // namespace sprout::formation
