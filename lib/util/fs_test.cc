#include "util/fs.h"

#include <catch2/catch.hpp>
#include <fstream>

using namespace sprout;

namespace {

void Write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

}  // namespace

TEST_CASE("ContentDigest names a tree by what it holds, not where it sits", "[fs]") {
  TempDir t(fs::temp_directory_path(), "fs-test");
  for (const char* where : {"one/overlay", "two/deeper/overlay"}) {
    Write(t.path() / where / "etc/a.conf", "a=1\n");
    Write(t.path() / where / "usr/bin/tool", "#!/bin/sh\n");
    fs::permissions(t.path() / where / "usr/bin/tool", fs::perms(0755));
    fs::create_symlink("a.conf", t.path() / where / "etc/b.conf");
  }
  const fs::path one = t.path() / "one/overlay";
  const fs::path two = t.path() / "two/deeper/overlay";
  auto a = ContentDigest(one);
  REQUIRE(a);
  CHECK(a->starts_with("sha256:"));
  CHECK(ContentDigest(two).value() == *a);
  CHECK(ContentDigest(one / "etc/a.conf").value() == ContentDigest(two / "etc/a.conf").value());

  SECTION("a changed byte changes it") {
    Write(two / "etc/a.conf", "a=2\n");
    CHECK(ContentDigest(two).value() != *a);
  }
  SECTION("the owner's exec bit changes it, the umask's bits do not") {
    fs::permissions(two / "etc/a.conf", fs::perms(0600));
    fs::permissions(two / "etc", fs::perms(0700));
    CHECK(ContentDigest(two).value() == *a);
    fs::permissions(two / "usr/bin/tool", fs::perms(0644));
    CHECK(ContentDigest(two).value() != *a);
  }
  SECTION("a renamed file changes it") {
    fs::rename(two / "etc/a.conf", two / "etc/c.conf");
    CHECK(ContentDigest(two).value() != *a);
  }
  SECTION("a missing path is an error naming it") {
    auto missing = ContentDigest(t.path() / "nope");
    REQUIRE_FALSE(missing);
    CHECK(missing.error().find("nope") != std::string::npos);
  }
}

TEST_CASE("ChooseCacheDir: one cache for root and the quickstart's user", "[fs]") {
  CacheFacts f;
  f.system = "/var/cache/sprout";
  f.user = "/home/ana/.cache/sprout";
  SECTION("root uses the system cache") {
    f.root = true;
    CHECK(ChooseCacheDir(f) == "/var/cache/sprout");
  }
  SECTION("a user who may write the system cache shares it") {
    f.system_writable = true;
    CHECK(ChooseCacheDir(f) == "/var/cache/sprout");
  }
  SECTION("a user who may not write it keeps a cache of their own") {
    CHECK(ChooseCacheDir(f) == "/home/ana/.cache/sprout");
  }
  SECTION("SPROUT_CACHE_DIR wins for everyone") {
    f.env = "/srv/sprout-cache";
    f.root = true;
    CHECK(ChooseCacheDir(f) == "/srv/sprout-cache");
    f.root = false;
    CHECK(ChooseCacheDir(f) == "/srv/sprout-cache");
  }
}
