#include "formation/etcd.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <thread>

namespace sprout::formation {

std::string PeerUrl(const std::string& address, int peer_port) {
  return "http://" + address + ":" + std::to_string(peer_port);
}

std::string ClientUrl(const std::string& address, int client_port) {
  return "http://" + address + ":" + std::to_string(client_port);
}

std::vector<std::string> EtcdNewArgs(const EtcdConfig& config, const StartEtcdNew& start) {
  std::string peer = PeerUrl(config.address, config.peer_port);
  std::string client = ClientUrl(config.address, config.client_port);
  return {config.bin,
          "--name=" + config.name,
          "--data-dir=" + config.data_dir,
          "--listen-peer-urls=" + peer,
          "--initial-advertise-peer-urls=" + peer,
          "--listen-client-urls=" + client,
          "--advertise-client-urls=" + client,
          "--initial-cluster=" + start.initial_cluster,
          "--initial-cluster-token=" + start.token,
          "--initial-cluster-state=new"};
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
