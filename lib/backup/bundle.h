// Backup bundles: etcd's snapshot, the cluster PKI and the cluster identity in one
// file, encrypted and authenticated with AES-256-GCM under a key derived from the
// cluster secret (docs/backup.md, "The bundle"). Pure: randomness comes in as bytes.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace sprout::backup {

// kBundleSuffix ends the name of every bundle file.
inline constexpr std::string_view kBundleSuffix = ".sprout-backup";

// kEtcdQuotaBytes is the largest database a sprout node's etcd keeps: its backend quota.
// No etcd of sprout's sets one (neither staticpods/ nor the formation daemon's etcd pass
// --quota-backend-bytes, and neither the Shoot nor the profile has a field for it), so
// it is etcd's default, 2 GiB; quota_test.cc fails when a manifest starts to set one.
inline constexpr std::uint64_t kEtcdQuotaBytes = std::uint64_t{2} << 30;
// kMaxPayloadSize is the largest plaintext a bundle may carry: etcd's quota with 64 MiB
// for the PKI, the identity and what etcd lets a database grow past its quota (one
// request, 1.5 MiB by default). SealBundle refuses more, and a header claiming more is
// refused before anything after it is read.
inline constexpr std::uint64_t kMaxPayloadSize = kEtcdQuotaBytes + (std::uint64_t{64} << 20);
// kMaxBundleSize is the largest bundle file: the payload plus the header, nonce and tag.
inline constexpr std::uint64_t kMaxBundleSize = kMaxPayloadSize + (std::uint64_t{1} << 20);
// kMaxHeadSize is how much of a file's start ReadHeaderPrefix needs at most: magic,
// version, length and the longest header a bundle may have (64 KiB).
inline constexpr std::uint64_t kMaxHeadSize = 4 + 1 + 4 + (std::uint64_t{64} << 10);

// Salt and Nonce are the random inputs of one bundle (the caller draws them).
using Salt = std::array<std::uint8_t, 16>;
using Nonce = std::array<std::uint8_t, 12>;

// BundleHeader is the clear part of a bundle. It is authenticated (AES-GCM's
// additional data), so listing may trust it only after the bundle opened; before
// that it is a claim.
struct BundleHeader {
  std::string cluster;              // cluster name (identity)
  std::int64_t created = 0;         // Unix seconds when the snapshot was taken
  std::string kind;                 // "scheduled" or "manual"
  std::string node;                 // the node that took it
  std::uint64_t revision = 0;       // etcd revision of the snapshot
  std::uint64_t keys = 0;           // etcd's key count of the snapshot
  std::string snapshot_sha256;      // hex SHA-256 of the snapshot as etcd streamed it
  std::uint64_t snapshot_size = 0;  // its size in bytes
  std::uint64_t payload_size = 0;   // size of the plaintext (so a cut file shows without the key)
  std::string salt;                 // hex of the bundle's HKDF salt

  // operator== compares every field.
  bool operator==(const BundleHeader&) const = default;
};

// Identity is who the cluster was when the snapshot was taken.
struct Identity {
  std::string cluster;               // cluster name
  std::string token;                 // the founding's etcd cluster token
  std::vector<std::string> members;  // "name=peer-url" of the members then, sorted

  // operator== compares every field.
  bool operator==(const Identity&) const = default;
};

// BundleContents is what a bundle carries inside its encryption.
struct BundleContents {
  Identity identity;
  std::string snapshot;                      // etcd's snapshot (database plus etcd's SHA-256)
  std::map<std::string, std::string> files;  // PKI files by path under the PKI dir, and "bootstrap-token"
};

// kRequiredFiles are the PKI files a bundle must carry for a restore.
extern const std::vector<std::string> kRequiredFiles;

// SealBundle encodes and encrypts contents under a key derived from secret, the
// header's cluster and salt. header's salt, snapshot and payload fields are filled in
// here; the rest (cluster, time, kind, node, revision, keys) comes from the caller.
Result<std::string> SealBundle(BundleHeader header, const BundleContents& contents, std::string_view secret,
                               const Salt& salt, const Nonce& nonce);

// ReadHeader parses the clear header and checks the file's size against it, without
// the secret. It does not authenticate anything.
Result<BundleHeader> ReadHeader(std::string_view bytes);

// ReadHeaderPrefix is ReadHeader from the first bytes of a file (at most kMaxHeadSize
// are looked at) and the file's size, so a listing never reads a whole bundle.
Result<BundleHeader> ReadHeaderPrefix(std::string_view head, std::uint64_t file_size);

// Opened is a bundle that decrypted and passed every check.
struct Opened {
  BundleHeader header;
  BundleContents contents;
};

// OpenBundle authenticates and decrypts bytes for cluster with secret and checks them:
// the cluster named in the header and identity, the snapshot's size and sha256, etcd's
// own hash at the end of the snapshot, and the required PKI files. Every refusal says
// why; no plaintext is returned unless all checks passed.
Result<Opened> OpenBundle(std::string_view bytes, std::string_view cluster, std::string_view secret);

// BundleVerifier authenticates a bundle fed to it in pieces, in order, of any size: it
// makes OpenBundle's checks (the GCM tag over header and payload, then the payload's
// entries, the snapshot's size and sha256, etcd's hash, the identity's cluster and the
// required files) holding only the header (at most kMaxHeadSize bytes), a 64 KiB
// buffer and the identity (at most kMaxIdentitySize), however large the file claims to
// be. No plaintext leaves it; the verdict comes only after the tag verified, so a forged
// file is refused as OpenBundle refuses it (docs/backup.md, "Authenticating in a
// stream").
class BundleVerifier {
 public:
  BundleVerifier(std::string_view cluster, std::string_view secret);
  ~BundleVerifier();
  BundleVerifier(const BundleVerifier&) = delete;
  BundleVerifier& operator=(const BundleVerifier&) = delete;
  // Feed takes the file's next bytes. An error means the file cannot open whatever
  // follows (not a bundle, another cluster's, or more bytes than its header says): the
  // caller may stop reading; Finish then returns the same error.
  Status Feed(std::string_view bytes);
  // Finish ends the file: its authenticated header, or why it does not open.
  Result<BundleHeader> Finish();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// kMaxIdentitySize bounds the identity.json a streamed bundle may carry (sprout's are
// a few hundred bytes).
inline constexpr std::uint64_t kMaxIdentitySize = std::uint64_t{1} << 20;

// CheckEtcdHash checks the SHA-256 etcd appends to a snapshot stream (over everything
// before it), as `etcdctl snapshot restore` does.
Status CheckEtcdHash(std::string_view snapshot);

}  // namespace sprout::backup
