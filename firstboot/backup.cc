#include "firstboot/backup.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>

#include "backup/bundle.h"
#include "backup/catalog.h"
#include "backup/schedule.h"
#include "backup/sink.h"
#include "backup/snapshot.h"
#include "backup/take.h"
#include "formationd/etcd.h"
#include "formationd/join_net.h"
#include "formationd/journal.h"
#include "formationd/state_file.h"
#include "pki/pki.h"
#include "util/fs.h"
#include "util/sha256.h"
#include "util/text.h"

namespace sprout::firstboot {

namespace {

std::int64_t NowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

const char* kLocalClient = "https://127.0.0.1:2379";

// Options fills what one backup needs from the node's settings; the identity comes
// from the running cluster (its member list) and the node's state (the token).
Result<backup::BackupOptions> Options(const settings::NodeSettings& settings, const BackupFlags& b) {
  const auto& f = settings.formation;
  if (b.sink.empty())
    return Fail("no backup sink: give --backup-dir or sprout.backup-dir (a local folder, or nfs://HOST/PATH)");
  if (settings.role != "control-plane") return Fail("only control-plane nodes hold etcd and the PKI to back up");
  backup::BackupOptions o;
  o.cluster = f.cluster_name;
  o.secret = f.secret;
  o.node = f.name;
  o.sink = b.sink;
  o.pki_dir = f.pki_dir;
  o.bootstrap_token = f.state_dir / "bootstrap-token";
  o.scratch = f.state_dir / "backup-scratch";
  o.etcdctl = b.etcdctl;
  o.client_url = kLocalClient;
  o.tls = formation::ClientTlsFor(f.pki_dir.string());
  o.keep = b.keep;
  o.now = NowSeconds;
  auto state = LoadNodeState(f.state_dir);
  if (!state) return Fail(state.error());
  o.identity.cluster = f.cluster_name;
  o.identity.token = state->cluster_token;
  formation::EtcdApi api(o.client_url, o.tls);
  auto members = api.ListMembers();
  if (!members) return Fail("this node's etcd does not answer: " + members.error());
  for (const auto& m : *members) {
    for (const auto& u : m.peer_urls) o.identity.members.push_back(m.name + "=" + u);
  }
  std::sort(o.identity.members.begin(), o.identity.members.end());
  return o;
}

std::string Utc(std::int64_t t) { return UtcTime(t, "%Y-%m-%d %H:%M:%SZ"); }

std::string Describe(const backup::BackupResult& r, const std::string& sink) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(2) << backup::JoinLocation(sink, r.file) << ": " << r.size << " bytes, revision "
    << r.header.revision << ", " << r.header.keys << " keys, snapshot " << r.header.snapshot_size << " bytes, sha256 "
    << r.sha256 << ", " << r.seconds << " s";
  return s.str();
}

// CopiesDir is where a control-plane node keeps the copies its peers send it.
std::filesystem::path CopiesDir(const formation::DaemonOptions& f) { return f.state_dir / "backup-copies"; }

// Copies is where a bundle's copies went: one line a peer, and whether any failed.
struct Copies {
  std::string text;  // "node-2 kept it; node-3 failed: why"
  bool failed = false;
};

// CopyToPeers hands the bundle of r to every other voting member's join endpoint (its
// address from the member list the bundle's identity holds); each peer checks it opens
// with the cluster's secret before it keeps it. Bounded: a peer that cannot be reached
// costs 5 s, one that takes the copy and never answers 5 s plus the copy's allowance
// (formation::BackupCopyAllowanceMs: 30 s plus 4 s a MiB).
Copies CopyToPeers(const settings::NodeSettings& settings, const backup::BackupOptions& o,
                   const backup::BackupResult& r) {
  const auto& f = settings.formation;
  auto keys = formation::DeriveNodeKeys(f);
  if (!keys) return {"no copies: " + keys.error(), true};
  formation::JoinRequest from{formation::kJoinVersion, true, f.name, f.listen};
  std::vector<std::string> done;
  bool failed = false;
  for (const auto& m : o.identity.members) {
    const auto eq = m.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = m.substr(0, eq);
    const std::string host = formation::HostOf(m.substr(eq + 1));
    if (name == f.name || host.empty()) continue;
    auto pushed = formation::PushBackupCopy(host, f.port, keys->join, from, r.file, r.bundle, 5000);
    failed = failed || !pushed;
    done.push_back(name + (pushed ? " kept it" : " failed: " + pushed.error()));
  }
  if (done.empty()) return {"no other control-plane member to copy to", false};
  return {Join(done, "; "), failed};
}

void ReportCopies(const settings::NodeSettings& settings, const Copies& copies, std::ostream* out) {
  backup::NoteCopies(settings.formation.state_dir, copies.text);
  formation::Journal(copies.failed ? LOG_WARNING : LOG_INFO,
                     "backup: copies on the other control-plane nodes: " + copies.text,
                     {{"PHASE", "backup"}, {"BACKUP_COPIES", copies.text}});
  if (out != nullptr) *out << "backup: copies on the other control-plane nodes: " << copies.text << "\n";
}

}  // namespace

formation::BackupCopyStore BackupCopyStoreFor(const settings::NodeSettings& settings, int keep) {
  const auto& f = settings.formation;
  auto lock = std::make_shared<std::mutex>();
  return [cluster = f.cluster_name, secret = f.secret, dir = CopiesDir(f), node = f.name, keep,
          lock](const formation::BackupCopy& c) -> Status {
    // This runs on a join-endpoint connection's thread: nothing it meets may throw out
    // of it, or the daemon ends (std::terminate).
    try {
      auto name = backup::ParseName(c.bundle);
      if (!name || name->cluster != cluster) return Fail(c.bundle + " is not a bundle of " + cluster);
      // The sender proved the control-plane key; the bundle must also open with this
      // cluster's secret (its tag covers every byte), or it is not kept.
      if (auto opened = backup::OpenBundle(c.bytes, cluster, secret); !opened) return Fail(opened.error());
      std::lock_guard<std::mutex> hold(*lock);
      std::error_code ec;
      std::filesystem::create_directories(dir, ec);
      std::filesystem::permissions(dir, std::filesystem::perms::owner_all, ec);
      auto sink = backup::OpenSink(dir.string());
      if (!sink) return Fail(sink.error());
      auto wrote = backup::WriteBundle(**sink, c.bundle, c.bytes, node, static_cast<long>(::getpid()));
      if (!wrote) return Fail(wrote.error());
      backup::PruneSink(**sink, cluster, secret, keep, NowSeconds(), c.bundle);
      return Ok{};
    } catch (const std::exception& e) {
      return Fail(std::string("keeping the copy failed: ") + e.what());
    } catch (...) {
      return Fail("keeping the copy failed");
    }
  };
}

BackupFlags WithSettings(BackupFlags flags, const settings::NodeSettings& settings) {
  flags.sink = settings.backup.sink;
  flags.keep = settings.backup.keep;
  flags.interval = settings.backup.interval;
  flags.restore_from = settings.backup.restore_from;
  return flags;
}

int BackupNow(const settings::NodeSettings& settings, const BackupFlags& b) {
  auto o = Options(settings, b);
  if (!o) {
    std::cerr << "sprout-firstboot: backup: " << o.error() << "\n";
    return 1;
  }
  o->kind = "manual";
  o->time = NowSeconds();
  if (b.scheduled) {
    if (b.interval <= 0) {
      std::cerr << "sprout-firstboot: backup now --scheduled: give --backup-interval (the schedule's slot length)\n";
      return 2;
    }
    o->kind = "scheduled";
    o->time = backup::SlotOf(o->time, b.interval);
  }
  o->waiting = [] {
    std::cerr << "sprout-firstboot: backup: another backup is under way on this node (the scheduled one, or another "
                 "`backup now`); waiting for it to finish\n";
  };
  auto r = backup::TakeBackup(*o);
  if (!r) {
    backup::NoteFailure(settings.formation.state_dir, r.error(), NowSeconds());
    std::cerr << "sprout-firstboot: backup failed, nothing was listed as good: " << r.error() << "\n";
    return 1;
  }
  if (r->existed) {
    std::cout << "backup: " << backup::JoinLocation(b.sink, r->file) << " is in the sink already; nothing written ("
              << (r->lost_race ? "another node linked the name first while this one wrote"
                               : "it was there before the snapshot")
              << ")\n";
    return 0;
  }
  backup::NoteGood(settings.formation.state_dir, b.sink, *r, NowSeconds());
  if (!r->squatted.empty())
    std::cout << "backup: the slot's name held a file that does not count (" << r->squatted << "); wrote " << r->file
              << " instead\n";
  std::cout << "backup: good: " << Describe(*r, b.sink) << "\n";
  for (const auto& p : r->pruned) std::cout << "backup: retention removed " << p << "\n";
  if (!r->held.empty()) std::cout << "backup: retention held: " << r->held << "\n";
  for (const auto& n : r->not_counted) std::cout << "backup: retention did not count " << n << "\n";
  ReportCopies(settings, CopyToPeers(settings, *o, *r), &std::cout);
  return 0;
}

int BackupList(const settings::NodeSettings& settings, const BackupFlags& b) {
  if (b.sink.empty()) {
    std::cerr << "sprout-firstboot: backup list: no sink; give --backup-dir (or sprout.backup-dir)\n";
    return 2;
  }
  auto sink = backup::OpenSink(b.sink);
  if (!sink) {
    std::cerr << "sprout-firstboot: backup list: " << sink.error() << "\n";
    return 1;
  }
  auto files = backup::ScanBundles(**sink);
  if (!files) {
    std::cerr << "sprout-firstboot: backup list: " << files.error() << "\n";
    return 1;
  }
  const auto& f = settings.formation;
  // Every bundle of the cluster is read once, in pieces, hashed and (with the secret)
  // authenticated; the listing then orders by the time sealed inside each, not by name.
  std::map<std::string, std::string> sha;
  for (auto& file : *files) {
    auto n = backup::ParseName(file.file);
    // Listed larger than any bundle: not read (ScanBundles says why).
    if (!n || n->cluster != f.cluster_name || file.size > backup::kMaxBundleSize) continue;
    auto checked = backup::CheckBundle(**sink, file.file, f.cluster_name, f.secret);
    if (!checked) {
      file.problem = checked.error();
      file.opened = backup::Authenticity::kUnchecked;
      file.header_ok = false;
      continue;
    }
    sha[file.file] = checked->sha256.empty() ? "-" : checked->sha256;
    file.opened = checked->opened;
    if (checked->opened == backup::Authenticity::kAuthentic) {
      file.created = checked->header.created;
      file.sealing = checked->header.salt;
      file.revision = checked->header.revision;
    } else if (checked->opened == backup::Authenticity::kRefused) {
      file.problem = checked->problem;
    }
  }
  auto listed = backup::ListBundles(*files, f.cluster_name);
  std::cout << "bundles of " << f.cluster_name << " in " << b.sink << " (newest first by the time sealed inside each; "
            << "names order nothing): " << listed.size() << "\n";
  for (const auto& l : listed) {
    std::string check;
    std::string when = "time ?";
    std::string revision = "?";
    if (l.file.opened == backup::Authenticity::kAuthentic) {
      check = "good";
      when = Utc(l.file.created);
      revision = std::to_string(l.file.revision);
      // A name more than an hour off the sealed time was given by someone else (renamed).
      if (l.name.time - l.file.created > 3600 || l.file.created - l.name.time > 3600)
        check += " (sealed " + Utc(l.file.created) + ", its name says " + Utc(l.name.time) + ")";
    } else if (f.secret.empty()) {
      check = l.file.header_ok ? "header ok (no secret to open it)" : "BAD: " + l.file.problem;
    } else {
      check = "BAD: " + (l.file.problem.empty() ? std::string("not read") : l.file.problem);
    }
    auto it = sha.find(l.file.file);
    std::cout << l.file.file << "  " << l.file.size << " bytes  " << when << "  revision " << revision << "  sha256 "
              << (it == sha.end() ? std::string("-") : it->second) << "  " << check << "\n";
  }
  return 0;
}

std::string BackupStatusLines(const std::filesystem::path& state_dir) {
  auto r = backup::LoadBackupRecord(state_dir);
  if (!r) return "backup: " + r.error() + "\n";
  std::ostringstream s;
  if (!r->last_good_file.empty()) {
    s << std::fixed << std::setprecision(2) << "backup: last good " << r->last_good_file << " at "
      << Utc(r->last_good_at) << ", revision " << r->last_good_revision << ", " << r->last_good_size
      << " bytes, sha256 " << r->last_good_sha256 << ", took " << r->last_good_seconds << " s\n";
  }
  if (!r->last_copies.empty()) s << "backup: copies of it: " << r->last_copies << "\n";
  if (!r->last_error.empty())
    s << "backup: last attempt failed at " << Utc(r->last_error_at) << ": " << r->last_error << "\n";
  return s.str();
}

Result<formation::RestorePlan> PrepareRestore(const settings::NodeSettings& settings, const BackupFlags& b) {
  const auto& f = settings.formation;
  // Authenticated in pieces first, so only a bundle that opens is read whole (at most
  // its own size, within etcd's quota): junk or a sparse file claiming 8 GiB is refused
  // with a few pieces of memory.
  {
    auto at = backup::SplitBundleLocation(b.restore_from);
    if (!at) return Fail(at.error());
    auto sink = backup::OpenSink(at->sink);
    if (!sink) return Fail(sink.error());
    auto checked = backup::CheckBundle(**sink, at->name, f.cluster_name, f.secret);
    if (!checked) return Fail("cannot read " + b.restore_from + ": " + checked.error());
    if (checked->opened != backup::Authenticity::kAuthentic) return Fail(b.restore_from + ": " + checked->problem);
  }
  auto text = backup::ReadBundleAt(b.restore_from);
  if (!text) return Fail(text.error());
  auto opened = backup::OpenBundle(*text, f.cluster_name, f.secret);
  if (!opened) return Fail(b.restore_from + ": " + opened.error());
  // Staged under the state dir, 0700: the snapshot holds every secret of the cluster.
  auto stage = f.state_dir / "restore";
  std::error_code ec;
  std::filesystem::remove_all(stage, ec);
  std::filesystem::create_directories(stage / "pki", ec);
  std::filesystem::permissions(stage, std::filesystem::perms::owner_all, ec);
  auto snapshot = stage / "snapshot.db";
  if (auto s = WriteFileAtomic(snapshot, opened->contents.snapshot, std::filesystem::perms(0600)); !s)
    return Fail(s.error());
  for (const auto& [name, data] : opened->contents.files) {
    if (name == "bootstrap-token") continue;
    auto path = stage / "pki" / name;
    std::filesystem::create_directories(path.parent_path(), ec);
    if (auto s = WriteFileAtomic(path, data, std::filesystem::perms(0600)); !s) return Fail(s.error());
  }
  auto cas = pki::LoadCAs(stage / "pki");
  if (!cas) return Fail(b.restore_from + ": the PKI in the bundle does not load: " + cas.error());
  std::string token = opened->contents.files.at("bootstrap-token");
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  formation::RestorePlan plan;
  plan.credentials = formation::Credentials{*cas, token, {}};
  plan.token_suffix = "-r" + opened->header.snapshot_sha256.substr(0, 12);
  plan.source = b.restore_from;
  std::string etcdctl = b.etcdctl;
  plan.make_data_dir = [etcdctl, snapshot](const formation::EtcdArgs& args) -> Status {
    // Restored beside the data dir and renamed into place, so a crash half-way never
    // leaves a data dir that looks like a member's.
    std::filesystem::path target = args.data_dir;
    std::filesystem::path temp = target;
    temp += ".restoring";
    std::error_code e;
    std::filesystem::remove_all(temp, e);
    backup::RestoreArgs r;
    r.etcdctl = etcdctl;
    r.snapshot = snapshot;
    r.data_dir = temp;
    r.name = args.name;
    r.initial_cluster = args.initial_cluster;
    r.token = args.initial_cluster_token;
    r.peer_url = args.peer_url;
    if (auto s = backup::RestoreSnapshot(r); !s) return s;
    std::filesystem::permissions(temp, std::filesystem::perms::owner_all, e);
    std::filesystem::rename(temp, target, e);
    if (e) return Fail("cannot move the restored data to " + target.string() + ": " + e.message());
    return SyncPath(target.parent_path());
  };
  return plan;
}

namespace {

// NodeScheduler is the scheduler's edge on a node: the system clock, the local etcd's
// status, TakeBackup, and the journal and <state>/backup.json for what happened.
class NodeScheduler : public backup::SchedulerEdge {
 public:
  NodeScheduler(const settings::NodeSettings& settings, const BackupFlags& b)
      : settings_(settings), b_(b), tls_(formation::ClientTlsFor(settings.formation.pki_dir.string())) {}

  std::int64_t Now() override { return NowSeconds(); }

  backup::EtcdView AskEtcd() override {
    auto status = backup::GetEtcdStatus(kLocalClient, tls_);
    return {status.ok(), status && status->leads()};
  }

  Status Take(std::int64_t slot) override {
    using formation::Journal;
    auto o = Options(settings_, b_);
    Result<backup::BackupResult> r = Fail(o ? std::string() : o.error());
    if (o) {
      o->kind = "scheduled";
      o->time = slot;
      r = backup::TakeBackup(*o);
    }
    const auto& state_dir = settings_.formation.state_dir;
    if (!r) {
      backup::NoteFailure(state_dir, r.error(), NowSeconds());
      Journal(LOG_WARNING,
              "backup: scheduled snapshot failed, retrying in " + std::to_string(backup::ScheduleInput{}.retry_after) +
                  " s: " + r.error(),
              {{"PHASE", "backup"}, {"BACKUP_ERROR", r.error()}});
      return Fail(r.error());
    }
    if (r->existed) {
      Journal(LOG_INFO,
              "backup: " + r->file + " is in the sink already (another node " +
                  (r->lost_race ? "linked the name first while this one wrote" : "wrote it") +
                  "; it authenticates as this slot's); nothing written",
              {{"PHASE", "backup"}});
      return Ok{};
    }
    backup::NoteGood(state_dir, b_.sink, *r, NowSeconds());
    if (!r->squatted.empty())
      Journal(LOG_WARNING,
              "backup: the slot's name held a file that does not count (" + r->squatted + "); wrote " + r->file +
                  " instead",
              {{"PHASE", "backup"}});
    Journal(LOG_INFO, "backup: good: " + Describe(*r, b_.sink),
            {{"PHASE", "backup"}, {"BACKUP_FILE", r->file}, {"BACKUP_SHA256", r->sha256}});
    for (const auto& p : r->pruned) Journal(LOG_INFO, "backup: retention removed " + p, {{"PHASE", "backup"}});
    if (!r->held.empty()) Journal(LOG_WARNING, "backup: retention held: " + r->held, {{"PHASE", "backup"}});
    ReportCopies(settings_, CopyToPeers(settings_, *o, *r), nullptr);
    return Ok{};
  }

  void RoundFailed(const std::string& why) override {
    formation::Journal(LOG_ERR, "backup: the scheduler's round failed, going on at the next slot: " + why,
                       {{"PHASE", "backup"}, {"BACKUP_ERROR", why}});
    backup::NoteFailure(settings_.formation.state_dir, why, NowSeconds());
  }

 private:
  const settings::NodeSettings& settings_;
  const BackupFlags& b_;
  formation::EtcdClientTls tls_;
};

}  // namespace

std::thread StartBackupScheduler(const settings::NodeSettings& settings, const BackupFlags& b,
                                 const volatile std::sig_atomic_t* stop) {
  if (b.sink.empty() || b.interval <= 0 || settings.role != "control-plane") return {};
  return std::thread([settings, b, stop] {
    // Nothing of one round may end the thread (and with it the node): Scheduler::Round
    // gives anything thrown to RoundFailed and goes on at the next slot.
    NodeScheduler edge(settings, b);
    backup::Scheduler scheduler(edge, b.interval);
    while (*stop == 0) {
      scheduler.Round();
      for (int i = 0; i < 20 && *stop == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
}

}  // namespace sprout::firstboot
