#include "formation/beacons.h"

#include <algorithm>
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
         " replayed=" + std::to_string(c.replayed) + " own=" + std::to_string(c.own) +
         " overreach=" + std::to_string(c.overreach) + " for_workers=" + std::to_string(c.for_workers);
}

bool SameDrops(const DropCounters& a, const DropCounters& b) {
  return a.malformed == b.malformed && a.other_cluster == b.other_cluster && a.forged == b.forged &&
         a.overreach == b.overreach;
}

Beacons::Beacons(std::unique_ptr<Datagrams> io, Sealer sealer, Gate gate)
    : io_(std::move(io)), sealer_(std::move(sealer)), gate_(std::move(gate)) {}

void Beacons::SealForWorkers(Sealer worker_sealer) { worker_sealer_ = std::move(worker_sealer); }

bool Beacons::Drain(int max, const Handler& handle) {
  for (int i = 0; i < max; ++i) {
    auto d = io_->Receive();
    if (!d) break;
    auto opened = gate_.Open(d->bytes);
    if (!opened) {
      last_refused_from_ = FormatAddress(d->from);
      continue;
    }
    const Frame& frame = opened->frame;
    (opened->worker ? worker_addresses_ : addresses_)[frame.header.sender] = d->from;
    if (!handle(frame.header.sender, frame.message)) return false;
  }
  return true;
}

void Beacons::Send(const std::vector<Outbound>& messages) {
  for (const auto& m : messages) {
    const bool for_workers = worker_sealer_ && WorkerMayReceive(m.message);
    if (!m.to.empty() && addresses_.count(m.to) == 0) {
      if (auto w = worker_addresses_.find(m.to); w != worker_addresses_.end()) {
        // A worker is answered under the worker key, and only with what it may know.
        if (for_workers) send_failures_ += io_->SendTo(worker_sealer_->Seal(m.message), w->second) ? 0 : 1;
        continue;
      }
    }
    auto bytes = sealer_.Seal(m.message);
    auto it = m.to.empty() ? addresses_.end() : addresses_.find(m.to);
    if (it != addresses_.end()) {
      send_failures_ += io_->SendTo(bytes, it->second) ? 0 : 1;
    } else {
      send_failures_ += static_cast<std::uint64_t>(io_->SendAll(bytes));
      if (for_workers) send_failures_ += static_cast<std::uint64_t>(io_->SendAll(worker_sealer_->Seal(m.message)));
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
  names.reserve(addresses_.size() + worker_addresses_.size());
  for (const auto& [name, address] : addresses_) names.push_back(name);
  for (const auto& [name, address] : worker_addresses_) names.push_back(name);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

}  // namespace sprout::formation
