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
