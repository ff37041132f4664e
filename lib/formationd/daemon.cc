#include "formationd/daemon.h"

#include <poll.h>
#include <sys/random.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <variant>

#include "formation/auth.h"
#include "formationd/beacons.h"
#include "formationd/etcd_supervisor.h"
#include "formationd/founding.h"
#include "formationd/join_endpoint.h"
#include "formationd/membership.h"
#include "formationd/status.h"
#include "pki/pki.h"
#include "util/fs.h"
#include "util/text.h"

namespace sprout::formation {

namespace {

std::uint64_t NowMs() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

std::uint64_t RandomSeed() {
  std::uint64_t seed = 0;
  if (::getrandom(&seed, sizeof seed, 0) != static_cast<ssize_t>(sizeof seed)) seed = NowMs() ^ ::getpid();
  return seed;
}

// RandomNonce is a liveness nonce from the kernel's random source: an earlier install
// must not be able to have answered it.
Nonce RandomNonce() {
  Nonce n{};
  std::size_t got = 0;
  while (got < n.size()) {
    ssize_t r = ::getrandom(n.data() + got, n.size() - got, 0);
    if (r > 0) got += static_cast<std::size_t>(r);
  }
  return n;
}

EtcdConfig EtcdConfigOf(const DaemonOptions& o) {
  EtcdConfig etcd;
  etcd.bin = o.etcd_bin;
  etcd.name = o.name;
  etcd.data_dir = o.etcd_data_dir.string();
  etcd.address = o.listen;
  etcd.pki_dir = o.pki_dir.string();
  etcd.log_file = (o.state_dir / "etcd.log").string();
  return etcd;
}

// Loop is one daemon run. It feeds the node time and frames and dispatches what the
// node asks for to the piece that does it: beacons (frames), the join endpoint, the
// membership tasks (so the loop never blocks on the network), the etcd supervisor and
// the status reporter.
class Loop {
 public:
  Loop(const DaemonOptions& o, Node node, Beacons beacons, NodeKeys keys)
      : o_(o),
        node_(std::move(node)),
        beacons_(std::move(beacons)),
        keys_(keys),
        etcd_config_(EtcdConfigOf(o)),
        etcd_(o.make_launcher ? o.make_launcher() : std::make_unique<ChildEtcdLauncher>(), o.etcd_data_dir,
              etcd_config_.log_file),
        membership_(o, keys.join, etcd_config_),
        status_(o.state_dir, StatusIdentity{o.name, o.listen, o.expected}) {
    if (o.control_plane && o.store_backup_copy) join_.SetBackupStore(o.store_backup_copy);
  }

  int Run(const volatile std::sig_atomic_t* stop) {
    bool ready = false;
    while (*stop == 0) {
      std::uint64_t now = NowMs();
      if (!Handle(node_.OnTick(now))) return 1;
      // Bounded, so a flood cannot starve the timers.
      auto on_frame = [this](const std::string& sender, const Message& m) {
        return Handle(node_.OnMessage(sender, m));
      };
      if (!beacons_.Drain(256, on_frame, now)) return 1;
      CollectTasks();
      etcd_.Supervise(now);
      if ((start_ || join_done_) && etcd_.started()) BecameMember();
      if (auto e = membership_.TakeEndpoints()) join_.UpdateApiEndpoints(*e);
      membership_.RefreshEndpoints(now, join_.serving() && etcd_.started());
      beacons_.ReportDrops(now);
      status_.Report(now, Snapshot());
      if (!ready) {
        sd_notify(0, "READY=1");
        Journal(LOG_INFO,
                "formation running as " + o_.name + " on " + o_.listen + ", expecting " + std::to_string(o_.expected) +
                    " control-plane nodes",
                {{"NODE", o_.name}, {"ADDRESS", o_.listen}, {"EXPECTED", std::to_string(o_.expected)}});
        ready = true;
      }
      // A frame wakes the loop at once; otherwise it ticks every 50 ms while the node
      // forms or joins, and every 250 ms once it is settled (a voting member whose etcd
      // runs, or a worker that has joined): its timers are then a second or more apart,
      // and twenty wake-ups a second cost an emulated node 5 % of its CPU for nothing.
      const bool settled = member_announced_ || worker_done_;
      pollfd p{beacons_.fd(), POLLIN, 0};
      ::poll(&p, 1, settled ? 250 : 50);
    }
    sd_notify(0, "STOPPING=1");
    membership_.Stop();
    join_.Stop();
    etcd_.Stop();
    return 0;
  }

 private:
  // Handle does the actions in order, then sends; false when state could not be saved
  // (sending then could break a promise, so the daemon stops and systemd restarts it).
  bool Handle(const Output& out) {
    for (const auto& action : out.actions) {
      if (const auto* p = std::get_if<PersistState>(&action)) {
        if (auto s = SaveFormationState(o_.state_dir, p->state); !s) {
          Journal(LOG_ERR, s.error(), {{"PHASE", "error"}});
          return false;
        }
      } else if (const auto* s = std::get_if<StartEtcdNew>(&action)) {
        if (!start_ && !join_as_) {
          start_ = *s;
          Found(*s);
        }
      } else if (const auto* j = std::get_if<JoinAsLearner>(&action)) {
        if (!join_as_ && !start_) {
          join_as_ = *j;
          Journal(LOG_INFO, "not in the founding set of " + j->token + "; joining it as an etcd learner",
                  {{"PHASE", "learner"}, {"CLUSTER_TOKEN", j->token}});
          membership_.StartLearner(*j);
        }
      } else if (const auto* w = std::get_if<JoinAsWorker>(&action)) {
        if (!worker_started_) {
          worker_started_ = true;
          worker_done_ = membership_.StartWorker(*w);
        }
      }
    }
    beacons_.Send(out.messages);
    return true;
  }

  // Found starts a founding member as PlanFounding (founding.h) decides: with the
  // credentials it has or made, or after fetching them from the other founding members.
  void Found(const StartEtcdNew& s) {
    auto plan = PlanFounding(o_, etcd_config_, s);
    if (plan.kind == FoundingPlan::kServe) Serve(plan.credentials, plan.args);
    if (plan.kind == FoundingPlan::kFetch) membership_.FetchFoundingCredentials(s.founding, plan.args);
  }

  // Serve installs credentials, starts etcd with args and the join endpoint.
  void Serve(const Credentials& c, const EtcdArgs& args) {
    if (auto s = InstallCredentials(CredentialFiles(o_), c); !s) {
      Journal(LOG_ERR, "cannot install the PKI: " + s.error(), {{"PHASE", "error"}});
      return;
    }
    member_ = MemberInfo{start_.has_value(), start_ && start_->founding.founder == o_.name, args, c};
    etcd_.Start(args, NoteForStart(start_, args.initial_cluster));
    if (!keys_.serve) return;  // a worker serves nothing (and never gets here)
    if (auto s = join_.Serve(o_.listen, o_.port, *keys_.serve, c); !s)
      Journal(LOG_ERR, s.error(), {{"PHASE", "error"}});
  }

  // CollectTasks picks up finished membership tasks.
  void CollectTasks() {
    if (auto r = membership_.TakeStarted()) {
      Serve(r->credentials, r->args);
      if (join_as_) membership_.StartPromote(join_as_->founding);
    }
    if (membership_.TakePromoted()) {
      join_done_ = true;
      Journal(LOG_INFO, "promoted: voting member of " + join_as_->token, {{"PHASE", "member"}});
    }
    if (auto w = membership_.TakeWorker()) worker_done_ = *w;
  }

  // BecameMember calls the on_member hook once per run, when this node is a voting
  // member (founding, or promoted) and its etcd has started.
  void BecameMember() {
    if (!o_.on_member || !member_ || member_announced_) return;
    member_announced_ = true;
    o_.on_member(*member_);
  }

  StatusSnapshot Snapshot() const {
    StatusSnapshot s;
    s.phase = node_.phase();
    s.up_peers = node_.UpPeers();
    s.promoted = join_done_;
    s.worker_done = worker_done_;
    s.heard = beacons_.Heard();
    s.cluster = node_.state().cluster;
    s.etcd_pid = etcd_.pid();
    s.refuses_to_found = !node_.config().may_found;
    s.beyond_electorate = node_.BeyondElectorate();
    s.electorate = node_.config().electorate;
    return s;
  }

  const DaemonOptions& o_;
  Node node_;
  Beacons beacons_;
  NodeKeys keys_;
  EtcdConfig etcd_config_;
  // Declared in this order so that they end in the reverse one: the tasks first (they
  // may still ask the join endpoint's peers), then the join server, then etcd.
  EtcdSupervisor etcd_;
  JoinEndpoint join_;
  Membership membership_;
  StatusReporter status_;
  std::optional<StartEtcdNew> start_;     // founding this cluster
  std::optional<JoinAsLearner> join_as_;  // joining it as a learner
  std::optional<MemberInfo> member_;      // once credentials are installed and etcd's args known
  bool member_announced_ = false;
  bool join_done_ = false;  // promoted
  bool worker_started_ = false;
  bool worker_done_ = false;
};

}  // namespace

Result<PersistedState> LoadFormationState(const std::filesystem::path& dir) {
  std::error_code ec;
  auto file = dir / "formation.state";
  if (!std::filesystem::exists(file, ec)) return PersistedState{};
  auto text = ReadFile(file);
  if (!text) return Fail(text.error());
  std::vector<std::uint8_t> bytes(text->begin(), text->end());
  auto state = DecodeState(bytes);
  if (!state) return Fail(file.string() + ": " + state.error());
  return state;
}

Status SaveFormationState(const std::filesystem::path& dir, const PersistedState& state) {
  auto bytes = EncodeState(state);
  return WriteFileAtomic(dir / "formation.state", std::string(bytes.begin(), bytes.end()),
                         std::filesystem::perms(0600));
}

Result<NodeKeys> DeriveNodeKeys(const DaemonOptions& o) {
  NodeKeys keys;
  if (o.control_plane) {
    if (o.secret.empty()) {
      return Fail("a control-plane node needs the cluster secret; a worker secret proves only a worker");
    }
    auto key = DeriveKey(o.secret, o.cluster_name);
    if (!key) return Fail(key.error());
    auto worker = DeriveKey(WorkerSecret(o.secret), o.cluster_name);
    if (!worker) return Fail(worker.error());
    keys.frames.formation = *key;
    keys.frames.worker = *worker;
    keys.join = JoinKey{JoinAuthority::kControlPlane, JoinPsk(*key)};
    keys.serve = JoinKeys{JoinPsk(*key), JoinPsk(*worker)};
    return keys;
  }
  std::string worker_secret = o.worker_secret.empty() && !o.secret.empty() ? WorkerSecret(o.secret) : o.worker_secret;
  if (worker_secret.empty()) return Fail("a worker needs the worker secret (or the cluster secret to derive it from)");
  auto key = DeriveKey(worker_secret, o.cluster_name);
  if (!key) return Fail(key.error());
  keys.frames.formation = *key;
  keys.join = JoinKey{JoinAuthority::kWorker, JoinPsk(*key)};
  return keys;
}

int RunIdle(const std::string& reason, const volatile std::sig_atomic_t* stop) {
  // "ready" leads both lines: the QEMU smoke test looks for it in STATUS and the journal.
  std::string status = "ready; formation disabled: " + reason;
  Journal(LOG_WARNING, status, {{"PHASE", "disabled"}});
  sd_notifyf(0, "READY=1\nSTATUS=%s", status.c_str());
  while (*stop == 0) ::pause();
  sd_notify(0, "STOPPING=1");
  return 0;
}

int RunDaemon(const DaemonOptions& o, const volatile std::sig_atomic_t* stop) {
  // A join client or server whose peer vanished must get EPIPE, not die of SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  std::error_code ec;
  std::filesystem::create_directories(o.state_dir, ec);
  auto saved = LoadFormationState(o.state_dir);
  if (!saved) {
    Journal(LOG_ERR, saved.error() + "; move it away to start this node's formation afresh", {{"PHASE", "error"}});
    sd_notifyf(0, "STATUS=error: %s", saved.error().c_str());
    return 1;
  }
  // The incarnation must grow across starts or peers drop our frames as replays. The
  // saved one does across restarts; the wall clock (milliseconds, when it is set) also
  // covers a node whose state was wiped, e.g. a replaced disk under the same name.
  auto wall_ms = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
  saved->incarnation = std::max(saved->incarnation, wall_ms);
  auto keys = DeriveNodeKeys(o);
  if (!keys) {
    Journal(LOG_ERR, keys.error(), {{"PHASE", "error"}});
    return 1;
  }
  if (!o.control_plane) {
    // Said at every start: a worker without a pin takes whatever CA answers first.
    if (o.ca_cert_hash.empty()) {
      auto trust = WorkerTrust(o);
      Journal(LOG_WARNING, NoCaPinWarning(trust.trusted, trust.trusted_from), {{"PHASE", "worker"}, {"CA_PIN", ""}});
    } else {
      Journal(LOG_INFO, "worker: pins the cluster CA " + o.ca_cert_hash + " (" + o.ca_cert_hash_source + ")",
              {{"PHASE", "worker"}, {"CA_PIN", o.ca_cert_hash}});
    }
  }
  TransportConfig tc;
  tc.listen = o.listen;
  tc.port = o.port;
  tc.group = o.group;
  tc.peers = o.peers;
  auto transport = UdpTransport::Open(tc);
  if (!transport) {
    Journal(LOG_ERR, transport.error(), {{"PHASE", "error"}});
    sd_notifyf(0, "STATUS=error: %s", transport.error().c_str());
    return 1;
  }
  NodeConfig nc;
  nc.name = o.name;
  nc.peer_url = PeerUrl(o.listen);
  nc.cluster_name = o.cluster_name;
  nc.expected_control_plane = o.expected;
  nc.electorate = o.electorate;
  // A static peer list is the electorate: only the listed addresses vote, and a node
  // that is not on its own list is a spare that joins the cluster the others found.
  for (const auto& p : o.peers) nc.voters.push_back(PeerUrl(p));
  nc.control_plane = o.control_plane;
  // Without a static list, quorums are majorities of M; with no M either, no quorum is
  // known to be safe, so this node does not found (it still votes, learns and joins).
  nc.may_found = !o.control_plane || !o.peers.empty() || o.electorate > 0;
  Node node(nc, *saved, RandomSeed());
  // A control-plane node also hears workers' beacons and tells them the cluster, under
  // the worker key; a worker knows only that key, so all it hears is that. Under either
  // key, a sender's frames count only once its incarnation answered a fresh nonce.
  Beacons beacons(std::make_unique<UdpDatagrams>(std::move(*transport)), keys->frames, o.cluster_name, o.name,
                  node.state().incarnation, RandomNonce);
  Loop loop(o, std::move(node), std::move(beacons), *keys);
  return loop.Run(stop);
}

}  // namespace sprout::formation
