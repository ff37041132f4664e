// The edges of a backup: etcd's snapshot and status APIs over mutual TLS (its v3 JSON
// gateway, like formation's other etcd calls), the test restore and the restore with
// etcdctl. The parsers are pure and unit-tested; sinks are in sink.h.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "backup/catalog.h"
#include "formationd/etcd.h"
#include "util/result.h"

namespace sprout::backup {

// EtcdStatus is what /v3/maintenance/status says about one member.
struct EtcdStatus {
  std::string member_id;  // the answering member
  std::string leader;     // the member it believes leads
  std::uint64_t revision = 0;
  bool leads() const { return !member_id.empty() && member_id == leader; }
};

// ParseEtcdStatus reads the gateway's status answer.
Result<EtcdStatus> ParseEtcdStatus(std::string_view json);

// SnapshotStream decodes the gateway's snapshot answer: one JSON object per line,
// {"result":{"blob":"<base64>"}}, or {"error":...} when etcd failed mid-way.
class SnapshotStream {
 public:
  // Feed takes the next bytes of the answer, split anywhere.
  Status Feed(std::string_view bytes);
  // Finish ends the answer and returns the snapshot, checked with CheckEtcdHash.
  Result<std::string> Finish();

 private:
  Status Line(std::string_view line);
  std::string pending_;
  std::string data_;
};

// SnapshotStatus is what `etcdctl snapshot status -w json` says of a database file.
struct SnapshotStatus {
  std::uint64_t hash = 0;
  std::uint64_t revision = 0;
  std::uint64_t keys = 0;
  std::uint64_t size = 0;
};

// ParseSnapshotStatus reads `etcdctl snapshot status -w json`.
Result<SnapshotStatus> ParseSnapshotStatus(std::string_view json);

// GetEtcdStatus asks the member at client_url for its status.
Result<EtcdStatus> GetEtcdStatus(const std::string& client_url, const formation::EtcdClientTls& tls);

// FetchSnapshot streams a snapshot from the member at client_url (bounded: 5 s to
// connect, 10 min in all) and checks etcd's integrity hash.
Result<std::string> FetchSnapshot(const std::string& client_url, const formation::EtcdClientTls& tls);

// SnapshotTool is the program that runs `snapshot restore` and `snapshot status` for
// the given etcdctl: etcdutl from etcdctl's folder (or PATH, for a bare "etcdctl") when
// there is one, since etcd 3.6 has them only there; else etcdctl itself (etcd 3.4).
std::string SnapshotTool(const std::string& etcdctl);

// RestoreArgs are what `etcdctl snapshot restore` needs to make a member's data dir.
struct RestoreArgs {
  std::string etcdctl = "etcdctl";
  std::filesystem::path snapshot;  // the snapshot file (with etcd's hash at its end)
  std::filesystem::path data_dir;  // must not exist
  std::string name;                // --name
  std::string initial_cluster;     // --initial-cluster
  std::string token;               // --initial-cluster-token
  std::string peer_url;            // --initial-advertise-peer-urls
};

// RestoreSpaceNeeded is the free space `etcdctl snapshot restore` of a snapshot of
// snapshot_size bytes needs: the restored database (about the snapshot's size), the
// write-ahead log etcd preallocates (one 64 MiB segment) and 8 MiB of slack.
uint64_t RestoreSpaceNeeded(uint64_t snapshot_size);

// RestoreSpaceProblem says why free_bytes in folder are too few for that restore, with
// the fix, or returns "" when they are enough.
std::string RestoreSpaceProblem(uint64_t snapshot_size, uint64_t free_bytes, const std::string& folder);

// RestoreSnapshot runs `etcdctl snapshot restore` (which checks etcd's hash), after
// checking that the data dir's file system has RestoreSpaceNeeded free: etcdctl itself
// fails late and says only "no space left on device".
Status RestoreSnapshot(const RestoreArgs& args);

// StatusOfSnapshot runs `etcdctl snapshot status -w json` on a database file.
Result<SnapshotStatus> StatusOfSnapshot(const std::string& etcdctl, const std::filesystem::path& file);

// TestRestore restores snapshot into a fresh folder under scratch and checks the
// restored database with RestoredProblem; returns the snapshot's status. The folder is
// removed afterwards.
// RestoredProblem says what is wrong with a test restore's database, given the status of
// the snapshot and of the restored database ("" when nothing is). The revision must
// match. The key count is not compared: `snapshot status` counts every bucket's keys,
// and a restore replaces the members bucket with the one new member and writes the
// consistent index into meta, so the count moves with the membership (measured with
// etcd 3.4: an empty one-member cluster 3 -> 4, an empty three-member cluster 5 -> 6,
// 1,002 keys on three members 1007 -> 1007).
std::string RestoredProblem(const SnapshotStatus& snapshot, const SnapshotStatus& restored);

Result<SnapshotStatus> TestRestore(const std::string& etcdctl, const std::filesystem::path& snapshot,
                                   const std::filesystem::path& scratch);

}  // namespace sprout::backup
