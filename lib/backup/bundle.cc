#include "backup/bundle.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "util/sha256.h"
#include "util/text.h"

namespace sprout::backup {

const std::vector<std::string> kRequiredFiles = {
    "ca.crt", "ca.key", "etcd/ca.crt",     "etcd/ca.key", "front-proxy-ca.crt", "front-proxy-ca.key",
    "sa.key", "sa.pub", "bootstrap-token",
};

namespace {

constexpr std::string_view kMagic = "SPRB";
constexpr std::uint8_t kVersion = 1;
// The salt names the purpose and version, so this key never equals a formation or
// join key made from the same secret, and a v2 format gets new keys.
constexpr std::string_view kHkdfLabel = "sprout backup v1";
constexpr std::size_t kTagSize = 16;
constexpr std::size_t kPrefix = 4 + 1 + 4;  // magic, version, header length
constexpr std::size_t kMaxHeader = kMaxHeadSize - kPrefix;

using Key = std::array<std::uint8_t, 32>;

Result<Key> BundleKey(std::string_view secret, std::string_view cluster, const Salt& salt) {
  if (secret.empty()) return Fail("the cluster secret is empty");
  std::string salt_bytes(kHkdfLabel);
  salt_bytes.append(reinterpret_cast<const char*>(salt.data()), salt.size());
  return HkdfSha256(secret, salt_bytes, "backup:" + std::string(cluster));
}

using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)>;

// Gcm runs AES-256-GCM one way. Encrypting appends the tag; decrypting checks it and
// returns nothing but an error when it does not verify.
Result<std::string> Gcm(bool encrypt, const Key& key, const Nonce& nonce, std::string_view aad, std::string_view in,
                        std::string_view tag_in) {
  CipherCtx ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  if (!ctx) return Fail("cannot create a cipher context");
  int ok = encrypt ? EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key.data(), nonce.data())
                   : EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key.data(), nonce.data());
  if (ok != 1) return Fail("cannot set up AES-256-GCM");
  int len = 0;
  auto update = [&](unsigned char* out, const std::string_view data) {
    return encrypt ? EVP_EncryptUpdate(ctx.get(), out, &len, reinterpret_cast<const unsigned char*>(data.data()),
                                       static_cast<int>(data.size()))
                   : EVP_DecryptUpdate(ctx.get(), out, &len, reinterpret_cast<const unsigned char*>(data.data()),
                                       static_cast<int>(data.size()));
  };
  if (update(nullptr, aad) != 1) return Fail("AES-256-GCM refused the header");
  std::string out(in.size() + kTagSize, '\0');
  auto* o = reinterpret_cast<unsigned char*>(out.data());
  // EVP takes int lengths; feed large inputs in pieces.
  std::size_t done = 0;
  constexpr std::size_t kPiece = 1 << 28;
  while (done < in.size()) {
    std::size_t n = std::min(kPiece, in.size() - done);
    if (update(o + done, in.substr(done, n)) != 1) return Fail("AES-256-GCM failed");
    done += n;  // GCM is a stream cipher: as many bytes out as in
  }
  if (encrypt) {
    if (EVP_EncryptFinal_ex(ctx.get(), o + done, &len) != 1) return Fail("AES-256-GCM failed");
    if (EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTagSize, o + in.size()) != 1)
      return Fail("AES-256-GCM gave no tag");
    return out;
  }
  std::string tag(tag_in);
  if (EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTagSize, tag.data()) != 1)
    return Fail("AES-256-GCM refused the tag");
  if (EVP_DecryptFinal_ex(ctx.get(), o + done, &len) != 1) {
    OPENSSL_cleanse(out.data(), out.size());
    return Fail(
        "the bundle does not open with this cluster's secret: the secret or cluster name differs, or the file was "
        "changed or cut short");
  }
  out.resize(in.size());
  return out;
}

void PutU16(std::string& s, std::uint16_t v) {
  s += static_cast<char>(v & 0xff);
  s += static_cast<char>(v >> 8);
}
void PutU32(std::string& s, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
}
void PutU64(std::string& s, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
}
std::uint64_t GetLe(std::string_view s, std::size_t at, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<std::uint8_t>(s[at + static_cast<std::size_t>(i)]);
  return v;
}

std::string IdentityJson(const Identity& id) {
  nlohmann::ordered_json j{{"cluster", id.cluster}, {"token", id.token}, {"members", id.members}};
  return j.dump();
}

Result<Identity> ParseIdentity(const std::string& text) {
  try {
    auto j = nlohmann::json::parse(text);
    Identity id;
    id.cluster = j.at("cluster").get<std::string>();
    id.token = j.at("token").get<std::string>();
    id.members = j.at("members").get<std::vector<std::string>>();
    return id;
  } catch (const std::exception& e) {
    return Fail(std::string("identity.json in the bundle is not valid: ") + e.what());
  }
}

std::string HeaderJson(const BundleHeader& h) {
  nlohmann::ordered_json j{{"cluster", h.cluster},
                           {"created", h.created},
                           {"kind", h.kind},
                           {"node", h.node},
                           {"revision", h.revision},
                           {"keys", h.keys},
                           {"snapshot_sha256", h.snapshot_sha256},
                           {"snapshot_size", h.snapshot_size},
                           {"payload_size", h.payload_size},
                           {"salt", h.salt}};
  return j.dump();
}

// Payload is the plaintext: identity.json, etcd.db, then the files, each as
// (u16 name length, name, u64 size, bytes).
std::string EncodePayload(const BundleContents& c) {
  std::string out;
  auto put = [&out](std::string_view name, std::string_view data) {
    PutU16(out, static_cast<std::uint16_t>(name.size()));
    out += name;
    PutU64(out, data.size());
    out += data;
  };
  put("identity.json", IdentityJson(c.identity));
  put("etcd.db", c.snapshot);
  for (const auto& [name, data] : c.files) put(name, data);
  return out;
}

Result<BundleContents> DecodePayload(std::string_view p) {
  BundleContents c;
  bool have_identity = false;
  bool have_snapshot = false;
  std::size_t at = 0;
  while (at < p.size()) {
    if (p.size() - at < 2) return Fail("the bundle's contents end inside an entry name");
    std::size_t n = GetLe(p, at, 2);
    at += 2;
    if (p.size() - at < n + 8) return Fail("the bundle's contents end inside an entry");
    std::string name(p.substr(at, n));
    at += n;
    std::uint64_t size = GetLe(p, at, 8);
    at += 8;
    if (p.size() - at < size) return Fail("the bundle's entry " + name + " is cut short");
    std::string_view data = p.substr(at, size);
    at += size;
    if (name == "identity.json") {
      auto id = ParseIdentity(std::string(data));
      if (!id) return Fail(id.error());
      c.identity = *id;
      have_identity = true;
    } else if (name == "etcd.db") {
      c.snapshot = std::string(data);
      have_snapshot = true;
    } else if (name.empty() || name.find("..") != std::string::npos || name[0] == '/') {
      return Fail("the bundle names a file outside the PKI dir: '" + name + "'");
    } else {
      c.files[name] = std::string(data);
    }
  }
  if (!have_identity) return Fail("the bundle has no identity.json");
  if (!have_snapshot) return Fail("the bundle has no etcd snapshot");
  return c;
}

Result<std::array<std::uint8_t, 16>> SaltFromHex(const std::string& hex) {
  std::array<std::uint8_t, 16> out{};
  if (hex.size() != 32) return Fail("the bundle's salt is not 32 hex digits");
  for (std::size_t i = 0; i < 16; ++i) {
    auto nibble = [](char ch) -> int {
      if (ch >= '0' && ch <= '9') return ch - '0';
      if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
      return -1;
    };
    int hi = nibble(hex[2 * i]);
    int lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return Fail("the bundle's salt is not 32 hex digits");
    out[i] = static_cast<std::uint8_t>(hi * 16 + lo);
  }
  return out;
}

}  // namespace

Status CheckEtcdHash(std::string_view snapshot) {
  // etcd appends SHA-256 over the database; a bbolt database is whole pages, so the
  // length is then 32 past a multiple of 512 (etcdctl's own test for "has a hash").
  if (snapshot.size() < 32 || snapshot.size() % 512 != 32)
    return Fail("the snapshot has no etcd integrity hash at its end (size " + std::to_string(snapshot.size()) +
                "): it is not a whole snapshot as etcd streams it");
  std::string_view db = snapshot.substr(0, snapshot.size() - 32);
  Sha256 h;
  h.Update(db);
  auto d = h.Digest();
  if (std::memcmp(d.data(), snapshot.data() + db.size(), 32) != 0)
    return Fail("the snapshot's etcd integrity hash does not match its data");
  return Ok{};
}

Result<std::string> SealBundle(BundleHeader header, const BundleContents& contents, std::string_view secret,
                               const Salt& salt, const Nonce& nonce) {
  if (header.cluster.empty()) return Fail("a bundle needs the cluster name");
  if (contents.identity.cluster != header.cluster)
    return Fail("the identity names cluster '" + contents.identity.cluster + "', the header '" + header.cluster + "'");
  if (auto s = CheckEtcdHash(contents.snapshot); !s) return Fail(s.error());
  for (const auto& f : kRequiredFiles) {
    if (!contents.files.count(f)) return Fail("the bundle would lack " + f + ", which a restore needs");
  }
  std::string payload = EncodePayload(contents);
  if (payload.size() > kMaxPayloadSize)
    return Fail("the bundle would carry " + std::to_string(payload.size()) + " bytes, over the " +
                std::to_string(kMaxPayloadSize) + " a bundle may hold (etcd's quota and the PKI)");
  header.snapshot_sha256 = Sha256Hex(contents.snapshot);
  header.snapshot_size = contents.snapshot.size();
  header.payload_size = payload.size();
  header.salt = Hex(salt.data(), salt.size());
  std::string hjson = HeaderJson(header);
  std::string out(kMagic);
  out += static_cast<char>(kVersion);
  PutU32(out, static_cast<std::uint32_t>(hjson.size()));
  out += hjson;
  auto key = BundleKey(secret, header.cluster, salt);
  if (!key) return Fail(key.error());
  // The additional data is everything before the nonce: magic, version and header.
  auto sealed = Gcm(true, *key, nonce, out, payload, {});
  OPENSSL_cleanse(key->data(), key->size());
  OPENSSL_cleanse(payload.data(), payload.size());
  if (!sealed) return Fail(sealed.error());
  out.append(reinterpret_cast<const char*>(nonce.data()), nonce.size());
  out += *sealed;
  return out;
}

namespace {

struct Parsed {
  BundleHeader header;
  std::size_t header_end = 0;  // offset of the nonce
  std::uint64_t total = 0;     // the file's size the header implies
};

// CheckPrefix checks the first kPrefix bytes: magic, version and a bounded header length.
Result<std::size_t> CheckPrefix(std::string_view head) {
  if (head.size() < kPrefix || head.substr(0, 4) != kMagic) return Fail("not a sprout backup bundle (no SPRB magic)");
  if (static_cast<std::uint8_t>(head[4]) != kVersion)
    return Fail("bundle format version " + std::to_string(static_cast<std::uint8_t>(head[4])) +
                " is not known to this sprout (it reads version 1)");
  std::size_t hlen = GetLe(head, 5, 4);
  if (hlen > kMaxHeader) return Fail("the bundle's header claims " + std::to_string(hlen) + " bytes, over 64 KiB");
  return hlen;
}

// Parse reads the clear header from head, the file's first bytes, and (when
// size_known) checks the whole file's size against it. Every size is bounded before
// any sum is formed, so a crafted header cannot make the sum wrap around to the file's
// real size.
Result<Parsed> Parse(std::string_view head, std::uint64_t file_size, bool size_known = true) {
  auto prefix = CheckPrefix(head);
  if (!prefix) return Fail(prefix.error());
  const std::size_t hlen = *prefix;
  if (head.size() < kPrefix + hlen || (size_known && file_size < kPrefix + hlen))
    return Fail("the bundle's header is cut short");
  Parsed p;
  try {
    auto j = nlohmann::json::parse(head.substr(kPrefix, hlen));
    auto& h = p.header;
    h.cluster = j.at("cluster").get<std::string>();
    h.created = j.at("created").get<std::int64_t>();
    h.kind = j.at("kind").get<std::string>();
    h.node = j.at("node").get<std::string>();
    h.revision = j.at("revision").get<std::uint64_t>();
    h.keys = j.at("keys").get<std::uint64_t>();
    h.snapshot_sha256 = j.at("snapshot_sha256").get<std::string>();
    h.snapshot_size = j.at("snapshot_size").get<std::uint64_t>();
    h.payload_size = j.at("payload_size").get<std::uint64_t>();
    h.salt = j.at("salt").get<std::string>();
  } catch (const std::exception& e) {
    return Fail(std::string("the bundle's header is not valid: ") + e.what());
  }
  if (p.header.payload_size > kMaxPayloadSize)
    return Fail("the bundle's header claims a payload of " + std::to_string(p.header.payload_size) +
                " bytes, over the " + std::to_string(kMaxPayloadSize) + " a bundle may hold");
  p.header_end = kPrefix + hlen;
  // Each term is bounded (64 KiB, 12, 2 GiB and a bit, 16): the sum cannot wrap.
  const std::uint64_t want = p.header_end + sizeof(Nonce) + p.header.payload_size + kTagSize;
  p.total = want;
  if (size_known && file_size != want)
    return Fail("the bundle is " + std::to_string(file_size) + " bytes, its header says " + std::to_string(want) +
                (file_size < want ? ": it was cut short" : ": it has bytes appended"));
  return p;
}

}  // namespace

Result<BundleHeader> ReadHeader(std::string_view bytes) { return ReadHeaderPrefix(bytes, bytes.size()); }

Result<BundleHeader> ReadHeaderPrefix(std::string_view head, std::uint64_t file_size) {
  auto p = Parse(head.substr(0, std::min<std::size_t>(head.size(), kMaxHeadSize)), file_size);
  if (!p) return Fail(p.error());
  return p->header;
}

Result<Opened> OpenBundle(std::string_view bytes, std::string_view cluster, std::string_view secret) {
  auto p = Parse(bytes, bytes.size());
  if (!p) return Fail(p.error());
  const BundleHeader& h = p->header;
  if (h.cluster != cluster)
    return Fail("the bundle is a backup of cluster '" + h.cluster + "', this node belongs to '" + std::string(cluster) +
                "'");
  auto salt = SaltFromHex(h.salt);
  if (!salt) return Fail(salt.error());
  auto key = BundleKey(secret, cluster, *salt);
  if (!key) return Fail(key.error());
  Nonce nonce{};
  std::memcpy(nonce.data(), bytes.data() + p->header_end, nonce.size());
  std::size_t ct_at = p->header_end + nonce.size();
  auto plain = Gcm(false, *key, nonce, bytes.substr(0, p->header_end), bytes.substr(ct_at, h.payload_size),
                   bytes.substr(ct_at + h.payload_size, kTagSize));
  OPENSSL_cleanse(key->data(), key->size());
  if (!plain) return Fail(plain.error());
  auto contents = DecodePayload(*plain);
  OPENSSL_cleanse(plain->data(), plain->size());
  if (!contents) return Fail(contents.error());
  // Authenticated, so these checks catch a bundle sealed wrongly, not an attacker.
  if (contents->identity.cluster != h.cluster)
    return Fail("the bundle's identity names cluster '" + contents->identity.cluster + "', its header '" + h.cluster +
                "'");
  if (contents->snapshot.size() != h.snapshot_size || Sha256Hex(contents->snapshot) != h.snapshot_sha256)
    return Fail("the snapshot in the bundle does not match the size and sha256 its header records");
  if (auto s = CheckEtcdHash(contents->snapshot); !s) return Fail(s.error());
  for (const auto& f : kRequiredFiles) {
    if (!contents->files.count(f)) return Fail("the bundle lacks " + f + ", which a restore needs");
  }
  return Opened{h, std::move(*contents)};
}

namespace {

// kStreamPiece is the most ciphertext decrypted at once, and the plaintext buffer's size.
constexpr std::size_t kStreamPiece = std::size_t{64} << 10;

// PayloadStream checks the decrypted payload as it goes by, as DecodePayload and
// OpenBundle check it whole, keeping no entry but identity.json: the snapshot is
// hashed twice (its sha256, and etcd's hash over all but its last 32 bytes), and of the
// other entries only which required files were seen is kept.
class PayloadStream {
 public:
  ~PayloadStream() { OPENSSL_cleanse(identity_.data(), identity_.size()); }

  void Add(std::string_view p) {
    while (!p.empty() && error_.empty()) {
      if (part_ == Part::kData) {
        const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(left_, p.size()));
        Data(p.substr(0, n));
        p.remove_prefix(n);
        left_ -= n;
        if (left_ == 0) EndEntry();
        continue;
      }
      // A fixed field (2 or 8 bytes) or the name: collect it.
      const std::size_t want = part_ == Part::kNameLen ? 2 : part_ == Part::kSize ? 8 : name_len_;
      const std::size_t n = std::min(want - field_.size(), p.size());
      field_.append(p.substr(0, n));
      p.remove_prefix(n);
      if (field_.size() == want) Field();
    }
  }

  Status Finish(const BundleHeader& h) {
    if (!error_.empty()) return Fail(error_);
    if (part_ != Part::kNameLen || !field_.empty()) {
      return Fail(part_ == Part::kData      ? "the bundle's entry " + name_ + " is cut short"
                  : part_ == Part::kNameLen ? std::string("the bundle's contents end inside an entry name")
                                            : std::string("the bundle's contents end inside an entry"));
    }
    if (!have_identity_) return Fail("the bundle has no identity.json");
    if (!have_snapshot_) return Fail("the bundle has no etcd snapshot");
    if (identity_cluster_ != h.cluster)
      return Fail("the bundle's identity names cluster '" + identity_cluster_ + "', its header '" + h.cluster + "'");
    if (snapshot_size_ != h.snapshot_size || snapshot_sha256_ != h.snapshot_sha256)
      return Fail("the snapshot in the bundle does not match the size and sha256 its header records");
    if (!etcd_hash_ok_)
      return Fail("the snapshot's etcd integrity hash is missing or does not match its data (size " +
                  std::to_string(snapshot_size_) + ")");
    for (std::size_t i = 0; i < kRequiredFiles.size(); ++i) {
      if ((seen_ & (1U << i)) == 0) return Fail("the bundle lacks " + kRequiredFiles[i] + ", which a restore needs");
    }
    return Ok{};
  }

 private:
  enum class Part { kNameLen, kName, kSize, kData };

  void Field() {
    if (part_ == Part::kNameLen) {
      name_len_ = GetLe(field_, 0, 2);
      part_ = Part::kName;
    } else if (part_ == Part::kName) {
      name_ = field_;
      part_ = Part::kSize;
    } else {
      left_ = GetLe(field_, 0, 8);
      BeginEntry();
      part_ = Part::kData;
      if (left_ == 0) EndEntry();
    }
    field_.clear();
  }

  void BeginEntry() {
    if (name_ == "identity.json") {
      if (left_ > kMaxIdentitySize)
        error_ = "the bundle's identity.json is over " + std::to_string(kMaxIdentitySize) + " bytes";
      OPENSSL_cleanse(identity_.data(), identity_.size());
      identity_.clear();
    } else if (name_ == "etcd.db") {
      // The last etcd.db entry counts, as in DecodePayload.
      sha_ = std::make_unique<Sha256>();
      db_ = std::make_unique<Sha256>();
      tail_.clear();
      snapshot_size_ = 0;
    }
  }

  void Data(std::string_view d) {
    if (name_ == "identity.json") {
      identity_.append(d);
    } else if (name_ == "etcd.db") {
      sha_->Update(d);
      snapshot_size_ += d.size();
      // db_ hashes all but the last 32 bytes seen so far; tail_ holds those.
      if (d.size() >= 32) {
        db_->Update(tail_);
        db_->Update(d.substr(0, d.size() - 32));
        tail_.assign(d.substr(d.size() - 32));
      } else {
        tail_.append(d);
        if (tail_.size() > 32) {
          db_->Update(std::string_view(tail_).substr(0, tail_.size() - 32));
          tail_.erase(0, tail_.size() - 32);
        }
      }
    }
  }

  void EndEntry() {
    part_ = Part::kNameLen;
    if (name_ == "identity.json") {
      auto id = ParseIdentity(identity_);
      if (!id) {
        error_ = id.error();
        return;
      }
      identity_cluster_ = id->cluster;
      have_identity_ = true;
    } else if (name_ == "etcd.db") {
      have_snapshot_ = true;
      snapshot_sha256_ = sha_->HexDigest();
      const auto d = db_->Digest();
      etcd_hash_ok_ = snapshot_size_ >= 32 && snapshot_size_ % 512 == 32 && tail_.size() == 32 &&
                      std::memcmp(d.data(), tail_.data(), 32) == 0;
    } else if (name_.empty() || name_.find("..") != std::string::npos || name_[0] == '/') {
      error_ = "the bundle names a file outside the PKI dir: '" + name_ + "'";
    } else {
      for (std::size_t i = 0; i < kRequiredFiles.size(); ++i) {
        if (kRequiredFiles[i] == name_) seen_ |= 1U << i;
      }
    }
  }

  Part part_ = Part::kNameLen;
  std::string field_;  // the fixed field or name being collected
  std::size_t name_len_ = 0;
  std::string name_;        // the current entry's name (at most 64 KiB)
  std::uint64_t left_ = 0;  // its bytes still to come
  std::string error_;       // the first thing wrong; checking stops there
  std::string identity_;    // identity.json's bytes (at most kMaxIdentitySize)
  std::string identity_cluster_;
  bool have_identity_ = false;
  bool have_snapshot_ = false;
  std::unique_ptr<Sha256> sha_;  // the snapshot's sha256
  std::unique_ptr<Sha256> db_;   // etcd's hash: over all but the snapshot's last 32 bytes
  std::string tail_;             // the snapshot's last 32 bytes so far
  std::uint64_t snapshot_size_ = 0;
  std::string snapshot_sha256_;
  bool etcd_hash_ok_ = false;
  std::uint32_t seen_ = 0;  // bit i: kRequiredFiles[i] was an entry
};

}  // namespace

struct BundleVerifier::State {
  std::string cluster;
  std::string secret;
  std::string head;  // magic, version, length, header and nonce, until they are whole
  bool parsed = false;
  Parsed p;
  std::uint64_t fed = 0;  // bytes fed so far
  std::string error;      // the first framing error: every later call returns it
  CipherCtx ctx{nullptr, EVP_CIPHER_CTX_free};
  std::string tag;                   // the last 16 bytes, as they come
  std::vector<unsigned char> plain;  // kStreamPiece bytes: the plaintext of one piece
  PayloadStream payload;

  ~State() { OPENSSL_cleanse(plain.data(), plain.size()); }

  // Begin sets the cipher up once the header and nonce are in head.
  Status Begin() {
    auto parsed_head = Parse(head, 0, false);
    if (!parsed_head) return Fail(parsed_head.error());
    p = *parsed_head;
    const BundleHeader& h = p.header;
    if (h.cluster != cluster)
      return Fail("the bundle is a backup of cluster '" + h.cluster + "', this node belongs to '" + cluster + "'");
    auto salt = SaltFromHex(h.salt);
    if (!salt) return Fail(salt.error());
    auto key = BundleKey(secret, cluster, *salt);
    if (!key) return Fail(key.error());
    ctx.reset(EVP_CIPHER_CTX_new());
    const auto* nonce = reinterpret_cast<const unsigned char*>(head.data() + p.header_end);
    const bool ok = ctx && EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key->data(), nonce) == 1;
    OPENSSL_cleanse(key->data(), key->size());
    if (!ok) return Fail("cannot set up AES-256-GCM");
    int len = 0;
    if (EVP_DecryptUpdate(ctx.get(), nullptr, &len, reinterpret_cast<const unsigned char*>(head.data()),
                          static_cast<int>(p.header_end)) != 1)
      return Fail("AES-256-GCM refused the header");
    plain.assign(kStreamPiece, 0);
    parsed = true;
    return Ok{};
  }

  // Body takes bytes after the nonce: ciphertext, then the tag, then nothing.
  Status Body(std::string_view bytes) {
    const std::uint64_t ct_end = p.header_end + sizeof(Nonce) + p.header.payload_size;
    while (!bytes.empty()) {
      const std::uint64_t at = fed;
      if (at < ct_end) {
        const auto n = static_cast<std::size_t>(std::min<std::uint64_t>({ct_end - at, bytes.size(), kStreamPiece}));
        int len = 0;
        if (EVP_DecryptUpdate(ctx.get(), plain.data(), &len, reinterpret_cast<const unsigned char*>(bytes.data()),
                              static_cast<int>(n)) != 1)
          return Fail("AES-256-GCM failed");
        payload.Add(std::string_view(reinterpret_cast<const char*>(plain.data()), static_cast<std::size_t>(len)));
        fed += n;
        bytes.remove_prefix(n);
      } else if (at < p.total) {
        const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(p.total - at, bytes.size()));
        tag.append(bytes.substr(0, n));
        fed += n;
        bytes.remove_prefix(n);
      } else {
        return Fail("the bundle is over " + std::to_string(p.total) +
                    " bytes, the size its header says: it has bytes appended");
      }
    }
    return Ok{};
  }
};

BundleVerifier::BundleVerifier(std::string_view cluster, std::string_view secret) : s_(std::make_unique<State>()) {
  s_->cluster = std::string(cluster);
  s_->secret = std::string(secret);
}

BundleVerifier::~BundleVerifier() = default;

Status BundleVerifier::Feed(std::string_view bytes) {
  State& s = *s_;
  if (!s.error.empty()) return Fail(s.error);
  while (!s.parsed && !bytes.empty()) {
    // The prefix first, then the header and nonce it announces.
    std::size_t want = kPrefix;
    if (s.head.size() >= kPrefix) {
      auto hlen = CheckPrefix(s.head);
      if (!hlen) {
        s.error = hlen.error();
        return Fail(s.error);
      }
      want = kPrefix + *hlen + sizeof(Nonce);
    }
    const std::size_t n = std::min(want - s.head.size(), bytes.size());
    s.head.append(bytes.substr(0, n));
    s.fed += n;
    bytes.remove_prefix(n);
    if (s.head.size() == kPrefix) {
      if (auto hlen = CheckPrefix(s.head); !hlen) s.error = hlen.error();
    } else if (s.head.size() == want && want > kPrefix) {
      if (auto begun = s.Begin(); !begun) s.error = begun.error();
    }
    if (!s.error.empty()) return Fail(s.error);
  }
  if (bytes.empty()) return Ok{};
  if (auto body = s.Body(bytes); !body) {
    s.error = body.error();
    return body;
  }
  return Ok{};
}

Result<BundleHeader> BundleVerifier::Finish() {
  State& s = *s_;
  if (!s.error.empty()) return Fail(s.error);
  if (!s.parsed) {
    auto prefix = CheckPrefix(s.head);
    return Fail(prefix ? std::string("the bundle's header is cut short") : prefix.error());
  }
  if (s.fed < s.p.total)
    return Fail("the bundle is " + std::to_string(s.fed) + " bytes, its header says " + std::to_string(s.p.total) +
                ": it was cut short");
  int len = 0;
  if (EVP_CIPHER_CTX_ctrl(s.ctx.get(), EVP_CTRL_GCM_SET_TAG, kTagSize, s.tag.data()) != 1)
    return Fail("AES-256-GCM refused the tag");
  if (EVP_DecryptFinal_ex(s.ctx.get(), s.plain.data(), &len) != 1)
    return Fail(
        "the bundle does not open with this cluster's secret: the secret or cluster name differs, or the file was "
        "changed or cut short");
  if (auto checked = s.payload.Finish(s.p.header); !checked) return Fail(checked.error());
  return s.p.header;
}

}  // namespace sprout::backup
