// Keeping this node's etcd running: the daemon decides once how etcd starts (as a
// founding member or as an added learner); the supervisor starts it with those args,
// notices when it exits and starts it again, at most every 2 s. How etcd runs (child
// process or otherwise) is the EtcdLauncher's business (etcd.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "formation/election.h"
#include "formationd/etcd.h"
#include "formationd/journal.h"

namespace sprout::formation {

// EtcdStartNote is the log line of every start of etcd (the launcher's description is
// added as the ETCD field at each start).
struct EtcdStartNote {
  std::string message;        // what the line says
  std::vector<Field> fields;  // its structured fields
};

// NoteForStart says how etcd starts: as a founding member of founding's cluster, or
// (no founding) as a learner joining initial_cluster.
EtcdStartNote NoteForStart(const std::optional<StartEtcdNew>& founding, const std::string& initial_cluster);

// EtcdSupervisor starts etcd through its launcher and restarts it when it exits.
class EtcdSupervisor {
 public:
  // EtcdSupervisor runs etcd with launcher; data_dir is made (mode 0700) before each
  // start, and log_file is named when etcd exits.
  EtcdSupervisor(std::unique_ptr<EtcdLauncher> launcher, std::filesystem::path data_dir, std::string log_file);

  // Start remembers args and note and starts etcd (unless it runs).
  void Start(const EtcdArgs& args, EtcdStartNote note);
  // Supervise notices an exited etcd and starts it again once 2 s have passed.
  void Supervise(std::uint64_t now);
  // Stop stops etcd.
  void Stop() { launcher_->Stop(); }

  // started is true while etcd runs as far as the last Start or Supervise saw.
  bool started() const { return started_; }
  // decided is true once Start was called: etcd's args are known.
  bool decided() const { return !args_.name.empty(); }
  // args are how etcd is (re)started, once decided.
  const EtcdArgs& args() const { return args_; }
  // pid is the etcd child's process ID, or -1 (not running, or not a child process).
  int pid() const;

 private:
  void StartNow();
  std::unique_ptr<EtcdLauncher> launcher_;
  std::filesystem::path data_dir_;
  std::string log_file_;
  EtcdArgs args_;  // name empty until decided
  EtcdStartNote note_;
  bool started_ = false;
  std::uint64_t restart_at_ = 0;
};

}  // namespace sprout::formation
