// section_images.cc: the images a profile preloads.
#include <catch2/catch.hpp>

#include "profile/profile.h"
#include "profile/profile_testing.h"

using namespace sprout;
using sprout::testing::Errors;
using sprout::testing::Files;

TEST_CASE("images: ref, source and platform are read; each bad one is named at its place", "[profile]") {
  Files f;
  f.Write("base.tar", "");
  f.Write("etcd/build.sh", "#!/bin/sh\n");
  auto good = f.Write("good.yaml",
                      "name: x\nbase: base.tar\nimages:\n"
                      "  - {ref: localhost/sprout/etcd:3.4, source: 'recipe:etcd'}\n"
                      "  - {ref: 'registry.example:5000/app@sha256:" +
                          std::string(64, 'a') + "', platform: linux/arm64}\n");
  Diagnostics d;
  auto p = LoadProfile(good, d);
  INFO(d.Render());
  REQUIRE(p);
  REQUIRE(p->images.size() == 2);
  CHECK(p->images[0].ref == "localhost/sprout/etcd:3.4");
  CHECK(p->images[0].source.starts_with("recipe:"));
  CHECK(p->images[1].platform == "linux/arm64");

  auto bad = f.Write("bad.yaml",
                     "name: x\nbase: base.tar\nimages:\n"
                     "  - {ref: 'Bad Ref'}\n"
                     "  - {ref: localhost/a:1, source: 'git:somewhere'}\n"
                     "  - {ref: localhost/b:1, source: 'oci:missing'}\n"
                     "  - {source: 'oci:missing'}\n"
                     "  - {ref: localhost/c:1, platform: 'linux'}\n");
  Diagnostics e;
  std::string out = Errors(bad, e);
  INFO(out);
  CHECK_THAT(out, Catch::Contains(":4:11: error: image reference 'Bad Ref'"));
  CHECK_THAT(out, Catch::Contains("hint: write it as registry[:port]/repository:tag or ...@sha256:DIGEST"));
  CHECK_THAT(out, Catch::Contains(":5:34: error: image source 'git:somewhere'"));
  CHECK_THAT(out, Catch::Contains(":6:34: error: image source "));
  CHECK_THAT(out, Catch::Contains("missing does not exist"));
  CHECK_THAT(out, Catch::Contains(":7:5: error: an 'images' entry needs a 'ref'"));
  CHECK_THAT(out, Catch::Contains(":8:36: error: platform 'linux' must be os/"));
}
