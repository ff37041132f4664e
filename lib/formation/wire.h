// Formation protocol messages and their compact, versioned binary encoding.
//
// A frame on the wire is: magic "SPRF", version, type, cluster tag (8 bytes), sender
// name, boot incarnation, counter, body length, body, HMAC-SHA256 (32 bytes). The
// layout is documented in docs/formation.md; this file only knows bytes, not keys.
#pragma once

#include <netinet/in.h>

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "util/result.h"

namespace sprout::formation {

// Datagram is one received UDP payload and where it came from.
struct Datagram {
  std::vector<std::uint8_t> bytes;  // the payload
  sockaddr_in from{};               // the sender's address
};

// kWireVersion is the frame version this code writes and the only one it reads.
inline constexpr std::uint8_t kWireVersion = 1;
// kMacSize is the length of the HMAC-SHA256 trailer of every frame.
inline constexpr std::size_t kMacSize = 32;
// kTagSize is the length of the cluster tag that lets a node drop other clusters cheaply.
inline constexpr std::size_t kTagSize = 8;
// kMaxNameLength bounds node names, tokens and URLs so a frame fits one UDP datagram.
inline constexpr std::size_t kMaxNameLength = 200;
// kMaxMembers bounds the founding member set carried in one message.
inline constexpr std::size_t kMaxMembers = 64;

// ClusterTag is the first 8 bytes of a hash of the cluster name: public, not a secret.
using ClusterTag = std::array<std::uint8_t, kTagSize>;
// Mac is an HMAC-SHA256 value.
using Mac = std::array<std::uint8_t, kMacSize>;

// Ballot orders election attempts: a round number, ties broken by the candidate's name.
struct Ballot {
  std::uint64_t round = 0;  // 0 only for the zero ballot
  std::string candidate;    // the node that runs this ballot

  // IsZero is true for the ballot that precedes every real one.
  bool IsZero() const { return round == 0 && candidate.empty(); }
  // operator< orders by round, then by candidate name.
  bool operator<(const Ballot& o) const { return round != o.round ? round < o.round : candidate < o.candidate; }
  // operator== compares round and candidate.
  bool operator==(const Ballot&) const = default;
};

// Member is one node of the founding set: its name and etcd peer URL.
struct Member {
  std::string name;      // etcd member name
  std::string peer_url;  // etcd peer URL

  // operator== compares name and URL.
  bool operator==(const Member&) const = default;
};

// Founding is the one value the election decides: who founds, with which members and token.
struct Founding {
  std::string founder;          // the candidate that created this founding
  std::uint64_t round = 0;      // the round in which it was created
  std::string token;            // etcd --initial-cluster-token, also the cluster ID here
  std::vector<Member> members;  // sorted by name, founder included

  // operator== compares every field.
  bool operator==(const Founding&) const = default;
  // HasMember is true when name is one of the founding members.
  bool HasMember(const std::string& name) const;
  // InitialCluster renders etcd's --initial-cluster value: "a=url,b=url".
  std::string InitialCluster() const;
};

// Beacon announces that a node is up, with its etcd peer URL.
struct Beacon {
  std::string peer_url;       // the sender's etcd peer URL
  bool control_plane = true;  // false for workers, which never vote

  // operator== compares every field.
  bool operator==(const Beacon&) const = default;
};

// VoteRequest asks every node to give its vote to ballot (election phase 1).
struct VoteRequest {
  Ballot ballot;         // the candidate's new ballot
  std::string peer_url;  // the candidate's etcd peer URL

  // operator== compares every field.
  bool operator==(const VoteRequest&) const = default;
};

// VoteGrant answers a VoteRequest: granted or not, and what the voter already accepted.
struct VoteGrant {
  Ballot ballot;                          // the ballot being answered
  bool granted = false;                   // false: the voter holds a higher ballot, given in promised
  Ballot promised;                        // the voter's current ballot
  std::string peer_url;                   // the voter's etcd peer URL, for the founding set
  std::optional<Ballot> accepted_ballot;  // set when the voter accepted a founding
  std::optional<Founding> accepted;       // the founding it accepted at accepted_ballot

  // operator== compares every field.
  bool operator==(const VoteGrant&) const = default;
};

// FoundingProposal asks the voters to accept founding under ballot (phase 2).
struct FoundingProposal {
  Ballot ballot;      // the ballot the votes were granted to
  Founding founding;  // the value proposed under it

  // operator== compares every field.
  bool operator==(const FoundingProposal&) const = default;
};

// FoundingAccepted answers a FoundingProposal.
struct FoundingAccepted {
  Ballot ballot;          // the proposal's ballot
  bool accepted = false;  // false: the node holds a higher ballot
  Ballot promised;        // the node's current ballot

  // operator== compares every field.
  bool operator==(const FoundingAccepted&) const = default;
};

// FoundingAnnouncement tells everyone that founding was chosen by a majority.
struct FoundingAnnouncement {
  Founding founding;  // the chosen founding

  // operator== compares every field.
  bool operator==(const FoundingAnnouncement&) const = default;
};

// ClusterAdvertisement is sent periodically by every node that knows the cluster.
struct ClusterAdvertisement {
  Founding founding;  // the chosen founding: the cluster's identity

  // operator== compares every field.
  bool operator==(const ClusterAdvertisement&) const = default;
};

// Nonce is a random challenge of the liveness check; 128 bits, so never reused.
using Nonce = std::array<std::uint8_t, 16>;

// LivenessProbe asks the sender of a frame to prove that its incarnation is alive now
// (beacons.h); it never reaches the protocol.
struct LivenessProbe {
  Nonce nonce{};  // fresh from the prober's random source

  // operator== compares every field.
  bool operator==(const LivenessProbe&) const = default;
};

// LivenessEcho answers a LivenessProbe with its nonce, sealed under the answerer's
// current incarnation: a frame no capture can hold.
struct LivenessEcho {
  Nonce nonce{};  // the probe's nonce

  // operator== compares every field.
  bool operator==(const LivenessEcho&) const = default;
};

// Message is any protocol message body.
using Message = std::variant<Beacon, VoteRequest, VoteGrant, FoundingProposal, FoundingAccepted, FoundingAnnouncement,
                             ClusterAdvertisement, LivenessProbe, LivenessEcho>;

// MessageName names a message type for logs ("beacon", "vote-request", ...).
const char* MessageName(const Message& m);

// Header is the authenticated envelope around a message.
struct Header {
  ClusterTag cluster_tag{};       // which cluster the frame is for
  std::string sender;             // the sender's node name
  std::uint64_t incarnation = 0;  // the sender's boot number
  std::uint64_t counter = 0;      // per-incarnation sequence number

  // operator== compares every field.
  bool operator==(const Header&) const = default;
};

// Frame is a decoded frame: header, message, MAC and how many leading bytes the MAC covers.
struct Frame {
  Header header;                // who sent it, when
  Message message;              // what it says
  Mac mac{};                    // the MAC as received
  std::size_t signed_size = 0;  // leading bytes covered by the MAC
};

// EncodeUnsigned renders header and message, everything the MAC covers.
std::vector<std::uint8_t> EncodeUnsigned(const Header& header, const Message& message);

// DecodeMessage parses a whole frame; it never crashes and never reads out of bounds on
// arbitrary bytes (it is the fuzzing entry point). It does not check the MAC.
Result<Frame> DecodeMessage(std::span<const std::uint8_t> bytes);

// Writer appends little-endian integers and length-prefixed strings.
class Writer {
 public:
  // U8, U16, U64 append fixed-width little-endian integers.
  void U8(std::uint8_t v) { out_.push_back(v); }
  void U16(std::uint16_t v);
  void U64(std::uint64_t v);
  // Str appends a one-byte length and the bytes (callers keep strings under 256).
  void Str(const std::string& s);
  // Bytes appends raw bytes.
  void Bytes(std::span<const std::uint8_t> b);
  // BallotField and FoundingField append the composite fields.
  void BallotField(const Ballot& b);
  void FoundingField(const Founding& f);
  // Take returns the bytes written.
  std::vector<std::uint8_t> Take() { return std::move(out_); }

 private:
  std::vector<std::uint8_t> out_;
};

// Reader consumes what Writer wrote; every read is bounds-checked and failure is sticky.
class Reader {
 public:
  // Reader reads from bytes, which must outlive it.
  explicit Reader(std::span<const std::uint8_t> bytes) : b_(bytes) {}
  // U8, U16, U64 read fixed-width integers (0 once failed).
  std::uint8_t U8();
  std::uint16_t U16();
  std::uint64_t U64();
  // Str reads a one-byte length and that many bytes.
  std::string Str();
  // Flag reads a byte that must be 0 or 1.
  bool Flag();
  // BallotField and FoundingField read the composite fields, validating them.
  Ballot BallotField();
  Founding FoundingField();
  // Fail marks the input malformed with a reason (the first reason is kept).
  void Fail(const std::string& why);
  // ok is true while no read failed.
  bool ok() const { return error_.empty(); }
  // error says why reading failed.
  const std::string& error() const { return error_; }
  // pos is the number of bytes consumed.
  std::size_t pos() const { return pos_; }
  // remaining is the number of bytes left.
  std::size_t remaining() const { return b_.size() - pos_; }

 private:
  bool Need(std::size_t n);
  std::span<const std::uint8_t> b_;
  std::size_t pos_ = 0;
  std::string error_;
};

}  // namespace sprout::formation
