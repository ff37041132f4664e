// Beacon I/O of the formation daemon: sealing the pure Node's messages into frames and
// sending them, reading frames through the liveness check (liveness.h: a sender's
// incarnation must answer a fresh nonce before its frames count, so captured frames
// of earlier boots and installs are dropped as stale) and the Gate (which refuses
// malformed, foreign, forged and replayed ones), remembering where each peer was last
// heard from, and logging the drop counters. The protocol itself stays in node.*; frames reach the
// network through Datagrams, so tests run this with an in-memory fake.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "formation/auth.h"
#include "formation/election.h"
#include "formation/liveness.h"
#include "formationd/transport.h"

namespace sprout::formation {

// Datagrams is how frames reach the network: UdpDatagrams in the daemon, a fake in tests.
class Datagrams {
 public:
  virtual ~Datagrams() = default;
  // SendTo sends one datagram to one address; false if it was refused.
  virtual bool SendTo(const std::vector<std::uint8_t>& bytes, const sockaddr_in& to) = 0;
  // SendAll sends one datagram to the group and every static peer; returns how many sends were refused.
  virtual int SendAll(const std::vector<std::uint8_t>& bytes) = 0;
  // Receive returns one waiting datagram without blocking, or nothing.
  virtual std::optional<Datagram> Receive() = 0;
  // fd is what to poll() for incoming datagrams, or -1.
  virtual int fd() const = 0;
};

// UdpDatagrams sends and receives through a UdpTransport.
class UdpDatagrams : public Datagrams {
 public:
  // UdpDatagrams owns transport.
  explicit UdpDatagrams(UdpTransport transport) : transport_(std::move(transport)) {}
  bool SendTo(const std::vector<std::uint8_t>& bytes, const sockaddr_in& to) override;
  int SendAll(const std::vector<std::uint8_t>& bytes) override;
  std::optional<Datagram> Receive() override;
  int fd() const override { return transport_.fd(); }

 private:
  UdpTransport transport_;
};

// CountersText renders drop counters for the log ("accepted=3 malformed=0 ...").
std::string CountersText(const DropCounters& c);

// SameDrops compares the counters worth a log line. Replays are not among them: every
// frame goes both to the group and to each static peer, so the second copy is always
// "replayed"; those totals ride along as fields of the next line that is logged.
bool SameDrops(const DropCounters& a, const DropCounters& b);

// Beacons is one node's frame I/O: its Sealer, its liveness check, its Gate and the
// last address of every peer it heard. On a control-plane node it also speaks to workers
// under the worker key: its gate admits their beacons (Gate::AdmitWorkers), what a
// worker needs to find the cluster goes out sealed under both keys, and worker-key
// frames have a liveness check of their own, so that an echo under the worker key (which
// every worker can seal) never vouches for a frame under the control-plane key.
class Beacons {
 public:
  // Beacons sends and receives through io as self of cluster_name under keys (both keys
  // on a control-plane node, the worker key alone on a worker), signing in incarnation;
  // nonces feed the liveness probes (random in the daemon).
  Beacons(std::unique_ptr<Datagrams> io, const FrameKeys& keys, const std::string& cluster_name,
          const std::string& self, std::uint64_t incarnation, std::function<Nonce()> nonces,
          LivenessOptions liveness = {});

  // Handler takes one accepted message from sender; false stops the drain.
  using Handler = std::function<bool(const std::string& sender, const Message& message)>;
  // Drain reads at most max waiting datagrams (bounded, so a flood cannot starve the
  // timers) at time now (ms, monotonic). It answers liveness probes, probes the
  // sender incarnations it has not heard answer yet and holds their frames, and hands
  // each frame of an answered incarnation that the gate accepts to handle, remembering
  // where its sender is. Probes and echoes go under the key the peer's frame came in
  // under. A worker-key frame that no worker may send is refused before any probe (the
  // gate counts it as overreach, or for_workers for a control-plane node's copy).
  // Refused and stale frames are counted and skipped; stale ones are logged. Returns
  // false as soon as handle does.
  bool Drain(int max, const Handler& handle, std::uint64_t now);
  // Send seals each message and sends it: to the peer's last address when it is
  // addressed to a peer heard before, else to the group and every static peer. A
  // message to a worker goes under the worker key, and only if WorkerMayReceive allows
  // it; a broadcast that workers may receive goes out under the worker key as well.
  void Send(const std::vector<Outbound>& messages);
  // ReportDrops logs changed drop counters, at most once a second.
  void ReportDrops(std::uint64_t now);

  // Heard names every peer heard this run, sorted (workers included).
  std::vector<std::string> Heard() const;
  // counters are the gate's drop counters.
  const DropCounters& counters() const { return gate_.counters(); }
  // stale counts frames dropped because their incarnation never answered a probe, under
  // either key.
  std::uint64_t stale() const;
  // last_refused_from is the address of the last refused frame ("a.b.c.d:port").
  const std::string& last_refused_from() const { return last_refused_from_; }
  // send_failures counts sends the kernel refused.
  std::uint64_t send_failures() const { return send_failures_; }
  // fd is what to poll() for incoming frames.
  int fd() const { return io_->fd(); }

 private:
  // Channel is what is kept per key: a control-plane node has one for its own key and
  // one for the worker key, a worker only the first (under the worker key). Nothing is
  // shared between them, so a worker can neither confirm nor stale a control-plane
  // node's incarnation, nor use up its probe answers.
  struct Channel {
    Channel(const Key& channel_key, const std::string& cluster_name, const std::string& self, std::uint64_t incarnation,
            std::function<Nonce()> nonces, LivenessOptions options);
    Key key;
    Sealer sealer;
    Liveness liveness;
    std::map<std::string, std::uint64_t> last_echo;  // sender -> when we last answered its probe
    std::map<std::string, sockaddr_in> addresses;    // peer name -> where it was last heard from
  };

  // Deliver passes a datagram of an answered incarnation through the gate to handle.
  bool Deliver(const Datagram& d, const Handler& handle);
  // LogStale logs the frames of an incarnation that never answered under channel's key.
  void LogStale(const StaleIncarnation& s, const Channel& channel);

  std::unique_ptr<Datagrams> io_;
  ClusterTag tag_;
  std::string self_;
  Channel own_;                     // frames under this node's own formation key
  std::optional<Channel> workers_;  // control-plane nodes: frames under the worker key
  Gate gate_;
  std::string last_refused_from_;
  DropCounters reported_drops_;
  std::uint64_t next_drop_log_ = 0;
  std::uint64_t send_failures_ = 0;
};

}  // namespace sprout::formation
