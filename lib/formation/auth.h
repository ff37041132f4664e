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

// WorkerSecret is the secret a worker holds instead of the cluster secret: 64 lower-case
// hex digits of HMAC-SHA256(cluster secret, "sprout worker secret v1"). Anyone with the
// cluster secret can derive it; nobody can go back from it to the cluster secret.
std::string WorkerSecret(std::string_view cluster_secret);

// ClusterSecretWeakness says why a cluster secret is too weak to found a cluster on
// (fewer than 16 bytes, or fewer than 8 distinct byte values: a repeated pattern or a
// short word), or "" when it is not. `sprout personalize` refuses a weak one.
std::string ClusterSecretWeakness(std::string_view secret);
// ValidWorkerSecret checks the form WorkerSecret gives: 64 lower-case hex digits.
bool ValidWorkerSecret(std::string_view text);

// WorkerMaySend says whether a node that proved only the worker key may send message to
// a control-plane node: a beacon that says it is a worker, and nothing else. A worker
// never votes, proposes, accepts or tells a control-plane node which cluster exists.
bool WorkerMaySend(const Message& message);
// WorkerMayReceive says whether message may go out sealed under the worker key: what a
// worker needs to find the cluster (its founding), never the election's traffic.
bool WorkerMayReceive(const Message& message);

// FrameKeys are the formation keys of one node. A control-plane node holds both: its
// frames go under formation, and it talks to workers under worker. A worker holds only
// the worker formation key, as formation, and no worker key beside it.
struct FrameKeys {
  Key formation{};            // its own frames are sealed and checked under this
  std::optional<Key> worker;  // control-plane nodes: the worker formation key, to talk to workers
};

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
  std::uint64_t overreach = 0;      // authentic under the worker key, but not a worker's beacon
  std::uint64_t for_workers = 0;    // the worker-key copy of a control-plane node's advertisement

  // operator== compares every counter.
  bool operator==(const DropCounters&) const = default;
};

// kReplayWindow is how many counter values behind the newest one are still accepted
// once each, so that UDP reordering does not drop fresh frames.
inline constexpr std::uint64_t kReplayWindow = 64;

// Opened is a frame a Gate admitted, and which key it proved.
struct Opened {
  Frame frame;          // the authenticated frame
  bool worker = false;  // true: sealed under the worker key of a control-plane node's gate
};

// Gate checks incoming frames: format, cluster, MAC, then replay; it keeps the counters.
class Gate {
 public:
  // Gate admits frames of cluster_name under key, addressed to node self. On a worker,
  // key is the worker formation key, and everything the gate admits came under it.
  Gate(Key key, std::string_view cluster_name, std::string self);
  // AdmitWorkers makes a control-plane node's gate also admit frames sealed under
  // worker_key, but only what WorkerMaySend allows and only under names no frame under
  // the main key used (what WorkerMayReceive allows is the copy another control-plane
  // node sealed for workers: dropped quietly, as for_workers). Worker frames have their
  // own replay windows, so a worker cannot mute a control-plane node by replaying or
  // pre-empting its counters.
  void AdmitWorkers(Key worker_key);
  // Open returns the authenticated frame, or nothing (and counts why) when refused.
  std::optional<Opened> Open(std::span<const std::uint8_t> bytes);
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
  static bool Fresh(std::map<std::string, Window>& windows, const Header& h);

  Key key_;
  std::optional<Key> worker_key_;
  ClusterTag tag_;
  std::string self_;
  std::map<std::string, Window> windows_;         // senders under key_
  std::map<std::string, Window> worker_windows_;  // senders under worker_key_
  DropCounters counters_;
  std::string last_reason_;
};

}  // namespace sprout::formation
