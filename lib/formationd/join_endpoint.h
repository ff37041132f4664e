// The daemon's side of the join endpoint: the credentials a control-plane node keeps
// on disk (CAs and node certificates under the PKI dir, the bootstrap token in the
// state dir) and the JoinServer that serves them, with the API endpoint list it tells
// joiners kept current. The wire format and the server itself are in join.*.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "formation/auth.h"
#include "formation/join.h"
#include "formation/wire.h"
#include "formationd/join_net.h"
#include "util/result.h"

namespace sprout::formation {

// NodeCredentialFiles says where one node keeps its credentials.
struct NodeCredentialFiles {
  std::filesystem::path pki_dir;     // kubeadm's layout (lib/pki)
  std::filesystem::path token_file;  // the bootstrap token, one line (0600)
  std::filesystem::path founded;     // the founder's marker: it made and installed the PKI
  std::string name;                  // node name: the subject of its certificates
  std::string address;               // node address: their IP SAN
};

// ApiEndpoints are the Kubernetes API URLs of the founding members.
std::vector<std::string> ApiEndpoints(const Founding& f);

// LoadLocalCredentials reads what an earlier run installed: the CAs and the token; the
// API endpoints are those of the founding f.
Result<Credentials> LoadLocalCredentials(const NodeCredentialFiles& files, const Founding& f);

// TracesOfEarlierFounding lists what says that this node may have made or held a
// cluster's PKI before: the founder's marker (written once the PKI is installed, before
// anything is served), etcd's member directory and every CA file under the PKI dir
// (ca.*, etcd/ca.*, front-proxy-ca.*, sa.*). A founder that finds any of them must not
// make a new PKI: a second set of CAs would cut its etcd off from the members that hold
// the first. Only a node with none of them may make one.
std::vector<std::string> TracesOfEarlierFounding(const NodeCredentialFiles& files,
                                                 const std::filesystem::path& etcd_data_dir);

// FounderPki is what a founding member does about its PKI when its founding starts.
enum class FounderPki {
  kUseLocal,  // everything loads: use it
  kMake,      // the founder, with no trace of any PKI: make the cluster's CAs
  kFetch,     // fetch the cluster's PKI from the other founding members (a non-founder
              // always; a founder whose own PKI is there but does not load)
  kNewToken,  // the CAs load but the bootstrap token does not, and nobody else holds
              // it: keep the CAs, make a new token
  kRefuse,    // a founder with traces of a PKI it cannot load and nobody to fetch it
              // from: make nothing, say which file and the fix, wait for a person
};

// FounderPkiInput is what DecideFounderPki looks at.
struct FounderPkiInput {
  bool founder = false;        // this node created the founding
  bool local_loads = false;    // LoadLocalCredentials succeeded
  bool cas_load = false;       // the CAs alone load (the token may not)
  bool traces = false;         // TracesOfEarlierFounding found something
  bool other_members = false;  // the founding has members besides this node
};

// DecideFounderPki is the rule that keeps one PKI per cluster; pure, so the table in
// join_endpoint_test.cc holds every case.
FounderPki DecideFounderPki(const FounderPkiInput& in);

// InstallCredentials writes the CAs and the token, and this node's etcd certificates
// unless valid ones (issued by this etcd CA) are there already. It never replaces a CA:
// when a CA certificate or sa.pub is there with other contents it writes nothing and
// fails, naming the file (a key whose certificate is the same may be restored).
Status InstallCredentials(const NodeCredentialFiles& files, const Credentials& c);

// MakeFounderCredentials makes a new cluster's CAs and bootstrap token, naming the
// founding members' API endpoints. The Kubernetes CA's key is derived from
// cluster_secret (pki::MakeClusterCAs), so workers can pin it ("Workers pin the cluster
// CA" in docs/formation.md); empty: random (tests).
Result<Credentials> MakeFounderCredentials(const Founding& f, std::string_view cluster_secret);

// JoinEndpoint is this node's join server and what it serves.
class JoinEndpoint {
 public:
  // Serve starts the server on address:port with keys (once) and serves c.
  Status Serve(const std::string& address, std::uint16_t port, const JoinKeys& keys, const Credentials& c);
  // UpdateApiEndpoints serves endpoints as the API endpoint list and logs it; false
  // (and nothing logged) when endpoints is empty or what is served already.
  bool UpdateApiEndpoints(const std::vector<std::string>& endpoints);
  // SetBackupStore makes the server keep backup copies from control-plane peers.
  void SetBackupStore(BackupCopyStore store) { server_.SetBackupStore(std::move(store)); }
  // Stop ends the server.
  void Stop() { server_.Stop(); }
  // serving is true once Serve succeeded.
  bool serving() const { return serving_; }
  // served is what the server answers with, once serving.
  const Credentials& served() const { return served_; }
  // port is the TCP port listened on.
  std::uint16_t port() const { return server_.port(); }

 private:
  JoinServer server_;
  Credentials served_;
  bool serving_ = false;
};

}  // namespace sprout::formation
