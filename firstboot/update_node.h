// The pieces of `sprout-firstboot update` its commands share (internal to firstboot):
// the flags, the node's slots and ESP as the commands see them, the lock, the ESP
// mount, the step log and the record in STATE/update.json. update_apply.cc runs apply
// as named steps, update_gate.cc the health gate and the commit, update.cc the command.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "image/gpt.h"
#include "update/checks.h"
#include "update/entries.h"
#include "update/gpt_patch.h"
#include "update/identity.h"
#include "update/plan.h"
#include "util/fs.h"
#include "util/result.h"

namespace sprout::firstboot::update_cmd {

namespace fs = std::filesystem;

inline constexpr const char* kLockFile = "/run/sprout-update.lock";

// Options are the update command's flags; the defaults are a real node's.
struct Options {
  std::string cmdline = "/proc/cmdline";
  std::string disk;                             // the disk holding the slots; default: the running root's disk
  std::string esp;                              // a folder holding the ESP's files; default: the disk's ESP, mounted
  std::string key;                              // trusted public key; default: the root's etc/sprout/update.pub
  std::string root = "/";                       // the running root, which holds the trust root
  std::string ca_file;                          // CA bundle for an https build server; default: the system's
  bool insecure_unsigned = false;               // accept a build nobody signed, on a node without a trust root
  bool allow_downgrade = false;                 // accept a build whose serial is not above the running one's
  bool allow_cross_profile = false;             // accept a build of another profile, role or cluster
  std::uint64_t min_free = update::kEtcdFloor;  // bytes the state partition keeps free during the update
  std::string state_dir = "/var/lib/sprout";    // where update.json records the slots
  int tries = 3;
  int timeout = 900;
  bool reboot = false;
};

// Lock serializes update commands on this node (one ESP mount at a time).
class Lock {
 public:
  Lock();
  ~Lock();
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

 private:
  int fd_ = -1;
};

// Mount mounts a vfat file system (a device, or a range of an image through a loop
// device) on a fresh folder under /run, and unmounts it on scope exit.
class Mount {
 public:
  static Result<std::unique_ptr<Mount>> Vfat(const std::string& source, bool read_only, const std::string& loop_opts);
  ~Mount();
  Mount(const Mount&) = delete;
  Mount& operator=(const Mount&) = delete;
  fs::path path() const { return dir_->path(); }

 private:
  Mount() = default;
  std::unique_ptr<TempDir> dir_;
  bool mounted_ = false;
};

// Node is what the commands read from this node: its command line, disk and ESP.
struct Node {
  std::string cmdline;
  std::string running_hash;
  std::string disk;
  GptLayout gpt;
  std::unique_ptr<Mount> esp_mount;
  fs::path esp;
  std::vector<update::Entry> entries;
};

// OpenNode reads the command line, the disk's GPT and the ESP's loader entries; it
// mounts the ESP (read-only unless writable_esp) when no --esp folder is given.
Result<Node> OpenNode(const Options& o, bool writable_esp);

// ReadEntries reads sprout's loader entries in an ESP's folder, by file name.
std::vector<update::Entry> ReadEntries(const fs::path& esp);

// RunningEtcd is the etcd version the running build preloads.
std::string RunningEtcd(const fs::path& esp, const std::string& running_hash);

// RunningIdentity is the running build's serial, profile, role and cluster, from its
// image.json on the ESP: unknown when there is none, an error when it is damaged.
Result<update::RecordedIdentity> RunningIdentity(const fs::path& esp, const std::string& running_hash);

// WriteGptChanges patches both GPT copies of disk: the backup first, then the primary,
// each synced, so a cut between them leaves two valid tables.
Status WriteGptChanges(const std::string& disk, const std::vector<update::EntryChange>& changes);

// StatusOf describes both slots, their entries and the booted one.
std::string StatusOf(const Node& n);

// Record keeps the slots as this command saw them in STATE/update.json, which
// `sprout-firstboot status` shows without mounting the ESP.
void Record(const Options& o, const std::string& by);

// Step prints one line of apply's progress with the seconds since t0.
void Step(const std::string& what, std::chrono::steady_clock::time_point t0);

// Warn says something the operator must not miss: on stderr and in the journal.
void Warn(const std::string& what);

// The commands.
int Apply(const Options& o, const std::string& source);
int Gate(const Options& o);
int Bless(const Options& o);
int ShowStatus(const Options& o);

}  // namespace sprout::firstboot::update_cmd
