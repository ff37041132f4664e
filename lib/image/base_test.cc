#include "image/base.h"

#include <catch2/catch.hpp>

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
