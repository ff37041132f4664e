// Starting and supervising the local etcd member. The flags are computed by a pure
// function (tested without processes); EtcdProcess is the thin edge that forks.
#pragma once

#include <string>
#include <vector>

#include "formation/node.h"
#include "util/result.h"

namespace sprout::formation {

// EtcdConfig is this node's etcd setup; URLs are plain HTTP on the node address for
// now (mTLS comes with the PKI, see docs/formation.md).
struct EtcdConfig {
  std::string bin = "etcd";  // the etcd executable
  std::string name;          // member name: the node name
  std::string data_dir;      // etcd --data-dir
  std::string address;       // the node's IPv4 address
  int client_port = 2379;    // etcd client port
  int peer_port = 2380;      // etcd peer port
  std::string log_file;      // where etcd's output goes (appended)
};

// PeerUrl is the etcd peer URL of a node at address.
std::string PeerUrl(const std::string& address, int peer_port = 2380);
// ClientUrl is the etcd client URL of a node at address.
std::string ClientUrl(const std::string& address, int client_port = 2379);

// EtcdNewArgs is the argv that starts a founding member. Every founding member passes
// the identical --initial-cluster and --initial-cluster-token; once the data dir
// exists etcd ignores both, so repeating the start after a restart is safe.
std::vector<std::string> EtcdNewArgs(const EtcdConfig& config, const StartEtcdNew& start);

// EtcdExistingArgs is the argv that starts a learner added to a running cluster:
// --initial-cluster lists the current members plus this node.
std::vector<std::string> EtcdExistingArgs(const EtcdConfig& config, const std::string& initial_cluster);

// ClientUrlFor derives a member's client URL from its peer URL ("http://a:2380" ->
// "http://a:2379"): members use the default ports until the PKI step makes URLs explicit.
std::string ClientUrlFor(const std::string& peer_url);

// EtcdMember is one member as etcd's v3 JSON gateway reports it.
struct EtcdMember {
  std::string id;                      // decimal member ID (the gateway sends it as a string)
  std::string name;                    // empty until the member has started
  std::vector<std::string> peer_urls;  // its peer URLs
  bool learner = false;                // true until promoted
};

// ParseMembers reads the "members" array of a member list/add response.
Result<std::vector<EtcdMember>> ParseMembers(const std::string& json);

// JoinInitialCluster renders --initial-cluster for a learner from the member list
// after its add: started members by name, the unstarted entry with our peer URL as us.
Result<std::string> JoinInitialCluster(const std::vector<EtcdMember>& members, const std::string& self_name,
                                       const std::string& self_peer_url);

// EtcdApi calls etcd's v3 JSON gateway at one client URL; every call has a short
// timeout and returns etcd's own error text on failure.
class EtcdApi {
 public:
  // EtcdApi talks to client_url ("http://198.18.0.11:2379").
  explicit EtcdApi(std::string client_url) : url_(std::move(client_url)) {}
  // ListMembers returns the current members.
  Result<std::vector<EtcdMember>> ListMembers();
  // AddLearner adds peer_url as a learner and returns the members afterwards.
  Result<std::vector<EtcdMember>> AddLearner(const std::string& peer_url);
  // Promote makes learner id a voting member.
  Status Promote(const std::string& id);
  // Remove removes member id (a stale entry of this node).
  Status Remove(const std::string& id);

 private:
  Result<std::string> Post(const std::string& path, const std::string& body);
  std::string url_;
};

// EtcdProcess is a supervised etcd child; it dies with its parent (PR_SET_PDEATHSIG).
class EtcdProcess {
 public:
  EtcdProcess() = default;
  EtcdProcess(const EtcdProcess&) = delete;
  EtcdProcess& operator=(const EtcdProcess&) = delete;
  ~EtcdProcess() { Stop(); }

  // Start forks and execs argv with output appended to log_file.
  Status Start(const std::vector<std::string>& argv, const std::string& log_file);
  // Poll reaps the child if it exited; returns its wait status then, else -1.
  int Poll();
  // running is true while the child has not been reaped.
  bool running() const { return pid_ > 0; }
  // pid is the child's process ID, or -1.
  int pid() const { return pid_; }
  // Stop sends SIGTERM, waits up to 10 s, then SIGKILL.
  void Stop();

 private:
  int pid_ = -1;
};

}  // namespace sprout::formation
