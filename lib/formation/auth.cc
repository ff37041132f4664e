#include "formation/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <memory>
#include <set>

#include "util/sha256.h"

namespace sprout::formation {

namespace {

// The salt names the protocol and its version: a future v2 key schedule then yields
// different keys even from the same secret and cluster name.
constexpr std::string_view kHkdfSalt = "sprout formation v1";
// The label of the worker secret; a v2 would change it, and every worker secret with it.
constexpr std::string_view kWorkerSecretLabel = "sprout worker secret v1";

}  // namespace

Result<Key> DeriveKey(std::string_view secret, std::string_view cluster_name) {
  if (secret.empty()) return Fail("the cluster secret is empty; give one in the profile or at boot");
  return HkdfSha256(secret, kHkdfSalt, "cluster:" + std::string(cluster_name));
}

ClusterTag TagFor(std::string_view cluster_name) {
  Sha256 h;
  h.Update("sprout cluster tag:");
  h.Update(cluster_name);
  auto d = h.Digest();
  ClusterTag t{};
  std::copy(d.begin(), d.begin() + kTagSize, t.begin());
  return t;
}

Mac ComputeMac(const Key& key, std::span<const std::uint8_t> data) {
  Mac out{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), data.data(), data.size(), out.data(), &len);
  return out;
}

std::string WorkerSecret(std::string_view cluster_secret) {
  std::uint8_t mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), cluster_secret.data(), static_cast<int>(cluster_secret.size()),
       reinterpret_cast<const std::uint8_t*>(kWorkerSecretLabel.data()), kWorkerSecretLabel.size(), mac, &len);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += kHex[mac[i] >> 4];
    out += kHex[mac[i] & 0xf];
  }
  OPENSSL_cleanse(mac, sizeof mac);
  return out;
}

bool ValidWorkerSecret(std::string_view text) {
  return text.size() == 64 &&
         std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool WorkerMaySend(const Message& message) {
  const auto* beacon = std::get_if<Beacon>(&message);
  return beacon != nullptr && !beacon->control_plane;
}

bool WorkerMayReceive(const Message& message) {
  return std::holds_alternative<ClusterAdvertisement>(message) || std::holds_alternative<FoundingAnnouncement>(message);
}

Sealer::Sealer(Key key, std::string_view cluster_name, std::string sender, std::uint64_t incarnation) : key_(key) {
  header_.cluster_tag = TagFor(cluster_name);
  header_.sender = std::move(sender);
  header_.incarnation = incarnation;
}

std::vector<std::uint8_t> Sealer::Seal(const Message& message) {
  ++header_.counter;  // starts at 1, so a zero counter never appears on the wire
  std::vector<std::uint8_t> out = EncodeUnsigned(header_, message);
  Mac mac = ComputeMac(key_, out);
  out.insert(out.end(), mac.begin(), mac.end());
  return out;
}

Gate::Gate(Key key, std::string_view cluster_name, std::string self)
    : key_(key), tag_(TagFor(cluster_name)), self_(std::move(self)) {}

void Gate::AdmitWorkers(Key worker_key) { worker_key_ = worker_key; }

std::optional<Opened> Gate::Open(std::span<const std::uint8_t> bytes) {
  auto frame = DecodeMessage(bytes);
  if (!frame) {
    ++counters_.malformed;
    last_reason_ = frame.error();
    return std::nullopt;
  }
  const Header& h = frame->header;
  if (h.cluster_tag != tag_) {
    ++counters_.other_cluster;
    last_reason_ = "frame from " + h.sender + " belongs to another cluster";
    return std::nullopt;
  }
  // Constant-time comparison: a timing difference must not reveal how much of a MAC matched.
  auto verifies = [&](const Key& key) {
    Mac want = ComputeMac(key, bytes.first(frame->signed_size));
    return CRYPTO_memcmp(want.data(), frame->mac.data(), kMacSize) == 0;
  };
  bool worker = false;
  if (!verifies(key_)) {
    if (!worker_key_ || !verifies(*worker_key_)) {
      ++counters_.forged;
      last_reason_ = "frame claiming to be from " + h.sender + " has a bad MAC (wrong secret or tampered)";
      return std::nullopt;
    }
    worker = true;
  }
  if (h.sender == self_) {
    ++counters_.own;
    last_reason_ = "own frame";
    return std::nullopt;
  }
  if (worker && WorkerMayReceive(frame->message)) {
    // Control-plane nodes send their advertisements under both keys; this node has the
    // other copy. A worker's forgery of one is dropped here just the same.
    ++counters_.for_workers;
    return std::nullopt;
  }
  if (worker && (!WorkerMaySend(frame->message) || windows_.count(h.sender) != 0)) {
    // The worker key proves a worker and nothing more: such a frame must not vote,
    // propose, advertise a cluster or speak as a control-plane node.
    ++counters_.overreach;
    last_reason_ = windows_.count(h.sender) != 0
                       ? "frame under the worker key uses the name of control-plane node " + h.sender
                       : std::string("frame under the worker key from ") + h.sender + " is a " +
                             MessageName(frame->message) + ", which only control-plane nodes may send";
    return std::nullopt;
  }
  if (!Fresh(worker ? worker_windows_ : windows_, h)) {
    ++counters_.replayed;
    last_reason_ = "replayed frame from " + h.sender + " (incarnation " + std::to_string(h.incarnation) + ", counter " +
                   std::to_string(h.counter) + ")";
    return std::nullopt;
  }
  ++counters_.accepted;
  return Opened{std::move(*frame), worker};
}

bool Gate::Fresh(std::map<std::string, Window>& windows, const Header& h) {
  auto it = windows.find(h.sender);
  if (it == windows.end() || h.incarnation > it->second.incarnation) {
    // A new boot of the sender restarts its counter; everything of older boots is stale.
    windows[h.sender] = Window{h.incarnation, h.counter, 1};
    return true;
  }
  Window& w = it->second;
  if (h.incarnation < w.incarnation) return false;
  if (h.counter > w.top) {
    std::uint64_t shift = h.counter - w.top;
    w.seen = shift >= kReplayWindow ? 1 : (w.seen << shift) | 1;
    w.top = h.counter;
    return true;
  }
  std::uint64_t behind = w.top - h.counter;
  if (behind >= kReplayWindow) return false;
  std::uint64_t bit = std::uint64_t{1} << behind;
  if (w.seen & bit) return false;
  w.seen |= bit;
  return true;
}

std::string ClusterSecretWeakness(std::string_view secret) {
  if (secret.size() < 16)
    return "it has " + std::to_string(secret.size()) + " bytes; a cluster secret needs at least 16";
  std::set<unsigned char> distinct(secret.begin(), secret.end());
  if (distinct.size() < 8) {
    return "its " + std::to_string(secret.size()) + " bytes hold only " + std::to_string(distinct.size()) +
           " distinct values (a repeated pattern or a word is guessed, not a secret)";
  }
  return "";
}

}  // namespace sprout::formation
