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
