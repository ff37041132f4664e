#include "formation/etcd.h"

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
#include <thread>

namespace sprout::formation {

std::string PeerUrl(const std::string& address, int peer_port) {
  return "http://" + address + ":" + std::to_string(peer_port);
}

std::string ClientUrl(const std::string& address, int client_port) {
  return "http://" + address + ":" + std::to_string(client_port);
}

namespace {

// EtcdArgs is the command line both ways of starting etcd share; only the initial
// cluster, the token and the state differ.
std::vector<std::string> EtcdArgs(const EtcdConfig& config, const std::string& initial_cluster,
                                  const std::string& token, const char* state) {
  std::string peer = PeerUrl(config.address, config.peer_port);
  std::string client = ClientUrl(config.address, config.client_port);
  std::vector<std::string> args{config.bin,
                                "--name=" + config.name,
                                "--data-dir=" + config.data_dir,
                                "--listen-peer-urls=" + peer,
                                "--initial-advertise-peer-urls=" + peer,
                                "--listen-client-urls=" + client,
                                "--advertise-client-urls=" + client,
                                "--initial-cluster=" + initial_cluster};
  if (!token.empty()) args.push_back("--initial-cluster-token=" + token);
  args.push_back(std::string("--initial-cluster-state=") + state);
  return args;
}

}  // namespace

std::vector<std::string> EtcdNewArgs(const EtcdConfig& config, const StartEtcdNew& start) {
  return EtcdArgs(config, start.initial_cluster, start.token, "new");
}

std::vector<std::string> EtcdExistingArgs(const EtcdConfig& config, const std::string& initial_cluster) {
  return EtcdArgs(config, initial_cluster, "", "existing");
}

std::string ClientUrlFor(const std::string& peer_url) {
  auto colon = peer_url.rfind(':');
  if (colon == std::string::npos || colon < 6) return peer_url;
  return peer_url.substr(0, colon) + ":2379";
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
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 1000L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 3000L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
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

Status EtcdProcess::Start(const std::vector<std::string>& argv, const std::string& log_file) {
  if (pid_ > 0) return Ok{};
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int out = ::open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (out < 0) return Fail("cannot open the etcd log " + log_file + ": " + std::strerror(errno));
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

int EtcdProcess::Poll() {
  if (pid_ <= 0) return -1;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    return status;
  }
  return -1;
}

void EtcdProcess::Stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  for (int i = 0; i < 100; ++i) {
    if (Poll() >= 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

}  // namespace sprout::formation
