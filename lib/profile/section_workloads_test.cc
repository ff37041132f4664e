// section_workloads.cc: the manifests and charts a profile carries.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "profile/profile.h"
#include "profile/profile_testing.h"

using namespace sprout;
using sprout::testing::Errors;
using sprout::testing::Files;

TEST_CASE("workloads: a chart and manifests are read, with defaults and paths from the profile's folder", "[profile]") {
  Files f;
  f.Write("base.tar", "");
  f.Write("charts/demo/Chart.yaml", "apiVersion: v2\nname: demo\nversion: 0.1.0\n");
  f.Write("demo-values.yaml", "replicas: 2\n");
  f.Write("extra/a.yaml", "kind: ConfigMap\n");
  f.Write("job.yaml", "kind: Job\n");
  auto p = f.Write("p.yaml",
                   "name: x\nbase: base.tar\nworkloads:\n"
                   "  - name: demo\n"
                   "    chart: charts/demo\n"
                   "    namespace: demo\n"
                   "    values: [demo-values.yaml]\n"
                   "    set:\n"
                   "      message: 'yes'\n"
                   "      replicas: 3\n"
                   "      on: yes\n"
                   "  - name: extras\n"
                   "    manifests: [extra, job.yaml]\n");
  Diagnostics d;
  auto got = LoadProfile(p, d);
  INFO(d.Render());
  REQUIRE(got);
  REQUIRE(got->workloads.size() == 2);
  const auto& chart = got->workloads[0];
  CHECK(chart.type == ProfileWorkload::Type::kChart);
  CHECK(chart.source == "charts/demo");
  CHECK(chart.chart == f.dir.path() / "charts/demo");
  CHECK(chart.release == "demo");  // the name, when no release is given
  CHECK(chart.ns == "demo");
  REQUIRE(chart.values.size() == 1);
  CHECK(chart.values[0] == f.dir.path() / "demo-values.yaml");
  // Inline values are typed as Helm reads a values file.
  CHECK(chart.set_json == R"({"message":"yes","replicas":3,"true":true})");
  const auto& m = got->workloads[1];
  CHECK(m.type == ProfileWorkload::Type::kManifests);
  CHECK(m.source == "extra, job.yaml");
  CHECK(m.ns == "default");
  CHECK(m.release.empty());
  REQUIRE(m.manifests.size() == 2);
  // The record names them relative to the profile.
  auto j = nlohmann::json::parse(ProfileToJson(*got));
  CHECK(j["workloads"][0]["chart"] == "charts/demo");
  CHECK(j["workloads"][0]["values"][0] == "demo-values.yaml");
  CHECK(j["workloads"][0]["set"]["replicas"] == 3);
  CHECK(j["workloads"][1]["manifests"][1] == "job.yaml");
}

TEST_CASE("workloads: a profile without them records none", "[profile]") {
  Files f;
  f.Write("base.tar", "");
  auto p = f.Write("p.yaml", "name: x\nbase: base.tar\n");
  Diagnostics d;
  auto got = LoadProfile(p, d);
  REQUIRE(got);
  CHECK(nlohmann::json::parse(ProfileToJson(*got)).contains("workloads") == false);
}

TEST_CASE("workloads: every mistake is reported at its place, in one run", "[profile]") {
  Files f;
  f.Write("base.tar", "");
  f.Write("notachart/README", "");
  f.Write("chart.zip", "");
  f.Write("empty/README", "");
  f.Write("notes.txt", "");
  f.Write("charts/ok/Chart.yaml", "apiVersion: v2\nname: ok\nversion: 1.0.0\n");
  auto bad = f.Write("bad.yaml",
                     "name: x\nbase: base.tar\nworkloads:\n"
                     "  - {chart: charts/ok}\n"                                      // 4: no name
                     "  - {name: Bad_Name, chart: charts/ok}\n"                      // 5
                     "  - {name: a, chart: missing}\n"                               // 6
                     "  - {name: b, chart: notachart}\n"                             // 7
                     "  - {name: c, chart: chart.zip}\n"                             // 8
                     "  - {name: d, manifests: [nothere.yaml, empty, notes.txt]}\n"  // 9
                     "  - {name: e, manifests: [notes.txt], release: r}\n"           // 10
                     "  - {name: f, chart: charts/ok, values: [gone.yaml]}\n"        // 11
                     "  - {name: g, chart: charts/ok, release: Not-OK}\n"            // 12
                     "  - {name: h, chart: charts/ok, namespace: kube_system}\n"     // 13
                     "  - {name: i, chart: charts/ok, set: [1, 2]}\n"                // 14
                     "  - {name: j}\n"                                               // 15
                     "  - {name: k, chart: charts/ok, manifests: [notes.txt]}\n"     // 16
                     "  - {name: l, chart: charts/ok, sett: {}}\n"                   // 17
                     "  - {name: a, chart: charts/ok}\n"                             // 18
                     "  - {name: m, chart: charts/ok, set: {a: 1, a: 2}}\n");        // 19
  Diagnostics e;
  std::string out = Errors(bad, e);
  INFO(out);
  CHECK_THAT(out, Catch::Contains(":4:5: error: a 'workloads' entry needs a 'name'"));
  CHECK_THAT(out, Catch::Contains(":5:12: error: 'workloads[].name' must be 1-63 of a-z 0-9 -"));
  CHECK_THAT(out, Catch::Contains(":6:22: error: chart 'missing' does not exist (looked for "));
  CHECK_THAT(out, Catch::Contains("hint: give a chart folder (with Chart.yaml) or a packaged .tgz"));
  CHECK_THAT(out, Catch::Contains(":7:22: error: chart folder 'notachart' has no Chart.yaml"));
  CHECK_THAT(out, Catch::Contains(":8:22: error: chart 'chart.zip' is a file, but not a packaged chart (.tgz)"));
  CHECK_THAT(out, Catch::Contains(":9:27: error: manifest 'nothere.yaml' does not exist"));
  CHECK_THAT(out, Catch::Contains(":9:41: error: manifest folder 'empty' holds no .yaml, .yml or .json file"));
  CHECK_THAT(out, Catch::Contains(":9:48: error: manifest 'notes.txt' is not a .yaml, .yml or .json file"));
  CHECK_THAT(out, Catch::Contains(":10:48: error: 'release' is for charts; a 'manifests' entry has none"));
  CHECK_THAT(out, Catch::Contains(":11:42: error: values file 'gone.yaml' does not exist (looked for "));
  CHECK_THAT(out, Catch::Contains("hint: relative paths start at the profile's folder; the chart's own values.yaml"));
  CHECK_THAT(out, Catch::Contains(":12:42: error: 'workloads[].release' must be at most 53 of a-z 0-9 - ."));
  CHECK_THAT(out, Catch::Contains(":13:44: error: 'workloads[].namespace' must be a namespace name"));
  CHECK_THAT(out, Catch::Contains(":14:38: error: 'workloads[].set' must be a mapping of values, but it is a list"));
  CHECK_THAT(out, Catch::Contains(":15:5: error: a 'workloads' entry needs 'chart' (a Helm chart folder or .tgz) or "
                                  "'manifests'"));
  CHECK_THAT(out, Catch::Contains(":16:5: error: a 'workloads' entry takes 'chart' or 'manifests', not both"));
  CHECK_THAT(out, Catch::Contains(":17:33: error: unknown key 'sett' in a 'workloads' entry"));
  CHECK_THAT(out, Catch::Contains("hint: did you mean 'set'?"));
  CHECK_THAT(out, Catch::Contains(":18:12: error: workload 'a' is named twice in this profile"));
  CHECK_THAT(out, Catch::Contains(":19:45: error: key 'a' appears twice in this mapping"));
}

TEST_CASE("workloads: a child replaces its parent's entry by name, in place, and appends the others", "[profile]") {
  Files f;
  f.Write("base.tar", "");
  f.Write("parent/charts/demo/Chart.yaml", "apiVersion: v2\nname: demo\nversion: 0.1.0\n");
  f.Write("parent/one.yaml", "");
  f.Write("two.yaml", "");
  f.Write("parent/p.yaml",
          "name: p\nbase: ../base.tar\nworkloads:\n"
          "  - {name: demo, chart: charts/demo}\n"
          "  - {name: one, manifests: [one.yaml]}\n");
  auto child = f.Write("c.yaml",
                       "extends: parent/p.yaml\nname: c\nworkloads:\n"
                       "  - {name: demo, chart: parent/charts/demo, namespace: other}\n"
                       "  - {name: two, manifests: [two.yaml]}\n");
  Diagnostics d;
  auto got = LoadProfile(child, d);
  INFO(d.Render());
  REQUIRE(got);
  REQUIRE(got->workloads.size() == 3);
  CHECK(got->workloads[0].name == "demo");
  CHECK(got->workloads[0].ns == "other");
  CHECK(got->workloads[1].name == "one");
  CHECK(got->workloads[1].manifests[0] == f.dir.path() / "parent/one.yaml");
  CHECK(got->workloads[2].name == "two");
}
