#include "formation/daemon.h"

#include <poll.h>
#include <sys/random.h>
#include <sys/uio.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>

#include "firstboot/state.h"
#include "formation/auth.h"
#include "formation/etcd.h"
#include "util/fs.h"

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

std::string CountersText(const DropCounters& c) {
  return "accepted=" + std::to_string(c.accepted) + " malformed=" + std::to_string(c.malformed) +
         " other_cluster=" + std::to_string(c.other_cluster) + " forged=" + std::to_string(c.forged) +
         " replayed=" + std::to_string(c.replayed) + " own=" + std::to_string(c.own);
}

// SameDrops compares the counters worth a log line. Replays are not among them: every
// frame goes both to the group and to each static peer, so the second copy is always
// "replayed"; those totals ride along as fields of the next line that is logged.
bool SameDrops(const DropCounters& a, const DropCounters& b) {
  return a.malformed == b.malformed && a.other_cluster == b.other_cluster && a.forged == b.forged;
}

// Loop is one daemon run: the node, its socket, its etcd, and what it last reported.
class Loop {
 public:
  Loop(const DaemonOptions& o, Node node, UdpTransport transport, Sealer sealer, Gate gate)
      : o_(o),
        node_(std::move(node)),
        transport_(std::move(transport)),
        sealer_(std::move(sealer)),
        gate_(std::move(gate)) {
    etcd_.bin = o.etcd_bin;
    etcd_.name = o.name;
    etcd_.data_dir = o.etcd_data_dir.string();
    etcd_.address = o.listen;
    etcd_.log_file = (o.state_dir / "etcd.log").string();
  }

  int Run(const volatile std::sig_atomic_t* stop) {
    bool ready = false;
    while (*stop == 0) {
      std::uint64_t now = NowMs();
      if (!Handle(node_.OnTick(now))) return 1;
      for (int i = 0; i < 256; ++i) {  // bounded, so a flood cannot starve the timers
        auto d = transport_.Receive();
        if (!d) break;
        auto frame = gate_.Open(d->bytes);
        if (!frame) {
          last_refused_from_ = FormatAddress(d->from);
          continue;
        }
        addresses_[frame->header.sender] = d->from;
        if (!Handle(node_.OnMessage(frame->header.sender, frame->message))) return 1;
      }
      Supervise(now);
      Join(now);
      Report(now);
      if (!ready) {
        sd_notify(0, "READY=1");
        Journal(LOG_INFO,
                "formation running as " + o_.name + " on " + o_.listen + ", expecting " + std::to_string(o_.expected) +
                    " control-plane nodes",
                {{"NODE", o_.name}, {"ADDRESS", o_.listen}, {"EXPECTED", std::to_string(o_.expected)}});
        ready = true;
      }
      pollfd p{transport_.fd(), POLLIN, 0};
      ::poll(&p, 1, 50);
    }
    sd_notify(0, "STOPPING=1");
    etcd_process_.Stop();
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
        if (!start_) {
          start_ = *s;
          etcd_args_ = EtcdNewArgs(etcd_, *s);
          StartEtcd();
        }
      } else if (const auto* j = std::get_if<JoinAsLearner>(&action)) {
        if (!join_) {
          join_ = *j;
          Journal(LOG_INFO, "not in the founding set of " + j->token + "; joining it as an etcd learner",
                  {{"PHASE", "learner"}, {"CLUSTER_TOKEN", j->token}});
        }
      } else if (std::holds_alternative<JoinAsWorker>(action)) {
        if (!join_logged_) {
          Journal(LOG_WARNING, "worker join is not implemented yet", {{"PHASE", PhaseName(node_.phase())}});
          join_logged_ = true;
        }
      }
    }
    for (const auto& m : out.messages) {
      auto bytes = sealer_.Seal(m.message);
      auto it = m.to.empty() ? addresses_.end() : addresses_.find(m.to);
      if (it != addresses_.end()) {
        send_failures_ += transport_.SendTo(bytes, it->second) ? 0 : 1;
      } else {
        send_failures_ += static_cast<std::uint64_t>(transport_.SendAll(bytes));
      }
    }
    return true;
  }

  void StartEtcd() {
    if (etcd_args_.empty() || etcd_process_.running()) return;
    std::error_code ec;
    std::filesystem::create_directories(o_.etcd_data_dir.parent_path(), ec);
    if (auto s = etcd_process_.Start(etcd_args_, etcd_.log_file); !s) {
      Journal(LOG_ERR, s.error(), {{"PHASE", "member"}});
      return;
    }
    if (!start_) {
      Journal(LOG_INFO, "starting etcd to join the cluster: " + etcd_args_.back(),
              {{"PHASE", "learner"}, {"ETCD_PID", std::to_string(etcd_process_.pid())}});
      return;
    }
    std::string members;
    for (const auto& m : start_->founding.members) members += (members.empty() ? "" : ",") + m.name;
    Journal(LOG_INFO,
            "starting etcd as founding member of " + start_->token + " (members " + members + ", founder " +
                start_->founding.founder + ")",
            {{"PHASE", "member"},
             {"CLUSTER_TOKEN", start_->token},
             {"INITIAL_CLUSTER", start_->initial_cluster},
             {"ETCD_PID", std::to_string(etcd_process_.pid())}});
  }

  // Supervise restarts etcd if it exited, at most every 2 s.
  void Supervise(std::uint64_t now) {
    int status = etcd_process_.Poll();
    if (status >= 0) {
      Journal(LOG_WARNING, "etcd exited (status " + std::to_string(status) + "); see " + etcd_.log_file,
              {{"PHASE", "member"}});
      restart_at_ = now + 2000;
    }
    if (!etcd_args_.empty() && !etcd_process_.running() && now >= restart_at_) StartEtcd();
  }

  // JoinRetry schedules the next join step with a capped exponential back-off and
  // logs the reason when it changed (etcd says "too many learner members", "unhealthy
  // cluster", "can only promote a learner member which is in sync with leader", ...).
  void JoinRetry(std::uint64_t now, const std::string& why) {
    if (why != join_error_) {
      Journal(LOG_INFO, "join: " + why + "; retrying", {{"PHASE", "learner"}});
      join_error_ = why;
    }
    ++join_endpoint_;
    join_at_ = now + std::min<std::uint64_t>(250ULL << std::min(join_attempts_, 5), 5000);
    ++join_attempts_;
  }

  // Join adds this node as a learner through a founding member's etcd, starts etcd
  // with the resulting member list, then promotes it once etcd accepts that.
  void Join(std::uint64_t now) {
    if (!join_ || join_done_ || now < join_at_) return;
    std::vector<std::string> endpoints;
    for (const auto& m : join_->founding.members) endpoints.push_back(ClientUrlFor(m.peer_url));
    EtcdApi api(endpoints[join_endpoint_ % endpoints.size()]);
    std::string self = PeerUrl(o_.listen);
    auto members = api.ListMembers();
    if (!members) return JoinRetry(now, members.error());
    const EtcdMember* mine = nullptr;
    for (const auto& m : *members) {
      if (std::find(m.peer_urls.begin(), m.peer_urls.end(), self) != m.peer_urls.end()) mine = &m;
    }
    std::error_code ec;
    bool have_data = std::filesystem::exists(o_.etcd_data_dir / "member", ec);
    if (etcd_args_.empty()) {
      if (have_data) {
        // Added and started before: etcd ignores --initial-cluster with a data dir.
        etcd_args_ = EtcdExistingArgs(etcd_, o_.name + "=" + self);
      } else {
        if (mine != nullptr && !mine->name.empty()) {
          // A started member with our URL but no data here: this node was replaced.
          auto r = api.Remove(mine->id);
          if (!r) return JoinRetry(now, "removing the stale member " + mine->id + ": " + r.error());
          Journal(LOG_INFO, "removed stale member " + mine->id + " (" + mine->name + ") before joining again",
                  {{"PHASE", "learner"}});
          return JoinRetry(now, "re-adding after removing the stale member");
        }
        if (mine == nullptr) {
          members = api.AddLearner(self);
          if (!members) return JoinRetry(now, members.error());
          Journal(LOG_INFO, "added as learner " + self, {{"PHASE", "learner"}});
        }
        auto ic = JoinInitialCluster(*members, o_.name, self);
        if (!ic) return JoinRetry(now, ic.error());
        etcd_args_ = EtcdExistingArgs(etcd_, *ic);
      }
      StartEtcd();
      join_at_ = now + 1000;
      return;
    }
    if (mine == nullptr) return JoinRetry(now, "this node is not in the member list yet");
    if (mine->learner) {
      auto r = api.Promote(mine->id);
      if (!r) return JoinRetry(now, r.error());
    }
    join_done_ = true;
    Journal(LOG_INFO, "promoted: voting member of " + join_->token, {{"PHASE", "member"}});
  }

  // Report logs changed drop counters and keeps systemd's STATUS and state.json current.
  void Report(std::uint64_t now) {
    const DropCounters& c = gate_.counters();
    if (!SameDrops(c, reported_drops_) && now >= next_drop_log_) {
      Journal(LOG_WARNING,
              "dropped formation frames: " + CountersText(c) + " (last: " + gate_.last_reason() + ", from " +
                  last_refused_from_ + ")",
              {{"DROP_MALFORMED", std::to_string(c.malformed)},
               {"DROP_OTHER_CLUSTER", std::to_string(c.other_cluster)},
               {"DROP_FORGED", std::to_string(c.forged)},
               {"DROP_REPLAYED", std::to_string(c.replayed)},
               {"DROP_OWN", std::to_string(c.own)},
               {"DROP_LAST_REASON", gate_.last_reason()},
               {"DROP_LAST_FROM", last_refused_from_}});
      reported_drops_ = c;
      next_drop_log_ = now + 1000;
    }
    std::string line = join_done_ ? "member" : StatusLine(node_.phase(), node_.UpPeers(), o_.expected);
    if (line != status_line_) {
      sd_notifyf(0, "STATUS=%s", line.c_str());
      Journal(LOG_INFO, line, {{"PHASE", PhaseName(node_.phase())}});
      status_line_ = line;
    }
    if (now >= next_state_write_) {
      WriteStatus();
      next_state_write_ = now + 1000;
    }
  }

  void WriteStatus() {
    auto st = LoadNodeState(o_.state_dir);
    NodeState s = st ? *st : NodeState{};
    s.phase = join_done_ ? "member (joined as learner)" : PhaseName(node_.phase());
    s.name = o_.name;
    s.address = o_.listen;
    s.expected = o_.expected;
    s.peers_up.clear();
    for (const auto& [name, addr] : addresses_) s.peers_up.push_back(name);
    s.up_peers = node_.UpPeers();
    s.members.clear();
    s.cluster_token.clear();
    s.founder.clear();
    if (const auto& f = node_.state().cluster) {
      s.cluster_token = f->token;
      s.founder = f->founder;
      for (const auto& m : f->members) s.members.push_back(m.name);
    }
    s.etcd_pid = etcd_process_.pid();
    if (auto w = SaveNodeState(o_.state_dir, s); !w) Journal(LOG_WARNING, w.error());
  }

  const DaemonOptions& o_;
  Node node_;
  UdpTransport transport_;
  Sealer sealer_;
  Gate gate_;
  EtcdConfig etcd_;
  EtcdProcess etcd_process_;
  std::optional<StartEtcdNew> start_;
  std::vector<std::string> etcd_args_;  // how etcd is (re)started, once decided
  std::optional<JoinAsLearner> join_;
  bool join_done_ = false;
  std::uint64_t join_at_ = 0;
  int join_attempts_ = 0;
  std::size_t join_endpoint_ = 0;
  std::string join_error_;
  std::map<std::string, sockaddr_in> addresses_;
  std::string last_refused_from_;
  DropCounters reported_drops_;
  std::string status_line_;
  std::uint64_t send_failures_ = 0;
  std::uint64_t next_drop_log_ = 0;
  std::uint64_t next_state_write_ = 0;
  std::uint64_t restart_at_ = 0;
  bool join_logged_ = false;
};

}  // namespace

void Journal(int priority, const std::string& message, const std::vector<Field>& fields) {
  if (std::getenv("JOURNAL_STREAM") != nullptr || std::getenv("INVOCATION_ID") != nullptr) {
    std::vector<std::string> lines = {"MESSAGE=sprout-firstboot: " + message, "PRIORITY=" + std::to_string(priority),
                                      "SYSLOG_IDENTIFIER=sprout-firstboot"};
    for (const auto& [k, v] : fields) lines.push_back("SPROUT_" + k + "=" + v);
    std::vector<iovec> iov;
    iov.reserve(lines.size());
    for (auto& l : lines) iov.push_back(iovec{l.data(), l.size()});
    sd_journal_sendv(iov.data(), static_cast<int>(iov.size()));
    return;
  }
  std::string text = "sprout-firstboot: " + message;
  if (!fields.empty()) {
    text += " (";
    for (std::size_t i = 0; i < fields.size(); ++i) text += (i ? " " : "") + fields[i].first + "=" + fields[i].second;
    text += ")";
  }
  std::fprintf(stderr, "%s\n", text.c_str());
}

std::string StatusLine(Phase phase, int up_peers, int expected) {
  switch (phase) {
    case Phase::kDiscovering:
      return "discovering: " + std::to_string(up_peers + 1) + "/" + std::to_string(expected) + " control-plane peers";
    case Phase::kCandidate:
    case Phase::kProposing:
      return "founding";
    case Phase::kMember:
      return "member";
    case Phase::kLearner:
      return "joining as learner";
    case Phase::kWorker:
      return "worker";
  }
  return "unknown";
}

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
  std::error_code ec;
  std::filesystem::create_directories(o.state_dir, ec);
  auto saved = LoadFormationState(o.state_dir);
  if (!saved) {
    Journal(LOG_ERR, saved.error() + "; move it away to start this node's formation afresh", {{"PHASE", "error"}});
    sd_notifyf(0, "STATUS=error: %s", saved.error().c_str());
    return 1;
  }
  auto key = DeriveKey(o.secret, o.cluster_name);
  if (!key) {
    Journal(LOG_ERR, key.error(), {{"PHASE", "error"}});
    return 1;
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
  nc.control_plane = o.control_plane;
  Node node(nc, *saved, RandomSeed());
  Sealer sealer(*key, o.cluster_name, o.name, node.state().incarnation);
  Gate gate(*key, o.cluster_name, o.name);
  Loop loop(o, std::move(node), std::move(*transport), std::move(sealer), std::move(gate));
  return loop.Run(stop);
}

}  // namespace sprout::formation
