// section_base.cc: name, base, arch and the other settings of the profile itself.
#include <catch2/catch.hpp>

#include "profile/profile.h"
#include "profile/profile_testing.h"

using namespace sprout;
using sprout::testing::Errors;
using sprout::testing::Files;

TEST_CASE("A profile without name or base says what to add", "[profile]") {
  Files f;
  auto file = f.Write("empty.yaml", "description: nothing else\n");
  Diagnostics d;
  std::string out = Errors(file, d);
  CHECK(d.error_count() == 2);
  CHECK_THAT(out, Catch::Contains("error: the profile has no 'name'"));
  CHECK_THAT(out, Catch::Contains("hint: add 'base: ../images/base'"));
}

TEST_CASE("arch is amd64 unless the profile or one it extends says arm64", "[profile][arch]") {
  Files f;
  f.Write("base.tar", "");
  auto plain = f.Write("plain.yaml", "name: x\nbase: base.tar\n");
  auto arm = f.Write("arm.yaml", "name: x\nbase: base.tar\narch: arm64\n");
  auto child = f.Write("child.yaml", "extends: arm.yaml\nname: y\n");
  Diagnostics d;
  auto p = LoadProfile(plain, d);
  REQUIRE(p);
  CHECK(p->arch == Arch::kAmd64);
  p = LoadProfile(arm, d);
  REQUIRE(p);
  CHECK(p->arch == Arch::kArm64);
  CHECK(p->arch_where.line == 3);
  p = LoadProfile(child, d);
  REQUIRE(p);
  CHECK(p->arch == Arch::kArm64);  // inherited
  CHECK(ProfileToJson(*p).find("\"arch\": \"arm64\"") != std::string::npos);
}

TEST_CASE("a wrong arch is an error at its place, with the Debian name as hint", "[profile][arch]") {
  Files f;
  f.Write("base.tar", "");
  auto file = f.Write("bad.yaml", "name: x\nbase: base.tar\narch: aarch64\n");
  Diagnostics d;
  std::string out = Errors(file, d);
  CHECK(d.error_count() == 1);
  CHECK_THAT(out, Catch::Contains(":3:7: error: 'arch' must be 'amd64' or 'arm64'; got 'aarch64'"));
  CHECK_THAT(out, Catch::Contains("hint: did you mean 'arm64'? sprout uses Debian's architecture names"));
  auto other = f.Write("other.yaml", "name: x\nbase: base.tar\narch: riscv64\n");
  Diagnostics d2;
  out = Errors(other, d2);
  CHECK_THAT(out, Catch::Contains("hint: architectures are: amd64, arm64"));
}

TEST_CASE("ParseArchName and ArchName are inverse; kernel spellings get a hint", "[profile][arch]") {
  CHECK(ParseArchName("amd64") == Arch::kAmd64);
  CHECK(ParseArchName("arm64") == Arch::kArm64);
  CHECK_FALSE(ParseArchName("x86_64").has_value());
  CHECK(std::string(ArchName(Arch::kArm64)) == "arm64");
  CHECK(ArchHint("X86_64").find("'amd64'") != std::string::npos);
}

TEST_CASE("update.serial and update.profile are inherited, recorded only when set, and checked", "[profile][update]") {
  Files f;
  f.Write("base.tar", "");
  auto plain = f.Write("plain.yaml", "name: a\nbase: base.tar\n");
  auto b = f.Write("b.yaml", "extends: plain.yaml\nname: b\nupdate:\n  serial: 1700000001\n  profile: a\n");
  auto c = f.Write("c.yaml", "extends: b.yaml\nname: c\n");
  Diagnostics d;
  auto p = LoadProfile(plain, d);
  REQUIRE(p);
  CHECK_FALSE(p->update_serial);
  CHECK(p->update_profile.empty());
  // A profile that sets neither records neither, so its inputs and seed stay as they were.
  CHECK(ProfileToJson(*p).find("\"update\"") == std::string::npos);
  p = LoadProfile(c, d);
  REQUIRE(p);
  CHECK(p->update_serial == 1700000001);
  CHECK(p->update_profile == "a");
  CHECK_THAT(ProfileToJson(*p), Catch::Contains("\"update\": {\n    \"serial\": 1700000001,\n    \"profile\": \"a\""));
  auto bad =
      f.Write("bad.yaml", "name: x\nbase: base.tar\nupdate:\n  serial: -3\n  profile: Not_A_Name\n  channel: x\n");
  Diagnostics d2;
  std::string out = Errors(bad, d2);
  CHECK(d2.error_count() == 3);
  CHECK_THAT(out, Catch::Contains(":4:11: error: 'update.serial' must be a non-negative whole number; got '-3'"));
  CHECK_THAT(out, Catch::Contains("error: 'update.profile' must be a profile name"));
  CHECK_THAT(out, Catch::Contains("channel"));
}
