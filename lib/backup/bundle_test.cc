#include "backup/bundle.h"

#include <catch2/catch.hpp>

#include "util/sha256.h"

using namespace sprout::backup;

namespace {

// FakeSnapshot is shaped like etcd's stream: whole pages, then SHA-256 of them.
std::string FakeSnapshot(char fill = 'd', std::size_t pages = 2) {
  std::string db(4096 * pages, fill);
  sprout::Sha256 h;
  h.Update(db);
  auto d = h.Digest();
  db.append(reinterpret_cast<const char*>(d.data()), d.size());
  return db;
}

BundleContents Contents() {
  BundleContents c;
  c.identity = Identity{"edge", "sprout-0123456789abcdef", {"n1=https://198.18.12.11:2380"}};
  c.snapshot = FakeSnapshot();
  for (const auto& f : kRequiredFiles) c.files[f] = "contents of " + f;
  return c;
}

BundleHeader Header() {
  BundleHeader h;
  h.cluster = "edge";
  h.created = 1795600000;
  h.kind = "scheduled";
  h.node = "n1";
  h.revision = 42;
  h.keys = 7;
  return h;
}

const Salt kSalt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
const Nonce kNonce = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2};

std::string Sealed() {
  auto b = SealBundle(Header(), Contents(), "s3cret", kSalt, kNonce);
  REQUIRE(b.ok());
  return *b;
}

}  // namespace

TEST_CASE("a sealed bundle opens with the same secret and cluster and gives back everything", "[backup]") {
  std::string b = Sealed();
  auto opened = OpenBundle(b, "edge", "s3cret");
  REQUIRE(opened.ok());
  CHECK(opened->contents.identity == Contents().identity);
  CHECK(opened->contents.snapshot == Contents().snapshot);
  CHECK(opened->contents.files == Contents().files);
  CHECK(opened->header.revision == 42);
  CHECK(opened->header.snapshot_sha256 == sprout::Sha256Hex(Contents().snapshot));
  CHECK(opened->header.snapshot_size == Contents().snapshot.size());
  auto header = ReadHeader(b);
  REQUIRE(header.ok());
  CHECK(*header == opened->header);
}

TEST_CASE("a bundle holds no PKI file and no snapshot byte in the clear", "[backup]") {
  std::string b = Sealed();
  CHECK(b.find("contents of etcd/ca.key") == std::string::npos);
  CHECK(b.find("contents of sa.key") == std::string::npos);
  CHECK(b.find(std::string(64, 'd')) == std::string::npos);
  CHECK(b.find("sprout-0123456789abcdef") == std::string::npos);  // the token is inside too
}

TEST_CASE("a bundle refuses to open with another secret or for another cluster", "[backup]") {
  std::string b = Sealed();
  auto wrong_secret = OpenBundle(b, "edge", "other");
  REQUIRE_FALSE(wrong_secret.ok());
  CHECK(wrong_secret.error().find("does not open with this cluster's secret") != std::string::npos);
  auto wrong_cluster = OpenBundle(b, "edge-2", "s3cret");
  REQUIRE_FALSE(wrong_cluster.ok());
  CHECK(wrong_cluster.error() == "the bundle is a backup of cluster 'edge', this node belongs to 'edge-2'");
}

TEST_CASE("every flipped byte of a bundle makes it refuse to open", "[backup]") {
  std::string b = Sealed();
  // Every byte: the magic, the clear header (authenticated), the nonce, the
  // ciphertext and the tag.
  int refused = 0;
  for (std::size_t i = 0; i < b.size(); i += 1) {
    std::string bad = b;
    bad[i] = static_cast<char>(bad[i] ^ 0x01);
    if (!OpenBundle(bad, "edge", "s3cret").ok()) ++refused;
  }
  CHECK(refused == static_cast<int>(b.size()));
}

TEST_CASE("a cut or extended bundle is seen without the secret", "[backup]") {
  std::string b = Sealed();
  auto cut = ReadHeader(std::string_view(b).substr(0, b.size() - 100));
  REQUIRE_FALSE(cut.ok());
  CHECK(cut.error().find("cut short") != std::string::npos);
  auto longer = ReadHeader(b + "x");
  REQUIRE_FALSE(longer.ok());
  CHECK(longer.error().find("bytes appended") != std::string::npos);
  CHECK_FALSE(ReadHeader("SPRB").ok());
  CHECK(ReadHeader("hello world, not a bundle").error() == "not a sprout backup bundle (no SPRB magic)");
  std::string v2 = b;
  v2[4] = 2;
  CHECK(ReadHeader(v2).error() == "bundle format version 2 is not known to this sprout (it reads version 1)");
}

TEST_CASE("the same contents under another salt give another ciphertext", "[backup]") {
  Salt other = kSalt;
  other[0] ^= 0xff;
  auto a = SealBundle(Header(), Contents(), "s3cret", kSalt, kNonce);
  auto b = SealBundle(Header(), Contents(), "s3cret", other, kNonce);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->substr(a->size() - 200) != b->substr(b->size() - 200));
  CHECK(OpenBundle(*b, "edge", "s3cret").ok());
}

TEST_CASE("a bundle is not sealed without a whole snapshot and every PKI file a restore needs", "[backup]") {
  auto c = Contents();
  c.files.erase("etcd/ca.key");
  auto missing = SealBundle(Header(), c, "s3cret", kSalt, kNonce);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error() == "the bundle would lack etcd/ca.key, which a restore needs");
  c = Contents();
  c.snapshot.back() ^= 1;
  auto bad_hash = SealBundle(Header(), c, "s3cret", kSalt, kNonce);
  REQUIRE_FALSE(bad_hash.ok());
  CHECK(bad_hash.error() == "the snapshot's etcd integrity hash does not match its data");
  c = Contents();
  c.identity.cluster = "other";
  CHECK_FALSE(SealBundle(Header(), c, "s3cret", kSalt, kNonce).ok());
}

TEST_CASE("etcd's hash check accepts a whole stream and refuses a cut or changed one", "[backup]") {
  std::string s = FakeSnapshot('x', 3);
  CHECK(CheckEtcdHash(s).ok());
  CHECK_FALSE(CheckEtcdHash(s.substr(0, s.size() - 1)).ok());
  CHECK_FALSE(CheckEtcdHash(s.substr(0, 4096)).ok());
  s[10] = 'y';
  CHECK(CheckEtcdHash(s).error() == "the snapshot's etcd integrity hash does not match its data");
}

namespace {

// WithHeader is b with its clear header replaced by `json` (sizes as given), the rest
// of the bytes kept: what someone who can write to a sink can make without the secret.
std::string WithHeader(const std::string& b, const std::string& json) {
  std::size_t hlen = 0;
  for (int i = 3; i >= 0; --i) hlen = (hlen << 8) | static_cast<std::uint8_t>(b[5 + static_cast<std::size_t>(i)]);
  std::string out = b.substr(0, 5);
  for (int i = 0; i < 4; ++i) out += static_cast<char>((json.size() >> (8 * i)) & 0xff);
  return out + json + b.substr(9 + hlen);
}

std::string HeaderJson(std::uint64_t payload_size) {
  return R"({"cluster":"edge","created":1795600000,"kind":"scheduled","node":"n1","revision":42,"keys":7,)"
         R"("snapshot_sha256":"00","snapshot_size":8224,"payload_size":)" +
         std::to_string(payload_size) + R"(,"salt":"0102030405060708090a0b0c0d0e0f10"})";
}

}  // namespace

TEST_CASE("a header whose payload size makes the size sum wrap around is refused, not trusted", "[backup]") {
  // A file that ends right after its header (fewer than nonce + tag bytes follow), whose
  // header claims payload_size = 2^64 - 28 + k: header_end + 12 + payload + 16 wraps
  // to header_end + k, the file's real size. Before the fix ReadHeader accepted it and
  // OpenBundle read the nonce past the end of the buffer, then threw from substr.
  for (std::uint64_t k : std::initializer_list<std::uint64_t>{0, 5, 27}) {
    INFO(k);
    const std::uint64_t payload = std::uint64_t{0} - 28 + k;  // 20 digits for every k here
    const std::string json = HeaderJson(payload);
    std::string evil = "SPRB";
    evil += '\x01';
    for (int i = 0; i < 4; ++i) evil += static_cast<char>((json.size() >> (8 * i)) & 0xff);
    evil += json;
    evil += std::string(static_cast<std::size_t>(k), 'x');
    REQUIRE(std::uint64_t{9} + json.size() + 12 + payload + 16 == evil.size());  // the wrapped sum matches
    auto header = ReadHeader(evil);
    REQUIRE_FALSE(header.ok());
    CHECK_THAT(header.error(), Catch::Contains("claims a payload of"));
    sprout::Result<Opened> opened = sprout::Fail("not run");
    REQUIRE_NOTHROW(opened = OpenBundle(evil, "edge", "s3cret"));
    REQUIRE_FALSE(opened.ok());
    CHECK_THAT(opened.error(), Catch::Contains("claims a payload of"));
  }
}

TEST_CASE("forged and truncated headers are refused with a reason, without the secret", "[backup]") {
  std::string b = Sealed();
  struct Case {
    const char* what;
    std::string bytes;
    const char* says;
  };
  std::string long_header = b.substr(0, 5) + std::string("\xff\xff\xff\x00", 4) + b.substr(9);
  const std::vector<Case> cases = {
      {"header length over 64 KiB", long_header, "over 64 KiB"},
      {"header cut inside", b.substr(0, 30), "cut short"},
      {"payload over the largest bundle", WithHeader(b, HeaderJson(kMaxPayloadSize + 1)), "claims a payload of"},
      {"payload size not a number", WithHeader(b, R"({"cluster":"edge","payload_size":"x"})"), "header is not valid"},
      {"negative payload size (JSON -1 reads as 2^64 - 1)",
       WithHeader(b, HeaderJson(0).replace(HeaderJson(0).find(":0,"), 3, ":-1,")), "claims a payload of"},
      {"no magic", "SPRX" + b.substr(4), "no SPRB magic"},
      {"only the prefix", b.substr(0, 9), "cut short"},
      {"empty", "", "no SPRB magic"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    auto h = ReadHeader(c.bytes);
    REQUIRE_FALSE(h.ok());
    CHECK_THAT(h.error(), Catch::Contains(c.says));
    sprout::Result<Opened> opened = sprout::Fail("not run");
    REQUIRE_NOTHROW(opened = OpenBundle(c.bytes, "edge", "s3cret"));
    CHECK_FALSE(opened.ok());
  }
  // Every cut of a real bundle is refused, by the header check or by the tag.
  for (std::size_t n = 0; n < b.size(); n += 97) {
    INFO(n);
    CHECK_FALSE(ReadHeader(b.substr(0, n)).ok());
    CHECK_FALSE(OpenBundle(b.substr(0, n), "edge", "s3cret").ok());
  }
}

TEST_CASE("ReadHeaderPrefix reads the header from a file's start and its listed size", "[backup]") {
  std::string b = Sealed();
  auto h = ReadHeaderPrefix(b.substr(0, 400), b.size());
  REQUIRE(h.ok());
  CHECK(*h == ReadHeader(b).value());
  CHECK_THAT(ReadHeaderPrefix(b.substr(0, 400), b.size() - 1).error(), Catch::Contains("cut short"));
  CHECK_THAT(ReadHeaderPrefix(b.substr(0, 20), b.size()).error(), Catch::Contains("cut short"));
}

namespace {

// Streamed feeds bytes to a BundleVerifier in pieces of `piece` bytes.
sprout::Result<BundleHeader> Streamed(std::string_view bytes, std::size_t piece, std::string_view cluster = "edge",
                                      std::string_view secret = "s3cret") {
  BundleVerifier v(cluster, secret);
  for (std::size_t at = 0; at < bytes.size(); at += piece) {
    if (!v.Feed(bytes.substr(at, piece))) break;
  }
  return v.Finish();
}

}  // namespace

TEST_CASE("a bundle authenticates in a stream exactly when it opens whole, in pieces of any size", "[backup]") {
  std::string b = Sealed();
  for (std::size_t piece : {std::size_t{1}, std::size_t{7}, std::size_t{4096}, b.size()}) {
    INFO(piece);
    auto h = Streamed(b, piece);
    REQUIRE(h);
    CHECK(*h == OpenBundle(b, "edge", "s3cret")->header);
  }
  struct Case {
    const char* what;
    std::string bytes;
    std::string cluster;
    std::string secret;
    const char* says;
  };
  std::string flipped = b;
  flipped[b.size() / 2] = static_cast<char>(flipped[b.size() / 2] ^ 1);
  std::string tag = b;
  tag.back() = static_cast<char>(tag.back() ^ 1);
  for (const auto& c : {
           Case{"another secret", b, "edge", "other", "does not open with this cluster's secret"},
           Case{"another cluster", b, "core", "s3cret", "a backup of cluster 'edge'"},
           Case{"a flipped byte", flipped, "edge", "s3cret", "does not open"},
           Case{"a flipped tag", tag, "edge", "s3cret", "does not open"},
           Case{"cut short", b.substr(0, b.size() - 1), "edge", "s3cret", "cut short"},
           Case{"cut in the header", b.substr(0, 30), "edge", "s3cret", "cut short"},
           Case{"bytes appended", b + "x", "edge", "s3cret", "bytes appended"},
           Case{"no magic", "SPRX" + b.substr(4), "edge", "s3cret", "no SPRB magic"},
           Case{"empty", "", "edge", "s3cret", "no SPRB magic"},
       }) {
    INFO(c.what);
    CHECK_FALSE(OpenBundle(c.bytes, c.cluster, c.secret));
    for (std::size_t piece : {std::size_t{1}, std::size_t{100}, std::size_t{1} << 16}) {
      auto h = Streamed(c.bytes, piece, c.cluster, c.secret);
      REQUIRE_FALSE(h);
      CHECK_THAT(h.error(), Catch::Contains(c.says));
    }
  }
}

TEST_CASE("a streamed bundle with extra files, split inside every entry, authenticates", "[backup]") {
  // A bundle with more than the required files, in pieces that split every entry.
  BundleHeader h = Header();
  auto extra = Contents();
  extra.files["etcd/peer.crt"] = "not needed";
  auto sealed = SealBundle(h, extra, "s3cret", kSalt, kNonce);
  REQUIRE(sealed);
  auto streamed = Streamed(*sealed, 13);
  REQUIRE(streamed);
  CHECK(streamed->snapshot_sha256 == sprout::Sha256Hex(extra.snapshot));
}
