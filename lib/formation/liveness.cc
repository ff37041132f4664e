#include "formation/liveness.h"

#include <openssl/crypto.h>

#include <algorithm>

namespace sprout::formation {

std::optional<Frame> Authenticate(const Key& key, const ClusterTag& tag, const std::string& self,
                                  std::span<const std::uint8_t> bytes) {
  auto frame = DecodeMessage(bytes);
  if (!frame || frame->header.cluster_tag != tag || frame->header.sender == self) return std::nullopt;
  Mac want = ComputeMac(key, bytes.first(frame->signed_size));
  if (CRYPTO_memcmp(want.data(), frame->mac.data(), kMacSize) != 0) return std::nullopt;
  return std::move(*frame);
}

Liveness::Liveness(std::function<Nonce()> nonces, LivenessOptions options)
    : nonces_(std::move(nonces)), options_(options) {}

Liveness::Step Liveness::OnFrame(const std::string& sender, std::uint64_t incarnation, const char* what,
                                 const Datagram& d, std::uint64_t now) {
  auto c = confirmed_.find(sender);
  if (c != confirmed_.end() && incarnation == c->second) return Step{Verdict::kDeliver, std::nullopt};
  if (c != confirmed_.end() && incarnation < c->second) {
    // An incarnation before the one that answered: the sender has moved on.
    ++stale_frames_;
    return Step{Verdict::kStale, std::nullopt};
  }
  Id id{sender, incarnation};
  auto it = pending_.find(id);
  if (it == pending_.end()) {
    if (pending_.size() >= options_.max_pending) {
      // Full (a flood of captured frames): the entry waiting longest goes; a live
      // sender whose entry is evicted is simply probed again with its next frame.
      auto oldest = std::min_element(pending_.begin(), pending_.end(), [](const auto& a, const auto& b) {
        return a.second.first_seen < b.second.first_seen;
      });
      stale_frames_ += oldest->second.frames;
      pending_.erase(oldest);
    }
    Pending p;
    p.nonce = nonces_();
    p.first_seen = now;
    p.last_probe = now;
    it = pending_.emplace(id, std::move(p)).first;
    Step step{Verdict::kHold, it->second.nonce};
    it->second.held.push_back(d);
    it->second.frames = 1;
    it->second.messages.insert(what);
    return step;
  }
  Pending& p = it->second;
  if (p.held.size() >= options_.max_held) p.held.erase(p.held.begin());
  p.held.push_back(d);
  ++p.frames;
  p.messages.insert(what);
  Step step{Verdict::kHold, std::nullopt};
  if (now >= p.last_probe + options_.probe_interval_ms) {
    p.last_probe = now;
    step.probe = p.nonce;  // the same nonce: an answer to any copy of the probe will do
  }
  return step;
}

Liveness::Echoed Liveness::OnEcho(const std::string& sender, std::uint64_t incarnation, const Nonce& nonce) {
  Echoed out;
  auto first = pending_.lower_bound(Id{sender, 0});
  bool ours = false;
  for (auto it = first; it != pending_.end() && it->first.first == sender; ++it)
    ours = ours || it->second.nonce == nonce;
  if (!ours) return out;
  // The sender proved that it runs now, in incarnation; its other held incarnations
  // are not running any more (older) or never answered for themselves (a replay).
  if (confirmed_.size() >= options_.max_senders && !confirmed_.contains(sender)) confirmed_.erase(confirmed_.begin());
  confirmed_[sender] = incarnation;
  for (auto it = first; it != pending_.end() && it->first.first == sender;) {
    if (it->first.second == incarnation) {
      for (auto& d : it->second.held) out.release.push_back(std::move(d));
    } else {
      out.stale.push_back(StaleOf(it->first, it->second));
    }
    it = pending_.erase(it);
  }
  return out;
}

std::vector<StaleIncarnation> Liveness::Expire(std::uint64_t now) {
  std::vector<StaleIncarnation> out;
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (now >= it->second.first_seen + options_.give_up_ms) {
      out.push_back(StaleOf(it->first, it->second));
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

std::optional<std::uint64_t> Liveness::confirmed(const std::string& sender) const {
  auto it = confirmed_.find(sender);
  if (it == confirmed_.end()) return std::nullopt;
  return it->second;
}

StaleIncarnation Liveness::StaleOf(const Id& id, const Pending& p) {
  stale_frames_ += p.frames;
  return StaleIncarnation{id.first, id.second, p.frames, p.messages};
}

}  // namespace sprout::formation
