#include "builder/workloads.h"

#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

#include "image/arch.h"
#include "util/fs.h"
#include "util/process.h"
#include "util/text.h"

namespace sprout::cli {

namespace fs = std::filesystem;

namespace {

// Shown is how messages name a path: relative to the working directory when it is
// below it, else in full.
std::string Shown(const fs::path& path) {
  std::error_code ec;
  fs::path rel = path.lexically_relative(fs::current_path(ec));
  if (ec || rel.empty() || rel.string().starts_with("..")) return path.string();
  return rel.string();
}

// Tail is the last lines of a program's output, indented, for an error.
std::string Tail(const std::string& text, std::size_t lines) {
  std::vector<std::string> all = Split(text, '\n');
  while (!all.empty() && Trim(all.back()).empty()) all.pop_back();
  std::size_t from = all.size() > lines ? all.size() - lines : 0;
  std::string out;
  for (std::size_t i = from; i < all.size(); ++i) out += "\n  | " + all[i];
  return out;
}

// HelmMessage is what helm said on failure, less its advice to rerun it with --debug.
std::string HelmMessage(const std::string& err) {
  std::vector<std::string> kept;
  for (const auto& line : Split(err, '\n')) {
    std::string_view l = Trim(line);
    if (l.empty() || l.starts_with("Use --debug flag")) continue;
    if (l.starts_with("Error: ")) l.remove_prefix(7);
    kept.emplace_back(l);
  }
  return kept.empty() ? "helm gave no message" : Join(kept, "; ");
}

// ManifestFiles are the files a manifests entry names, in order: a file as it is, a
// folder's .yaml, .yml and .json files below it, sorted by their path in it.
std::vector<fs::path> ManifestFiles(const std::vector<fs::path>& listed) {
  std::vector<fs::path> out;
  for (const auto& p : listed) {
    std::error_code ec;
    if (!fs::is_directory(p, ec)) {
      out.push_back(p);
      continue;
    }
    std::vector<fs::path> below;
    for (fs::recursive_directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string ext = it->path().extension().string();
      if (it->is_regular_file(ec) && (ext == ".yaml" || ext == ".yml" || ext == ".json")) below.push_back(it->path());
    }
    std::sort(below.begin(), below.end(),
              [](const fs::path& a, const fs::path& b) { return a.generic_string() < b.generic_string(); });
    out.insert(out.end(), below.begin(), below.end());
  }
  return out;
}

// HelmEnv keeps helm to scratch folders: no repositories, plugins or registry logins of
// the user who builds, so a chart renders the same for everyone.
std::map<std::string, std::string> HelmEnv(const fs::path& scratch) {
  return {{"HELM_CACHE_HOME", (scratch / "cache").string()},
          {"HELM_CONFIG_HOME", (scratch / "config").string()},
          {"HELM_DATA_HOME", (scratch / "data").string()},
          {"KUBECONFIG", "/dev/null"}};
}

double Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f s", s);
  return buf;
}

std::string Count(std::size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

Result<fs::path> HelmBinary(const fs::path& cache_dir, bool offline) {
  if (const char* h = std::getenv("SPROUT_HELM"); h && *h) {
    std::error_code ec;
    if (!fs::is_regular_file(h, ec)) return Fail("SPROUT_HELM is " + std::string(h) + ", which is no file");
    return fs::path(h);
  }
  const fs::path script = DataDir() / "images" / "stack" / "compile.sh";
  TempDir tmp(fs::temp_directory_path(), "sprout-helm");
  Command c{{"bash", script.string(), cache_dir.string(), "helm"}, {{"SPROUT_ARCH", ArchName(HostArch())}}};
  if (offline) c.env["SPROUT_OFFLINE"] = "1";
  c.stdout_file = (tmp.path() / "folder").string();
  c.stderr_file = (tmp.path() / "log").string();
  auto run = Run(c);
  if (!run) return Fail(run.error());
  auto log = ReadFile(tmp.path() / "log");
  if (run->exit_code != 0) {
    return Fail("cannot compile helm, which renders the charts: " + script.string() + " " + cache_dir.string() +
                " helm failed (exit " + std::to_string(run->exit_code) +
                "); the last lines of its output:" + Tail(log ? *log : "", 12));
  }
  auto folder = ReadFile(tmp.path() / "folder");
  std::string last = folder ? std::string(Trim(*folder)) : "";
  if (auto nl = last.rfind('\n'); nl != std::string::npos) last = last.substr(nl + 1);
  fs::path helm = fs::path(last) / "helm";
  std::error_code ec;
  if (last.empty() || !fs::is_regular_file(helm, ec)) {
    return Fail(script.string() + " helm printed no folder holding helm (it printed '" + last + "')");
  }
  return helm;
}

Result<RenderedWorkloads> RenderWorkloads(const Profile& p, const BuildOptions& options,
                                          const std::function<void(const std::string&)>& note) {
  using workloads::Object;
  RenderedWorkloads out;
  const ProfileWorkload* first = p.workloads.empty() ? nullptr : &p.workloads.front();
  if (!first) return out;
  // The served table is 1.36's, so the image's Kubernetes must be 1.36.
  const std::string version = p.shoot ? p.shoot->kubernetes_version : workloads::kServedVersion;
  const std::string minor = "1." + std::to_string(workloads::kServedMinor);
  if (version != minor && !version.starts_with(minor + ".")) {
    return Fail(Shown(first->where.file) + ":" + std::to_string(first->where.line) + ": the workloads are checked " +
                "against the APIs of Kubernetes " + minor + ", but the image's Kubernetes is " + version +
                " (its Shoot's spec.kubernetes.version); build workloads on the 1.36 stack (extends: "
                "kubernetes-1.36.yaml, docs/stack.md)");
  }
  const bool charts = std::any_of(p.workloads.begin(), p.workloads.end(),
                                  [](const ProfileWorkload& w) { return w.type == ProfileWorkload::Type::kChart; });
  TempDir scratch(fs::temp_directory_path(), "sprout-workloads");
  fs::path helm;
  if (charts) {
    if (const char* h = std::getenv("SPROUT_HELM"); !h || !*h) {
      note("  helm: from images/stack/compile.sh, cached after its first compile (that one takes minutes)");
    }
    auto found = HelmBinary(options.cache_dir, options.offline);
    if (!found) return Fail(found.error());
    helm = *found;
    auto v = Run({{helm.string(), "version", "--template", "{{.Version}}"}, HelmEnv(scratch.path())});
    out.helm_version = v && v->exit_code == 0 ? std::string(Trim(v->output)) : "(unknown version)";
  }
  Diagnostics diags;
  workloads::ServedApis apis;
  std::vector<Object> objects;
  std::vector<std::string> namespace_of;
  for (std::size_t i = 0; i < p.workloads.size(); ++i) {
    const ProfileWorkload& w = p.workloads[i];
    namespace_of.push_back(w.ns);
    workloads::Workload entry{
        w.name, w.type == ProfileWorkload::Type::kChart ? "chart" : "manifests", w.source, w.release, w.ns, ""};
    std::vector<Object> mine;
    if (w.type == ProfileWorkload::Type::kChart) {
      std::vector<std::string> argv{helm.string(), "template",       w.release,     w.chart.string(), "--namespace",
                                    w.ns,          "--kube-version", "v" + version, "--include-crds"};
      for (const auto& api : apis.HelmApiVersions()) argv.insert(argv.end(), {"--api-versions", api});
      for (const auto& v : w.values) argv.insert(argv.end(), {"--values", v.string()});
      if (!w.set_json.empty()) {
        const fs::path set = scratch.path() / ("set-" + std::to_string(i) + ".json");
        if (auto s = WriteFileAtomic(set, w.set_json); !s) return Fail(s.error());
        argv.insert(argv.end(), {"--values", set.string()});
      }
      Command c{argv, HelmEnv(scratch.path())};
      c.stdout_file = (scratch.path() / ("rendered-" + std::to_string(i) + ".yaml")).string();
      c.stderr_file = (scratch.path() / ("rendered-" + std::to_string(i) + ".err")).string();
      const auto start = std::chrono::steady_clock::now();
      auto run = Run(c);
      const double took = Since(start);
      out.render_seconds += took;
      if (!run) return Fail(run.error());
      if (run->exit_code != 0) {
        auto err = ReadFile(c.stderr_file);
        diags.Error(
            w.where,
            "chart '" + w.source + "' of workload '" + w.name + "' does not render: " + HelmMessage(err ? *err : ""),
            "fix the template, or the values it is given; `helm template " + w.release + " " + w.source +
                "` gives the same message");
        continue;
      }
      auto text = ReadFile(c.stdout_file);
      if (!text) return Fail(text.error());
      std::error_code ec;
      mine = workloads::ParseObjects(*text, {Shown(w.chart), true, fs::is_directory(w.chart, ec), i}, diags);
      // Helm hooks belong to Helm's own install; the cluster applies the rest.
      std::vector<std::string> hooks;
      std::erase_if(mine, [&](const Object& o) {
        if (!workloads::IsHelmHook(o)) return false;
        hooks.push_back(workloads::Describe(o));
        return true;
      });
      auto shown = Run({{helm.string(), "show", "chart", w.chart.string()}, HelmEnv(scratch.path())});
      if (shown && shown->exit_code == 0) {
        try {
          YAML::Node chart = YAML::Load(shown->output);
          if (chart["version"] && chart["version"].IsScalar()) entry.chart_version = chart["version"].Scalar();
        } catch (const YAML::Exception&) {
          // No version to record; the chart rendered, so helm read it.
        }
      }
      note("  " + w.name + ": chart " + w.source + (entry.chart_version.empty() ? "" : " " + entry.chart_version) +
           ", release " + w.release + " in " + w.ns + ": " + Count(mine.size(), "object", "objects") +
           ", rendered in " + Seconds(took));
      if (!hooks.empty()) {
        note("    left out " + Count(hooks.size(), "Helm hook", "Helm hooks") + " (" + Join(hooks, ", ") +
             "): hooks run around Helm's own install, which a cluster that applies objects does not have");
      }
    } else {
      for (const auto& file : ManifestFiles(w.manifests)) {
        auto text = ReadFile(file);
        if (!text) {
          diags.Error(w.where, "cannot read manifest " + file.string() + ": " + text.error(), "");
          continue;
        }
        auto got = workloads::ParseObjects(*text, {Shown(file), false, false, i}, diags);
        mine.insert(mine.end(), std::make_move_iterator(got.begin()), std::make_move_iterator(got.end()));
      }
      note("  " + w.name + ": manifests " + w.source + ", namespace " + w.ns + ": " +
           Count(mine.size(), "object", "objects"));
    }
    // Its CRDs serve the later workloads' objects, and the later charts' capabilities.
    workloads::AddCrds(mine, apis, diags);
    out.list.push_back(entry);
    objects.insert(objects.end(), std::make_move_iterator(mine.begin()), std::make_move_iterator(mine.end()));
  }
  workloads::FillNamespaces(objects, namespace_of, apis);
  workloads::CheckServed(objects, apis, diags);
  workloads::CheckDuplicates(objects, diags);
  for (auto& n : workloads::MissingNamespaces(objects)) {
    note("  namespace " + n.name + " is made for workload " + p.workloads[n.workload].name +
         ": no object of the workloads makes it");
    objects.push_back(std::move(n));
  }
  std::vector<std::string> preloaded;
  for (const auto& img : p.images) preloaded.push_back(img.ref);
  workloads::CheckImages(objects, preloaded, diags);
  if (diags.has_errors()) {
    return Fail("the workloads have " + Count(static_cast<std::size_t>(diags.error_count()), "error", "errors") +
                ":\n" + diags.Render(::isatty(2) != 0));
  }
  workloads::Order(objects);
  if (out.list.size() != p.workloads.size()) return Fail("internal error: a workload was not rendered");
  out.baked = workloads::Bake(out.list, objects);
  out.objects = objects.size();
  out.objects_of.assign(out.list.size(), 0);
  std::set<std::string> images;
  for (const auto& o : objects) {
    ++out.objects_of[o.workload];
    images.insert(o.images.begin(), o.images.end());
  }
  out.images.assign(images.begin(), images.end());
  if (!out.images.empty()) note("  images the objects run, all preloaded: " + Join(out.images, ", "));
  return out;
}

void AddWorkloadFiles(const RenderedWorkloads& w, std::vector<RootEntry>& add) {
  if (!w.present()) return;
  const std::string dir = kWorkloadsDir;
  add.push_back({RootEntry::Kind::kDir, dir, "", {}, 0755});
  add.push_back({RootEntry::Kind::kDir, dir + "/objects", "", {}, 0755});
  add.push_back({RootEntry::Kind::kFile, dir + "/index.json", w.baked.index_json, {}, 0644});
  for (std::size_t n = 0; n < w.baked.objects.size(); ++n) {
    add.push_back({RootEntry::Kind::kFile, dir + "/" + workloads::ObjectFile(n), w.baked.objects[n], {}, 0644});
  }
}

std::string Summary(const RenderedWorkloads& w) {
  std::string s = Count(w.list.size(), "workload", "workloads") + ", " + Count(w.objects, "object", "objects") + ", " +
                  Count(w.images.size(), "image", "images");
  if (!w.helm_version.empty()) s += "; charts rendered by helm " + w.helm_version + " in " + Seconds(w.render_seconds);
  return s;
}

}  // namespace sprout::cli
