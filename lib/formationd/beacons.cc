#include "formationd/beacons.h"

#include <algorithm>
#include <utility>

#include "formationd/journal.h"

namespace sprout::formation {

bool UdpDatagrams::SendTo(const std::vector<std::uint8_t>& bytes, const sockaddr_in& to) {
  return transport_.SendTo(bytes, to);
}

int UdpDatagrams::SendAll(const std::vector<std::uint8_t>& bytes) { return transport_.SendAll(bytes); }

std::optional<Datagram> UdpDatagrams::Receive() { return transport_.Receive(); }

std::string CountersText(const DropCounters& c) {
  return "accepted=" + std::to_string(c.accepted) + " malformed=" + std::to_string(c.malformed) +
         " other_cluster=" + std::to_string(c.other_cluster) + " forged=" + std::to_string(c.forged) +
         " replayed=" + std::to_string(c.replayed) + " own=" + std::to_string(c.own) +
         " overreach=" + std::to_string(c.overreach) + " for_workers=" + std::to_string(c.for_workers);
}

bool SameDrops(const DropCounters& a, const DropCounters& b) {
  return a.malformed == b.malformed && a.other_cluster == b.other_cluster && a.forged == b.forged &&
         a.overreach == b.overreach;
}

Beacons::Channel::Channel(const Key& channel_key, const std::string& cluster_name, const std::string& self,
                          std::uint64_t incarnation, std::function<Nonce()> nonces, LivenessOptions options)
    : key(channel_key), sealer(channel_key, cluster_name, self, incarnation), liveness(std::move(nonces), options) {}

Beacons::Beacons(std::unique_ptr<Datagrams> io, const FrameKeys& keys, const std::string& cluster_name,
                 const std::string& self, std::uint64_t incarnation, std::function<Nonce()> nonces,
                 LivenessOptions liveness)
    : io_(std::move(io)),
      tag_(TagFor(cluster_name)),
      self_(self),
      own_(keys.formation, cluster_name, self, incarnation, nonces, liveness),
      gate_(keys.formation, cluster_name, self) {
  if (keys.worker) {
    workers_.emplace(*keys.worker, cluster_name, self, incarnation, std::move(nonces), liveness);
    gate_.AdmitWorkers(*keys.worker);
  }
}

bool Beacons::Drain(int max, const Handler& handle, std::uint64_t now) {
  for (const auto& s : own_.liveness.Expire(now)) LogStale(s, own_);
  if (workers_) {
    for (const auto& s : workers_->liveness.Expire(now)) LogStale(s, *workers_);
  }
  for (int i = 0; i < max; ++i) {
    auto d = io_->Receive();
    if (!d) break;
    // The key a frame proves picks its channel: probes are answered, and its sender is
    // probed, under that key and no other.
    Channel* channel = &own_;
    auto frame = Authenticate(own_.key, tag_, self_, d->bytes);
    if (!frame && workers_) {
      channel = &*workers_;
      frame = Authenticate(workers_->key, tag_, self_, d->bytes);
    }
    if (!frame) {
      gate_.Open(d->bytes);  // refused: the gate counts why
      last_refused_from_ = FormatAddress(d->from);
      continue;
    }
    const std::string& sender = frame->header.sender;
    if (const auto* probe = std::get_if<LivenessProbe>(&frame->message)) {
      // Answering needs no state, so a replayed probe costs one echo; spaced per sender
      // so that a replayed burst is not reflected at full rate.
      auto& last = channel->last_echo[sender];
      if (last == 0 || now >= last + 20) {
        last = now;
        send_failures_ += io_->SendTo(channel->sealer.Seal(LivenessEcho{probe->nonce}), d->from) ? 0 : 1;
      }
      if (channel->last_echo.size() > 1024) channel->last_echo.clear();
      continue;
    }
    if (const auto* echo = std::get_if<LivenessEcho>(&frame->message)) {
      auto echoed = channel->liveness.OnEcho(sender, frame->header.incarnation, echo->nonce);
      for (const auto& s : echoed.stale) LogStale(s, *channel);
      for (const auto& held : echoed.release) {
        if (!Deliver(held, handle)) return false;
      }
      continue;
    }
    if (channel != &own_ && !WorkerMaySend(frame->message)) {
      // Whatever its liveness, a worker-key frame is never more than a worker's beacon:
      // the gate refuses it (overreach, or for_workers for another control-plane node's
      // copy of an advertisement) without a probe or a place in the held frames.
      if (!gate_.Open(d->bytes)) last_refused_from_ = FormatAddress(d->from);
      continue;
    }
    auto step = channel->liveness.OnFrame(sender, frame->header.incarnation, MessageName(frame->message), *d, now);
    if (step.probe) {
      send_failures_ += io_->SendTo(channel->sealer.Seal(LivenessProbe{*step.probe}), d->from) ? 0 : 1;
    }
    if (step.verdict == Liveness::Verdict::kDeliver && !Deliver(*d, handle)) return false;
  }
  return true;
}

bool Beacons::Deliver(const Datagram& d, const Handler& handle) {
  auto opened = gate_.Open(d.bytes);
  if (!opened) {
    last_refused_from_ = FormatAddress(d.from);
    return true;
  }
  const Frame& frame = opened->frame;
  (opened->worker && workers_ ? workers_->addresses : own_.addresses)[frame.header.sender] = d.from;
  return handle(frame.header.sender, frame.message);
}

void Beacons::LogStale(const StaleIncarnation& s, const Channel& channel) {
  std::string what;
  for (const auto& m : s.messages) what += (what.empty() ? "" : ", ") + m;
  const bool worker_key = &channel != &own_;
  Journal(LOG_WARNING,
          "dropped " + std::to_string(s.frames) + " stale formation frame(s) from " + s.sender + " (incarnation " +
              std::to_string(s.incarnation) + (worker_key ? ", under the worker key" : "") + ": " + what +
              "): that incarnation did not answer a liveness probe, so they were replayed or are left over from an "
              "earlier boot or install",
          {{"STALE_FROM", s.sender},
           {"STALE_INCARNATION", std::to_string(s.incarnation)},
           {"STALE_FRAMES", std::to_string(s.frames)},
           {"STALE_MESSAGES", what},
           {"STALE_KEY", worker_key ? "worker" : "own"},
           {"DROP_STALE", std::to_string(stale())}});
}

std::uint64_t Beacons::stale() const {
  return own_.liveness.stale_frames() + (workers_ ? workers_->liveness.stale_frames() : 0);
}

void Beacons::Send(const std::vector<Outbound>& messages) {
  for (const auto& m : messages) {
    const bool for_workers = workers_ && WorkerMayReceive(m.message);
    if (!m.to.empty() && own_.addresses.count(m.to) == 0 && workers_) {
      if (auto w = workers_->addresses.find(m.to); w != workers_->addresses.end()) {
        // A worker is answered under the worker key, and only with what it may know.
        if (for_workers) send_failures_ += io_->SendTo(workers_->sealer.Seal(m.message), w->second) ? 0 : 1;
        continue;
      }
    }
    auto bytes = own_.sealer.Seal(m.message);
    auto it = m.to.empty() ? own_.addresses.end() : own_.addresses.find(m.to);
    if (it != own_.addresses.end()) {
      send_failures_ += io_->SendTo(bytes, it->second) ? 0 : 1;
    } else {
      send_failures_ += static_cast<std::uint64_t>(io_->SendAll(bytes));
      if (for_workers) send_failures_ += static_cast<std::uint64_t>(io_->SendAll(workers_->sealer.Seal(m.message)));
    }
  }
}

void Beacons::ReportDrops(std::uint64_t now) {
  const DropCounters& c = gate_.counters();
  if (SameDrops(c, reported_drops_) || now < next_drop_log_) return;
  Journal(LOG_WARNING,
          "dropped formation frames: " + CountersText(c) + " (last: " + gate_.last_reason() + ", from " +
              last_refused_from_ + ")",
          {{"DROP_MALFORMED", std::to_string(c.malformed)},
           {"DROP_OTHER_CLUSTER", std::to_string(c.other_cluster)},
           {"DROP_FORGED", std::to_string(c.forged)},
           {"DROP_REPLAYED", std::to_string(c.replayed)},
           {"DROP_OWN", std::to_string(c.own)},
           {"DROP_OVERREACH", std::to_string(c.overreach)},
           {"DROP_LAST_REASON", gate_.last_reason()},
           {"DROP_LAST_FROM", last_refused_from_}});
  reported_drops_ = c;
  next_drop_log_ = now + 1000;
}

std::vector<std::string> Beacons::Heard() const {
  std::vector<std::string> names;
  for (const auto& [name, address] : own_.addresses) names.push_back(name);
  if (workers_) {
    for (const auto& [name, address] : workers_->addresses) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

}  // namespace sprout::formation
