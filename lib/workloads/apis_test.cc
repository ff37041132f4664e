#include "workloads/apis.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <set>
#include <sstream>
#include <tuple>

#include "util/fs.h"
#include "util/text.h"

using namespace sprout;
using namespace sprout::workloads;

TEST_CASE("the built-in table is what kube-apiserver 1.36.5 serves, kind by kind", "[workloads]") {
  // Recorded from the real server's discovery (docs/workloads.md, "The served APIs").
  const auto file =
      std::filesystem::path(SPROUT_SOURCE_DIR) / "tests/golden/workloads/kube-apiserver-1.36.5-discovery.txt";
  auto text = ReadFile(file);
  REQUIRE(text.ok());
  std::set<std::tuple<std::string, std::string, bool, bool>> served, table;
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line.front() == '#') continue;
    auto f = Split(line, ' ');
    REQUIRE(f.size() == 4);
    // Stored: what apply can keep, which takes patch; the rest answers requests.
    const auto verbs = Split(f[3], ',');
    const bool patch = std::find(verbs.begin(), verbs.end(), "patch") != verbs.end();
    served.emplace(f[0], f[1], f[2] == "True", patch);
  }
  for (const auto& k : BuiltinApis()) table.emplace(k.api_version, k.kind, k.namespaced, k.stored);
  CHECK(served.size() == 68);
  for (const auto& s : served) {
    INFO(std::get<0>(s) << " " << std::get<1>(s));
    CHECK(table.contains(s));
  }
  for (const auto& t : table) {
    INFO(std::get<0>(t) << " " << std::get<1>(t));
    CHECK(served.contains(t));
  }
}

TEST_CASE("GroupOf and the namespaces Kubernetes makes", "[workloads]") {
  CHECK(GroupOf("v1").empty());
  CHECK(GroupOf("apps/v1") == "apps");
  CHECK(GroupOf("rbac.authorization.k8s.io/v1") == "rbac.authorization.k8s.io");
  CHECK(IsBuiltinNamespace("kube-system"));
  CHECK(IsBuiltinNamespace("kube-node-lease"));
  CHECK_FALSE(IsBuiltinNamespace("demo"));
}
