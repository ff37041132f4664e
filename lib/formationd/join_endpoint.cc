#include "formationd/join_endpoint.h"

#include "formationd/etcd.h"
#include "formationd/journal.h"
#include "pki/pki.h"
#include "util/fs.h"
#include "util/text.h"

namespace sprout::formation {

std::vector<std::string> ApiEndpoints(const Founding& f) {
  std::vector<std::string> out;
  for (const auto& m : f.members) out.push_back(ApiUrlOfHost(HostOf(m.peer_url)));
  return out;
}

Result<Credentials> LoadLocalCredentials(const NodeCredentialFiles& files, const Founding& f) {
  auto cas = pki::LoadCAs(files.pki_dir);
  if (!cas) return Fail(cas.error());
  auto token = ReadFile(files.token_file);
  if (!token) return Fail(token.error());
  std::string t = *token;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  if (!ValidBootstrapToken(t)) return Fail(files.token_file.string() + " does not hold a bootstrap token");
  return Credentials{*cas, t, ApiEndpoints(f)};
}

std::vector<std::string> TracesOfEarlierFounding(const NodeCredentialFiles& files,
                                                 const std::filesystem::path& etcd_data_dir) {
  std::vector<std::filesystem::path> candidates{files.founded};
  if (!etcd_data_dir.empty()) candidates.push_back(etcd_data_dir / "member");
  for (const auto& f : pki::CAFiles(pki::ClusterCAs{})) candidates.push_back(files.pki_dir / f.path);
  candidates.push_back(files.pki_dir / pki::kEncryptionKeyFile);  // CAFiles lists it only when there is one
  std::vector<std::string> found;
  for (const auto& c : candidates) {
    std::error_code ec;
    if (!c.empty() && std::filesystem::exists(c, ec)) found.push_back(c.string());
  }
  return found;
}

FounderPki DecideFounderPki(const FounderPkiInput& in) {
  if (in.local_loads) return FounderPki::kUseLocal;
  if (!in.founder) return FounderPki::kFetch;
  // The token alone is missing: the CAs stay. The other members got the token from this
  // founder, so fetching it back keeps one token; only with nobody to ask is a new one
  // made (a bootstrap token is a join credential, not part of the PKI).
  if (in.cas_load) return in.other_members ? FounderPki::kFetch : FounderPki::kNewToken;
  if (!in.traces) return FounderPki::kMake;
  return in.other_members ? FounderPki::kFetch : FounderPki::kRefuse;
}

Status InstallCredentials(const NodeCredentialFiles& files, const Credentials& c) {
  auto cas = pki::CAFiles(c.cas);
  for (const auto& f : cas) {
    if (!f.path.ends_with(".crt") && !f.path.ends_with(".pub")) continue;
    auto path = files.pki_dir / f.path;
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) continue;
    auto old = ReadFile(path);
    if (!old) return Fail(old.error() + "; not replacing a CA that cannot be read");
    if (*old != f.content) {
      return Fail(path.string() +
                  " holds another CA than the cluster's; not replacing it (this node's PKI belongs to another "
                  "cluster or founding); restore the cluster's file from a backup or another control-plane node, "
                  "or move " +
                  files.pki_dir.string() + " away if this node is to leave its old cluster");
    }
  }
  if (auto s = pki::WritePkiFiles(files.pki_dir, cas); !s) return s;
  if (auto s = WriteFileAtomic(files.token_file, c.bootstrap_token + "\n", std::filesystem::perms(0600)); !s) {
    return s;
  }
  bool current = true;
  for (const char* cert :
       {"etcd/server.crt", "etcd/peer.crt", "etcd/healthcheck-client.crt", "apiserver-etcd-client.crt"}) {
    auto text = ReadFile(files.pki_dir / cert);
    current = current && text && pki::VerifyIssued(c.cas.etcd_ca.cert_pem, *text);
  }
  if (current) return Ok{};
  auto node = pki::NodeFiles(c.cas, pki::NodeIdentity{files.name, {files.address}});
  if (!node) return Fail(node.error());
  return pki::WritePkiFiles(files.pki_dir, *node);
}

Result<Credentials> MakeFounderCredentials(const Founding& f, std::string_view cluster_secret) {
  auto cas = pki::MakeClusterCAs(cluster_secret);
  if (!cas) return Fail(cas.error());
  auto token = MakeBootstrapToken();
  if (!token) return Fail(token.error());
  return Credentials{*cas, *token, ApiEndpoints(f)};
}

Status JoinEndpoint::Serve(const std::string& address, std::uint16_t port, const JoinKeys& keys, const Credentials& c) {
  if (auto s = server_.Start(address, port, keys); !s) return s;
  server_.SetCredentials(c);
  served_ = c;
  serving_ = true;
  return Ok{};
}

bool JoinEndpoint::UpdateApiEndpoints(const std::vector<std::string>& endpoints) {
  if (endpoints.empty() || endpoints == served_.api_endpoints) return false;
  served_.api_endpoints = endpoints;
  server_.SetCredentials(served_);
  const std::string list = Join(endpoints, " ");
  Journal(LOG_INFO, "join endpoint: workers are now told the API endpoints " + list, {{"API_ENDPOINTS", list}});
  return true;
}

}  // namespace sprout::formation
