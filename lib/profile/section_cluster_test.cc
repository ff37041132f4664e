// section_cluster.cc: the Shoot, static pods and the pod host.
#include <catch2/catch.hpp>

#include "profile/profile.h"
#include "profile/profile_testing.h"

using namespace sprout;
using sprout::testing::Errors;
using sprout::testing::Files;

TEST_CASE("cluster settings: the pod host, static-pod folders and the Shoot file, each checked", "[profile]") {
  Files f;
  f.Write("base.tar", "");
  f.Write("pods/extra.yaml", "apiVersion: v1\nkind: Pod\n");
  auto good = f.Write("good.yaml",
                      "name: x\nbase: base.tar\npodHost: podman\nstaticPods: [pods]\n"
                      "withoutStaticPods: [kube-scheduler]\n");
  Diagnostics d;
  auto p = LoadProfile(good, d);
  INFO(d.Render());
  REQUIRE(p);
  CHECK(p->pod_host == PodHost::kPodman);
  REQUIRE(p->static_pods.size() == 1);
  CHECK(p->static_pods[0].filename() == "pods");
  CHECK(p->without_static_pods == std::vector<std::string>{"kube-scheduler"});

  auto bad = f.Write("bad.yaml",
                     "name: x\nbase: base.tar\npodHost: docker\nstaticPods: [nowhere]\nshoot: missing-shoot.yaml\n");
  Diagnostics e;
  std::string out = Errors(bad, e);
  CHECK(e.error_count() == 3);
  CHECK_THAT(out, Catch::Contains(":3:10: error: 'podHost' must be 'podman' or 'kubelet'; got 'docker'"));
  CHECK_THAT(out, Catch::Contains(":4:14: error: staticPods folder 'nowhere' is not a directory"));
  CHECK_THAT(out, Catch::Contains(":5:8: error: Shoot manifest 'missing-shoot.yaml' does not exist"));
}
