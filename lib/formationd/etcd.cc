#include "formationd/etcd.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

namespace sprout::formation {

std::string PeerUrl(const std::string& address, int peer_port) {
  return "https://" + address + ":" + std::to_string(peer_port);
}

std::string ClientUrl(const std::string& address, int client_port) {
  return "https://" + address + ":" + std::to_string(client_port);
}

std::vector<std::string> EtcdCommandLine(const EtcdArgs& a) {
  std::string listen;
  for (const auto& u : a.listen_client_urls) listen += (listen.empty() ? "" : ",") + u;
  std::vector<std::string> args{a.bin,
                                "--name=" + a.name,
                                "--data-dir=" + a.data_dir,
                                "--listen-peer-urls=" + a.peer_url,
                                "--initial-advertise-peer-urls=" + a.peer_url,
                                "--listen-client-urls=" + listen,
                                "--advertise-client-urls=" + a.advertise_client_url,
                                "--initial-cluster=" + a.initial_cluster};
  if (!a.initial_cluster_token.empty()) args.push_back("--initial-cluster-token=" + a.initial_cluster_token);
  args.push_back("--initial-cluster-state=" + a.initial_cluster_state);
  args.insert(args.end(), {"--client-cert-auth=true", "--trusted-ca-file=" + a.trusted_ca_file,
                           "--cert-file=" + a.cert_file, "--key-file=" + a.key_file, "--peer-client-cert-auth=true",
                           "--peer-trusted-ca-file=" + a.trusted_ca_file, "--peer-cert-file=" + a.peer_cert_file,
                           "--peer-key-file=" + a.peer_key_file,
                           // etcd 3.4's default logger (capnslog) leaves the server's zap
                           // logger nil, and some error paths log through it: a member
                           // that loses its leader under load then dies of a nil pointer
                           // (etcd issue 14402, seen here on a loaded 3-node cluster).
                           "--logger=zap", "--log-outputs=stderr"});
  return args;
}

namespace {

// BaseArgs fills what both ways of starting etcd share; only the initial cluster, the
// token and the state differ.
EtcdArgs BaseArgs(const EtcdConfig& config, const std::string& initial_cluster, const std::string& token,
                  const char* state) {
  EtcdArgs a;
  a.bin = config.bin;
  a.name = config.name;
  a.data_dir = config.data_dir;
  a.peer_url = PeerUrl(config.address, config.peer_port);
  a.advertise_client_url = ClientUrl(config.address, config.client_port);
  a.listen_client_urls = {ClientUrl("127.0.0.1", config.client_port), a.advertise_client_url};
  a.initial_cluster = initial_cluster;
  a.initial_cluster_token = token;
  a.initial_cluster_state = state;
  std::string etcd = config.pki_dir + "/etcd/";
  a.trusted_ca_file = etcd + "ca.crt";
  a.cert_file = etcd + "server.crt";
  a.key_file = etcd + "server.key";
  a.peer_cert_file = etcd + "peer.crt";
  a.peer_key_file = etcd + "peer.key";
  a.log_file = config.log_file;
  return a;
}

}  // namespace

EtcdArgs EtcdNewArgs(const EtcdConfig& config, const StartEtcdNew& start) {
  return BaseArgs(config, start.initial_cluster, start.token, "new");
}

EtcdArgs EtcdExistingArgs(const EtcdConfig& config, const std::string& initial_cluster) {
  return BaseArgs(config, initial_cluster, "", "existing");
}

std::string ClientUrlFor(const std::string& peer_url) {
  auto colon = peer_url.rfind(':');
  if (colon == std::string::npos || colon < 6) return peer_url;
  return peer_url.substr(0, colon) + ":2379";
}

std::string HostOf(const std::string& url) {
  auto start = url.find("://");
  start = start == std::string::npos ? 0 : start + 3;
  auto colon = url.rfind(':');
  if (colon == std::string::npos || colon < start) colon = url.size();
  std::string host = url.substr(start, colon - start);
  if (host.size() > 1 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return host;
}

std::string ApiUrlOfHost(const std::string& host) {
  return host.find(':') == std::string::npos ? "https://" + host + ":6443" : "https://[" + host + "]:6443";
}

std::vector<std::string> ApiEndpointsOf(const std::vector<EtcdMember>& members) {
  std::vector<std::string> out;
  for (const auto& m : members) {
    if (m.learner || m.peer_urls.empty()) continue;
    out.push_back(ApiUrlOfHost(HostOf(m.peer_urls.front())));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::map<std::string, std::string> MemberAddresses(const std::vector<EtcdMember>& members) {
  std::map<std::string, std::string> out;
  std::set<std::string> ambiguous;
  for (const auto& m : members) {
    if (m.name.empty() || m.peer_urls.empty()) continue;
    const std::string host = HostOf(m.peer_urls.front());
    if (auto [it, added] = out.emplace(m.name, host); !added && it->second != host) ambiguous.insert(m.name);
  }
  for (const auto& name : ambiguous) out.erase(name);
  return out;
}

EtcdClientTls ClientTlsFor(const std::string& pki_dir) {
  return {pki_dir + "/etcd/ca.crt", pki_dir + "/apiserver-etcd-client.crt", pki_dir + "/apiserver-etcd-client.key"};
}

Result<std::vector<EtcdMember>> ParseMembers(const std::string& text) {
  try {
    auto j = nlohmann::json::parse(text);
    std::vector<EtcdMember> out;
    for (const auto& m : j.value("members", nlohmann::json::array())) {
      EtcdMember e;
      e.id = m.value("ID", "");
      e.name = m.value("name", "");
      e.peer_urls = m.value("peerURLs", std::vector<std::string>{});
      e.learner = m.value("isLearner", false);
      out.push_back(std::move(e));
    }
    return out;
  } catch (const std::exception& e) {
    return Fail(std::string("etcd sent a member list that is not JSON: ") + e.what());
  }
}

Result<std::string> JoinInitialCluster(const std::vector<EtcdMember>& members, const std::string& self_name,
                                       const std::string& self_peer_url) {
  std::string out;
  bool self = false;
  for (const auto& m : members) {
    bool mine = std::find(m.peer_urls.begin(), m.peer_urls.end(), self_peer_url) != m.peer_urls.end();
    std::string name = mine ? self_name : m.name;
    if (mine) self = true;
    if (name.empty()) continue;  // another node added but not started yet: not ours to list
    for (const auto& u : m.peer_urls) out += (out.empty() ? "" : ",") + name + "=" + u;
  }
  if (!self) return Fail("the member list has no entry with this node's peer URL " + self_peer_url);
  return out;
}

namespace {

std::size_t Collect(char* data, std::size_t size, std::size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}

}  // namespace

Result<std::string> EtcdApi::Post(const std::string& path, const std::string& body) {
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return Fail("cannot initialize libcurl");
  std::string response;
  std::string url = url_ + path;
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, Collect);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response);
  // Generous: every call is retried with backoff anyway, while on busy members (three
  // control-plane nodes in software emulation on two cores, whose etcd logged TLS
  // handshake timeouts between peers) a 3 s limit failed every try for many minutes.
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 15000L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_CAINFO, tls_.ca_file.c_str());
  curl_easy_setopt(curl, CURLOPT_SSLCERT, tls_.cert_file.c_str());
  curl_easy_setopt(curl, CURLOPT_SSLKEY, tls_.key_file.c_str());
  CURLcode rc = curl_easy_perform(curl);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  if (rc != CURLE_OK) return Fail(url + ": " + curl_easy_strerror(rc));
  if (status != 200) {
    std::string why = response;
    try {
      why = nlohmann::json::parse(response).value("error", response);
    } catch (const std::exception&) {
      // not JSON: quote the body as it is
    }
    return Fail(url + ": HTTP " + std::to_string(status) + ": " + why);
  }
  return response;
}

Result<std::vector<EtcdMember>> EtcdApi::ListMembers() {
  auto r = Post("/v3/cluster/member/list", "{}");
  if (!r) return Fail(r.error());
  return ParseMembers(*r);
}

Result<std::vector<EtcdMember>> EtcdApi::AddLearner(const std::string& peer_url) {
  nlohmann::json body{{"peerURLs", {peer_url}}, {"isLearner", true}};
  auto r = Post("/v3/cluster/member/add", body.dump());
  if (!r) return Fail(r.error());
  return ParseMembers(*r);
}

Status EtcdApi::Promote(const std::string& id) {
  nlohmann::json body{{"ID", id}};
  auto r = Post("/v3/cluster/member/promote", body.dump());
  if (!r) return Fail(r.error());
  return Ok{};
}

Status EtcdApi::Remove(const std::string& id) {
  nlohmann::json body{{"ID", id}};
  auto r = Post("/v3/cluster/member/remove", body.dump());
  if (!r) return Fail(r.error());
  return Ok{};
}

Status ChildEtcdLauncher::Start(const EtcdArgs& etcd) {
  if (pid_ > 0) return Ok{};
  auto argv = EtcdCommandLine(etcd);
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int out = ::open(etcd.log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (out < 0) return Fail("cannot open the etcd log " + etcd.log_file + ": " + std::strerror(errno));
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(out);
    return Fail(std::string("cannot fork etcd: ") + std::strerror(errno));
  }
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(out, 1);
    ::dup2(out, 2);
    int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, 0);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(out);
  pid_ = pid;
  return Ok{};
}

bool ChildEtcdLauncher::Running() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    last_status_ = status;
    return false;
  }
  return true;
}

void ChildEtcdLauncher::Stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  for (int i = 0; i < 100; ++i) {
    if (!Running()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  last_status_ = status;
}

std::string ChildEtcdLauncher::Describe() const {
  return pid_ > 0 ? "pid " + std::to_string(pid_) : std::string("not running");
}

}  // namespace sprout::formation
