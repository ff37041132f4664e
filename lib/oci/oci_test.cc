#include <catch2/catch.hpp>
#include <cstdint>
#include <string>

#include "oci/auth.h"
#include "oci/cache.h"
#include "oci/manifest.h"
#include "oci/reference.h"
#include "util/fs.h"
#include "util/sha256.h"

using namespace sprout;
using namespace sprout::oci;

namespace {
const std::string kD1 = "sha256:" + std::string(64, 'a');
const std::string kD2 = "sha256:" + std::string(64, 'b');
const std::string kD3 = "sha256:" + std::string(64, 'c');
}  // namespace

TEST_CASE("references parse into registry, repository, tag and digest", "[oci]") {
  auto r = ParseReference("127.0.0.1:5000/sprout/etcd:3.4");
  REQUIRE(r.ok());
  CHECK(r->registry == "127.0.0.1:5000");
  CHECK(r->repository == "sprout/etcd");
  CHECK(r->tag == "3.4");
  CHECK(r->digest.empty());

  auto d = ParseReference("registry.example/a/b/c@" + kD1);
  REQUIRE(d.ok());
  CHECK(d->repository == "a/b/c");
  CHECK(d->tag.empty());
  CHECK(d->digest == kD1);
  CHECK(d->String() == "registry.example/a/b/c@" + kD1);

  auto both = ParseReference("localhost/etcd:3.4@" + kD2);
  REQUIRE(both.ok());
  CHECK(both->registry == "localhost");
  CHECK(both->tag == "3.4");
  CHECK(both->digest == kD2);

  auto bare = ParseReference("registry.example:443/etcd");
  REQUIRE(bare.ok());
  CHECK(bare->tag == "latest");
}

TEST_CASE("bad references are refused with the reason", "[oci]") {
  CHECK_THAT(ParseReference("etcd:3.4").error(), Catch::Contains("names no registry"));
  CHECK_THAT(ParseReference("registry.example/Etcd:1").error(), Catch::Contains("lower-case"));
  CHECK_THAT(ParseReference("registry.example/etcd@sha256:abc").error(), Catch::Contains("64 lower-case hex"));
  CHECK_THAT(ParseReference("registry.example/etcd:-x").error(), Catch::Contains("tag '-x'"));
  CHECK_THAT(ParseReference("registry.example/a//b:1").error(), Catch::Contains("component ''"));
  CHECK_FALSE(ParseReference("").ok());
}

TEST_CASE("Docker schema 2 and OCI manifests parse into config and layers", "[oci]") {
  std::string docker = R"({"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json",
    "config":{"mediaType":"application/vnd.docker.container.image.v1+json","digest":")" +
                       kD1 + R"(","size":7},
    "layers":[{"mediaType":"application/vnd.docker.image.rootfs.diff.tar.gzip","digest":")" +
                       kD2 + R"(","size":100}]})";
  auto m = ParseManifest(docker);
  REQUIRE(m.ok());
  CHECK_FALSE(m->is_index);
  CHECK(m->config.digest == kD1);
  REQUIRE(m->layers.size() == 1);
  CHECK(m->layers[0].size == 100);

  // OCI may leave mediaType out: the Content-Type or the fields decide.
  std::string oci = R"({"schemaVersion":2,"config":{"digest":")" + kD1 + R"(","size":7},"layers":[]})";
  auto o = ParseManifest(oci);
  REQUIRE(o.ok());
  CHECK(o->media_type == kOciManifest);
}

TEST_CASE("indexes and manifest lists select a platform", "[oci]") {
  std::string list = R"({"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.list.v2+json",
   "manifests":[
    {"digest":")" + kD1 +
                     R"(","size":1,"platform":{"os":"linux","architecture":"amd64"}},
    {"digest":")" + kD2 +
                     R"(","size":1,"platform":{"os":"linux","architecture":"arm64","variant":"v8"}},
    {"digest":")" + kD3 +
                     R"(","size":1,"platform":{"os":"unknown","architecture":"unknown"}}]})";
  auto idx = ParseManifest(list);
  REQUIRE(idx.ok());
  CHECK(idx->is_index);
  CHECK(SelectPlatform(*idx, {"linux", "amd64", ""})->digest == kD1);
  CHECK(SelectPlatform(*idx, {"linux", "arm64", ""})->digest == kD2);
  CHECK(SelectPlatform(*idx, {"linux", "arm64", "v8"})->digest == kD2);
  auto none = SelectPlatform(*idx, {"linux", "s390x", ""});
  REQUIRE_FALSE(none.ok());
  CHECK_THAT(none.error(), Catch::Contains("offers linux/amd64, linux/arm64/v8, unknown/unknown"));
  auto oci_index = ParseManifest(R"({"schemaVersion":2,"manifests":[]})");
  REQUIRE(oci_index.ok());
  CHECK(oci_index->media_type == kOciIndex);
}

TEST_CASE("malformed manifests are refused, never trusted", "[oci]") {
  CHECK_THAT(ParseManifest("{").error(), Catch::Contains("not valid JSON"));
  CHECK_THAT(ParseManifest("[]").error(), Catch::Contains("not a JSON object"));
  CHECK_THAT(ParseManifest(R"({"schemaVersion":1})").error(), Catch::Contains("schemaVersion"));
  CHECK_THAT(
      ParseManifest(R"({"schemaVersion":2,"layers":[],"config":{"digest":"sha256:../../etc","size":1}})").error(),
      Catch::Contains("config.digest"));
  CHECK_THAT(ParseManifest(R"({"schemaVersion":2,"layers":[{"digest":")" + kD1 + R"(","size":-1}],
                              "config":{"digest":")" +
                           kD1 + R"(","size":1}})")
                 .error(),
             Catch::Contains("layers[0] has no size"));
  CHECK_THAT(ParseManifest(R"({"schemaVersion":2,"mediaType":"text/plain","layers":[]})").error(),
             Catch::Contains("unsupported manifest media type"));
  CHECK_FALSE(ParsePlatform("linux").ok());
  CHECK(ParsePlatform("linux/arm64/v8")->variant == "v8");
}

TEST_CASE("WWW-Authenticate challenges parse", "[oci]") {
  auto c = ParseChallenge(R"(Bearer realm="https://auth.example/token",service="reg",scope="repository:a/b:pull")");
  REQUIRE(c);
  CHECK(c->scheme == "bearer");
  CHECK(c->params["realm"] == "https://auth.example/token");
  CHECK(c->params["service"] == "reg");
  CHECK(c->params["scope"] == "repository:a/b:pull");
  auto b = ParseChallenge(R"(Basic realm="x")");
  REQUIRE(b);
  CHECK(b->scheme == "basic");
  CHECK_FALSE(ParseChallenge(R"(Bearer realm="unterminated)"));
}

TEST_CASE("docker config.json credentials by host, either spelling", "[oci]") {
  // "alice:s3cret" in base64
  std::string cfg = R"({"auths":{"127.0.0.1:5000":{"auth":"YWxpY2U6czNjcmV0"},
                                 "https://reg.example/v1/":{"username":"bob","password":"pw"}}})";
  auto a = CredentialsFromConfig(cfg, "127.0.0.1:5000", "cfg");
  REQUIRE(a.ok());
  REQUIRE(a->has_value());
  CHECK((*a)->username == "alice");
  CHECK((*a)->password == "s3cret");
  auto b = CredentialsFromConfig(cfg, "reg.example", "cfg");
  REQUIRE(b->has_value());
  CHECK((*b)->username == "bob");
  auto none = CredentialsFromConfig(cfg, "other.example", "cfg");
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());
  CHECK_THAT(CredentialsFromConfig(R"({"auths":{"h":{"auth":"!!!!"}}})", "h", "cfg").error(),
             Catch::Contains("not base64"));
  CHECK(*Base64Decode("YWxpY2U6czNjcmV0") == "alice:s3cret");
}

TEST_CASE("the cache stores a blob only when it hashes to its digest", "[oci]") {
  TempDir dir(fs::temp_directory_path(), "sprout-oci-cache");
  Cache cache(dir.path());
  std::string good = "hello";
  std::string digest = "sha256:" + Sha256Hex(good);
  CHECK(cache.Put(digest, good, "test").ok());
  CHECK(cache.Has(digest, static_cast<std::int64_t>(good.size())));
  CHECK(cache.Read(digest).value() == good);
  auto bad = cache.Put(kD1, "not it", "test image");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error(), Catch::Contains("of test image is corrupt"));
  CHECK_FALSE(cache.Has(kD1, kUnknownSize));
  CHECK(cache.RecordRef("reg.example/a:1", digest).ok());
  CHECK(cache.LookupRef("reg.example/a:1") == digest);
  CHECK_FALSE(cache.LookupRef("reg.example/a:2"));
}

TEST_CASE("a truncated blob in the cache is not trusted, and is dropped to be fetched again", "[oci]") {
  TempDir dir(fs::temp_directory_path(), "sprout-oci-cache");
  Cache cache(dir.path());
  const std::string blob = "the bytes of a layer";
  const std::string digest = "sha256:" + Sha256Hex(blob);
  const auto size = static_cast<std::int64_t>(blob.size());

  // Known size: the cheap check catches the short file.
  REQUIRE(cache.Put(digest, blob, "test").ok());
  fs::resize_file(cache.BlobPath(digest), 5);
  CHECK_FALSE(cache.Has(digest, size));
  CHECK_FALSE(fs::exists(cache.BlobPath(digest)));

  // Unknown size: the content is hashed.
  REQUIRE(cache.Put(digest, blob, "test").ok());
  fs::resize_file(cache.BlobPath(digest), 5);
  CHECK_FALSE(cache.Has(digest, kUnknownSize));
  CHECK_FALSE(fs::exists(cache.BlobPath(digest)));

  // A whole blob counts; asked at another size it does not, but it is not damaged and stays.
  REQUIRE(cache.Put(digest, blob, "test").ok());
  CHECK(cache.Has(digest, size));
  CHECK(cache.Has(digest, kUnknownSize));
  CHECK_FALSE(cache.Has(digest, size + 1));
  CHECK(fs::file_size(cache.BlobPath(digest)) == blob.size());
}

TEST_CASE("Put and Import replace a truncated cached blob instead of keeping it", "[oci]") {
  TempDir dir(fs::temp_directory_path(), "sprout-oci-cache");
  Cache cache(dir.path());
  const std::string blob = "the bytes of a config";
  const std::string digest = "sha256:" + Sha256Hex(blob);

  REQUIRE(cache.Put(digest, blob, "test").ok());
  fs::resize_file(cache.BlobPath(digest), 3);
  REQUIRE(cache.Put(digest, blob, "test").ok());
  CHECK(cache.Read(digest).value() == blob);

  fs::resize_file(cache.BlobPath(digest), 3);
  REQUIRE(WriteFileAtomic(dir.path() / "source", blob).ok());
  REQUIRE(cache.Import(digest, dir.path() / "source", "test").ok());
  CHECK(cache.Read(digest).value() == blob);
}

TEST_CASE("a file that cannot be opened for writing is an error naming it and the reason", "[oci]") {
  TempDir dir(fs::temp_directory_path(), "sprout-oci-open");
  const fs::path missing = dir.path() / "no-such-dir" / "blob.partial";
  auto f = OpenForWriting(missing, "wb");
  REQUIRE_FALSE(f.ok());
  CHECK_THAT(f.error(), Catch::Contains("cannot open " + missing.string()));
  CHECK_THAT(f.error(), Catch::Contains("No such file or directory"));
  auto ok = OpenForWriting(dir.path() / "blob", "wb");
  REQUIRE(ok.ok());
  CHECK(std::fclose(*ok) == 0);
}
