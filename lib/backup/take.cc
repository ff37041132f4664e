#include "backup/take.h"

#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "backup/catalog.h"
#include "backup/sink.h"
#include "backup/snapshot.h"
#include "pki/pki.h"
#include "util/file_lock.h"
#include "util/fs.h"
#include "util/sha256.h"
#include "util/text.h"

namespace sprout::backup {

namespace {

// How many names a manual backup tries when the one it would take exists (above).
constexpr int kManualNameTries = 3;

template <std::size_t N>
Status Random(std::array<std::uint8_t, N>& out) {
  std::size_t got = 0;
  while (got < N) {
    ssize_t r = ::getrandom(out.data() + got, N - got, 0);
    if (r < 0) return Fail("getrandom failed");
    got += static_cast<std::size_t>(r);
  }
  return Ok{};
}

// SlotCounts opens the file under the slot's name, in pieces, and judges it (JudgeSlot):
// only an authenticated scheduled bundle of this slot counts. It reads at most
// max_bytes of it, so a sparse file claiming gigabytes costs little.
SlotVerdict SlotCounts(Sink& sink, const std::string& file, const SlotWriter& w, std::uint64_t max_bytes,
                       bool* over_limit) {
  auto checked = CheckBundle(sink, file, w.cluster, w.secret, max_bytes);
  // A name that cannot be read (a folder made under it, a file this node may not open)
  // does not count either: it must not hold the slot.
  if (!checked) return SlotVerdict{false, "cannot read it: " + checked.error()};
  SlotFile f{checked->opened, checked->header.kind, checked->header.created, checked->problem, checked->over_limit};
  if (over_limit != nullptr) *over_limit = checked->over_limit;
  return JudgeSlot(f, w.slot);
}

// TaggedSlotName is a name of the slot no one can have made ahead.
Result<std::string> TaggedSlotName(const SlotWriter& w) {
  auto tag = w.tag();
  if (!tag) return Fail(tag.error());
  return NameFor(BundleName{w.cluster, w.slot, "scheduled", "", *tag});
}

// RandomTag is 16 random hex digits.
Result<std::string> RandomTag() {
  std::array<std::uint8_t, 8> tag{};
  if (auto s = Random(tag); !s) return Fail(s.error());
  return Hex(tag.data(), tag.size());
}

}  // namespace

Result<std::map<std::string, std::string>> ReadPkiFiles(const std::filesystem::path& pki_dir,
                                                        const std::filesystem::path& bootstrap_token) {
  std::map<std::string, std::string> files;
  for (const auto& f : kRequiredFiles) {
    auto path = f == "bootstrap-token" ? bootstrap_token : pki_dir / f;
    auto text = ReadFile(path);
    if (!text) return Fail("cannot read " + path.string() + " for the bundle: " + text.error());
    files[f] = *text;
  }
  std::error_code ec;
  if (std::filesystem::exists(pki_dir / pki::kEncryptionKeyFile, ec)) {
    auto text = ReadFile(pki_dir / pki::kEncryptionKeyFile);
    if (!text)
      return Fail("cannot read " + (pki_dir / pki::kEncryptionKeyFile).string() + " for the bundle: " + text.error());
    files[pki::kEncryptionKeyFile] = *text;
  }
  return files;
}

Result<SlotPlace> LookAtSlot(Sink& sink, const SlotWriter& w) {
  SlotPlace p;
  p.file = NameFor(BundleName{w.cluster, w.slot, "scheduled", ""});
  auto exists = sink.Exists(p.file);
  if (!exists) return Fail(exists.error());
  if (!*exists) return p;
  // A file under the slot's name counts only once it authenticates as this slot's
  // bundle: anyone who can write to the share can make the name.
  bool over = false;
  auto counts = SlotCounts(sink, p.file, w, kSlotCheckBytes, &over);
  if (counts.counts) {
    p.existed = true;
  } else if (!over) {
    p.squatted = p.file + ": " + counts.why;  // a larger one is judged after the snapshot
  }
  return p;
}

Result<SlotPlace> PlaceSlotBundle(Sink& sink, const SlotWriter& w, const SlotPlace& before, std::string_view sealed) {
  SlotPlace p;
  p.file = NameFor(BundleName{w.cluster, w.slot, "scheduled", ""});
  p.squatted = before.squatted;
  // A slot whose name holds a file that does not count gets a name of its own, with a
  // random tag, rather than replacing that file: removing what does not open is never
  // this node's call (it may be another secret's), and a writer who re-creates the name
  // cannot race a name it cannot guess.
  if (!p.squatted.empty()) {
    auto tagged = TaggedSlotName(w);
    if (!tagged) return Fail(tagged.error());
    p.file = *tagged;
  }
  auto wrote = WriteBundle(sink, p.file, sealed, w.node, w.pid);
  if (!wrote) return Fail(wrote.error());
  if (*wrote == SinkWrite::kWritten) return p;
  if (!p.squatted.empty()) return Fail("a bundle named " + p.file + " exists in " + sink.Location() + " already");
  // The slot's name was taken while this node wrote: it counts only if it authenticates.
  auto counts = SlotCounts(sink, p.file, w, BundleSizeBound(sealed.size()), nullptr);
  if (counts.counts) {
    p.existed = true;
    p.lost_race = true;
    return p;
  }
  p.squatted = p.file + ": " + counts.why;
  auto tagged = TaggedSlotName(w);
  if (!tagged) return Fail(tagged.error());
  p.file = *tagged;
  wrote = WriteBundle(sink, p.file, sealed, w.node, w.pid);
  if (!wrote) return Fail(wrote.error());
  if (*wrote == SinkWrite::kExists)
    return Fail("a bundle named " + p.file + " exists in " + sink.Location() + " already");
  return p;
}

Result<BackupResult> TakeBackup(const BackupOptions& o) {
  auto started = std::chrono::steady_clock::now();
  BackupResult r;
  r.file = NameFor(BundleName{o.cluster, o.time, o.kind, o.kind == "manual" ? o.node : ""});
  std::error_code ec;
  // A scheduled slot's bundle may be there already; an unreachable share fails the
  // attempt here, before etcd is asked for anything (bounded: kNfsTimeoutMs per call).
  const SlotWriter writer{o.cluster, o.secret, o.node, static_cast<long>(::getpid()), o.time, RandomTag};
  SlotPlace before;
  if (o.kind == "scheduled") {
    auto sink = OpenSink(o.sink);
    if (!sink) return Fail("cannot write to the sink: " + sink.error());
    auto looked = LookAtSlot(**sink, writer);
    if (!looked) return Fail("cannot write to the sink: " + looked.error());
    before = *looked;
    if (before.existed) {
      r.existed = true;
      return r;
    }
  }
  // The node's scratch folder (0700: it holds all of etcd's data), one backup at a time:
  // a manual one run beside a scheduled one once failed its test restore when the other
  // replaced the snapshot file under it. Under the lock, anything in it is a leftover of
  // a backup that died (a power cut), and goes.
  std::filesystem::create_directories(o.scratch, ec);
  std::filesystem::permissions(o.scratch, std::filesystem::perms::owner_all, ec);
  auto lock = FileLock::Acquire(o.scratch / "lock", o.lock_wait, o.waiting);
  if (!lock) return Fail("another backup is under way on this node: " + lock.error());
  for (const auto& e : std::filesystem::directory_iterator(o.scratch, ec)) {
    if (e.path().filename() != "lock") std::filesystem::remove_all(e.path(), ec);
  }
  // 1. The snapshot, through etcd's API, with etcd's hash checked.
  auto snapshot = FetchSnapshot(o.client_url, o.tls);
  if (!snapshot) return Fail("snapshot: " + snapshot.error());
  // 2. The test restore, from a file in the scratch folder.
  auto file = o.scratch / "snapshot.db";
  if (auto s = WriteFileAtomic(file, *snapshot, std::filesystem::perms(0600)); !s) return Fail(s.error());
  auto status = TestRestore(o.etcdctl, file, o.scratch);
  std::filesystem::remove(file, ec);
  if (!status) return Fail(status.error());
  // 3. The bundle.
  auto files = ReadPkiFiles(o.pki_dir, o.bootstrap_token);
  if (!files) return Fail(files.error());
  BundleContents contents{o.identity, std::move(*snapshot), std::move(*files)};
  BundleHeader header;
  header.cluster = o.cluster;
  header.created = o.now();
  header.kind = o.kind;
  header.node = o.node;
  header.revision = status->revision;
  header.keys = status->keys;
  Salt salt{};
  Nonce nonce{};
  if (auto s = Random(salt); !s) return Fail(s.error());
  if (auto s = Random(nonce); !s) return Fail(s.error());
  auto sealed = SealBundle(header, contents, o.secret, salt, nonce);
  if (!sealed) return Fail(sealed.error());
  // 4. The sink: temporary name, fsync, link, fsync, read back. Opened only now: an
  // NFS session idle through a long snapshot could outlive its lease.
  auto sink = OpenSink(o.sink);
  if (!sink) return Fail("cannot write to the sink: " + sink.error());
  if (o.kind == "scheduled") {
    auto placed = PlaceSlotBundle(**sink, writer, before, *sealed);
    if (!placed) return Fail(placed.error());
    r.file = placed->file;
    r.squatted = placed->squatted;
    if (placed->existed) {
      r.existed = true;
      r.lost_race = placed->lost_race;
      return r;
    }
  } else {
    // A manual bundle is named for when it is written, not when it was asked for: one
    // that waited for the lock is newer than the one it waited for. Two written in one
    // second on this node would share a name; the second then waits for the clock's next
    // second and takes that name (a few tries: each name is this node's alone).
    std::int64_t named = o.now();
    r.file = NameFor(BundleName{o.cluster, named, o.kind, o.node});
    auto wrote = WriteBundle(**sink, r.file, *sealed, o.node, static_cast<long>(::getpid()));
    for (int tries = 1; wrote && *wrote == SinkWrite::kExists && tries < kManualNameTries; ++tries) {
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      while (o.now() <= named && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      named = std::max(named + 1, o.now());
      r.file = NameFor(BundleName{o.cluster, named, o.kind, o.node});
      wrote = WriteBundle(**sink, r.file, *sealed, o.node, static_cast<long>(::getpid()));
    }
    if (!wrote) return Fail(wrote.error());
    if (*wrote == SinkWrite::kExists) return Fail("a bundle named " + r.file + " exists in " + o.sink + " already");
  }
  auto h = ReadHeader(*sealed);
  if (h) r.header = *h;
  r.size = sealed->size();
  r.sha256 = Sha256Hex(*sealed);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  // 5. Retention, now that a good bundle is the newest.
  auto retention = PruneSink(**sink, o.cluster, o.secret, o.keep, o.now(), r.file);
  r.pruned = std::move(retention.remove);
  r.held = std::move(retention.held);
  r.not_counted = std::move(retention.not_counted);
  r.bundle = std::move(*sealed);
  return r;
}

Result<BackupRecord> LoadBackupRecord(const std::filesystem::path& state_dir) {
  BackupRecord r;
  std::error_code ec;
  auto path = state_dir / "backup.json";
  if (!std::filesystem::exists(path, ec)) return r;
  auto text = ReadFile(path);
  if (!text) return Fail(text.error());
  try {
    auto j = nlohmann::json::parse(*text);
    r.last_good_file = j.value("last_good_file", "");
    r.last_good_at = j.value("last_good_at", std::int64_t{0});
    r.last_good_revision = j.value("last_good_revision", std::uint64_t{0});
    r.last_good_size = j.value("last_good_size", std::uint64_t{0});
    r.last_good_sha256 = j.value("last_good_sha256", "");
    r.last_good_seconds = j.value("last_good_seconds", 0.0);
    r.last_error = j.value("last_error", "");
    r.last_error_at = j.value("last_error_at", std::int64_t{0});
    r.last_copies = j.value("last_copies", "");
  } catch (const std::exception& e) {
    return Fail(path.string() + ": " + e.what());
  }
  return r;
}

Status SaveBackupRecord(const std::filesystem::path& state_dir, const BackupRecord& r) {
  nlohmann::ordered_json j{{"last_good_file", r.last_good_file},
                           {"last_good_at", r.last_good_at},
                           {"last_good_revision", r.last_good_revision},
                           {"last_good_size", r.last_good_size},
                           {"last_good_sha256", r.last_good_sha256},
                           {"last_good_seconds", r.last_good_seconds},
                           {"last_error", r.last_error},
                           {"last_error_at", r.last_error_at},
                           {"last_copies", r.last_copies}};
  return WriteFileAtomic(state_dir / "backup.json", j.dump(2) + "\n", std::filesystem::perms(0644));
}

void NoteGood(const std::filesystem::path& state_dir, const std::string& sink, const BackupResult& res,
              std::int64_t now) {
  auto r = LoadBackupRecord(state_dir);
  BackupRecord rec = r ? *r : BackupRecord{};
  rec.last_good_file = JoinLocation(sink, res.file);
  rec.last_good_at = now;
  rec.last_good_revision = res.header.revision;
  rec.last_good_size = res.size;
  rec.last_good_sha256 = res.sha256;
  rec.last_good_seconds = res.seconds;
  rec.last_error.clear();
  rec.last_error_at = 0;
  rec.last_copies.clear();
  SaveBackupRecord(state_dir, rec).ok();
}

void NoteCopies(const std::filesystem::path& state_dir, const std::string& copies) {
  auto r = LoadBackupRecord(state_dir);
  BackupRecord rec = r ? *r : BackupRecord{};
  rec.last_copies = copies;
  SaveBackupRecord(state_dir, rec).ok();
}

void NoteFailure(const std::filesystem::path& state_dir, const std::string& error, std::int64_t now) {
  auto r = LoadBackupRecord(state_dir);
  BackupRecord rec = r ? *r : BackupRecord{};
  rec.last_error = error;
  rec.last_error_at = now;
  SaveBackupRecord(state_dir, rec).ok();
}

}  // namespace sprout::backup
