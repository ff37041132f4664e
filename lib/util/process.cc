#include "util/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "util/text.h"

extern char** environ;

namespace sprout {

namespace {

// Tail keeps the last lines of a program's output for an error message.
std::string Tail(const std::string& s, std::size_t lines = 15) {
  std::size_t pos = s.size();
  for (std::size_t n = 0; n <= lines && pos > 0; ++n) {
    std::size_t p = s.rfind('\n', pos - 1);
    if (p == std::string::npos) return s;
    pos = p;
  }
  return s.substr(pos + 1);
}

std::string ReadAll(int fd) {
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

int WaitFor(int pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return 127;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 127;
}

// Spawn forks and execs cmd; stdin comes from in_fd, stdout+stderr go to out_fd
// (stdout to stdout_fd, stderr to stderr_fd, when they are >= 0).
Result<int> Spawn(const Command& cmd, int in_fd, int out_fd, int stdout_fd, int stderr_fd = -1) {
  if (cmd.argv.empty()) return Fail("internal error: empty command");
  std::string path = FindProgram(cmd.argv[0]);
  if (path.empty()) {
    return Fail("cannot find the program '" + cmd.argv[0] +
                "' in PATH; install its Debian package (see README: the quick start installs every dependency)");
  }
  std::vector<std::string> envs;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    std::string key = kv.substr(0, kv.find('='));
    if (!cmd.env.count(key)) envs.push_back(kv);
  }
  for (const auto& [k, v] : cmd.env) envs.push_back(k + "=" + v);
  std::vector<char*> argv, envp;
  for (const auto& a : cmd.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : envs) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  pid_t pid = ::fork();
  if (pid < 0) return Fail(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    ::signal(SIGPIPE, SIG_DFL);
    ::dup2(in_fd, 0);
    ::dup2(stdout_fd >= 0 ? stdout_fd : out_fd, 1);
    ::dup2(stderr_fd >= 0 ? stderr_fd : out_fd, 2);
    ::execve(path.c_str(), argv.data(), envp.data());
    ::_exit(127);
  }
  return static_cast<int>(pid);
}

}  // namespace

std::string FindProgram(const std::string& name) {
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : "";
  std::string path = std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin";
  path += ":/usr/sbin:/sbin:/usr/local/sbin";
  for (const auto& dir : Split(path, ':')) {
    if (dir.empty()) continue;
    std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

Result<RunResult> Run(const Command& cmd) {
  int in_fd = ::open(cmd.stdin_file.empty() ? "/dev/null" : cmd.stdin_file.c_str(), O_RDONLY | O_CLOEXEC);
  if (in_fd < 0) return Fail("cannot open " + cmd.stdin_file + ": " + std::strerror(errno));
  int stdout_fd = -1;
  if (!cmd.stdout_file.empty()) {
    stdout_fd = ::open(cmd.stdout_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (stdout_fd < 0) {
      ::close(in_fd);
      return Fail("cannot write " + cmd.stdout_file + ": " + std::strerror(errno));
    }
  }
  int stderr_fd = -1;
  if (!cmd.stderr_file.empty()) {
    stderr_fd = ::open(cmd.stderr_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (stderr_fd < 0) {
      ::close(in_fd);
      if (stdout_fd >= 0) ::close(stdout_fd);
      return Fail("cannot write " + cmd.stderr_file + ": " + std::strerror(errno));
    }
  }
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return Fail(std::string("pipe failed: ") + std::strerror(errno));
  auto pid = Spawn(cmd, in_fd, cmd.stderr_to_stdout_file && stdout_fd >= 0 ? stdout_fd : p[1], stdout_fd, stderr_fd);
  ::close(p[1]);
  ::close(in_fd);
  if (stdout_fd >= 0) ::close(stdout_fd);
  if (stderr_fd >= 0) ::close(stderr_fd);
  if (!pid) {
    ::close(p[0]);
    return Fail(pid.error());
  }
  RunResult r;
  r.output = ReadAll(p[0]);
  ::close(p[0]);
  r.exit_code = WaitFor(*pid);
  return r;
}

Result<std::string> RunChecked(const Command& cmd) {
  auto r = Run(cmd);
  if (!r) return Fail(r.error());
  if (r->exit_code != 0) {
    return Fail(cmd.argv[0] + " exited with status " + std::to_string(r->exit_code) + ":\n" + Tail(r->output));
  }
  return std::move(r->output);
}

Result<Pipe> Pipe::Start(const Command& cmd) {
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0) return Fail(std::string("pipe failed: ") + std::strerror(errno));
  if (::pipe2(out, O_CLOEXEC) != 0) return Fail(std::string("pipe failed: ") + std::strerror(errno));
  auto pid = Spawn(cmd, in[0], out[1], -1);
  ::close(in[0]);
  ::close(out[1]);
  if (!pid) {
    ::close(in[1]);
    ::close(out[0]);
    return Fail(pid.error());
  }
  return Pipe(cmd.argv[0], *pid, in[1], out[0]);
}

Pipe::Pipe(Pipe&& other) noexcept
    : name_(std::move(other.name_)), pid_(other.pid_), fd_(other.fd_), out_fd_(other.out_fd_) {
  other.pid_ = -1;
  other.fd_ = -1;
  other.out_fd_ = -1;
}

Pipe::~Pipe() {
  if (fd_ >= 0) ::close(fd_);
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    WaitFor(pid_);
  }
  if (out_fd_ >= 0) ::close(out_fd_);
}

Result<std::string> Pipe::Finish() {
  ::close(fd_);
  fd_ = -1;
  // The child's output is read after stdin closes; tools used here write little
  // until their input ends, so the pipe buffer does not fill first.
  std::string output = ReadAll(out_fd_);
  ::close(out_fd_);
  out_fd_ = -1;
  int code = WaitFor(pid_);
  pid_ = -1;
  if (code != 0) return Fail(name_ + " exited with status " + std::to_string(code) + ":\n" + Tail(output));
  return output;
}

}  // namespace sprout
