#include "oci/pull.h"

#include <archive.h>
#include <archive_entry.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "oci/cache.h"
#include "oci/import.h"
#include "oci/manifest.h"
#include "util/fs.h"
#include "util/sha256.h"

using namespace sprout;
using namespace sprout::oci;
using nlohmann::json;

namespace {

const std::string kRef = "reg.example/sprout/app:1";

// WriteTar writes a plain tar of regular files, in the order given.
void WriteTar(const fs::path& tar, const std::vector<std::pair<std::string, std::string>>& files) {
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  REQUIRE(archive_write_open_filename(a, tar.c_str()) == ARCHIVE_OK);
  for (const auto& [name, body] : files) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name.c_str());
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, static_cast<la_int64_t>(body.size()));
    REQUIRE(archive_write_header(a, e) == ARCHIVE_OK);
    REQUIRE(archive_write_data(a, body.data(), body.size()) == static_cast<la_ssize_t>(body.size()));
    archive_entry_free(e);
  }
  REQUIRE(archive_write_close(a) == ARCHIVE_OK);
  archive_write_free(a);
}

// DockerManifest is a `docker save` manifest.json for one image tagged kRef.
std::string DockerManifest(const std::string& config, const std::vector<std::string>& layers) {
  return json::array({{{"Config", config}, {"RepoTags", {kRef}}, {"Layers", layers}}}).dump();
}

Result<std::vector<PreloadedImage>> PullDockerArchive(const fs::path& cache, const fs::path& tar) {
  PullOptions o;
  o.cache_dir = cache;
  o.offline = true;  // a local source never needs the network
  return PullImages({{kRef, "docker-archive:" + tar.string(), {}, "linux/amd64"}}, o);
}

}  // namespace

TEST_CASE("archive paths: absolute, '..', empty and NUL names are refused", "[oci]") {
  CHECK(ArchivePathProblem("layer.tar").empty());
  CHECK(ArchivePathProblem("abc123/layer.tar").empty());
  CHECK(ArchivePathProblem("./config.json").empty());
  CHECK(ArchivePathProblem("a..b/..c").empty());  // dots inside a name are fine
  CHECK(ArchivePathProblem("/etc/shadow") == "it is absolute");
  CHECK(ArchivePathProblem("//etc/shadow") == "it is absolute");
  CHECK(ArchivePathProblem("../secret") == "it has a '..' element");
  CHECK(ArchivePathProblem("a/../../secret") == "it has a '..' element");
  CHECK(ArchivePathProblem("a/../b") == "it has a '..' element");  // refused even when it stays inside
  CHECK(ArchivePathProblem("a/..") == "it has a '..' element");
  CHECK(ArchivePathProblem("") == "it is empty");
  CHECK(ArchivePathProblem(std::string("a\0/../x", 7)) == "it contains a NUL byte");
}

TEST_CASE("an archive member reached through a symlink must stay inside the archive", "[oci]") {
  TempDir t(fs::temp_directory_path(), "sprout-oci-member");
  const fs::path dir = t.path() / "unpacked";
  fs::create_directories(dir / "sub");
  REQUIRE(WriteFileAtomic(t.path() / "secret", "host file").ok());
  REQUIRE(WriteFileAtomic(dir / "sub" / "layer.tar", "layer").ok());
  fs::create_directory_symlink(t.path(), dir / "out");
  fs::create_symlink(t.path() / "secret", dir / "secret-link");
  fs::create_symlink("sub/layer.tar", dir / "inside-link");

  const std::string what = "docker-archive /x/image.tar: manifest.json";
  auto via_dir = ArchiveMember(dir, "out/secret", what);
  REQUIRE_FALSE(via_dir.ok());
  CHECK_THAT(via_dir.error(), Catch::StartsWith(what +
                                                " names 'out/secret', which is refused: a symlink leads it "
                                                "out of the archive, to " +
                                                (fs::canonical(t.path()) / "secret").string()));
  auto via_file = ArchiveMember(dir, "secret-link", what);
  REQUIRE_FALSE(via_file.ok());
  CHECK_THAT(via_file.error(), Catch::Contains("'secret-link'") && Catch::Contains("a symlink leads it out"));

  auto dots = ArchiveMember(dir, "sub/../../secret", what);
  REQUIRE_FALSE(dots.ok());
  CHECK_THAT(dots.error(), Catch::Contains("'sub/../../secret', which is refused: it has a '..' element"));

  // Paths and symlinks that stay inside are followed.
  CHECK(ArchiveMember(dir, "sub/layer.tar", what).value() == fs::canonical(dir / "sub" / "layer.tar"));
  CHECK(ArchiveMember(dir, "inside-link", what).value() == fs::canonical(dir / "sub" / "layer.tar"));
}

TEST_CASE("a docker-archive whose manifest.json names files outside it is refused", "[oci]") {
  TempDir t(fs::temp_directory_path(), "sprout-oci-docker");
  const fs::path cache = t.path() / "cache";
  const fs::path tar = t.path() / "image.tar";
  const std::string config = R"({"architecture":"amd64","os":"linux"})";
  // The archive is unpacked into CACHE/oci/archive-XXXXXX, so "../" reaches CACHE/oci.
  fs::create_directories(cache / "oci");
  REQUIRE(WriteFileAtomic(cache / "oci" / "secret.json", config).ok());
  REQUIRE(WriteFileAtomic(t.path() / "host-file", "a file of the build host").ok());

  SECTION("a config path with '..'") {
    WriteTar(tar, {{"manifest.json", DockerManifest("../secret.json", {})}});
    auto r = PullDockerArchive(cache, tar);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error(), Catch::Contains("docker-archive " + tar.string() +
                                          ": manifest.json names '../secret.json', which is refused: it has a '..' "
                                          "element"));
  }
  SECTION("an absolute layer path") {
    const std::string host = (t.path() / "host-file").string();
    WriteTar(tar, {{"manifest.json", DockerManifest("config.json", {host})}, {"config.json", config}});
    auto r = PullDockerArchive(cache, tar);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error(), Catch::Contains("docker-archive " + tar.string() + ": manifest.json names '" + host +
                                          "', which is refused: it is absolute"));
  }
  SECTION("files inside the archive are imported") {
    WriteTar(tar, {{"manifest.json", DockerManifest("config.json", {"abc/layer.tar"})},
                   {"config.json", config},
                   {"abc/layer.tar", "layer bytes"}});
    auto r = PullDockerArchive(cache, tar);
    REQUIRE(r.ok());
    REQUIRE(r->size() == 1);
    CHECK(Cache(cache).Has("sha256:" + Sha256Hex("layer bytes"), 11));
  }
}

TEST_CASE("an archive file that cannot be written is an error naming it and the reason", "[oci]") {
  TempDir t(fs::temp_directory_path(), "sprout-oci-extract");
  const fs::path tar = t.path() / "image.tar";
  // "x/y" makes x a directory; the regular file "x" then cannot be opened.
  WriteTar(tar, {{"x/y", "y"}, {"x", "x"}});
  auto r = PullDockerArchive(t.path() / "cache", tar);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error(), Catch::Contains("cannot unpack " + tar.string() + ": cannot open "));
  CHECK_THAT(r.error(), Catch::Contains("/x for writing: Is a directory"));
}

TEST_CASE("a truncated layer in the cache is imported again from its OCI layout", "[oci]") {
  TempDir t(fs::temp_directory_path(), "sprout-oci-layout");
  const fs::path layout = t.path() / "layout";
  const std::string layer = "the bytes of the only layer";
  const std::string config = R"({"architecture":"amd64","os":"linux"})";
  const std::string layer_digest = "sha256:" + Sha256Hex(layer);
  const std::string config_digest = "sha256:" + Sha256Hex(config);
  const std::string manifest =
      json{{"schemaVersion", 2},
           {"mediaType", kOciManifest},
           {"config", {{"mediaType", kOciConfig}, {"digest", config_digest}, {"size", config.size()}}},
           {"layers", {{{"mediaType", kOciLayerTar}, {"digest", layer_digest}, {"size", layer.size()}}}}}
          .dump();
  const std::string manifest_digest = "sha256:" + Sha256Hex(manifest);
  const std::string index = json{{"schemaVersion", 2},
                                 {"mediaType", kOciIndex},
                                 {"manifests",
                                  {{{"mediaType", kOciManifest},
                                    {"digest", manifest_digest},
                                    {"size", manifest.size()},
                                    {"annotations", {{"org.opencontainers.image.ref.name", kRef}}}}}}}
                                .dump();
  fs::create_directories(layout / "blobs" / "sha256");
  for (const auto& b : {layer, config, manifest}) {
    REQUIRE(WriteFileAtomic(layout / "blobs" / "sha256" / Sha256Hex(b), b).ok());
  }
  REQUIRE(WriteFileAtomic(layout / "index.json", index).ok());

  PullOptions o;
  o.cache_dir = t.path() / "cache";
  o.offline = true;
  const std::vector<ImageSpec> specs = {{kRef, "oci:" + layout.string(), {}, "linux/amd64"}};
  REQUIRE(PullImages(specs, o).ok());
  Cache cache(o.cache_dir);
  REQUIRE(fs::file_size(cache.BlobPath(layer_digest)) == layer.size());

  // A crash or a careless copy left the cached layer short: the next pull must not use it.
  fs::resize_file(cache.BlobPath(layer_digest), 4);
  auto again = PullImages(specs, o);
  REQUIRE(again.ok());
  CHECK(again->at(0).manifest_digest == manifest_digest);
  CHECK(cache.Read(layer_digest).value() == layer);
}

TEST_CASE("an image recipe's key covers its own files and the recipes' shared lib folder, nothing else", "[oci]") {
  TempDir t(fs::temp_directory_path(), "sprout-recipe-key");
  const fs::path images = t.path() / "images";
  auto write = [](const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    REQUIRE(WriteFileAtomic(p, text).ok());
  };
  write(images / "app" / "build.sh", "#!/bin/sh\n. ../lib/common.sh\n");
  write(images / "lib" / "common.sh", "helper() { :; }\n");
  write(images / "other" / "build.sh", "#!/bin/sh\n");
  auto key = RecipeKey(images / "app");
  REQUIRE(key.ok());

  write(images / "other" / "build.sh", "#!/bin/sh\necho changed\n");
  CHECK(RecipeKey(images / "app").value() == *key);  // another recipe is not an input

  write(images / "lib" / "common.sh", "helper() { echo changed; }\n");
  auto shared_changed = RecipeKey(images / "app");
  REQUIRE(shared_changed.ok());
  CHECK(*shared_changed != *key);

  write(images / "app" / "build.sh", "#!/bin/sh\n. ../lib/common.sh\nhelper\n");
  CHECK(RecipeKey(images / "app").value() != *shared_changed);

  // A recipe with no lib folder beside it is keyed by its own files alone.
  write(t.path() / "alone" / "recipe" / "build.sh", "#!/bin/sh\n");
  CHECK(RecipeKey(t.path() / "alone" / "recipe").ok());
  CHECK_FALSE(RecipeKey(t.path() / "missing").ok());
}

TEST_CASE("a worker imports every preloaded image but those of etcd and the control plane", "[oci]") {
  CHECK(ComponentOf("localhost/sprout/etcd:3.4") == "etcd");
  CHECK(ComponentOf("localhost/sprout/kube-apiserver@sha256:" + std::string(64, 'a')) == "kube-apiserver");
  CHECK(ComponentOf("registry.test:5000/sprout/pause:v1.20.2") == "pause");
  CHECK(ComponentOf("registry.test:5000/busybox") == "busybox");
  std::vector<PreloadedImage> all;
  for (const char* ref : {"localhost/sprout/etcd:3.4", "localhost/sprout/kube-apiserver:v1.20.2",
                          "localhost/sprout/kube-controller-manager:v1.20.2", "localhost/sprout/kube-scheduler:v1.20.2",
                          "localhost/sprout/pause:v1.20.2", "localhost/sprout/busybox:1.35",
                          "localhost/sprout/etcd-backup-tool:1", "localhost/apps/kube-apiserver-proxy:2"}) {
    all.push_back({ref, "", "", "linux/amd64", 0});
  }
  std::vector<std::string> kept;
  for (const auto& img : WorkerImages(all)) kept.push_back(img.reference);
  // A component's name must match whole: etcd-backup-tool and kube-apiserver-proxy stay.
  CHECK(kept == std::vector<std::string>{"localhost/sprout/pause:v1.20.2", "localhost/sprout/busybox:1.35",
                                         "localhost/sprout/etcd-backup-tool:1",
                                         "localhost/apps/kube-apiserver-proxy:2"});
  CHECK(WorkerImages({}).empty());
}
