// `sprout cis PROFILE`: the CIS report of the files the profile's image and a
// control-plane node of it would have. The I/O only: the build's own renderer
// (AddClusterFiles) and the node's control-plane step (kube::WriteControlPlane) write
// into a scratch folder; lib/cis judges what they wrote.
#include "cis/cis.h"

#include <sys/stat.h>
#include <unistd.h>

#include <iostream>

#include "builder/cluster.h"
#include "builder/commands.h"
#include "builder/pipeline.h"
#include "kube/controlplane.h"
#include "pki/pki.h"
#include "staticpod/podhost.h"
#include "util/fs.h"
#include "util/text.h"

namespace sprout::cli {

namespace fs = std::filesystem;

namespace {

// Shown is a path as the report prints it: relative to the working folder when inside
// it, so the report reads the same in every checkout.
std::string Shown(const fs::path& p) {
  std::error_code ec;
  const fs::path cwd = fs::current_path(ec);
  const fs::path abs = fs::weakly_canonical(p, ec);
  const fs::path rel = abs.lexically_relative(cwd);
  if (!ec && !rel.empty() && *rel.begin() != "..") return rel.generic_string();
  return abs.generic_string();
}

// StackForReport is the Kubernetes the kubelet's files are written for: the Shoot's
// spec.kubernetes.version (the build checks that the preloaded components have it)
// rather than the compiled recipe's, so no compile is needed.
Result<Stack> StackForReport(const Profile& p) {
  if (!p.shoot) return Stack{};
  auto stack = ParseStackVersions("kubernetes v" + p.shoot->kubernetes_version + "\n");
  if (!stack) {
    return Fail(p.shoot_file.string() + ": spec.kubernetes.version '" + p.shoot->kubernetes_version +
                "' is not MAJOR.MINOR.PATCH; set it to the version the image runs, such as 1.36.5");
  }
  return stack;
}

const RootEntry* Entry(const std::vector<RootEntry>& add, const std::string& path) {
  const RootEntry* found = nullptr;
  for (const auto& e : add) {
    if (e.path == path) found = &e;  // the last one wins, as in the root
  }
  return found;
}

unsigned ModeOf(const fs::path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 ? st.st_mode & 07777U : 0U;
}

// NodeFiles writes what a control-plane node writes at first boot into dir (dir is its
// /etc/kubernetes): the cluster CAs as the founder makes them, then the control-plane
// step's certificates, kubeconfigs and static pods, and etcd's static pod.
Status NodeFiles(const Profile& p, const std::map<std::string, fs::path>& templates, const fs::path& dir,
                 StaticPodInput& pods) {
  kube::ControlPlanePaths paths;
  paths.kubernetes_dir = dir;
  paths.pki_dir = dir / "pki";
  paths.manifests = dir / "manifests";
  paths.templates = dir.parent_path() / "templates";
  paths.audit_log_dir = dir.parent_path() / "audit";
  std::error_code ec;
  fs::create_directories(paths.templates, ec);
  for (const auto& [name, path] : templates) {
    auto text = ReadFile(path);
    if (!text) return Fail("cannot read the static-pod template " + path.string() + ": " + text.error());
    if (auto s = WriteFileAtomic(paths.templates / name, *text); !s) return s;
  }
  auto cas = pki::MakeClusterCAs();
  if (!cas) return Fail("cannot make the sample cluster's CAs: " + cas.error());
  if (auto s = pki::WritePkiFiles(paths.pki_dir, pki::CAFiles(*cas)); !s) return s;
  const std::string cluster = p.shoot ? p.shoot->name : "sprout";
  const std::string services = p.shoot ? p.shoot->services_cidr : "10.96.0.0/12";
  kube::ControlPlaneNode node{pods.node_name, {pods.node_ip}, services, cluster, "cluster.local"};
  auto written = kube::WriteControlPlane(paths, node, pods);
  if (!written) return Fail(written.error());
  auto etcd = WriteNodeManifests(paths.templates, paths.manifests, pods, false, {"etcd"});
  if (!etcd) return Fail(etcd.error());
  return Ok{};
}

Result<cis::Rendered> ReadRendered(const fs::path& file, const std::string& node_path, std::string origin = "") {
  auto text = ReadFile(file);
  if (!text) {
    return Fail("the control-plane step wrote no " + node_path + " (" + text.error() +
                "); does the profile leave that static pod out (withoutStaticPods)?");
  }
  return cis::Rendered{node_path, *text, std::move(origin)};
}

Result<cis::Inputs> Render(const Profile& p, const fs::path& profile_path) {
  const fs::path data = DataDir();
  auto stack = StackForReport(p);
  if (!stack) return Fail(stack.error());
  std::vector<RootEntry> add;
  if (auto s = AddClusterFiles(p, data, add, *stack); !s) return Fail(s.error());
  std::vector<std::string> errors;
  const auto templates = StaticPodTemplates(p, data, errors);
  if (!errors.empty()) return Fail(Join(errors, "\n"));
  for (const auto& c : ControlPlaneComponents()) {
    if (templates.count(c + ".yaml") == 0) {
      return Fail("the profile leaves " + c +
                  " out (withoutStaticPods), so the report has no control plane to judge; run it on a profile "
                  "that keeps etcd, kube-apiserver, kube-controller-manager and kube-scheduler");
    }
  }

  std::error_code ec;
  TempDir work(fs::temp_directory_path(ec), "sprout-cis");
  const fs::path etc = work.path() / "kubernetes";
  StaticPodInput pods = SampleInput(p);
  if (auto s = NodeFiles(p, templates, etc, pods); !s) return Fail(s.error());

  cis::Inputs in;
  in.kubernetes_minor = stack->kubernetes_minor;
  in.subject = "the control plane and kubelet of " + Shown(profile_path) + " (Kubernetes 1." +
               std::to_string(stack->kubernetes_minor) +
               (p.shoot ? ", the Shoot's `spec.kubernetes.version`)" : ", no Shoot: the default)");
  const std::pair<cis::Rendered*, const char*> manifests[] = {{&in.apiserver, "kube-apiserver"},
                                                              {&in.controller_manager, "kube-controller-manager"},
                                                              {&in.scheduler, "kube-scheduler"},
                                                              {&in.etcd, "etcd"}};
  for (const auto& [target, name] : manifests) {
    const std::string file = std::string(name) + ".yaml";
    const auto t = templates.find(file);
    auto r = ReadRendered(etc / "manifests" / file, pods.kubernetes_dir + "/manifests/" + file,
                          t == templates.end() ? "" : "rendered from " + Shown(t->second));
    if (!r) return Fail(r.error());
    *target = std::move(*r);
  }
  auto enc = ReadRendered(etc / "pki" / "encryption-config.yaml", pods.pki_dir + "/encryption-config.yaml");
  if (!enc) return Fail(enc.error());
  in.encryption_config = std::move(*enc);
  auto audit = ReadRendered(etc / "audit-policy.yaml", pods.kubernetes_dir + "/audit-policy.yaml");
  if (!audit) return Fail(audit.error());
  in.audit_policy = std::move(*audit);
  for (auto it = fs::recursive_directory_iterator(etc, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file(ec)) in.modes[fs::relative(it->path(), etc, ec).generic_string()] = ModeOf(it->path());
  }
  if (ec) return Fail("cannot list " + etc.string() + ": " + ec.message());
  in.modes_source = "written by the control-plane step";
  auto unit = ReadFile(data / "firstboot" / "sprout-firstboot.service");
  if (!unit) return Fail("cannot read sprout-firstboot's unit: " + unit.error() + "; is SPROUT_DATA_DIR right?");
  in.firstboot_unit = *unit;
  in.cni_mode = 0644;
  in.cni_mode_source = "firstboot/kube_agent.cc writes it with WriteFileAtomic's default";
  in.image_modes_source = "`sprout build`";
  const RootEntry* config = Entry(add, "usr/lib/sprout/kubelet/config.yaml");
  const RootEntry* kubelet_unit = Entry(add, "usr/lib/systemd/system/kubelet.service");
  if (config != nullptr && kubelet_unit != nullptr) {
    in.kubelet_config = {"/" + config->path, config->data,
                         p.kubelet.config_yaml.empty() ? "" : "with the profile's `kubelet.config`"};
    in.kubelet_config_mode = config->mode;
    in.kubelet_unit = {"/" + kubelet_unit->path, kubelet_unit->data, ""};
    in.kubelet_unit_mode = kubelet_unit->mode;
    in.kubelet_env = {pods.kubernetes_dir + "/kubelet.env",
                      KubeletEnv(pods.node_name, pods.node_ip, p.role == Role::kControlPlane),
                      "as sprout-firstboot writes it"};
    in.kubelet_overrides = p.kubelet.config_yaml;
  }
  return in;
}

}  // namespace

int Cis(const fs::path& profile) {
  auto p = LoadAndReport(profile);
  if (!p) return 1;
  auto in = Render(*p, profile);
  if (!in) {
    std::cerr << "sprout: " << profile.string() << ": " << in.error() << "\n";
    return 1;
  }
  auto report = cis::Judge(*in);
  if (!report) {
    std::cerr << "sprout: " << profile.string() << ": " << report.error() << "\n";
    return 1;
  }
  std::cout << cis::Markdown(*report);
  return 0;
}

}  // namespace sprout::cli
