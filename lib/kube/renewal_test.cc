#include "kube/renewal.h"

#include <catch2/catch.hpp>

using namespace sprout::kube;

TEST_CASE("renewal: only the components that read a kubeconfig once start again", "[kube]") {
  CHECK(RestartsFor({}).empty());
  CHECK(RestartsFor({"pki/apiserver.crt", "pki/apiserver.key", "pki/front-proxy-client.crt", "admin.conf"}).empty());
  CHECK(RestartsFor({"scheduler.conf", "kubelet.conf", "controller-manager.conf", "scheduler.conf"}) ==
        std::vector<std::string>{"kube-controller-manager", "kube-scheduler", "kubelet"});
}

TEST_CASE("renewal: the next pass comes at the earliest renewal, within 5 s to an hour", "[kube]") {
  CHECK(NextCheckIn({}, 1000) == 3600);
  CHECK(NextCheckIn({1100, 1050, 99999}, 1000) == 50);
  CHECK(NextCheckIn({900}, 1000) == 5);  // overdue: soon, never a busy loop
  CHECK(NextCheckIn({1000 + 86400}, 1000) == 3600);
}
