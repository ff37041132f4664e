// section_disk.cc: formats and the partition sizes.
#include <catch2/catch.hpp>

#include "profile/profile.h"
#include "profile/profile_testing.h"

using namespace sprout;
using sprout::testing::Errors;
using sprout::testing::Files;

TEST_CASE("disk sizes take units, 'auto' for the root, and are refused below their minimum", "[profile]") {
  Files f;
  f.Write("base.tar", "");
  auto good = f.Write("good.yaml",
                      "name: x\nbase: base.tar\nformats: [raw, qcow2]\n"
                      "disk: {espSize: 64MiB, stateSize: 1GiB, rootSize: auto}\n");
  Diagnostics d;
  auto p = LoadProfile(good, d);
  INFO(d.Render());
  REQUIRE(p);
  CHECK(p->esp_size == 64ull << 20);
  CHECK(p->state_size == 1ull << 30);
  CHECK(p->root_size == 0);
  CHECK(p->formats == std::vector<Format>{Format::kRaw, Format::kQcow2});

  auto bad = f.Write("bad.yaml", "name: x\nbase: base.tar\ndisk:\n  espSize: 1MiB\n  stateSize: lots\n  swap: 1GiB\n");
  Diagnostics e;
  std::string out = Errors(bad, e);
  CHECK(e.error_count() == 3);
  CHECK_THAT(out, Catch::Contains(":4:12: error: 'disk.espSize' is 1.0 MiB, below the minimum of 32.0 MiB"));
  CHECK_THAT(out, Catch::Contains(":5:14: error: 'disk.stateSize' must be a size; got 'lots'"));
  CHECK_THAT(out, Catch::Contains(":6:3: error: unknown key 'swap' in 'disk'"));
}

TEST_CASE("formats: an unknown one gets the nearest known name, an empty list is refused", "[profile]") {
  Files f;
  f.Write("base.tar", "");
  auto typo = f.Write("typo.yaml", "name: x\nbase: base.tar\nformats: [raw, isso]\n");
  Diagnostics d;
  std::string out = Errors(typo, d);
  CHECK_THAT(out, Catch::Contains(":3:16: error: unknown format 'isso'"));
  CHECK_THAT(out, Catch::Contains("hint: did you mean 'iso'?"));
  auto empty = f.Write("empty.yaml", "name: x\nbase: base.tar\nformats: []\n");
  Diagnostics e;
  out = Errors(empty, e);
  CHECK_THAT(out, Catch::Contains("error: 'formats' is empty, so the build would make nothing"));
}

TEST_CASE("disk.stateEncryption and disk.withoutTpm: defaults, values, typos, and a later profile's say", "[profile]") {
  Files f;
  f.Write("base.tar", "");
  auto plain = f.Write("plain.yaml", "name: x\nbase: base.tar\n");
  Diagnostics d;
  auto p = LoadProfile(plain, d);
  REQUIRE(p);
  CHECK(p->state_encryption == StateEncryption::kNone);
  CHECK(ProfileToJson(*p).find("stateEncryption") == std::string::npos);  // the record stays as it was

  auto tpm = f.Write("tpm.yaml", "name: x\nbase: base.tar\ndisk: {stateEncryption: tpm2}\n");
  p = LoadProfile(tpm, d);
  INFO(d.Render());
  REQUIRE(p);
  CHECK(p->state_encryption == StateEncryption::kTpm2);
  CHECK(p->without_tpm == WithoutTpm::kRefuse);  // the default
  CHECK_THAT(ProfileToJson(*p), Catch::Contains("\"stateEncryption\": \"tpm2\",\n    \"withoutTpm\": \"refuse\""));

  // A child overrides its parent's withoutTpm, and inherits its stateEncryption.
  auto child = f.Write("child.yaml", "extends: tpm.yaml\ndisk:\n  withoutTpm: plain\n");
  p = LoadProfile(child, d);
  REQUIRE(p);
  CHECK(p->state_encryption == StateEncryption::kTpm2);
  CHECK(p->without_tpm == WithoutTpm::kPlain);
  // A grandchild's `none` turns encryption off, its parent's withoutTpm with it.
  auto off = f.Write("off.yaml", "extends: child.yaml\ndisk: {stateEncryption: none}\n");
  p = LoadProfile(off, d);
  REQUIRE(p);
  CHECK(p->state_encryption == StateEncryption::kNone);
  CHECK(p->without_tpm == WithoutTpm::kRefuse);
  CHECK(d.error_count() == 0);

  auto typos = f.Write("typos.yaml", "name: x\nbase: base.tar\ndisk:\n  stateEncryption: tpm\n  withoutTpm: plian\n");
  Diagnostics e;
  std::string out = Errors(typos, e);
  CHECK(e.error_count() == 2);
  CHECK_THAT(out, Catch::Contains(":4:20: error: 'disk.stateEncryption' must be 'none' or 'tpm2'; got 'tpm'"));
  CHECK_THAT(out, Catch::Contains("hint: did you mean 'tpm2'?"));
  CHECK_THAT(out, Catch::Contains(":5:15: error: 'disk.withoutTpm' must be 'refuse' or 'plain'; got 'plian'"));
  CHECK_THAT(out, Catch::Contains("hint: did you mean 'plain'?"));

  auto unknown = f.Write("unknown.yaml", "name: x\nbase: base.tar\ndisk: {stateEncryption: luks}\n");
  Diagnostics u;
  out = Errors(unknown, u);
  CHECK_THAT(out, Catch::Contains("error: 'disk.stateEncryption' must be 'none' or 'tpm2'; got 'luks'"));
  CHECK_THAT(out, Catch::Contains("hint: tpm2 encrypts the state partition at first boot"));
}

TEST_CASE("disk.withoutTpm without stateEncryption: tpm2 is refused where it is written", "[profile]") {
  Files f;
  f.Write("base.tar", "");
  auto alone = f.Write("alone.yaml", "name: x\nbase: base.tar\ndisk:\n  withoutTpm: plain\n");
  Diagnostics d;
  std::string out = Errors(alone, d);
  CHECK(d.error_count() == 1);
  CHECK_THAT(out, Catch::Contains(":4:15: error: 'disk.withoutTpm' only applies with 'disk.stateEncryption: tpm2', "
                                  "and the state is not encrypted"));
  CHECK_THAT(out, Catch::Contains("hint: add 'stateEncryption: tpm2' to encrypt the state partition"));

  // Also when a child says withoutTpm after its parent said none.
  f.Write("none.yaml", "name: x\nbase: base.tar\ndisk: {stateEncryption: none}\n");
  auto child = f.Write("child.yaml", "extends: none.yaml\ndisk: {withoutTpm: refuse}\n");
  Diagnostics e;
  out = Errors(child, e);
  CHECK_THAT(out, Catch::Contains("child.yaml:2:"));
  CHECK_THAT(out, Catch::Contains("error: 'disk.withoutTpm' only applies with 'disk.stateEncryption: tpm2'"));
}
