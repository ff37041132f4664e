#include "kube/controlplane.h"

#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "tests/golden.h"
#include "util/fs.h"

using namespace sprout;
using namespace sprout::kube;

namespace {

StaticPodInput Pods() {
  StaticPodInput in;
  in.node_name = "node-1";
  in.node_ip = "198.18.0.11";
  in.cluster_name = "sprout";
  in.kubernetes_version = "v1.20.2";
  in.pods_cidr = "10.244.0.0/16";
  in.services_cidr = "10.96.0.0/12";
  in.etcd_members = {{"node-1", "198.18.0.11"}};
  in.images = {
      {"kube-apiserver", "localhost/sprout/kube-apiserver:v1.20.2@sha256:" + std::string(64, 'a')},
      {"kube-controller-manager", "localhost/sprout/kube-controller-manager:v1.20.2@sha256:" + std::string(64, 'b')},
      {"kube-scheduler", "localhost/sprout/kube-scheduler:v1.20.2@sha256:" + std::string(64, 'c')}};
  return in;
}

unsigned Mode(const std::filesystem::path& p) {
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return st.st_mode & 0777U;
}

}  // namespace

TEST_CASE("kube: the control-plane step writes certificates, kubeconfigs and three static pods, once", "[kube]") {
  TempDir dir(std::filesystem::temp_directory_path(), "controlplane-test");
  ControlPlanePaths paths;
  paths.kubernetes_dir = dir.path();
  paths.pki_dir = dir.path() / "pki";
  paths.manifests = dir.path() / "manifests";
  paths.templates = std::filesystem::path(SPROUT_SOURCE_DIR) / "staticpods";
  paths.audit_log_dir = dir.path() / "log" / "audit";
  auto cas = pki::MakeClusterCAs();
  REQUIRE(cas);
  REQUIRE(pki::WritePkiFiles(paths.pki_dir, pki::CAFiles(*cas)));
  StaticPodInput pods = Pods();
  pods.pki_dir = paths.pki_dir.string();
  pods.kubernetes_dir = paths.kubernetes_dir.string();
  pods.audit_log_dir = paths.audit_log_dir.string();
  ControlPlaneNode node{"node-1", {"198.18.0.11"}, "10.96.0.0/12", "sprout", "cluster.local"};

  auto first = WriteControlPlane(paths, node, pods);
  REQUIRE(first);
  CHECK(first->issued.size() == ControlPlaneFilePaths().size());
  CHECK(first->manifests == std::vector<std::string>{"kube-apiserver", "kube-controller-manager", "kube-scheduler"});
  CHECK(Mode(dir.path() / "admin.conf") == 0600);
  CHECK(Mode(dir.path() / "pki" / "apiserver.key") == 0600);
  CHECK(Mode(dir.path() / "pki" / "apiserver.crt") == 0644);
  auto apiserver = ReadFile(paths.manifests / "kube-apiserver.yaml");
  REQUIRE(apiserver);
  CHECK(apiserver->find("--advertise-address=198.18.0.11") != std::string::npos);
  CHECK(apiserver->find("--tls-cert-file=" + (paths.pki_dir / "apiserver.crt").string()) != std::string::npos);
  CHECK(apiserver->find(std::string(64, 'a')) != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(paths.manifests / "etcd.yaml"));
  // Secrets at rest: the apiserver reads the cluster's key from a file only root reads.
  CHECK(apiserver->find("--encryption-provider-config=" + (paths.pki_dir / "encryption-config.yaml").string()) !=
        std::string::npos);
  CHECK(Mode(paths.pki_dir / "encryption-config.yaml") == 0600);
  CHECK(ReadFile(paths.pki_dir / "encryption-config.yaml").value().find("secret: " + cas->encryption_key) !=
        std::string::npos);
  CHECK(apiserver->find("--audit-policy-file=" + (dir.path() / "audit-policy.yaml").string()) != std::string::npos);
  CHECK(apiserver->find("--audit-log-path=" + (paths.audit_log_dir / "audit.log").string()) != std::string::npos);
  CHECK(std::filesystem::exists(dir.path() / "audit-policy.yaml"));
  CHECK(Mode(paths.audit_log_dir) == 0700);
  // Every file the step wrote, with its mode (`sprout cis` judges the modes the step
  // writes for the CIS file-permission checks, docs/cis.md). Files only: WriteFileAtomic sets a file's mode
  // whatever the umask, while a folder's depends on it.
  std::string modes;
  std::vector<std::string> lines;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir.path())) {
    if (!e.is_regular_file()) continue;
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", Mode(e.path()));
    lines.push_back(std::string(mode) + " " + std::filesystem::relative(e.path(), dir.path()).string());
  }
  std::sort(lines.begin(), lines.end(),
            [](const std::string& a, const std::string& b) { return a.substr(5) < b.substr(5); });
  for (const auto& l : lines) modes += l + "\n";
  sprout::testing::CheckGolden("files/control-plane.modes", modes);

  auto second = WriteControlPlane(paths, node, pods);
  REQUIRE(second);
  CHECK(second->issued.empty());
  CHECK(second->manifests.empty());

  pods.images.erase("kube-scheduler");
  auto missing = WriteControlPlane(paths, node, pods);
  REQUIRE_FALSE(missing);
  CHECK(missing.error().find("kube-scheduler") != std::string::npos);
  CHECK(missing.error().find("images:") != std::string::npos);
}

TEST_CASE("kube: the control-plane step refuses to run without the cluster CAs", "[kube]") {
  TempDir dir(std::filesystem::temp_directory_path(), "controlplane-test");
  ControlPlanePaths paths;
  paths.kubernetes_dir = dir.path();
  paths.pki_dir = dir.path() / "pki";
  auto r = WriteControlPlane(paths, {"n", {"198.18.0.11"}, "10.96.0.0/12"}, Pods());
  REQUIRE_FALSE(r);
  CHECK(r.error().find("cluster CAs") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir.path() / "admin.conf"));
}

TEST_CASE("control plane: only the founder's apiserver starts at once on a new cluster; a reboot never waits",
          "[kube]") {
  using sprout::kube::ApiserverStart;
  using sprout::kube::DecideApiserverStart;
  CHECK(DecideApiserverStart(true, false) == ApiserverStart::kNow);
  CHECK(DecideApiserverStart(false, false) == ApiserverStart::kAfterOneIsReady);
  CHECK(DecideApiserverStart(false, true) == ApiserverStart::kNow);  // rendered before: this is a reboot
  CHECK(DecideApiserverStart(true, true) == ApiserverStart::kNow);
}
