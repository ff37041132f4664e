#include "image/base.h"

#include <catch2/catch.hpp>
#include <fstream>

#include "util/fs.h"

using namespace sprout;

TEST_CASE("BasePhase follows mmdebstrap's I: lines and the package dpkg works on", "[base]") {
  CHECK(BasePhase("").empty());
  CHECK(BasePhase("some noise\n").empty());
  std::string log =
      "I: automatically chosen mode: root\n"
      "I: running apt-get update...\n"
      "Get:1 http://mirror bookworm InRelease\n";
  CHECK(BasePhase(log) == "running apt-get update");
  log += "I: installing essential packages...\nUnpacking libc6:amd64 (2.36-9) ...\n";
  CHECK(BasePhase(log) == "installing essential packages: libc6");
  log += "Setting up base-files (12.4) ...\n";
  CHECK(BasePhase(log) == "installing essential packages: base-files");
  log += "I: running --essential-hook in shell: sh -c 'mkdir -p \"$1/etc\" && cp a b' exec /tmp/x\n";
  CHECK(BasePhase(log) == "running --essential-hook");
  log += "I: creating tarball...\nI: done";  // the last line may lack its newline
  CHECK(BasePhase(log) == "done");
}

TEST_CASE("LogTail keeps the last lines", "[base]") {
  CHECK(LogTail("a\nb\nc\nd\n", 2) == "c\nd");
  CHECK(LogTail("a\nb", 5) == "a\nb");
  CHECK(LogTail("only", 1) == "only");
  CHECK(LogTail("", 3).empty());
}

TEST_CASE("FindCachedBase reads a shared cache when the own one lacks the base", "[base]") {
  TempDir tmp(fs::temp_directory_path(), "sprout-base-test");
  const fs::path own = tmp.path() / "own", shared = tmp.path() / "shared";
  auto put = [](const fs::path& p) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << "tar";
  };
  CHECK_FALSE(FindCachedBase(own, {shared}, "k1").has_value());
  put(CachedBasePath(shared, "k1"));
  CHECK(FindCachedBase(own, {shared}, "k1") == CachedBasePath(shared, "k1"));
  CHECK_FALSE(FindCachedBase(own, {}, "k1").has_value());  // not shared: not found
  put(CachedBasePath(own, "k1"));
  CHECK(FindCachedBase(own, {shared}, "k1") == CachedBasePath(own, "k1"));  // the own cache first
  CHECK_FALSE(FindCachedBase(own, {shared}, "k2").has_value());
}

TEST_CASE("RecipeKey differs per architecture, so amd64 and arm64 never share a base", "[base][arch]") {
  TempDir dir(fs::temp_directory_path(), "recipe-key");
  fs::create_directories(dir.path() / "recipe");
  std::ofstream(dir.path() / "recipe" / "build.sh") << "#!/bin/sh\n";
  std::ofstream(dir.path() / "sources") << "Types: deb\n";
  auto amd = RecipeKey(dir.path() / "recipe", dir.path() / "sources", Arch::kAmd64);
  auto arm = RecipeKey(dir.path() / "recipe", dir.path() / "sources", Arch::kArm64);
  REQUIRE(amd);
  REQUIRE(arm);
  CHECK(*amd != *arm);
  CHECK(*amd == RecipeKey(dir.path() / "recipe", dir.path() / "sources", Arch::kAmd64).value());
}
