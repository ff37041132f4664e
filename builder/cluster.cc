#include "builder/cluster.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "dns/zone.h"
#include "fetch/fetch.h"
#include "image/arch.h"
#include "image/base.h"
#include "kube/coredns.h"
#include "staticpod/kubelet.h"
#include "staticpod/staticpod.h"
#include "util/fs.h"
#include "util/log_watch.h"
#include "util/process.h"
#include "util/text.h"

namespace sprout {

namespace fs = std::filesystem;

namespace {

std::string Where(const Location& l) { return l.file + ":" + std::to_string(l.line) + ":" + std::to_string(l.column); }

Status FetchOne(ProfileFile& f, const fs::path& cache_dir) {
  if (!f.url.empty()) {
    auto got = FetchVerified(f.url, f.sha256, cache_dir);
    if (!got) return Fail(Where(f.where) + ": " + got.error());
    f.source = *got;
  } else if (!f.sha256.empty() && !f.source.empty()) {
    if (auto v = VerifyFile(f.source, f.sha256); !v) return Fail(Where(f.where) + ": " + v.error());
  }
  return Ok{};
}

// LastLines quotes the end of a log for an error message, one "  | " line each.
std::string LastLines(const fs::path& log, std::size_t n) {
  auto text = ReadFile(log);
  std::string out;
  if (!text) return out;
  for (const auto& line : Split(LogTail(*text, n), '\n')) out += "  | " + line + "\n";
  return out;
}

// AirGapErrors proves at build time that every image a baked template runs is preloaded:
// each {{image_NAME}} must be the component of one of the profile's images. A node
// that would have to pull an image cannot start that pod on an air-gapped site.
std::vector<std::string> AirGapErrors(const Profile& p, const std::string& name, const fs::path& path,
                                      const std::string& text) {
  std::set<std::string> preloaded;
  for (const auto& img : p.images) preloaded.insert(oci::ComponentOf(img.ref));
  static const std::regex kImage(R"(\{\{\s*image_([A-Za-z0-9_]+)\s*\}\})");
  std::vector<std::string> errors;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kImage); it != std::sregex_iterator(); ++it) {
    std::string component = (*it)[1].str();
    std::replace(component.begin(), component.end(), '_', '-');
    if (preloaded.count(component) != 0) continue;
    const std::string pod = name.substr(0, name.size() - 5);
    errors.push_back("the static pod " + name + " (" + path.string() + ") runs the image of '" + component +
                     "', which the profile does not preload, so a node could only pull it; add it to images: " +
                     "(its repository's last element must be '" + component + "'), or leave the pod out of the " +
                     "image with 'withoutStaticPods: [" + pod + "]'");
  }
  return errors;
}

// VersionErrors: the Shoot's spec.kubernetes.version must be the version of the
// preloaded Kubernetes components, read from their image tags (kube-apiserver:v1.20.2).
std::vector<std::string> VersionErrors(const Profile& p) {
  std::vector<std::string> errors;
  if (!p.shoot) return errors;
  for (const auto& img : p.images) {
    const std::string component = oci::ComponentOf(img.ref);
    if (component.rfind("kube-", 0) != 0) continue;
    std::string repo = img.ref.substr(0, img.ref.find('@'));
    const auto colon = repo.rfind(':');
    if (colon == std::string::npos || colon < repo.rfind('/')) continue;  // no tag: nothing to compare
    std::string tag = repo.substr(colon + 1);
    if (!tag.empty() && tag[0] == 'v') tag = tag.substr(1);
    if (tag == p.shoot->kubernetes_version) continue;
    errors.push_back(Where(img.where) + ": the Shoot " + p.shoot_file.string() + " says Kubernetes " +
                     p.shoot->kubernetes_version + " (spec.kubernetes.version), but the preloaded " + component +
                     " is " + repo.substr(colon + 1) + " (" + img.ref +
                     "); set the Shoot's version to the one the image runs, or preload that version");
  }
  return errors;
}

// AddDns bakes the node's cluster DNS: knotd's configuration for the Shoot's networks,
// the controller's settings and both units (docs/dns.md).
Status AddDns(const Shoot& shoot, std::vector<RootEntry>& add) {
  auto config = dns::MakeDnsConfig("cluster.local", {shoot.services_cidr, shoot.pods_cidr});
  if (!config) return Fail("the Shoot's networks give no DNS zones: " + config.error());
  add.push_back({RootEntry::Kind::kFile, dns::kDnsConfigPath, dns::DnsConfigJson(*config), {}, 0644});
  add.push_back({RootEntry::Kind::kFile,
                 dns::kKnotConfigPath,
                 dns::KnotConfig(*config, "/var/lib/sprout/dns/zones", "/var/lib/sprout-dns", "/run/sprout-dns"),
                 {},
                 0644});
  for (const auto& [unit, text] : {std::pair<std::string, std::string>{"sprout-dns.service", dns::KnotUnit(*config)},
                                   {"sprout-dns-controller.service", dns::ControllerUnit()}}) {
    add.push_back({RootEntry::Kind::kFile, "usr/lib/systemd/system/" + unit, text, {}, 0644});
    add.push_back({RootEntry::Kind::kSymlink,
                   "etc/systemd/system/multi-user.target.wants/" + unit,
                   "/usr/lib/systemd/system/" + unit,
                   {},
                   0777});
  }
  return Ok{};
}

// PreloadsCoreDns says whether the profile preloads a CoreDNS image (an image whose
// repository's last element is `coredns`).
bool PreloadsCoreDns(const Profile& p) {
  for (const auto& img : p.images) {
    if (oci::ComponentOf(img.ref) == "coredns") return true;
  }
  return false;
}

// HostRootEntries are the files of the recipe folder's root/ tree (docs/stack.md), to be
// installed over the base at the same paths, in path order.
Status HostRootEntries(const KubeletSettings& k, std::vector<RootEntry>& add) {
  const fs::path root = k.folder / "root";
  std::error_code ec;
  if (k.folder.empty() || !fs::is_directory(root, ec)) return Ok{};
  std::vector<RootEntry> found;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const auto perms = fs::status(it->path(), ec).permissions();
    const bool exec = (perms & fs::perms::owner_exec) != fs::perms::none;
    found.push_back({RootEntry::Kind::kFile, fs::relative(it->path(), root, ec).generic_string(), "", it->path(),
                     exec ? 0755u : 0644u});
  }
  if (ec) return Fail("cannot list the kubelet recipe's root tree " + root.string() + ": " + ec.message());
  std::sort(found.begin(), found.end(), [](const RootEntry& a, const RootEntry& b) { return a.path < b.path; });
  for (auto& e : found) add.push_back(std::move(e));
  return Ok{};
}

}  // namespace

StaticPodInput SampleInput(const Profile& p) {
  StaticPodInput in;
  in.node_name = "sample-node";
  in.node_ip = "198.18.0.10";
  in.cluster_name = p.shoot ? p.shoot->name : "sprout";
  in.kubernetes_version = p.shoot ? p.shoot->kubernetes_version : "1.31.1";
  in.pods_cidr = p.shoot ? p.shoot->pods_cidr : "10.244.0.0/16";
  in.services_cidr = p.shoot ? p.shoot->services_cidr : "10.96.0.0/12";
  in.etcd_members = {{"sample-node", "198.18.0.10"}};
  in.etcd_cluster_token = in.cluster_name + "-sample";
  for (const auto& c : ControlPlaneComponents())
    in.images[c] = "localhost/sample/" + c + "@sha256:" + std::string(64, '0');
  return in;
}

Result<Stack> StackOf(const KubeletSettings& k) {
  std::error_code ec;
  const fs::path file = k.folder / "versions";
  if (k.folder.empty() || !fs::exists(file, ec)) return Stack{};
  auto text = ReadFile(file);
  if (!text) return Fail("cannot read the kubelet recipe's versions file " + file.string() + ": " + text.error());
  auto stack = ParseStackVersions(*text);
  if (!stack) {
    return Fail(file.string() + ": " + stack.error() + "; the recipe's host.sh writes it (docs/stack.md)");
  }
  return stack;
}

Status FetchProfileFiles(Profile& p, const fs::path& cache_dir) {
  std::vector<std::string> errors;
  for (auto& f : p.files) {
    if (auto s = FetchOne(f, cache_dir); !s) errors.push_back(s.error());
  }
  // A kubelet recipe is compiled in a step of its own (CompileKubelet).
  if (p.kubelet.present && p.kubelet.recipe.empty()) {
    if (auto s = FetchOne(p.kubelet.binary, cache_dir); !s) errors.push_back(s.error());
  }
  if (!errors.empty()) return Fail(Join(errors, "\n"));
  return Ok{};
}

Result<CompileLog> CompileKubelet(KubeletSettings& k, Arch arch, const fs::path& cache_dir, bool offline,
                                  const PhaseFn& watch) {
  const fs::path script = k.recipe / "host.sh";
  const std::string name =
      k.recipe.filename().empty() ? k.recipe.parent_path().filename().string() : k.recipe.filename().string();
  std::error_code ec;
  // The recipe's answer goes to a scratch file outside the cache: a build by a user who
  // may read the cache but not write it (the binaries already compiled) must work.
  TempDir work(fs::temp_directory_path(ec), "sprout-kubelet");
  const fs::path printed = work.path() / "folder";
  // Its progress (stderr) goes to a log read while it runs; the log is kept only when
  // the recipe fails, beside the cache's binaries when that folder is writable.
  fs::path logs = cache_dir / "kubernetes";
  fs::create_directories(logs, ec);
  if (!fs::is_directory(logs, ec) || ::access(logs.c_str(), W_OK) != 0) logs = fs::temp_directory_path(ec);
  const fs::path log = logs / ("compile-" + std::to_string(::getpid()) + ".log");
  Command cmd{{"bash", script.string(), cache_dir.string()},
              {{"SPROUT_ARCH", ArchName(arch)}, {"SPROUT_OFFLINE", offline ? "1" : "0"}}};
  cmd.stdout_file = printed.string();
  cmd.stderr_file = log.string();
  Result<RunResult> run = Fail("");
  {
    LogWatcher watcher(log, watch ? [&](const std::string& text) { watch(CompilePhase(ParseCompileLog(text, name))); }
                                  : std::function<void(const std::string&)>());
    run = Run(cmd);
  }
  auto text = ReadFile(log);
  CompileLog said = ParseCompileLog(text ? *text : "", name);
  if (!run || run->exit_code != 0) {
    return Fail(Where(k.binary.where) + ": the kubelet recipe " + script.string() + " failed" +
                (run ? " (exit " + std::to_string(run->exit_code) + ")" : ": " + run.error()) +
                (said.phase.empty() ? "" : " while: " + said.phase) + "; the last lines of its log, " + log.string() +
                ":\n" + LastLines(log, 25));
  }
  fs::remove(log, ec);
  auto folder = ReadFile(printed);
  const fs::path bin = fs::path(std::string(Trim(folder ? *folder : ""))) / "kubelet";
  if (!fs::is_regular_file(bin, ec)) {
    return Fail(Where(k.binary.where) + ": the kubelet recipe " + script.string() +
                " printed no folder with a kubelet");
  }
  if (auto elf = ElfArchOfFile(bin); elf && *elf != arch) {
    return Fail(Where(k.binary.where) + ": the kubelet recipe " + script.string() + " gave an " + ArchName(*elf) +
                " kubelet (" + bin.string() + ") for an " + ArchName(arch) +
                " image; its host.sh must honour SPROUT_ARCH");
  }
  k.binary.source = bin;
  k.folder = bin.parent_path();
  if (auto stack = StackOf(k); !stack) return Fail(stack.error());
  // The recipe's kube-proxy (Service ClusterIPs) goes in beside the kubelet.
  if (const fs::path proxy = bin.parent_path() / "kube-proxy"; fs::is_regular_file(proxy, ec)) k.proxy = proxy;
  if (said.folder.empty()) said.folder = bin.parent_path().string();
  return said;
}

std::map<std::string, fs::path> StaticPodTemplates(const Profile& p, const fs::path& data_dir,
                                                   std::vector<std::string>& errors) {
  // Templates by file name: sprout's own, replaced or extended by the profile's folders.
  std::map<std::string, fs::path> templates;
  for (const auto& c : ControlPlaneComponents()) templates[c + ".yaml"] = data_dir / "staticpods" / (c + ".yaml");
  for (const auto& dir : p.static_pods) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (e.is_regular_file() && e.path().extension() == ".yaml") templates[e.path().filename().string()] = e.path();
    }
    if (ec) errors.push_back("cannot list the staticPods folder " + dir.string() + ": " + ec.message());
  }
  for (const auto& left_out : p.without_static_pods) {
    if (templates.erase(left_out + ".yaml") == 0) {
      errors.push_back("withoutStaticPods names '" + left_out +
                       "', which is no static-pod template; the templates are " + [&] {
                         std::string names;
                         for (const auto& [n, unused] : templates)
                           names += (names.empty() ? "" : ", ") + n.substr(0, n.size() - 5);
                         return names;
                       }());
    }
  }
  return templates;
}

Status AddClusterFiles(const Profile& p, const fs::path& data_dir, std::vector<RootEntry>& add,
                       const std::optional<Stack>& stack_given) {
  std::vector<std::string> errors = VersionErrors(p);
  const auto templates = StaticPodTemplates(p, data_dir, errors);
  const StaticPodInput sample = SampleInput(p);
  for (const auto& [name, path] : templates) {
    auto text = ReadFile(path);
    if (!text) {
      errors.push_back("cannot read the static-pod template " + path.string() + ": " + text.error());
      continue;
    }
    auto rendered = RenderStaticPod(*text, sample, path.string());
    if (!rendered) {
      errors.push_back(rendered.error());
      continue;
    }
    // Only a node of a cluster (a profile with a Shoot) renders and runs the templates.
    if (p.shoot) {
      for (auto& e : AirGapErrors(p, name, path, *text)) errors.push_back(std::move(e));
    }
    add.push_back({RootEntry::Kind::kFile, "usr/share/sprout/staticpods/" + name, *text, {}, 0644});
  }
  if (!errors.empty()) return Fail("the cluster parts of the image cannot be built:\n" + Join(errors, "\n"));
  if (p.shoot)
    add.push_back({RootEntry::Kind::kFile, "usr/share/sprout/cluster.json", ShootToJson(*p.shoot), {}, 0644});
  // /etc is read-only on a node; certificates, kubeconfigs and rendered manifests live on
  // the state partition.
  add.push_back({RootEntry::Kind::kSymlink, "etc/kubernetes", "/var/lib/kubernetes", {}, 0777});
  if (p.pod_host == PodHost::kKubelet) {
    // Cluster DNS (docs/dns.md): CoreDNS behind kube-dns when the image preloads it (the
    // node agent creates its Deployment), else each node's own knotd and controller.
    std::string cluster_dns;
    if (p.shoot && PreloadsCoreDns(p)) {
      auto ip = kube::CoreDnsServiceIp(p.shoot->services_cidr);
      if (!ip) return Fail(p.shoot_file.string() + ": " + ip.error());
      cluster_dns = *ip;
    } else if (p.shoot) {
      if (auto s = AddDns(*p.shoot, add); !s) return s;
      cluster_dns = dns::kNodeLocalAddress;
    }
    auto stack = stack_given ? Result<Stack>(*stack_given) : StackOf(p.kubelet);
    if (!stack) return Fail(stack.error());
    auto config = KubeletConfigYaml(p.kubelet.config_yaml, cluster_dns, *stack);
    if (!config) return Fail(Where(p.kubelet.binary.where) + ": " + config.error());
    if (auto s = HostRootEntries(p.kubelet, add); !s) return s;
    add.push_back({RootEntry::Kind::kFile, "usr/bin/kubelet", "", p.kubelet.binary.source, 0755});
    add.push_back({RootEntry::Kind::kFile, "usr/lib/sprout/kubelet/config.yaml", *config, {}, 0644});
    add.push_back({RootEntry::Kind::kFile, "usr/lib/systemd/system/kubelet.service", KubeletUnit(*stack), {}, 0644});
    add.push_back({RootEntry::Kind::kSymlink,
                   "etc/systemd/system/multi-user.target.wants/kubelet.service",
                   "/usr/lib/systemd/system/kubelet.service",
                   {},
                   0777});
    if (!p.kubelet.proxy.empty()) {
      const std::string pods = p.shoot ? p.shoot->pods_cidr : "";
      add.push_back({RootEntry::Kind::kFile, "usr/bin/kube-proxy", "", p.kubelet.proxy, 0755});
      add.push_back({RootEntry::Kind::kFile,
                     "usr/lib/sprout/kube-proxy/config.yaml",
                     KubeProxyConfigYaml(pods, *stack),
                     {},
                     0644});
      add.push_back({RootEntry::Kind::kFile, "usr/lib/systemd/system/kube-proxy.service", KubeProxyUnit(), {}, 0644});
      add.push_back({RootEntry::Kind::kSymlink,
                     "etc/systemd/system/multi-user.target.wants/kube-proxy.service",
                     "/usr/lib/systemd/system/kube-proxy.service",
                     {},
                     0777});
      add.push_back(
          {RootEntry::Kind::kFile, "usr/lib/modules-load.d/sprout-kube-proxy.conf", KubeProxyModules(), {}, 0644});
      add.push_back(
          {RootEntry::Kind::kFile, "usr/lib/sysctl.d/60-sprout-kube-proxy.conf", KubeProxySysctl(), {}, 0644});
    }
  }
  return Ok{};
}

std::map<std::string, std::string> ComponentImages(const std::vector<oci::PreloadedImage>& images) {
  std::map<std::string, std::string> out;
  for (const auto& img : images) {
    std::string repo = img.reference.substr(0, img.reference.find('@'));
    const auto slash = repo.rfind('/');
    const auto colon = repo.rfind(':');
    if (colon != std::string::npos && (slash == std::string::npos || colon > slash)) repo = repo.substr(0, colon);
    const std::string component = oci::ComponentOf(img.reference);
    const std::string& digest = img.manifest_digest.empty() ? img.digest : img.manifest_digest;
    out[component] = repo + "@" + digest;
  }
  return out;
}

Status AddClusterRecord(const Profile& p, const std::vector<oci::PreloadedImage>& images, std::vector<RootEntry>& add) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  if (p.shoot) j = nlohmann::ordered_json::parse(ShootToJson(*p.shoot));
  j["podHost"] = p.pod_host == PodHost::kKubelet ? "kubelet" : "podman";
  if (p.backup.present) j["backup"] = {{"dir", p.backup.dir}, {"interval", p.backup.interval}, {"keep", p.backup.keep}};
  if (p.cert_validity_seconds != 0) j["certificates"] = {{"validitySeconds", p.cert_validity_seconds}};
  const auto components = ComponentImages(images);
  j["images"] = components;
  add.push_back({RootEntry::Kind::kFile, "usr/share/sprout/cluster.json", j.dump(2) + "\n", {}, 0644});
  if (p.pod_host == PodHost::kKubelet) {
    const auto pause = components.find("pause");
    if (pause == components.end()) {
      return Fail(
          "'podHost: kubelet' needs the pod sandbox image preloaded; add it to images:\n"
          "  - ref: localhost/sprout/pause:3.4.1\n    source: recipe:../images/kubernetes");
    }
    auto stack = StackOf(p.kubelet);
    if (!stack) return Fail(stack.error());
    add.push_back(
        {RootEntry::Kind::kFile, "etc/containerd/config.toml", ContainerdConfig(pause->second, *stack), {}, 0644});
  }
  return Ok{};
}

}  // namespace sprout
