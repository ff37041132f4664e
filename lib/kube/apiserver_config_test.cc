#include "kube/apiserver_config.h"

#include <yaml-cpp/yaml.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <ctime>
#include <filesystem>

#include "kube/certs.h"
#include "tests/golden.h"
#include "util/fs.h"

using namespace sprout;
using namespace sprout::kube;

TEST_CASE("kube: the encryption configuration encrypts Secrets with aescbc under the cluster's key", "[kube]") {
  const std::string key = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";  // 32 bytes
  auto y = YAML::Load(EncryptionConfigYaml(key));
  CHECK(y["apiVersion"].Scalar() == "apiserver.config.k8s.io/v1");
  CHECK(y["kind"].Scalar() == "EncryptionConfiguration");
  REQUIRE(y["resources"].size() == 1);
  const auto r = y["resources"][0];
  CHECK(r["resources"].size() == 1);
  CHECK(r["resources"][0].Scalar() == "secrets");
  // The first provider writes: aescbc with the one key. identity after it only reads.
  REQUIRE(r["providers"].size() == 2);
  const auto keys = r["providers"][0]["aescbc"]["keys"];
  REQUIRE(keys.size() == 1);
  CHECK(keys[0]["name"].Scalar() == kEncryptionKeyName);
  CHECK(keys[0]["secret"].Scalar() == key);
  CHECK(r["providers"][1]["identity"].IsMap());

  // With no key (a cluster founded before sprout made one), identity alone.
  auto plain = YAML::Load(EncryptionConfigYaml(""));
  REQUIRE(plain["resources"][0]["providers"].size() == 1);
  CHECK(plain["resources"][0]["providers"][0]["identity"]);
}

TEST_CASE("kube: the audit policy never logs a body, and never a Secret's", "[kube]") {
  auto y = YAML::Load(AuditPolicyYaml());
  CHECK(y["apiVersion"].Scalar() == "audit.k8s.io/v1");
  CHECK(y["kind"].Scalar() == "Policy");
  const auto rules = y["rules"];
  REQUIRE(rules.size() > 0);
  bool secrets_rule = false;
  for (const auto& rule : rules) {
    const std::string level = rule["level"].Scalar();
    INFO(level);
    // Request and RequestResponse would write bodies; nothing here does.
    CHECK((level == "None" || level == "Metadata"));
    if (!rule["resources"]) continue;
    for (const auto& group : rule["resources"]) {
      for (const auto& res : group["resources"]) {
        if (res.Scalar() == "secrets" && group["group"].Scalar().empty()) secrets_rule = level == "Metadata";
      }
    }
  }
  CHECK(secrets_rule);
  // The last rule catches everything else, at Metadata.
  CHECK(rules[rules.size() - 1]["level"].Scalar() == "Metadata");
  CHECK_FALSE(rules[rules.size() - 1]["resources"]);
}

TEST_CASE("kube: the control-plane files include both configurations, rewritten only when they change", "[kube]") {
  auto cas = pki::MakeClusterCAs();
  REQUIRE(cas);
  ControlPlaneNode node{"node-1", {"198.18.0.11"}, "10.96.0.0/12", "sprout", "cluster.local"};
  auto first = ControlPlaneFiles(*cas, node);
  REQUIRE(first);
  std::map<std::string, std::string> existing;
  for (const auto& f : *first) existing[f.path] = f.content;
  REQUIRE(existing.count(kEncryptionConfigPath) == 1);
  CHECK(existing[kEncryptionConfigPath] == EncryptionConfigYaml(cas->encryption_key));
  CHECK(existing.count(kAuditPolicyPath) == 1);
  for (const auto& f : *first) {
    if (f.path == kEncryptionConfigPath) CHECK(f.mode == std::filesystem::perms(0600));
  }
  auto again = UpdateControlPlaneFiles(*cas, node, existing, std::time(nullptr));
  REQUIRE(again);
  CHECK(again->empty());
  existing[kEncryptionConfigPath] = EncryptionConfigYaml("");
  auto fixed = UpdateControlPlaneFiles(*cas, node, existing, std::time(nullptr));
  REQUIRE(fixed);
  REQUIRE(fixed->size() == 1);
  CHECK(fixed->front().path == kEncryptionConfigPath);
}

TEST_CASE("Golden: the apiserver's encryption configuration (a sample key) and audit policy", "[kube]") {
  // SPROUT_UPDATE_GOLDEN=1 rewrites these files; `sprout cis` judges what the code writes (docs/cis.md).
  const std::pair<std::string, std::string> files[] = {
      {"encryption-config.yaml", EncryptionConfigYaml("c2FtcGxlIGtleSwgbm90IGEgY2x1c3RlcidzIGtleSE=")},
      {"audit-policy.yaml", AuditPolicyYaml()}};
  for (const auto& [name, text] : files) sprout::testing::CheckGolden("apiserver/" + name, text);
}
