// Taking one backup, start to end (docs/backup.md, "Writing a bundle"): snapshot,
// etcd's hash, the test restore, the bundle, the atomic write, the read back, and
// retention; plus the node's record of its last good and last failed backup.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backup/bundle.h"
#include "formationd/etcd.h"
#include "util/result.h"

namespace sprout::backup {

// BackupOptions is everything one backup needs.
struct BackupOptions {
  std::string cluster;                    // cluster name
  std::string secret;                     // the cluster secret (the bundle's key comes from it)
  std::string node;                       // this node's name
  Identity identity;                      // the founding's token and members
  std::string sink;                       // where bundles go: a folder, or nfs://HOST/PATH (sink.h)
  std::filesystem::path pki_dir;          // the cluster PKI in kubeadm's layout
  std::filesystem::path bootstrap_token;  // <state>/bootstrap-token
  std::filesystem::path scratch;          // where the snapshot and the test restore go (0700)
  std::string etcdctl = "etcdctl";        // for the test restore
  std::string client_url = "https://127.0.0.1:2379";
  formation::EtcdClientTls tls;       // the client certificate
  int keep = 7;                       // retention
  std::string kind = "manual";        // "manual" or "scheduled"
  std::int64_t time = 0;              // the name's time: the slot (scheduled); a manual one's is when it is written
  std::function<std::int64_t()> now;  // Unix seconds; the clock
  // One backup at a time on a node: the scheduled one and `backup now` share scratch,
  // so each holds scratch/lock (flock) from the snapshot to the end, waiting at most
  // lock_wait for the other; `waiting` is called if it has to wait.
  std::chrono::seconds lock_wait{300};
  std::function<void()> waiting;
};

// BackupResult is a backup that counted (or whose slot another node had written).
struct BackupResult {
  std::string file;                      // name in the sink
  bool existed = false;                  // scheduled: the slot's bundle was there already; nothing written
  bool lost_race = false;                // and it appeared while this node wrote (its link(2) was refused)
  std::string squatted;                  // scheduled: why the file under the slot's name did not count, so the
                                         // bundle went under another name (file); "" when it did not happen
  BundleHeader header;                   // what the bundle says
  std::uint64_t size = 0;                // the bundle's bytes
  std::string sha256;                    // of the bundle file
  double seconds = 0;                    // snapshot to read back
  std::vector<std::string> pruned;       // removed by retention
  std::string held;                      // why retention removed nothing, if it held
  std::vector<std::string> not_counted;  // bundles retention neither counted nor removed, and why
  std::string bundle;                    // the bundle's bytes, as written (for the copies on the peers)
};

class Sink;

// SlotWriter is who writes a scheduled slot's bundle, and where in time.
struct SlotWriter {
  std::string cluster;    // cluster name
  std::string secret;     // the cluster secret: a file counts only once it opens with it
  std::string node;       // this node, for the temporary name
  long pid = 0;           // this process, likewise
  std::int64_t slot = 0;  // the slot's start
  // tag draws 16 hex digits no one can guess ahead (getrandom; fixed in tests).
  std::function<Result<std::string>()> tag;
};

// SlotPlace is where a slot's bundle is, as this node found or put it.
struct SlotPlace {
  std::string file;        // the slot's name, or the tagged name the bundle went under
  bool existed = false;    // a bundle under the slot's name authenticates as the slot's: nothing written
  bool lost_race = false;  // and it appeared while this node wrote (the link was refused)
  std::string squatted;    // why the file under the slot's name did not count ("" if none or not judged yet)
};

// kSlotCheckBytes is how much of a slot's file LookAtSlot reads before the snapshot; a
// larger file is judged after it (PlaceSlotBundle), against the bundle sealed.
inline constexpr std::uint64_t kSlotCheckBytes = std::uint64_t{64} << 20;

// LookAtSlot judges the file under the slot's name before the snapshot (JudgeSlot, at
// most kSlotCheckBytes of it): existed when it authenticates as this slot's scheduled
// bundle; else squatted says why not (a file over kSlotCheckBytes is left for
// PlaceSlotBundle). An error only when the sink cannot be asked.
Result<SlotPlace> LookAtSlot(Sink& sink, const SlotWriter& w);

// PlaceSlotBundle writes the slot's sealed bundle (WriteBundle): under the slot's name,
// or, when `before` found it squatted, under a tagged name nobody can have made
// (`<cluster>-<slot>-scheduled-<tag>`). A name taken while this node wrote counts only
// when it authenticates as the slot's bundle (read up to BundleSizeBound of the sealed
// size); else the bundle goes under a tagged name too. So a pre-created name never stops
// a slot's backup, and never leaves it unfindable: listing orders by the sealed time.
Result<SlotPlace> PlaceSlotBundle(Sink& sink, const SlotWriter& w, const SlotPlace& before, std::string_view sealed);

// TakeBackup takes one backup. Nothing is written to the sink before the snapshot
// passed etcd's hash check and the test restore.
Result<BackupResult> TakeBackup(const BackupOptions& o);

// ReadPkiFiles reads the files a bundle carries from pki_dir and the bootstrap token:
// kRequiredFiles, and the cluster's encryption key (pki/encryption.key) when the node
// has one, without which a restored etcd's Secrets could not be read.
Result<std::map<std::string, std::string>> ReadPkiFiles(const std::filesystem::path& pki_dir,
                                                        const std::filesystem::path& bootstrap_token);

// BackupRecord is the node's memory of its backups, in <state>/backup.json, for status.
struct BackupRecord {
  std::string last_good_file;     // path of the last good bundle
  std::int64_t last_good_at = 0;  // Unix seconds
  std::uint64_t last_good_revision = 0;
  std::uint64_t last_good_size = 0;
  std::string last_good_sha256;
  double last_good_seconds = 0;
  std::string last_error;  // the last failure since the last good one, "" if none
  std::int64_t last_error_at = 0;
  std::string last_copies;  // where the last good bundle's copies went: "node-2 kept; node-3 failed: why"
};

// LoadBackupRecord reads <state>/backup.json; a missing file is an empty record.
Result<BackupRecord> LoadBackupRecord(const std::filesystem::path& state_dir);
// SaveBackupRecord writes it atomically.
Status SaveBackupRecord(const std::filesystem::path& state_dir, const BackupRecord& record);
// NoteGood and NoteFailure update the record on disk.
void NoteGood(const std::filesystem::path& state_dir, const std::string& sink, const BackupResult& r, std::int64_t now);
void NoteFailure(const std::filesystem::path& state_dir, const std::string& error, std::int64_t now);
// NoteCopies records where the last good bundle's copies went.
void NoteCopies(const std::filesystem::path& state_dir, const std::string& copies);

}  // namespace sprout::backup
