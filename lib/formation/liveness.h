// The liveness check of formation frames: no frame reaches the protocol until the
// incarnation that signed it has answered a fresh random nonce of ours. A frame
// captured on an earlier install (or earlier in this one) carries an incarnation that
// no running node signs with any more, so it can never be answered and is dropped as
// stale, whatever the receiver remembers: a node with no state at all judges it as
// well as one with years of it, and no clock is needed. See docs/formation.md,
// "Freshness". Pure: the caller supplies time, nonces and the datagrams.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "formation/auth.h"
#include "formation/wire.h"

namespace sprout::formation {

// Authenticate decodes bytes and checks cluster tag and MAC, like the Gate, but keeps
// no replay state and counts nothing: the liveness check must not let a stale frame
// move a replay window. Frames of self are refused too (the Gate counts them as own).
std::optional<Frame> Authenticate(const Key& key, const ClusterTag& tag, const std::string& self,
                                  std::span<const std::uint8_t> bytes);

// LivenessOptions are the check's timings and bounds.
struct LivenessOptions {
  std::uint64_t probe_interval_ms = 250;  // a held incarnation is probed again this often
  std::uint64_t give_up_ms = 3000;        // then its frames are dropped as stale and logged
  std::size_t max_pending = 64;           // incarnations held at once (oldest evicted)
  std::size_t max_held = 32;              // frames kept per held incarnation (oldest dropped)
  std::size_t max_senders = 1024;         // confirmed incarnations remembered
};

// StaleIncarnation is a sender incarnation that never answered, for the log.
struct StaleIncarnation {
  std::string sender;
  std::uint64_t incarnation = 0;
  std::uint64_t frames = 0;        // how many of its frames were dropped
  std::set<std::string> messages;  // their message names ("cluster-advertisement", ...)
};

// Liveness holds the frames of unconfirmed sender incarnations and releases them once
// the incarnation echoed a nonce; the rest expire as stale.
class Liveness {
 public:
  // Liveness draws nonces from nonces (unpredictable in the daemon: getrandom).
  explicit Liveness(std::function<Nonce()> nonces, LivenessOptions options = {});

  // Verdict says what to do with an authentic protocol frame.
  enum class Verdict {
    kDeliver,  // its incarnation answered: hand it to the Gate and the protocol
    kHold,     // kept until its incarnation answers (probe says whether to ask now)
    kStale,    // of an incarnation older than the one that answered: dropped
  };
  // Step is the verdict and, when due, a probe to send to the frame's source address.
  struct Step {
    Verdict verdict = Verdict::kHold;
    std::optional<Nonce> probe;
  };
  // OnFrame judges datagram d, an authentic frame from sender in incarnation, whose
  // message is named what.
  Step OnFrame(const std::string& sender, std::uint64_t incarnation, const char* what, const Datagram& d,
               std::uint64_t now);

  // Echoed is what an echo released: the held frames of the incarnation that answered,
  // in arrival order, and the incarnations of that sender it made stale.
  struct Echoed {
    std::vector<Datagram> release;
    std::vector<StaleIncarnation> stale;
  };
  // OnEcho takes an echo of nonce from sender in incarnation. An echo of a nonce we did
  // not send to that sender changes nothing (a replayed echo, or a late one).
  Echoed OnEcho(const std::string& sender, std::uint64_t incarnation, const Nonce& nonce);

  // Expire drops the incarnations that did not answer within give_up_ms.
  std::vector<StaleIncarnation> Expire(std::uint64_t now);

  // confirmed is the incarnation of sender that answered last, if any.
  std::optional<std::uint64_t> confirmed(const std::string& sender) const;
  // stale_frames counts every frame dropped as stale so far.
  std::uint64_t stale_frames() const { return stale_frames_; }
  // held is how many incarnations wait for an answer.
  std::size_t held() const { return pending_.size(); }

 private:
  struct Pending {
    Nonce nonce{};
    std::uint64_t first_seen = 0;
    std::uint64_t last_probe = 0;
    std::vector<Datagram> held;
    std::uint64_t frames = 0;
    std::set<std::string> messages;
  };
  using Id = std::pair<std::string, std::uint64_t>;  // sender, incarnation
  StaleIncarnation StaleOf(const Id& id, const Pending& p);

  std::function<Nonce()> nonces_;
  LivenessOptions options_;
  std::map<std::string, std::uint64_t> confirmed_;
  std::map<Id, Pending> pending_;
  std::uint64_t stale_frames_ = 0;
};

}  // namespace sprout::formation
