#include "staticpod/etcd_pod.h"

#include <catch2/catch.hpp>

#include "staticpod/podhost.h"
#include "util/fs.h"

namespace sprout {
namespace {

formation::EtcdArgs JoinerArgs() {
  formation::EtcdArgs a;
  a.name = "node-3";
  a.data_dir = "/var/lib/sprout/etcd";
  a.peer_url = "https://198.18.0.13:2380";
  a.initial_cluster = "node-1=https://198.18.0.11:2380,node-2=https://198.18.0.12:2380,node-3=https://198.18.0.13:2380";
  a.initial_cluster_state = "existing";
  a.trusted_ca_file = "/etc/kubernetes/pki/etcd/ca.crt";
  return a;
}

TEST_CASE("The daemon's etcd arguments become the etcd static pod's values") {
  auto in = EtcdPodInput(JoinerArgs(), {{"etcd", "localhost/sprout/etcd@sha256:" + std::string(64, '1')}}, "plant");
  REQUIRE(in.ok());
  CHECK(in->node_name == "node-3");
  CHECK(in->node_ip == "198.18.0.13");
  CHECK(in->pki_dir == "/etc/kubernetes/pki");
  CHECK(in->etcd_data_dir == "/var/lib/sprout/etcd");
  CHECK(in->etcd_initial_cluster_state == "existing");
  CHECK(in->etcd_cluster_token == "plant");  // a joiner has no token; etcd ignores it then
  REQUIRE(in->etcd_members.size() == 3);
  CHECK(EtcdInitialCluster(in->etcd_members) == JoinerArgs().initial_cluster);

  auto bad = JoinerArgs();
  bad.trusted_ca_file = "/somewhere/ca.pem";
  CHECK_FALSE(EtcdPodInput(bad, {}, "plant").ok());
}

TEST_CASE("The etcd static pod rendered from the daemon's arguments is valid and listens where the daemon expects") {
  TempDir dir("/tmp", "etcd-pod-test");
  auto in = EtcdPodInput(JoinerArgs(), {{"etcd", "localhost/sprout/etcd@sha256:" + std::string(64, '1')}}, "plant");
  REQUIRE(in.ok());
  auto out = WriteNodeManifests(std::string(SPROUT_SOURCE_DIR) + "/staticpods", dir.path(), *in, true, {"etcd"});
  REQUIRE(out.ok());
  REQUIRE(out->written.size() == 1);
  CHECK(out->changed == std::vector<std::string>{"etcd"});
  auto text = ReadFile(out->written[0].manifest);
  REQUIRE(text.ok());
  CHECK(text->find("--listen-client-urls=https://127.0.0.1:2379,https://198.18.0.13:2379") != std::string::npos);
  CHECK(text->find("--initial-cluster-state=existing") != std::string::npos);
  CHECK(text->find("mountPath: /var/lib/sprout/etcd") != std::string::npos);
  // The same arguments again change nothing, so a running pod is adopted, not restarted.
  auto again = WriteNodeManifests(std::string(SPROUT_SOURCE_DIR) + "/staticpods", dir.path(), *in, true, {"etcd"});
  REQUIRE(again.ok());
  CHECK(again->changed.empty());
}

}  // namespace
}  // namespace sprout
