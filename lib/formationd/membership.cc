#include "formationd/membership.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <set>
#include <thread>
#include <utility>
#include <variant>

#include "formationd/join_net.h"
#include "formationd/journal.h"
#include "pki/pki.h"
#include "util/fs.h"

namespace sprout::formation {

namespace {

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
    return Pause(stop, BackoffMs(attempts_++));
  }
  // Sleep waits as Wait does, for a reason already logged.
  bool Sleep(const std::atomic<bool>& stop) { return Pause(stop, BackoffMs(attempts_++)); }

 private:
  std::string what_;
  std::string last_;
  int attempts_ = 0;
};

// FetchFromMembers asks the founding members' join endpoints in turn (the founder
// first) until one answers; empty once stopped. A worker passes its trust in the cluster
// CA: an answer whose CA it refuses (CheckWorkerCa) is logged and the next endpoint asked.
std::optional<JoinResponse> FetchFromMembers(const DaemonOptions& o, const JoinKey& psk, const Founding& f,
                                             bool control_plane, const std::atomic<bool>& stop,
                                             const WorkerCaTrust* trust = nullptr) {
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
  std::set<std::string> refused;  // (endpoint, CA) pairs logged already
  for (std::size_t i = 0; !stop; ++i) {
    const auto& address = addresses[i % addresses.size()];
    auto r = FetchJoin(address, o.port, psk, request);
    if (r && trust) {
      const std::string endpoint = address + ":" + std::to_string(o.port);
      auto verdict = CheckWorkerCa(*trust, endpoint, r->ca_bundle);
      if (!verdict.keep) {
        if (refused.insert(endpoint + " " + verdict.offered).second) {
          Journal(LOG_ERR, verdict.refusal,
                  {{"PHASE", "joining"},
                   {"JOIN_FROM", address},
                   {"JOIN_REFUSED_CA", verdict.offered},
                   {"CA_PIN", trust->pin.empty() ? trust->trusted : trust->pin}});
        }
        if (!backoff.Sleep(stop)) break;
        continue;
      }
      if (verdict.first_use) {
        Journal(LOG_WARNING,
                "worker: trusting the cluster CA " + verdict.offered + " of the join endpoint " + endpoint +
                    " on first use (no ca-cert-hash pin); from now on this worker refuses any other",
                {{"PHASE", "joining"}, {"JOIN_FROM", address}, {"CA_CERT_HASH", verdict.offered}});
      }
    }
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

// FetchControlPlaneCredentials fetches and checks a control-plane node's credentials
// for the founding f; empty once stopped or when the answer is unusable (logged).
std::optional<Credentials> FetchControlPlaneCredentials(const DaemonOptions& o, const JoinKey& psk, const Founding& f,
                                                        const std::atomic<bool>& stop) {
  auto r = FetchFromMembers(o, psk, f, true, stop);
  if (!r) return std::nullopt;
  auto c = CredentialsFrom(*r);
  if (!c) {
    Journal(LOG_ERR, c.error(), {{"PHASE", "error"}});
    return std::nullopt;
  }
  c->api_endpoints = ApiEndpoints(f);
  return *c;
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

// AddSelfAsLearner runs the member add (removing a stale entry of this node first)
// and returns how to start etcd; empty once stopped.
std::optional<EtcdArgs> AddSelfAsLearner(const DaemonOptions& o, const EtcdConfig& etcd, const Founding& founding,
                                         const std::atomic<bool>& stop) {
  std::error_code ec;
  if (std::filesystem::exists(o.etcd_data_dir / "member", ec)) {
    // Added and started before: etcd ignores --initial-cluster with a data dir.
    return EtcdExistingArgs(etcd, o.name + "=" + PeerUrl(o.listen));
  }
  std::string self = PeerUrl(o.listen);
  auto join = [&o, &etcd, &self](EtcdApi& api, std::vector<EtcdMember> members) -> GatewayStep<EtcdArgs> {
    const EtcdMember* mine = FindSelf(members, o.name, self);
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

template <typename T>
bool Ready(const std::future<T>& f) {
  return f.valid() && f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

}  // namespace

NodeCredentialFiles CredentialFiles(const DaemonOptions& o) {
  return NodeCredentialFiles{o.pki_dir, o.state_dir / "bootstrap-token", o.state_dir / "founded-pki", o.name, o.listen};
}

int BackoffMs(int attempt) { return std::min(250 << std::min(attempt, 4), 4000); }

const EtcdMember* FindSelf(const std::vector<EtcdMember>& members, const std::string& name,
                           const std::string& peer_url) {
  const EtcdMember* mine = nullptr;
  for (const auto& m : members) {
    bool same_url = std::find(m.peer_urls.begin(), m.peer_urls.end(), peer_url) != m.peer_urls.end();
    if (same_url || (!m.name.empty() && m.name == name)) mine = &m;
  }
  return mine;
}

const EtcdMember* FindByPeerUrl(const std::vector<EtcdMember>& members, const std::string& peer_url) {
  const EtcdMember* mine = nullptr;
  for (const auto& m : members) {
    if (std::find(m.peer_urls.begin(), m.peer_urls.end(), peer_url) != m.peer_urls.end()) mine = &m;
  }
  return mine;
}

Membership::Membership(const DaemonOptions& o, const JoinKey& psk, EtcdConfig etcd)
    : o_(o), psk_(psk), etcd_(std::move(etcd)) {}

Membership::~Membership() {
  stop_ = true;  // the futures' destructors wait for the tasks, which now end soon
}

void Membership::FetchFoundingCredentials(const Founding& f, const EtcdArgs& args) {
  const DaemonOptions& o = o_;
  const std::atomic<bool>& stop = stop_;
  start_ = std::async(std::launch::async, [&o, psk = psk_, f, args, &stop]() -> std::optional<MemberStart> {
    auto c = FetchControlPlaneCredentials(o, psk, f, stop);
    if (!c) return std::nullopt;
    return MemberStart{*c, args};
  });
}

void Membership::StartLearner(const JoinAsLearner& j) {
  const DaemonOptions& o = o_;
  const std::atomic<bool>& stop = stop_;
  start_ = std::async(std::launch::async, [&o, psk = psk_, j, etcd = etcd_, &stop]() -> std::optional<MemberStart> {
    auto credentials = LoadLocalCredentials(CredentialFiles(o), j.founding);
    if (!credentials) {
      auto fetched = FetchControlPlaneCredentials(o, psk, j.founding, stop);
      if (!fetched) return std::nullopt;
      credentials = *fetched;
    }
    if (auto s = InstallCredentials(CredentialFiles(o), *credentials); !s) {
      Journal(LOG_ERR, "cannot install the PKI: " + s.error(), {{"PHASE", "error"}});
      return std::nullopt;
    }
    auto args = AddSelfAsLearner(o, etcd, j.founding, stop);
    if (!args) return std::nullopt;
    return MemberStart{*credentials, *args};
  });
}

void Membership::StartPromote(const Founding& f) {
  const DaemonOptions& o = o_;
  const std::atomic<bool>& stop = stop_;
  promote_ = std::async(std::launch::async, [&o, f, &stop]() {
    std::string self = PeerUrl(o.listen);
    auto promote = [&self](EtcdApi& api, const std::vector<EtcdMember>& members) -> GatewayStep<Ok> {
      const EtcdMember* mine = FindByPeerUrl(members, self);
      if (mine == nullptr) return Fail("this node is not in the member list");
      if (!mine->learner) return Ok{};
      if (auto r = api.Promote(mine->id); !r) return Fail(r.error());
      return Ok{};
    };
    return AskGateways<Ok>(o, f, "promotion", stop, promote).has_value();
  });
}

WorkerCaTrust WorkerTrust(const DaemonOptions& o) {
  WorkerCaTrust trust;
  trust.pin = o.ca_cert_hash;
  trust.pin_source = o.ca_cert_hash_source.empty() ? "ca-cert-hash" : o.ca_cert_hash_source;
  const auto kept = o.state_dir / "worker" / "ca.crt";
  trust.trusted_from = kept.string();
  std::error_code ec;
  if (!std::filesystem::exists(kept, ec)) return trust;
  auto text = ReadFile(kept);
  auto hash = text ? pki::SpkiSha256(*text) : Result<std::string>(Fail(text.error()));
  if (hash) {
    trust.trusted = *hash;
  } else {
    Journal(LOG_WARNING, "worker: " + kept.string() + " holds no usable CA (" + hash.error() + "); it trusts none",
            {{"PHASE", "worker"}});
  }
  return trust;
}

bool Membership::StartWorker(const JoinAsWorker& w) {
  std::error_code ec;
  auto dir = o_.state_dir / "worker";
  const WorkerCaTrust trust = WorkerTrust(o_);
  // Credentials saved under a CA the pin refuses (saved before the pin was given, or by an
  // older version from whoever answered first) are fetched again, as if none were there.
  const bool pinned_away = !trust.pin.empty() && !trust.trusted.empty() && trust.trusted != trust.pin;
  if (pinned_away) {
    Journal(LOG_ERR,
            "worker: the credentials in " + dir.string() + " came with the cluster CA " + trust.trusted +
                ", and this worker pins " + trust.pin + " (" + trust.pin_source +
                "); fetching them again from an endpoint that hands out the pinned CA",
            {{"PHASE", "worker"}, {"CA_PIN", trust.pin}, {"JOIN_REFUSED_CA", trust.trusted}});
  }
  if (!pinned_away && std::filesystem::exists(dir / "bootstrap-token", ec)) {
    // The token is a worker token (WorkerToken), which expires 12 to 24 hours after
    // it was handed out. Once the kubelet has its certificate the token is not needed;
    // until then a token older than one window is fetched anew.
    const auto written = std::filesystem::last_write_time(dir / "bootstrap-token", ec);
    const auto age = std::filesystem::file_time_type::clock::now() - written;
    const bool certified = std::filesystem::exists(o_.pki_dir.parent_path() / "kubelet.conf", ec);
    if (certified || (!ec && age < std::chrono::seconds(kWorkerTokenWindowSeconds))) {
      Journal(LOG_INFO, "worker: credentials already in " + dir.string(), {{"PHASE", "worker"}});
      return true;
    }
    Journal(LOG_INFO,
            "worker: the bootstrap token in " + dir.string() +
                " is older than 12 hours and the kubelet has no certificate yet; fetching a new one",
            {{"PHASE", "worker"}});
  }
  const DaemonOptions& o = o_;
  const std::atomic<bool>& stop = stop_;
  worker_ = std::async(std::launch::async, [&o, psk = psk_, w, dir, trust, &stop]() {
    auto r = FetchFromMembers(o, psk, w.founding, false, stop, &trust);
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
  return false;
}

void Membership::RefreshEndpoints(std::uint64_t now, bool ready) {
  // The founding members are only where the cluster started, so a running member asks
  // its own etcd for the voting members now and then.
  if (!ready || endpoints_.valid() || now < next_endpoints_) return;
  next_endpoints_ = now + 15000;
  std::string url = ClientUrlFor(PeerUrl(o_.listen));
  std::string pki = o_.pki_dir.string();
  endpoints_ = std::async(std::launch::async, [url, pki]() -> std::vector<std::string> {
    EtcdApi api(url, ClientTlsFor(pki));
    auto members = api.ListMembers();
    return members ? ApiEndpointsOf(*members) : std::vector<std::string>{};
  });
}

std::optional<MemberStart> Membership::TakeStarted() {
  if (!Ready(start_)) return std::nullopt;
  return start_.get();
}

bool Membership::TakePromoted() { return Ready(promote_) && promote_.get(); }

std::optional<bool> Membership::TakeWorker() {
  if (!Ready(worker_)) return std::nullopt;
  return worker_.get();
}

std::optional<std::vector<std::string>> Membership::TakeEndpoints() {
  if (!Ready(endpoints_)) return std::nullopt;
  return endpoints_.get();
}

}  // namespace sprout::formation
