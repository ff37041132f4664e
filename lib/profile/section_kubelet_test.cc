// section_kubelet.cc: where the kubelet binary comes from.
#include <catch2/catch.hpp>

#include "profile/profile.h"
#include "profile/profile_testing.h"

using namespace sprout;
using sprout::testing::Errors;
using sprout::testing::Files;

TEST_CASE("kubelet: a recipe, or a url or file with its sha256, never both and never neither", "[profile]") {
  Files f;
  f.Write("base.tar", "");
  f.Write("kube/host.sh", "#!/bin/sh\n");
  auto good = f.Write("good.yaml",
                      "name: x\nbase: base.tar\npodHost: kubelet\nkubelet:\n  recipe: kube\n"
                      "  config: {maxPods: 50}\n");
  Diagnostics d;
  auto p = LoadProfile(good, d);
  INFO(d.Render());
  REQUIRE(p);
  CHECK(p->kubelet.present);
  CHECK(p->kubelet.recipe.filename() == "kube");
  CHECK(p->kubelet.binary.path == "/usr/bin/kubelet");
  CHECK_THAT(p->kubelet.config_yaml, Catch::Contains("maxPods: 50"));

  auto neither = f.Write("neither.yaml", "name: x\nbase: base.tar\nkubelet:\n  config: {}\n");
  Diagnostics e;
  std::string out = Errors(neither, e);
  CHECK_THAT(out, Catch::Contains(":4:3: error: 'kubelet' needs 'recipe', or 'url' or 'source' with 'sha256'"));

  auto both =
      f.Write("both.yaml", "name: x\nbase: base.tar\nkubelet:\n  recipe: kube\n  url: http://198.18.0.1/kubelet\n");
  Diagnostics g;
  out = Errors(both, g);
  CHECK_THAT(out, Catch::Contains(":4:11: error: 'kubelet' takes 'recipe' or 'url'/'source', not both"));

  auto no_host = f.Write("nohost.yaml", "name: x\nbase: base.tar\nkubelet:\n  recipe: base.tar\n");
  Diagnostics h;
  out = Errors(no_host, h);
  CHECK_THAT(out, Catch::Contains(":4:11: error: kubelet recipe 'base.tar' has no host.sh"));

  auto no_sum = f.Write("nosum.yaml", "name: x\nbase: base.tar\nkubelet:\n  source: base.tar\n");
  Diagnostics k;
  out = Errors(no_sum, k);
  CHECK_THAT(out, Catch::Contains(":4:11: error: the kubelet binary needs its 'sha256'"));
}
