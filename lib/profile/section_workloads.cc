// The workloads an image carries (`workloads:`, docs/workloads.md): plain manifests and
// Helm charts, checked here for what a profile can say wrong by itself; the build
// renders them and checks the objects.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <regex>

#include "profile/layer.h"
#include "util/text.h"
#include "util/yaml_json.h"

namespace sprout {

namespace fs = std::filesystem;

namespace {

bool IsManifestFile(const fs::path& p) {
  const std::string ext = p.extension().string();
  return ext == ".yaml" || ext == ".yml" || ext == ".json";
}

bool IsPackagedChart(const fs::path& p) {
  const std::string name = p.filename().string();
  return name.ends_with(".tgz") || name.ends_with(".tar.gz");
}

// HasManifestFile says whether the folder holds a manifest file anywhere below it.
bool HasManifestFile(const fs::path& dir) {
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file(ec) && IsManifestFile(it->path())) return true;
  }
  return false;
}

}  // namespace

void LayerParser::ParseWorkload(const YAML::Node& item, Layer& layer) {
  if (!ExpectMap(item, "workloads[]")) return;
  CheckKeys(item, "a 'workloads' entry", {"name", "manifests", "chart", "release", "namespace", "values", "set"});
  ProfileWorkload w;
  w.where = At(item);
  bool ok = true;
  if (auto n = item["name"]) {
    if (auto s = String(n, "workloads[].name")) {
      if (!ValidName(*s)) {
        diags_.Error(At(n),
                     "'workloads[].name' must be 1-63 of a-z 0-9 - (not starting or ending with -); got '" + *s + "'",
                     "it names the workload in the image and in sprout-firstboot status, such as 'monitoring'");
        ok = false;
      } else if (std::find(workload_names_.begin(), workload_names_.end(), *s) != workload_names_.end()) {
        diags_.Error(At(n), "workload '" + *s + "' is named twice in this profile",
                     "give each entry its own name; a profile that extends this one replaces an entry by its name");
        ok = false;
      } else {
        w.name = *s;
      }
      workload_names_.push_back(*s);
    } else {
      ok = false;
    }
  } else {
    diags_.Error(At(item), "a 'workloads' entry needs a 'name'",
                 "add 'name: my-app'; it names the workload in the image and in sprout-firstboot status");
    ok = false;
  }
  auto chart = item["chart"];
  auto manifests = item["manifests"];
  if (chart && manifests) {
    diags_.Error(At(item), "a 'workloads' entry takes 'chart' or 'manifests', not both",
                 "make two entries: one for the chart, one for the manifests");
    return;
  }
  if (!chart && !manifests) {
    diags_.Error(At(item),
                 "a 'workloads' entry needs 'chart' (a Helm chart folder or .tgz) or 'manifests' (YAML files or "
                 "folders of them)",
                 "add 'chart: charts/my-app' or 'manifests: [my-app.yaml]'");
    return;
  }
  if (chart) {
    w.type = ProfileWorkload::Type::kChart;
    if (auto s = String(chart, "workloads[].chart")) {
      w.source = *s;
      w.chart = Resolve(*s);
      std::error_code ec;
      if (fs::is_directory(w.chart, ec)) {
        if (!fs::is_regular_file(w.chart / "Chart.yaml", ec)) {
          diags_.Error(At(chart), "chart folder '" + *s + "' has no Chart.yaml (looked in " + w.chart.string() + ")",
                       "name the folder that holds the chart's Chart.yaml, or a packaged .tgz");
          ok = false;
        }
      } else if (fs::is_regular_file(w.chart, ec)) {
        if (!IsPackagedChart(w.chart)) {
          diags_.Error(At(chart), "chart '" + *s + "' is a file, but not a packaged chart (.tgz)",
                       "name the chart's folder, or the .tgz that `helm package FOLDER` makes");
          ok = false;
        }
      } else {
        diags_.Error(At(chart), "chart '" + *s + "' does not exist (looked for " + w.chart.string() + ")",
                     "give a chart folder (with Chart.yaml) or a packaged .tgz; relative paths start at the profile's "
                     "folder");
        ok = false;
      }
    } else {
      ok = false;
    }
  } else {
    std::vector<std::string> written;
    for (const auto& m : Seq(manifests, "workloads[].manifests")) {
      auto s = String(m, "an item of workloads[].manifests");
      if (!s) {
        ok = false;
        continue;
      }
      written.push_back(*s);
      fs::path p = Resolve(*s);
      std::error_code ec;
      if (fs::is_directory(p, ec)) {
        if (!HasManifestFile(p)) {
          diags_.Error(At(m), "manifest folder '" + *s + "' holds no .yaml, .yml or .json file",
                       "put the manifests into it, or remove it from the list");
          ok = false;
        }
      } else if (fs::is_regular_file(p, ec)) {
        if (!IsManifestFile(p)) {
          diags_.Error(At(m), "manifest '" + *s + "' is not a .yaml, .yml or .json file",
                       "name the manifest files, or the folder that holds them");
          ok = false;
        }
      } else {
        diags_.Error(At(m), "manifest '" + *s + "' does not exist (looked for " + p.string() + ")",
                     "list YAML files or folders of them; relative paths start at the profile's folder");
        ok = false;
      }
      w.manifests.push_back(p);
    }
    if (manifests.IsSequence() && manifests.size() == 0) {
      diags_.Error(At(manifests), "'workloads[].manifests' is empty", "list the manifest files or folders");
      ok = false;
    }
    w.source = Join(written, ", ");
  }
  // What only a chart has.
  for (const char* key : {"release", "values", "set"}) {
    if (item[key] && !chart) {
      diags_.Error(At(item[key]), std::string("'") + key + "' is for charts; a 'manifests' entry has none",
                   std::string("remove '") + key + "', or make the entry a 'chart:'");
      ok = false;
    }
  }
  if (auto n = item["release"]; n && chart) {
    if (auto s = String(n, "workloads[].release")) {
      static const std::regex release(R"(^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$)");
      if (s->size() > 53 || !std::regex_match(*s, release)) {
        diags_.Error(At(n), "'workloads[].release' must be at most 53 of a-z 0-9 - . (Helm's rule); got '" + *s + "'",
                     "such as 'monitoring'; leave it out to use the workload's name");
        ok = false;
      } else {
        w.release = *s;
      }
    } else {
      ok = false;
    }
  }
  if (w.type == ProfileWorkload::Type::kChart && w.release.empty()) w.release = w.name;
  if (auto n = item["namespace"]) {
    if (auto s = String(n, "workloads[].namespace")) {
      if (!ValidName(*s)) {
        diags_.Error(At(n), "'workloads[].namespace' must be a namespace name (1-63 of a-z 0-9 -); got '" + *s + "'",
                     "such as 'monitoring'; leave it out for 'default'");
        ok = false;
      } else {
        w.ns = *s;
      }
    } else {
      ok = false;
    }
  }
  if (auto n = item["values"]; n && chart) {
    for (const auto& v : Seq(n, "workloads[].values")) {
      auto s = String(v, "an item of workloads[].values");
      if (!s) {
        ok = false;
        continue;
      }
      fs::path p = Resolve(*s);
      std::error_code ec;
      if (!fs::is_regular_file(p, ec)) {
        diags_.Error(At(v), "values file '" + *s + "' does not exist (looked for " + p.string() + ")",
                     "relative paths start at the profile's folder; the chart's own values.yaml is read without "
                     "naming it");
        ok = false;
      }
      w.values.push_back(p);
    }
  }
  if (auto n = item["set"]; n && chart) {
    if (!n.IsMap()) {
      diags_.Error(At(n), std::string("'workloads[].set' must be a mapping of values, but it is ") + KindName(n),
                   "write the values as in a values file, indented below 'set:'");
      ok = false;
    } else if (auto j = YamlToJson(n, file_.string(), 0, diags_)) {
      w.set_json = j->dump();
    } else {
      ok = false;
    }
  }
  if (ok) layer.workloads.push_back(std::move(w));
}

}  // namespace sprout
