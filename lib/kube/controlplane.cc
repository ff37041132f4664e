#include "kube/controlplane.h"

#include <ctime>
#include <map>

#include "staticpod/podhost.h"
#include "util/fs.h"

namespace sprout::kube {

namespace fs = std::filesystem;

namespace {

// Where a path of ControlPlaneFiles lives: pki/* under the PKI folder, the rest beside it.
fs::path Target(const ControlPlanePaths& paths, const std::string& rel) {
  if (rel.rfind("pki/", 0) == 0) return paths.pki_dir / rel.substr(4);
  return paths.kubernetes_dir / rel;
}

}  // namespace

ApiserverStart DecideApiserverStart(bool founder, bool rendered_before) {
  return founder || rendered_before ? ApiserverStart::kNow : ApiserverStart::kAfterOneIsReady;
}

const std::vector<std::string>& ControlPlaneComponentsAfterEtcd() {
  static const std::vector<std::string> kComponents{"kube-apiserver", "kube-controller-manager", "kube-scheduler"};
  return kComponents;
}

Result<std::vector<std::string>> WriteControlPlaneFiles(const ControlPlanePaths& paths, const ControlPlaneNode& node) {
  auto cas = pki::LoadCAs(paths.pki_dir);
  if (!cas) return Fail("the control plane needs the cluster CAs formation wrote: " + cas.error());
  std::map<std::string, std::string> existing;
  for (const auto& rel : ControlPlaneFilePaths()) {
    if (auto text = ReadFile(Target(paths, rel))) existing[rel] = *text;
  }
  auto files = UpdateControlPlaneFiles(*cas, node, existing, static_cast<std::int64_t>(std::time(nullptr)));
  if (!files) return Fail(files.error());
  std::vector<std::string> issued;
  for (const auto& f : *files) {
    const fs::path target = Target(paths, f.path);
    std::error_code ec;
    fs::create_directories(target.parent_path(), ec);
    if (ec) return Fail("cannot create " + target.parent_path().string() + ": " + ec.message());
    if (auto w = WriteFileAtomic(target, f.content, f.mode); !w) return Fail(w.error());
    issued.push_back(f.path);
  }
  return issued;
}

Result<ControlPlaneReport> WriteControlPlane(const ControlPlanePaths& paths, const ControlPlaneNode& node,
                                             const StaticPodInput& pods) {
  auto issued = WriteControlPlaneFiles(paths, node);
  if (!issued) return Fail(issued.error());
  ControlPlaneReport report;
  report.issued = std::move(*issued);
  // The audit log holds who did what (never a body; kube/apiserver_config.h): root only.
  std::error_code ec;
  fs::create_directories(paths.audit_log_dir, ec);
  if (ec) return Fail("cannot create the audit log folder " + paths.audit_log_dir.string() + ": " + ec.message());
  fs::permissions(paths.audit_log_dir, fs::perms::owner_all, ec);
  if (ec) return Fail("cannot make " + paths.audit_log_dir.string() + " private: " + ec.message());
  auto written = WriteNodeManifests(paths.templates, paths.manifests, pods, false, ControlPlaneComponentsAfterEtcd());
  if (!written) return Fail(written.error());
  if (!written->skipped.empty()) {
    std::string why;
    for (const auto& s : written->skipped) why += (why.empty() ? "" : "; ") + s;
    return Fail("the control plane cannot run: " + why +
                "; list the component's image in the profile's images: so the build preloads it");
  }
  if (written->written.size() != ControlPlaneComponentsAfterEtcd().size()) {
    return Fail("the static-pod templates in " + paths.templates.string() +
                " lack a control-plane component; expected kube-apiserver, kube-controller-manager and "
                "kube-scheduler");
  }
  report.manifests = written->changed;
  return report;
}

}  // namespace sprout::kube
