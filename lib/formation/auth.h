// Authentication of formation frames: HKDF-derived key, HMAC-SHA256, replay window.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "formation/wire.h"
#include "util/result.h"

namespace sprout::formation {

// Key is the 32-byte HMAC key of one cluster.
using Key = std::array<std::uint8_t, 32>;

// DeriveKey runs HKDF-SHA256 over the cluster secret, salted with a fixed protocol
// label and bound to the cluster name, so one secret reused for two clusters gives
// two unrelated keys.
Result<Key> DeriveKey(std::string_view secret, std::string_view cluster_name);

// TagFor is the public cluster tag: the first bytes of SHA-256 over the cluster name.
ClusterTag TagFor(std::string_view cluster_name);

// ComputeMac is HMAC-SHA256 of data under key.
Mac ComputeMac(const Key& key, std::span<const std::uint8_t> data);

// Sealer turns a node's outgoing messages into authenticated frames.
class Sealer {
 public:
  // Sealer signs as sender, in boot incarnation (which must grow with every boot).
  Sealer(Key key, std::string_view cluster_name, std::string sender, std::uint64_t incarnation);
  // Seal encodes message with the next counter value and appends the MAC.
  std::vector<std::uint8_t> Seal(const Message& message);

 private:
  Key key_;
  Header header_;
};

// DropCounters counts every frame a Gate refused, by reason.
struct DropCounters {
  std::uint64_t accepted = 0;
  std::uint64_t malformed = 0;      // not a frame of this protocol version
  std::uint64_t other_cluster = 0;  // a well-formed frame of another cluster
  std::uint64_t forged = 0;         // our cluster's tag but a MAC that does not verify
  std::uint64_t replayed = 0;       // authentic, but outside or already seen in the window
  std::uint64_t own = 0;            // our own frame looped back by multicast

  // operator== compares every counter.
  bool operator==(const DropCounters&) const = default;
};

// kReplayWindow is how many counter values behind the newest one are still accepted
// once each, so that UDP reordering does not drop fresh frames.
inline constexpr std::uint64_t kReplayWindow = 64;

// Gate checks incoming frames: format, cluster, MAC, then replay; it keeps the counters.
class Gate {
 public:
  // Gate admits frames of cluster_name under key, addressed to node self.
  Gate(Key key, std::string_view cluster_name, std::string self);
  // Open returns the authenticated frame, or nothing (and counts why) when refused.
  std::optional<Frame> Open(std::span<const std::uint8_t> bytes);
  // counters are the totals so far.
  const DropCounters& counters() const { return counters_; }
  // last_reason says why the last refused frame was refused, for the log.
  const std::string& last_reason() const { return last_reason_; }

 private:
  // Window is the replay state of one sender: newest incarnation and counter, and a
  // bitmap of which of the kReplayWindow counters below the newest were seen.
  struct Window {
    std::uint64_t incarnation = 0;
    std::uint64_t top = 0;
    std::uint64_t seen = 0;
  };
  bool Fresh(const Header& h);

  Key key_;
  ClusterTag tag_;
  std::string self_;
  std::map<std::string, Window> windows_;
  DropCounters counters_;
  std::string last_reason_;
};

}  // namespace sprout::formation
