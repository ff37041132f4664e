#include "formation/wire.h"

#include <algorithm>
#include <cstring>

namespace sprout::formation {

namespace {

constexpr std::uint8_t kMagic[4] = {'S', 'P', 'R', 'F'};

// Type numbers are part of the wire format: never renumber, only append.
enum class Type : std::uint8_t {
  kBeacon = 1,
  kVoteRequest = 2,
  kVoteGrant = 3,
  kFoundingProposal = 4,
  kFoundingAccepted = 5,
  kFoundingAnnouncement = 6,
  kClusterAdvertisement = 7,
  kLivenessProbe = 8,
  kLivenessEcho = 9,
};

Type TypeOf(const Message& m) {
  return static_cast<Type>(m.index() + 1);  // variant order mirrors Type numbering
}

void EncodeBody(Writer& w, const Message& m) {
  std::visit(
      [&w](const auto& b) {
        using T = std::decay_t<decltype(b)>;
        if constexpr (std::is_same_v<T, Beacon>) {
          w.Str(b.peer_url);
          w.U8(b.control_plane ? 1 : 0);
        } else if constexpr (std::is_same_v<T, VoteRequest>) {
          w.BallotField(b.ballot);
          w.Str(b.peer_url);
        } else if constexpr (std::is_same_v<T, VoteGrant>) {
          w.BallotField(b.ballot);
          w.U8(b.granted ? 1 : 0);
          w.BallotField(b.promised);
          w.Str(b.peer_url);
          // Accepted ballot and founding travel together or not at all.
          bool has = b.accepted_ballot.has_value() && b.accepted.has_value();
          w.U8(has ? 1 : 0);
          if (has) {
            w.BallotField(*b.accepted_ballot);
            w.FoundingField(*b.accepted);
          }
        } else if constexpr (std::is_same_v<T, FoundingProposal>) {
          w.BallotField(b.ballot);
          w.FoundingField(b.founding);
        } else if constexpr (std::is_same_v<T, FoundingAccepted>) {
          w.BallotField(b.ballot);
          w.U8(b.accepted ? 1 : 0);
          w.BallotField(b.promised);
        } else if constexpr (std::is_same_v<T, LivenessProbe> || std::is_same_v<T, LivenessEcho>) {
          w.Bytes(b.nonce);
        } else {
          static_assert(std::is_same_v<T, FoundingAnnouncement> || std::is_same_v<T, ClusterAdvertisement>);
          w.FoundingField(b.founding);
        }
      },
      m);
}

// ReadLiveness reads a liveness probe or echo, which is its nonce alone.
template <typename T>
T ReadLiveness(Reader& r) {
  T b;
  for (auto& x : b.nonce) x = r.U8();
  return b;
}

std::optional<Message> DecodeBody(Reader& r, Type type) {
  switch (type) {
    case Type::kBeacon: {
      Beacon b;
      b.peer_url = r.Str();
      b.control_plane = r.Flag();
      return b;
    }
    case Type::kVoteRequest: {
      VoteRequest b;
      b.ballot = r.BallotField();
      b.peer_url = r.Str();
      return b;
    }
    case Type::kVoteGrant: {
      VoteGrant b;
      b.ballot = r.BallotField();
      b.granted = r.Flag();
      b.promised = r.BallotField();
      b.peer_url = r.Str();
      if (r.Flag()) {
        b.accepted_ballot = r.BallotField();
        b.accepted = r.FoundingField();
      }
      return b;
    }
    case Type::kFoundingProposal: {
      FoundingProposal b;
      b.ballot = r.BallotField();
      b.founding = r.FoundingField();
      return b;
    }
    case Type::kFoundingAccepted: {
      FoundingAccepted b;
      b.ballot = r.BallotField();
      b.accepted = r.Flag();
      b.promised = r.BallotField();
      return b;
    }
    case Type::kFoundingAnnouncement:
      return FoundingAnnouncement{r.FoundingField()};
    case Type::kClusterAdvertisement:
      return ClusterAdvertisement{r.FoundingField()};
    case Type::kLivenessProbe:
      return ReadLiveness<LivenessProbe>(r);
    case Type::kLivenessEcho:
      return ReadLiveness<LivenessEcho>(r);
  }
  return std::nullopt;
}

}  // namespace

bool Founding::HasMember(const std::string& name) const {
  return std::any_of(members.begin(), members.end(), [&](const Member& m) { return m.name == name; });
}

std::string Founding::InitialCluster() const {
  std::string out;
  for (const auto& m : members) {
    if (!out.empty()) out += ',';
    out += m.name + "=" + m.peer_url;
  }
  return out;
}

const char* MessageName(const Message& m) {
  static const char* const kNames[] = {"beacon",
                                       "vote-request",
                                       "vote-grant",
                                       "founding-proposal",
                                       "founding-accepted",
                                       "founding-announcement",
                                       "cluster-advertisement",
                                       "liveness-probe",
                                       "liveness-echo"};
  return kNames[m.index()];
}

void Writer::Bytes(std::span<const std::uint8_t> b) {
  // Byte by byte: GCC 12 reports a false stringop-overflow for vector::insert here.
  for (std::uint8_t c : b) out_.push_back(c);
}

void Writer::U16(std::uint16_t v) {
  out_.push_back(static_cast<std::uint8_t>(v));
  out_.push_back(static_cast<std::uint8_t>(v >> 8));
}

void Writer::U64(std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out_.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

void Writer::Str(const std::string& s) {
  // Longer strings are cut rather than corrupting the frame; the decoder bounds them
  // the same way, so a sender cannot produce a frame its peers reject for length.
  std::size_t n = std::min(s.size(), kMaxNameLength);
  out_.push_back(static_cast<std::uint8_t>(n));
  out_.insert(out_.end(), s.begin(), s.begin() + static_cast<std::ptrdiff_t>(n));
}

void Writer::BallotField(const Ballot& b) {
  U64(b.round);
  Str(b.candidate);
}

void Writer::FoundingField(const Founding& f) {
  Str(f.founder);
  U64(f.round);
  Str(f.token);
  std::size_t n = std::min(f.members.size(), kMaxMembers);
  U8(static_cast<std::uint8_t>(n));
  for (std::size_t i = 0; i < n; ++i) {
    Str(f.members[i].name);
    Str(f.members[i].peer_url);
  }
}

bool Reader::Need(std::size_t n) {
  if (!ok()) return false;
  if (remaining() < n) {
    Fail("truncated at byte " + std::to_string(pos_));
    return false;
  }
  return true;
}

void Reader::Fail(const std::string& why) {
  if (error_.empty()) error_ = why;
  pos_ = b_.size();  // stop every later read
}

std::uint8_t Reader::U8() {
  if (!Need(1)) return 0;
  return b_[pos_++];
}

std::uint16_t Reader::U16() {
  if (!Need(2)) return 0;
  std::uint16_t v = static_cast<std::uint16_t>(b_[pos_] | (b_[pos_ + 1] << 8));
  pos_ += 2;
  return v;
}

std::uint64_t Reader::U64() {
  if (!Need(8)) return 0;
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(b_[pos_ + static_cast<std::size_t>(i)]) << (8 * i);
  pos_ += 8;
  return v;
}

std::string Reader::Str() {
  std::size_t n = U8();
  if (n > kMaxNameLength) {
    Fail("string longer than " + std::to_string(kMaxNameLength) + " bytes");
    return {};
  }
  if (!Need(n)) return {};
  std::string s(reinterpret_cast<const char*>(b_.data() + pos_), n);
  pos_ += n;
  return s;
}

bool Reader::Flag() {
  std::uint8_t v = U8();
  if (v > 1) Fail("flag byte is " + std::to_string(v) + ", want 0 or 1");
  return v == 1;
}

Ballot Reader::BallotField() {
  Ballot b;
  b.round = U64();
  b.candidate = Str();
  // A real ballot names its candidate; only the zero ballot has no name.
  if (ok() && b.candidate.empty() != (b.round == 0)) Fail("ballot round and candidate disagree");
  return b;
}

Founding Reader::FoundingField() {
  Founding f;
  f.founder = Str();
  f.round = U64();
  f.token = Str();
  std::size_t n = U8();
  if (n == 0 || n > kMaxMembers) Fail("founding has " + std::to_string(n) + " members");
  for (std::size_t i = 0; ok() && i < n; ++i) {
    Member m;
    m.name = Str();
    m.peer_url = Str();
    if (ok() && m.name.empty()) Fail("founding member without a name");
    // Members are sorted and unique so that equal sets have equal bytes.
    if (ok() && !f.members.empty() && !(f.members.back().name < m.name)) Fail("founding members not sorted");
    f.members.push_back(std::move(m));
  }
  if (ok() && (f.founder.empty() || f.token.empty() || f.round == 0)) Fail("founding lacks founder, token or round");
  if (ok() && !f.HasMember(f.founder)) Fail("founder is not a founding member");
  return f;
}

std::vector<std::uint8_t> EncodeUnsigned(const Header& header, const Message& message) {
  Writer body;
  EncodeBody(body, message);
  std::vector<std::uint8_t> b = body.Take();
  Writer w;
  w.Bytes(kMagic);
  w.U8(kWireVersion);
  w.U8(static_cast<std::uint8_t>(TypeOf(message)));
  w.Bytes(header.cluster_tag);
  w.Str(header.sender);
  w.U64(header.incarnation);
  w.U64(header.counter);
  w.U16(static_cast<std::uint16_t>(b.size()));
  w.Bytes(b);
  return w.Take();
}

Result<Frame> DecodeMessage(std::span<const std::uint8_t> bytes) {
  Reader r(bytes);
  std::uint8_t magic[4];
  for (auto& m : magic) m = r.U8();
  if (r.ok() && std::memcmp(magic, kMagic, sizeof magic) != 0) return Fail("not a sprout formation frame (bad magic)");
  std::uint8_t version = r.U8();
  if (r.ok() && version != kWireVersion)
    return Fail("frame version " + std::to_string(version) + ", this node speaks " + std::to_string(kWireVersion));
  std::uint8_t type = r.U8();
  if (r.ok() && (type < 1 || type > std::variant_size_v<Message>))
    return Fail("unknown message type " + std::to_string(type));
  Frame f{.header = {}, .message = Beacon{}};
  for (auto& t : f.header.cluster_tag) t = r.U8();
  f.header.sender = r.Str();
  if (r.ok() && f.header.sender.empty()) r.Fail("empty sender name");
  f.header.incarnation = r.U64();
  f.header.counter = r.U64();
  std::size_t body_size = r.U16();
  if (!r.ok()) return Fail("malformed header: " + r.error());
  if (r.remaining() != body_size + kMacSize)
    return Fail("body length " + std::to_string(body_size) + " does not match frame size " +
                std::to_string(bytes.size()));
  Reader br(bytes.subspan(r.pos(), body_size));
  auto msg = DecodeBody(br, static_cast<Type>(type));
  if (!br.ok() || !msg)
    return Fail("malformed " + std::string(msg ? MessageName(*msg) : "message") + ": " + br.error());
  if (br.remaining() != 0) return Fail("trailing bytes after " + std::string(MessageName(*msg)));
  f.message = std::move(*msg);
  f.signed_size = r.pos() + body_size;
  std::memcpy(f.mac.data(), bytes.data() + f.signed_size, kMacSize);
  return f;
}

}  // namespace sprout::formation
