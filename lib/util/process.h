// Running external programs (mkfs.fat, tar2sqfs, qemu): the one place sprout forks.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "util/result.h"

namespace sprout {

// Command describes a program to run.
struct Command {
  std::vector<std::string> argv;
  // Extra environment variables, set on top of the inherited environment.
  std::map<std::string, std::string> env;
  // If set, the child's stdin reads from this file instead of /dev/null.
  std::string stdin_file;
  // If set, the child's stdout goes to this file (truncated).
  std::string stdout_file;
  // With stdout_file set, send stderr there too (for logs of long runs).
  bool stderr_to_stdout_file = false;
  // If set, the child's stderr goes to this file (truncated), and not into the output;
  // a log that can be read while the program runs.
  std::string stderr_file;
};

// RunResult is what a finished program left behind.
struct RunResult {
  int exit_code = 0;
  std::string output;  // stdout and stderr combined, less what went to stdout_file or stderr_file
};

// Run starts cmd, waits for it and captures its output. A program that cannot be found
// is an error that names it; a non-zero exit is not an error here (see RunChecked).
Result<RunResult> Run(const Command& cmd);

// RunChecked is Run, with a non-zero exit turned into an error quoting the output tail.
Result<std::string> RunChecked(const Command& cmd);

// Pipe is a running program whose stdin the caller writes to.
class Pipe {
 public:
  // Start launches cmd with a pipe on its stdin; its output is captured.
  static Result<Pipe> Start(const Command& cmd);
  Pipe(Pipe&& other) noexcept;
  Pipe& operator=(Pipe&&) = delete;
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  ~Pipe();

  // fd is the write end of the child's stdin.
  int fd() const { return fd_; }
  // Finish closes stdin, waits for the child and fails if it exited non-zero.
  Result<std::string> Finish();

 private:
  Pipe(std::string name, int pid, int fd, int out_fd) : name_(std::move(name)), pid_(pid), fd_(fd), out_fd_(out_fd) {}
  std::string name_;
  int pid_ = -1;
  int fd_ = -1;
  int out_fd_ = -1;
};

// FindProgram looks name up in PATH (and the sbin directories) and returns its path.
std::string FindProgram(const std::string& name);

}  // namespace sprout
