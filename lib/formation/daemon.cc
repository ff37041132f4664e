#include "formation/daemon.h"

#include <poll.h>
#include <sys/random.h>
#include <sys/uio.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <map>
#include <optional>
#include <thread>
#include <variant>

#include "formation/auth.h"
#include "formation/etcd.h"
#include "formation/join.h"
#include "node/state.h"
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

// ApiEndpoints are the Kubernetes API URLs of the founding members.
std::vector<std::string> ApiEndpoints(const Founding& f) {
  std::vector<std::string> out;
  for (const auto& m : f.members) out.push_back(ApiUrlOfHost(HostOf(m.peer_url)));
  return out;
}

std::filesystem::path TokenFile(const DaemonOptions& o) { return o.state_dir / "bootstrap-token"; }

// LoadLocalCredentials reads what an earlier run installed: the CAs and the token.
Result<Credentials> LoadLocalCredentials(const DaemonOptions& o, const Founding& f) {
  auto cas = pki::LoadCAs(o.pki_dir);
  if (!cas) return Fail(cas.error());
  auto token = ReadFile(TokenFile(o));
  if (!token) return Fail(token.error());
  std::string t = *token;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  if (!ValidBootstrapToken(t)) return Fail(TokenFile(o).string() + " does not hold a bootstrap token");
  return Credentials{*cas, t, ApiEndpoints(f)};
}

// InstallCredentials writes the CAs and the token, and this node's etcd certificates
// unless valid ones (issued by this etcd CA) are there already.
Status InstallCredentials(const DaemonOptions& o, const Credentials& c) {
  if (auto s = pki::WritePkiFiles(o.pki_dir, pki::CAFiles(c.cas)); !s) return s;
  if (auto s = WriteFileAtomic(TokenFile(o), c.bootstrap_token + "\n", std::filesystem::perms(0600)); !s) return s;
  bool current = true;
  for (const char* cert :
       {"etcd/server.crt", "etcd/peer.crt", "etcd/healthcheck-client.crt", "apiserver-etcd-client.crt"}) {
    auto text = ReadFile(o.pki_dir / cert);
    current = current && text && pki::VerifyIssued(c.cas.etcd_ca.cert_pem, *text);
  }
  if (current) return Ok{};
  auto files = pki::NodeFiles(c.cas, pki::NodeIdentity{o.name, {o.listen}});
  if (!files) return Fail(files.error());
  return pki::WritePkiFiles(o.pki_dir, *files);
}

// Pause sleeps ms in small steps; false when asked to stop meanwhile.
bool Pause(const std::atomic<bool>& stop, int ms) {
  for (int waited = 0; waited < ms && !stop; waited += 50) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return !stop;
}

// Backoff is a capped exponential back-off that logs a reason once per change.
class Backoff {
 public:
  explicit Backoff(std::string what) : what_(std::move(what)) {}
  // Wait logs why (if new) and sleeps; false when asked to stop.
  bool Wait(const std::atomic<bool>& stop, const std::string& why) {
    if (why != last_) {
      Journal(LOG_INFO, what_ + ": " + why + "; retrying", {{"PHASE", "joining"}});
      last_ = why;
    }
    int ms = std::min(250 << std::min(attempts_, 4), 4000);
    ++attempts_;
    return Pause(stop, ms);
  }

 private:
  std::string what_;
  std::string last_;
  int attempts_ = 0;
};

// FetchFromMembers asks the founding members' join endpoints in turn (the founder
// first) until one answers; empty once stopped.
std::optional<JoinResponse> FetchFromMembers(const DaemonOptions& o, const Key& psk, const Founding& f,
                                             bool control_plane, const std::atomic<bool>& stop) {
  std::vector<std::string> addresses;
  for (const auto& m : f.members) {
    if (m.name == o.name) continue;
    auto host = HostOf(m.peer_url);
    if (m.name == f.founder) {
      addresses.insert(addresses.begin(), host);
    } else {
      addresses.push_back(host);
    }
  }
  if (addresses.empty()) return std::nullopt;
  JoinRequest request{kJoinVersion, control_plane, o.name, o.listen};
  Backoff backoff("fetching credentials");
  for (std::size_t i = 0; !stop; ++i) {
    const auto& address = addresses[i % addresses.size()];
    auto r = FetchJoin(address, o.port, psk, request);
    if (r) {
      Journal(LOG_INFO,
              "received " + std::string(control_plane ? "control-plane" : "worker") +
                  " credentials from the join endpoint of " + address,
              {{"PHASE", "joining"}, {"JOIN_FROM", address}});
      return *r;
    }
    if (!backoff.Wait(stop, r.error())) break;
  }
  return std::nullopt;
}

// AskAgain is what a gateway step returns to ask the next member at once, without
// backing off.
struct AskAgain {};

// GatewayStep is what one step against a member's etcd gateway decided: done with a
// T, back off for a reason (Error), or ask again at once.
template <typename T>
using GatewayStep = std::variant<T, Error, AskAgain>;

// AskGateways asks the founding members' etcd gateways in turn for the member list and
// hands it to step, backing off (logged as what) on errors, until step is done; empty
// once stopped.
template <typename T, typename Step>
std::optional<T> AskGateways(const DaemonOptions& o, const Founding& founding, const std::string& what,
                             const std::atomic<bool>& stop, Step step) {
  Backoff backoff(what);
  for (std::size_t i = 0; !stop; ++i) {
    EtcdApi api(ClientUrlFor(founding.members[i % founding.members.size()].peer_url), ClientTlsFor(o.pki_dir.string()));
    auto members = api.ListMembers();
    if (!members) {
      if (!backoff.Wait(stop, members.error())) break;
      continue;
    }
    GatewayStep<T> r = step(api, std::move(*members));
    if (auto* done = std::get_if<T>(&r)) return std::move(*done);
    if (const auto* e = std::get_if<Error>(&r)) {
      if (!backoff.Wait(stop, e->message)) break;
    }
  }
  return std::nullopt;
}

// LearnerResult is what the learner task hands back: how to start etcd.
struct LearnerResult {
  Credentials credentials;  // what this node now serves
  EtcdArgs args;            // how to start etcd
};

// Loop is one daemon run: the node, its socket, its etcd, its join endpoint, the
// background tasks (credential fetches and etcd gateway calls, so the beacon loop
// never blocks on them), and what it last reported.
class Loop {
 public:
  Loop(const DaemonOptions& o, Node node, UdpTransport transport, Sealer sealer, Gate gate, Key psk)
      : o_(o),
        node_(std::move(node)),
        transport_(std::move(transport)),
        sealer_(std::move(sealer)),
        gate_(std::move(gate)),
        psk_(psk),
        launcher_(o.make_launcher ? o.make_launcher() : std::make_unique<ChildEtcdLauncher>()) {
    etcd_.bin = o.etcd_bin;
    etcd_.name = o.name;
    etcd_.data_dir = o.etcd_data_dir.string();
    etcd_.address = o.listen;
    etcd_.pki_dir = o.pki_dir.string();
    etcd_.log_file = (o.state_dir / "etcd.log").string();
  }
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;
  ~Loop() {
    stop_tasks_ = true;  // the futures' destructors wait for the tasks, which now end soon
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
      CollectTasks(now);
      Supervise(now);
      RefreshEndpoints(now);
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
    stop_tasks_ = true;
    join_server_.Stop();
    launcher_->Stop();
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
        if (!start_ && !join_) {
          start_ = *s;
          Found(*s);
        }
      } else if (const auto* j = std::get_if<JoinAsLearner>(&action)) {
        if (!join_ && !start_) {
          join_ = *j;
          Journal(LOG_INFO, "not in the founding set of " + j->token + "; joining it as an etcd learner",
                  {{"PHASE", "learner"}, {"CLUSTER_TOKEN", j->token}});
          StartLearnerTask(*j);
        }
      } else if (const auto* w = std::get_if<JoinAsWorker>(&action)) {
        if (!worker_started_) {
          worker_started_ = true;
          StartWorkerTask(*w);
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

  // Found starts a founding member: the founder makes the PKI (once), the others
  // fetch it from the founder's join endpoint in the background first.
  void Found(const StartEtcdNew& s) {
    if (auto local = LoadLocalCredentials(o_, s.founding)) {
      return Serve(*local, EtcdNewArgs(etcd_, s));
    }
    if (s.founding.founder == o_.name) {
      auto cas = pki::MakeClusterCAs();
      auto token = MakeBootstrapToken();
      if (!cas || !token) {
        Journal(LOG_ERR, "cannot make the cluster PKI: " + (cas ? token.error() : cas.error()), {{"PHASE", "error"}});
        return;
      }
      Journal(LOG_INFO, "founder: made the etcd, Kubernetes and front-proxy CAs under " + o_.pki_dir.string(),
              {{"PHASE", "founding"}});
      return Serve(Credentials{*cas, *token, ApiEndpoints(s.founding)}, EtcdNewArgs(etcd_, s));
    }
    const DaemonOptions& o = o_;
    Key psk = psk_;
    Founding founding = s.founding;
    EtcdArgs args = EtcdNewArgs(etcd_, s);
    const std::atomic<bool>& stop = stop_tasks_;
    pending_start_ = std::async(std::launch::async, [&o, psk, founding, args, &stop]() -> std::optional<LearnerResult> {
      auto r = FetchFromMembers(o, psk, founding, true, stop);
      if (!r) return std::nullopt;
      auto c = CredentialsFrom(*r);
      if (!c) {
        Journal(LOG_ERR, c.error(), {{"PHASE", "error"}});
        return std::nullopt;
      }
      c->api_endpoints = ApiEndpoints(founding);
      return LearnerResult{*c, args};
    });
  }

  // Serve installs credentials, starts etcd with args and the join endpoint.
  void Serve(const Credentials& c, const EtcdArgs& args) {
    if (auto s = InstallCredentials(o_, c); !s) {
      Journal(LOG_ERR, "cannot install the PKI: " + s.error(), {{"PHASE", "error"}});
      return;
    }
    etcd_args_ = args;
    StartEtcd();
    if (auto s = join_server_.Start(o_.listen, o_.port, psk_); !s) {
      Journal(LOG_ERR, s.error(), {{"PHASE", "error"}});
      return;
    }
    join_server_.SetCredentials(c);
    served_ = c;
    serving_ = true;
  }

  // RefreshEndpoints keeps the API endpoints the join endpoint names current: the
  // founding members are only where the cluster started, so every 15 s a background
  // task asks this node's etcd for the voting members, and a changed list is served.
  void RefreshEndpoints(std::uint64_t now) {
    if (Ready(pending_endpoints_)) {
      auto e = pending_endpoints_.get();
      if (!e.empty() && e != served_.api_endpoints) {
        served_.api_endpoints = e;
        join_server_.SetCredentials(served_);
        const std::string list = Join(e, " ");
        Journal(LOG_INFO, "join endpoint: workers are now told the API endpoints " + list, {{"API_ENDPOINTS", list}});
      }
    }
    if (!serving_ || !etcd_started_ || pending_endpoints_.valid() || now < next_endpoints_) return;
    next_endpoints_ = now + 15000;
    std::string url = ClientUrlFor(PeerUrl(o_.listen));
    std::string pki = o_.pki_dir.string();
    pending_endpoints_ = std::async(std::launch::async, [url, pki]() -> std::vector<std::string> {
      EtcdApi api(url, ClientTlsFor(pki));
      auto members = api.ListMembers();
      return members ? ApiEndpointsOf(*members) : std::vector<std::string>{};
    });
  }

  // StartLearnerTask gets credentials (local or fetched) and adds this node as a
  // learner through the gateway, all in the background.
  void StartLearnerTask(const JoinAsLearner& j) {
    const DaemonOptions& o = o_;
    Key psk = psk_;
    EtcdConfig etcd = etcd_;
    const std::atomic<bool>& stop = stop_tasks_;
    pending_start_ = std::async(std::launch::async, [&o, psk, j, etcd, &stop]() -> std::optional<LearnerResult> {
      auto credentials = LoadLocalCredentials(o, j.founding);
      if (!credentials) {
        auto r = FetchFromMembers(o, psk, j.founding, true, stop);
        if (!r) return std::nullopt;
        credentials = CredentialsFrom(*r);
        if (!credentials) {
          Journal(LOG_ERR, credentials.error(), {{"PHASE", "error"}});
          return std::nullopt;
        }
        credentials->api_endpoints = ApiEndpoints(j.founding);
      }
      if (auto s = InstallCredentials(o, *credentials); !s) {
        Journal(LOG_ERR, "cannot install the PKI: " + s.error(), {{"PHASE", "error"}});
        return std::nullopt;
      }
      auto args = AddSelfAsLearner(o, etcd, j.founding, stop);
      if (!args) return std::nullopt;
      return LearnerResult{*credentials, *args};
    });
  }

  // AddSelfAsLearner runs the member add (removing a stale entry of this node first)
  // and returns how to start etcd; empty once stopped.
  static std::optional<EtcdArgs> AddSelfAsLearner(const DaemonOptions& o, const EtcdConfig& etcd,
                                                  const Founding& founding, const std::atomic<bool>& stop) {
    std::error_code ec;
    if (std::filesystem::exists(o.etcd_data_dir / "member", ec)) {
      // Added and started before: etcd ignores --initial-cluster with a data dir.
      return EtcdExistingArgs(etcd, o.name + "=" + PeerUrl(o.listen));
    }
    std::string self = PeerUrl(o.listen);
    auto join = [&o, &etcd, &self](EtcdApi& api, std::vector<EtcdMember> members) -> GatewayStep<EtcdArgs> {
      const EtcdMember* mine = nullptr;
      for (const auto& m : members) {
        bool same_url = std::find(m.peer_urls.begin(), m.peer_urls.end(), self) != m.peer_urls.end();
        if (same_url || (!m.name.empty() && m.name == o.name)) mine = &m;
      }
      if (mine != nullptr && !mine->name.empty()) {
        // A started member with our identity but no data here: this node was replaced.
        auto r = api.Remove(mine->id);
        if (!r) return Fail("removing the stale member " + mine->id + ": " + r.error());
        Journal(LOG_INFO, "removed stale member " + mine->id + " (" + mine->name + ") before joining again",
                {{"PHASE", "learner"}});
        return AskAgain{};
      }
      if (mine == nullptr) {
        auto added = api.AddLearner(self);
        if (!added) return Fail(added.error());
        members = std::move(*added);
        Journal(LOG_INFO, "added as learner " + self, {{"PHASE", "learner"}});
      }
      auto ic = JoinInitialCluster(members, o.name, self);
      if (!ic) return Fail(ic.error());
      return EtcdExistingArgs(etcd, *ic);
    };
    return AskGateways<EtcdArgs>(o, founding, "join", stop, join);
  }

  // StartPromoteTask promotes this learner once etcd accepts that (it must catch up).
  void StartPromoteTask() {
    const DaemonOptions& o = o_;
    Founding founding = join_->founding;
    const std::atomic<bool>& stop = stop_tasks_;
    pending_promote_ = std::async(std::launch::async, [&o, founding, &stop]() {
      std::string self = PeerUrl(o.listen);
      auto promote = [&self](EtcdApi& api, const std::vector<EtcdMember>& members) -> GatewayStep<Ok> {
        const EtcdMember* mine = nullptr;
        for (const auto& m : members) {
          if (std::find(m.peer_urls.begin(), m.peer_urls.end(), self) != m.peer_urls.end()) mine = &m;
        }
        if (mine == nullptr) return Fail("this node is not in the member list");
        if (!mine->learner) return Ok{};
        if (auto r = api.Promote(mine->id); !r) return Fail(r.error());
        return Ok{};
      };
      return AskGateways<Ok>(o, founding, "promotion", stop, promote).has_value();
    });
  }

  // StartWorkerTask fetches worker credentials into <state>/worker; no etcd.
  void StartWorkerTask(const JoinAsWorker& w) {
    std::error_code ec;
    auto dir = o_.state_dir / "worker";
    if (std::filesystem::exists(dir / "bootstrap-token", ec)) {
      Journal(LOG_INFO, "worker: credentials already in " + dir.string(), {{"PHASE", "worker"}});
      worker_done_ = true;
      return;
    }
    const DaemonOptions& o = o_;
    Key psk = psk_;
    const std::atomic<bool>& stop = stop_tasks_;
    pending_worker_ = std::async(std::launch::async, [&o, psk, w, dir, &stop]() {
      auto r = FetchFromMembers(o, psk, w.founding, false, stop);
      if (!r) return false;
      if (auto s = SaveWorkerCredentials(dir, *r); !s) {
        Journal(LOG_ERR, s.error(), {{"PHASE", "error"}});
        return false;
      }
      Journal(LOG_INFO,
              "worker: saved the CA bundle, " + std::to_string(r->api_endpoints.size()) +
                  " API endpoints and the bootstrap token to " + dir.string(),
              {{"PHASE", "worker"}});
      return true;
    });
  }

  template <typename T>
  static bool Ready(const std::future<T>& f) {
    return f.valid() && f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  }

  // CollectTasks picks up finished background tasks.
  void CollectTasks(std::uint64_t now) {
    if (Ready(pending_start_)) {
      auto r = pending_start_.get();
      if (r) {
        Serve(r->credentials, r->args);
        if (join_) {
          StartPromoteTask();
          join_at_ = now;
        }
      }
    }
    if (Ready(pending_promote_) && pending_promote_.get()) {
      join_done_ = true;
      Journal(LOG_INFO, "promoted: voting member of " + join_->token, {{"PHASE", "member"}});
    }
    if (Ready(pending_worker_)) worker_done_ = pending_worker_.get();
  }

  void StartEtcd() {
    if (etcd_args_.name.empty() || launcher_->Running()) return;
    std::error_code ec;
    std::filesystem::create_directories(o_.etcd_data_dir.parent_path(), ec);
    if (auto s = launcher_->Start(etcd_args_); !s) {
      Journal(LOG_ERR, s.error(), {{"PHASE", "member"}});
      return;
    }
    etcd_started_ = true;
    if (!start_) {
      Journal(LOG_INFO, "starting etcd to join the cluster: " + etcd_args_.initial_cluster,
              {{"PHASE", "learner"}, {"ETCD", launcher_->Describe()}});
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
             {"ETCD", launcher_->Describe()}});
  }

  // Supervise restarts etcd if it exited, at most every 2 s.
  void Supervise(std::uint64_t now) {
    if (etcd_started_ && !launcher_->Running()) {
      etcd_started_ = false;
      Journal(LOG_WARNING, "etcd exited; see " + etcd_.log_file, {{"PHASE", "member"}});
      restart_at_ = now + 2000;
    }
    if (!etcd_args_.name.empty() && !etcd_started_ && now >= restart_at_) StartEtcd();
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
    std::string line = join_done_     ? "member"
                       : worker_done_ ? "worker: credentials saved"
                                      : StatusLine(node_.phase(), node_.UpPeers(), o_.expected);
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
    s.etcd_pid = -1;
    if (const auto* child = dynamic_cast<const ChildEtcdLauncher*>(launcher_.get())) s.etcd_pid = child->pid();
    if (auto w = SaveNodeState(o_.state_dir, s); !w) Journal(LOG_WARNING, w.error());
  }

  const DaemonOptions& o_;
  Node node_;
  UdpTransport transport_;
  Sealer sealer_;
  Gate gate_;
  Key psk_;
  EtcdConfig etcd_;
  std::unique_ptr<EtcdLauncher> launcher_;
  JoinServer join_server_;
  std::atomic<bool> stop_tasks_{false};
  std::future<std::optional<LearnerResult>> pending_start_;
  std::future<bool> pending_promote_;
  std::future<bool> pending_worker_;
  std::future<std::vector<std::string>> pending_endpoints_;
  std::uint64_t next_endpoints_ = 0;
  Credentials served_;  // what the join endpoint serves, once serving_
  bool serving_ = false;
  std::optional<StartEtcdNew> start_;
  EtcdArgs etcd_args_;  // how etcd is (re)started, once decided (name empty before)
  bool etcd_started_ = false;
  std::optional<JoinAsLearner> join_;
  bool join_done_ = false;
  bool worker_started_ = false;
  bool worker_done_ = false;
  std::uint64_t join_at_ = 0;
  std::map<std::string, sockaddr_in> addresses_;
  std::string last_refused_from_;
  DropCounters reported_drops_;
  std::string status_line_;
  std::uint64_t send_failures_ = 0;
  std::uint64_t next_drop_log_ = 0;
  std::uint64_t next_state_write_ = 0;
  std::uint64_t restart_at_ = 0;
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
  Loop loop(o, std::move(node), std::move(*transport), std::move(sealer), std::move(gate), JoinPsk(*key));
  return loop.Run(stop);
}

}  // namespace sprout::formation
