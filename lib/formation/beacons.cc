#include "formation/beacons.h"

#include <utility>

#include "formation/journal.h"

namespace sprout::formation {

bool UdpDatagrams::SendTo(const std::vector<std::uint8_t>& bytes, const sockaddr_in& to) {
  return transport_.SendTo(bytes, to);
}

int UdpDatagrams::SendAll(const std::vector<std::uint8_t>& bytes) { return transport_.SendAll(bytes); }

std::optional<Datagram> UdpDatagrams::Receive() { return transport_.Receive(); }

std::string CountersText(const DropCounters& c) {
  return "accepted=" + std::to_string(c.accepted) + " malformed=" + std::to_string(c.malformed) +
         " other_cluster=" + std::to_string(c.other_cluster) + " forged=" + std::to_string(c.forged) +
         " replayed=" + std::to_string(c.replayed) + " own=" + std::to_string(c.own);
}

bool SameDrops(const DropCounters& a, const DropCounters& b) {
  return a.malformed == b.malformed && a.other_cluster == b.other_cluster && a.forged == b.forged;
}

Beacons::Beacons(std::unique_ptr<Datagrams> io, const Key& key, const std::string& cluster_name,
                 const std::string& self, std::uint64_t incarnation, std::function<Nonce()> nonces,
                 LivenessOptions liveness)
    : io_(std::move(io)),
      key_(key),
      tag_(TagFor(cluster_name)),
      self_(self),
      sealer_(key, cluster_name, self, incarnation),
      gate_(key, cluster_name, self),
      liveness_(std::move(nonces), liveness) {}

bool Beacons::Drain(int max, const Handler& handle, std::uint64_t now) {
  for (const auto& s : liveness_.Expire(now)) LogStale(s);
  for (int i = 0; i < max; ++i) {
    auto d = io_->Receive();
    if (!d) break;
    auto frame = Authenticate(key_, tag_, self_, d->bytes);
    if (!frame) {
      gate_.Open(d->bytes);  // refused: the gate counts why
      last_refused_from_ = FormatAddress(d->from);
      continue;
    }
    const std::string& sender = frame->header.sender;
    if (const auto* probe = std::get_if<LivenessProbe>(&frame->message)) {
      // Answering needs no state, so a replayed probe costs one echo; spaced per sender
      // so that a replayed burst is not reflected at full rate.
      auto& last = last_echo_[sender];
      if (last == 0 || now >= last + 20) {
        last = now;
        send_failures_ += io_->SendTo(sealer_.Seal(LivenessEcho{probe->nonce}), d->from) ? 0 : 1;
      }
      if (last_echo_.size() > 1024) last_echo_.clear();
      continue;
    }
    if (const auto* echo = std::get_if<LivenessEcho>(&frame->message)) {
      auto echoed = liveness_.OnEcho(sender, frame->header.incarnation, echo->nonce);
      for (const auto& s : echoed.stale) LogStale(s);
      for (const auto& held : echoed.release) {
        if (!Deliver(held, handle)) return false;
      }
      continue;
    }
    auto step = liveness_.OnFrame(sender, frame->header.incarnation, MessageName(frame->message), *d, now);
    if (step.probe) send_failures_ += io_->SendTo(sealer_.Seal(LivenessProbe{*step.probe}), d->from) ? 0 : 1;
    if (step.verdict == Liveness::Verdict::kDeliver && !Deliver(*d, handle)) return false;
  }
  return true;
}

bool Beacons::Deliver(const Datagram& d, const Handler& handle) {
  auto frame = gate_.Open(d.bytes);
  if (!frame) {
    last_refused_from_ = FormatAddress(d.from);
    return true;
  }
  addresses_[frame->header.sender] = d.from;
  return handle(frame->header.sender, frame->message);
}

void Beacons::LogStale(const StaleIncarnation& s) {
  std::string what;
  for (const auto& m : s.messages) what += (what.empty() ? "" : ", ") + m;
  Journal(LOG_WARNING,
          "dropped " + std::to_string(s.frames) + " stale formation frame(s) from " + s.sender + " (incarnation " +
              std::to_string(s.incarnation) + ": " + what +
              "): that incarnation did not answer a liveness probe, so they were replayed or are left over from an "
              "earlier boot or install",
          {{"STALE_FROM", s.sender},
           {"STALE_INCARNATION", std::to_string(s.incarnation)},
           {"STALE_FRAMES", std::to_string(s.frames)},
           {"STALE_MESSAGES", what},
           {"DROP_STALE", std::to_string(liveness_.stale_frames())}});
}

void Beacons::Send(const std::vector<Outbound>& messages) {
  for (const auto& m : messages) {
    auto bytes = sealer_.Seal(m.message);
    auto it = m.to.empty() ? addresses_.end() : addresses_.find(m.to);
    if (it != addresses_.end()) {
      send_failures_ += io_->SendTo(bytes, it->second) ? 0 : 1;
    } else {
      send_failures_ += static_cast<std::uint64_t>(io_->SendAll(bytes));
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
           {"DROP_LAST_REASON", gate_.last_reason()},
           {"DROP_LAST_FROM", last_refused_from_}});
  reported_drops_ = c;
  next_drop_log_ = now + 1000;
}

std::vector<std::string> Beacons::Heard() const {
  std::vector<std::string> names;
  names.reserve(addresses_.size());
  for (const auto& [name, address] : addresses_) names.push_back(name);
  return names;
}

}  // namespace sprout::formation
