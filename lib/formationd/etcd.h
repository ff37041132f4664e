// Starting and supervising the local etcd member. The flags are computed by a pure
// function (tested without processes); EtcdLauncher is the thin edge that runs etcd.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "formation/election.h"
#include "util/result.h"

namespace sprout::formation {

// EtcdConfig is this node's etcd setup. All URLs are https with mutual TLS; the
// certificates are in kubeadm's layout under pki_dir (see lib/pki/pki.h).
struct EtcdConfig {
  std::string bin = "etcd";                     // the etcd executable
  std::string name;                             // member name: the node name
  std::string data_dir;                         // etcd --data-dir
  std::string address;                          // the node's IPv4 address
  std::string pki_dir = "/etc/kubernetes/pki";  // holds etcd/{ca,server,peer}.{crt,key}
  int client_port = 2379;                       // etcd client port
  int peer_port = 2380;                         // etcd peer port
  std::string log_file;                         // where etcd's output goes (appended)
};

// EtcdArgs is everything a launcher needs to start one etcd member, in one plain
// struct: a child process renders it as flags, a static-pod launcher as a manifest.
struct EtcdArgs {
  std::string bin = "etcd";                     // executable (child process launcher)
  std::string name;                             // --name
  std::string data_dir;                         // --data-dir
  std::string peer_url;                         // --listen-peer-urls and --initial-advertise-peer-urls
  std::vector<std::string> listen_client_urls;  // --listen-client-urls
  std::string advertise_client_url;             // --advertise-client-urls
  std::string initial_cluster;                  // --initial-cluster
  std::string initial_cluster_state;            // "new" or "existing"
  std::string initial_cluster_token;            // --initial-cluster-token (new only)
  std::string trusted_ca_file;                  // --trusted-ca-file and --peer-trusted-ca-file
  std::string cert_file;                        // --cert-file (server certificate)
  std::string key_file;                         // --key-file
  std::string peer_cert_file;                   // --peer-cert-file
  std::string peer_key_file;                    // --peer-key-file
  std::string log_file;                         // where output goes (appended)

  // operator== compares every field.
  bool operator==(const EtcdArgs&) const = default;
};

// EtcdCommandLine renders args as etcd's argv (mutual TLS for clients and peers).
std::vector<std::string> EtcdCommandLine(const EtcdArgs& args);

// PeerUrl is the etcd peer URL of a node at address.
std::string PeerUrl(const std::string& address, int peer_port = 2380);
// ClientUrl is the etcd client URL of a node at address.
std::string ClientUrl(const std::string& address, int client_port = 2379);

// EtcdNewArgs are the args that start a founding member. Every founding member passes
// the identical --initial-cluster and --initial-cluster-token; once the data dir
// exists etcd ignores both, so repeating the start after a restart is safe.
EtcdArgs EtcdNewArgs(const EtcdConfig& config, const StartEtcdNew& start);

// EtcdExistingArgs are the args that start a learner added to a running cluster:
// --initial-cluster lists the current members plus this node.
EtcdArgs EtcdExistingArgs(const EtcdConfig& config, const std::string& initial_cluster);

// ClientUrlFor derives a member's client URL from its peer URL ("https://a:2380" ->
// "https://a:2379"): members use the default ports.
std::string ClientUrlFor(const std::string& peer_url);
// HostOf is the host part of a URL ("https://198.18.0.11:2380" -> "198.18.0.11").
std::string HostOf(const std::string& url);
// ApiUrlOfHost is the Kubernetes API URL on a control-plane host ("https://HOST:6443",
// IPv6 in brackets).
std::string ApiUrlOfHost(const std::string& host);

// EtcdClientTls is the client certificate the gateway calls present.
struct EtcdClientTls {
  std::string ca_file;    // the etcd CA
  std::string cert_file;  // a client certificate signed by it
  std::string key_file;   // its key
};

// ClientTlsFor is the apiserver-etcd-client certificate of the layout under pki_dir.
EtcdClientTls ClientTlsFor(const std::string& pki_dir);

// EtcdMember is one member as etcd's v3 JSON gateway reports it.
struct EtcdMember {
  std::string id;                      // decimal member ID (the gateway sends it as a string)
  std::string name;                    // empty until the member has started
  std::vector<std::string> peer_urls;  // its peer URLs
  bool learner = false;                // true until promoted
};

// ApiEndpointsOf lists the Kubernetes API URLs of the voting members of a member list,
// sorted: what workers are told. Learners are left out: they run no API server yet.
std::vector<std::string> ApiEndpointsOf(const std::vector<EtcdMember>& members);

// MemberAddresses is formation's record of the control-plane nodes' addresses: each
// started member's name (the node name) and the host of its first peer URL. A member
// not yet started has no name and is left out; a name two members carry with different
// addresses is left out too, since the list does not say which is the node. The pod
// routes check a Node's InternalIP against it (kube::PeerRoutes).
std::map<std::string, std::string> MemberAddresses(const std::vector<EtcdMember>& members);

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
  // EtcdApi talks to client_url ("https://198.18.0.11:2379") with client certificate tls.
  EtcdApi(std::string client_url, EtcdClientTls tls) : url_(std::move(client_url)), tls_(std::move(tls)) {}
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
  EtcdClientTls tls_;
};

// EtcdLauncher starts and stops the local etcd member. ChildEtcdLauncher runs it as a
// child process; another implementation may render a static-pod manifest instead.
class EtcdLauncher {
 public:
  virtual ~EtcdLauncher() = default;
  // Start starts etcd with args (nothing if it runs already).
  virtual Status Start(const EtcdArgs& args) = 0;
  // Running is false once etcd exited (the launcher reaps it) or was never started.
  virtual bool Running() = 0;
  // Stop stops etcd and waits for it (bounded).
  virtual void Stop() = 0;
  // Describe names the running instance for the log ("pid 123").
  virtual std::string Describe() const = 0;
};

// ChildEtcdLauncher runs etcd as a child that dies with its parent (PR_SET_PDEATHSIG).
class ChildEtcdLauncher : public EtcdLauncher {
 public:
  ChildEtcdLauncher() = default;
  ChildEtcdLauncher(const ChildEtcdLauncher&) = delete;
  ChildEtcdLauncher& operator=(const ChildEtcdLauncher&) = delete;
  ~ChildEtcdLauncher() override { ChildEtcdLauncher::Stop(); }

  // Start forks and execs EtcdCommandLine(args) with output appended to args.log_file.
  Status Start(const EtcdArgs& args) override;
  // Running reaps the child if it exited (its status is then in last_status).
  bool Running() override;
  // Stop sends SIGTERM, waits up to 10 s, then SIGKILL.
  void Stop() override;
  // Describe is "pid N" or "not running".
  std::string Describe() const override;
  // pid is the child's process ID, or -1.
  int pid() const { return pid_; }
  // last_status is the wait status of the last exit, or -1.
  int last_status() const { return last_status_; }

 private:
  int pid_ = -1;
  int last_status_ = -1;
};

}  // namespace sprout::formation
