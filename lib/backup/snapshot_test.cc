#include "backup/snapshot.h"

#include <openssl/evp.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "util/fs.h"
#include "util/sha256.h"

using namespace sprout::backup;

namespace {

std::string Base64(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

std::string Snapshot() {
  std::string db(4096, 'q');
  db[7] = 'x';
  return db + [&] {
    sprout::Sha256 h;
    h.Update(db);
    auto d = h.Digest();
    return std::string(reinterpret_cast<const char*>(d.data()), d.size());
  }();
}

// Stream renders a snapshot as etcd 3.4's gateway does: one JSON object per line.
std::string Stream(const std::string& snap, std::size_t chunk) {
  std::string out;
  for (std::size_t at = 0; at < snap.size(); at += chunk)
    out += R"({"result":{"blob":")" + Base64(snap.substr(at, chunk)) + "\"}}\n";
  return out;
}

}  // namespace

TEST_CASE("the gateway's snapshot stream decodes, split anywhere, and etcd's hash is checked", "[backup]") {
  std::string snap = Snapshot();
  std::string stream = Stream(snap, 1000);  // chunks not a multiple of 3: padding in every line
  for (std::size_t split : {std::size_t{1}, std::size_t{7}, std::size_t{4096}}) {
    SnapshotStream s;
    for (std::size_t at = 0; at < stream.size(); at += split) REQUIRE(s.Feed(stream.substr(at, split)).ok());
    auto got = s.Finish();
    REQUIRE(got.ok());
    CHECK(*got == snap);
  }
  SnapshotStream cut;
  REQUIRE(cut.Feed(Stream(snap.substr(0, 4096), 1000)).ok());
  CHECK_FALSE(cut.Finish().ok());
}

TEST_CASE("an error in the snapshot stream stops it with etcd's message", "[backup]") {
  SnapshotStream s;
  auto r = s.Feed(R"({"error":{"grpc_code":14,"message":"etcdserver: leader changed"}})"
                  "\n");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error() == "etcd stopped the snapshot: etcdserver: leader changed");
}

TEST_CASE("etcd's status answer says whether this member leads", "[backup]") {
  auto s = ParseEtcdStatus(
      R"({"header":{"cluster_id":"1","member_id":"33","revision":"12","raft_term":"2"},"version":"3.4.23",)"
      R"("leader":"33","raftIndex":"5"})");
  REQUIRE(s.ok());
  CHECK(s->leads());
  CHECK(s->revision == 12);
  auto f = ParseEtcdStatus(R"({"header":{"member_id":"34","revision":"12"},"leader":"33"})");
  REQUIRE(f.ok());
  CHECK_FALSE(f->leads());
  CHECK_FALSE(ParseEtcdStatus("{}").ok());
}

TEST_CASE("etcdctl's snapshot status JSON is read", "[backup]") {
  auto s = ParseSnapshotStatus(R"({"hash":999685095,"revision":2,"totalKey":5,"totalSize":20480})");
  REQUIRE(s.ok());
  CHECK(s->hash == 999685095);
  CHECK(s->revision == 2);
  CHECK(s->keys == 5);
  CHECK(s->size == 20480);
  CHECK_FALSE(ParseSnapshotStatus("Error: snapshot file is corrupt").ok());
}

TEST_CASE("a restore without room for the database and etcd's write-ahead log is refused with the fix", "[backup]") {
  constexpr uint64_t kMiB = 1024 * 1024;
  CHECK(sprout::backup::RestoreSpaceNeeded(0) == 72 * kMiB);
  CHECK(sprout::backup::RestoreSpaceNeeded(10 * kMiB) == 82 * kMiB);
  CHECK(sprout::backup::RestoreSpaceProblem(10 * kMiB, 82 * kMiB, "/var/lib/sprout/backup-scratch").empty());
  auto problem = sprout::backup::RestoreSpaceProblem(10 * kMiB, 50 * kMiB, "/var/lib/sprout/backup-scratch");
  CHECK(problem ==
        "restoring the 10 MiB snapshot needs about 82 MiB free in /var/lib/sprout/backup-scratch (the database and "
        "etcd's 64 MiB write-ahead log), and it has 50 MiB: free space there, or give the node a larger disk (the "
        "state partition grows to the end of the disk at first boot) or the profile a larger disk.stateSize");
}

TEST_CASE("a test restore is judged by its revision, not by etcd's key count across buckets", "[backup]") {
  // Measured with etcd 3.4: a cluster no key was ever written to, three members.
  SnapshotStatus empty{.hash = 1, .revision = 0, .keys = 5, .size = 20480};
  SnapshotStatus empty_restored{.hash = 2, .revision = 0, .keys = 6, .size = 20480};
  CHECK(RestoredProblem(empty, empty_restored).empty());
  SnapshotStatus full{.hash = 3, .revision = 10, .keys = 1007, .size = 106528};
  CHECK(RestoredProblem(full, SnapshotStatus{.hash = 4, .revision = 10, .keys = 1007, .size = 106528}).empty());
  CHECK(RestoredProblem(full, empty_restored) ==
        "the restored database is at revision 0, the snapshot at 10: etcdctl did not restore the snapshot's data");
}

TEST_CASE("snapshot restore and status run etcdutl beside etcdctl when there is one (etcd 3.6)", "[backup]") {
  namespace fs = std::filesystem;
  sprout::TempDir dir(fs::temp_directory_path(), "snapshot-tool");
  const fs::path ctl = dir.path() / "etcdctl";
  std::ofstream(ctl) << "#!/bin/sh\n";
  fs::permissions(ctl, fs::perms::owner_all);
  // etcd 3.4: no etcdutl, so etcdctl itself.
  CHECK(SnapshotTool(ctl.string()) == ctl.string());
  // etcd 3.6: etcdutl in the same folder.
  const fs::path utl = dir.path() / "etcdutl";
  std::ofstream(utl) << "#!/bin/sh\n";
  fs::permissions(utl, fs::perms::owner_all);
  CHECK(SnapshotTool(ctl.string()) == utl.string());
  // A file that cannot run is not taken.
  fs::permissions(utl, fs::perms::owner_read | fs::perms::owner_write);
  CHECK(SnapshotTool(ctl.string()) == ctl.string());
  // Another program name is used as given.
  CHECK(SnapshotTool("/opt/my-etcdctl") == "/opt/my-etcdctl");
}
