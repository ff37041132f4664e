#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <thread>

#include "firstboot/update_node.h"
#include "kube/api.h"
#include "kube/node_list.h"
#include "update/checks.h"
#include "update/health.h"
#include "util/process.h"
#include "util/text.h"

namespace sprout::firstboot::update_cmd {

using namespace sprout::update;

// Bless renames the booted, counted entry to its committed name.
int Bless(const Options& o) {
  Lock lock;
  auto node = OpenNode(o, true);
  if (!node) {
    std::cerr << "sprout-firstboot update: " << node.error() << "\n";
    return 1;
  }
  auto booted = BootedEntry(node->entries, node->running_hash);
  if (!booted || !booted->name.counted) {
    std::cout << "update: the booted entry " << (booted ? booted->name.file : std::string("(none)"))
              << " has no boot counter; nothing to commit\n";
    return 0;
  }
  const fs::path dir = node->esp / "loader" / "entries";
  const std::string to = CommittedName(booted->name);
  std::error_code ec;
  fs::rename(dir / booted->name.file, dir / to, ec);
  if (ec) {
    std::cerr << "sprout-firstboot update: cannot commit " << booted->name.file << ": " << ec.message() << "\n";
    return 1;
  }
  if (auto s = SyncPath(dir); !s) std::cerr << "sprout-firstboot update: " << s.error() << "\n";
  node->esp_mount.reset();
  Record(o, "update bless");
  std::cout << "update: committed slot " << booted->name.slot << ": " << booted->name.file << " -> " << to << "\n";
  return 0;
}

namespace {

std::string FirstbootStatusText() {
  auto r = Run({{"systemctl", "show", "-p", "StatusText", "--value", "sprout-firstboot.service"}});
  return r && r->exit_code == 0 ? std::string(Trim(r->output)) : std::string();
}

// KubeStaticPods are the static pods this node runs under a kubelet as part of the
// Kubernetes control plane (the manifests' names); empty on a node without one (the
// etcd-only podman host, a worker), whose gate is sprout-firstboot's status alone.
std::vector<std::string> KubeStaticPods() {
  std::error_code ec;
  std::vector<std::string> pods;
  if (!fs::exists("/usr/lib/sprout/kubelet/config.yaml", ec) || !fs::exists("/etc/kubernetes/admin.conf", ec)) {
    return pods;
  }
  for (const auto& e : fs::directory_iterator("/etc/kubernetes/manifests", ec)) {
    if (e.path().extension() == ".yaml") pods.push_back(e.path().stem().string());
  }
  std::sort(pods.begin(), pods.end());
  return pods;
}

// KubeProblem asks this node's apiserver (over loopback, as the cluster's admin) about
// its readiness, its Node and its mirror pods; "" when all are healthy.
std::string KubeProblem(const std::vector<std::string>& static_pods) {
  auto text = ReadFile("/etc/kubernetes/admin.conf");
  if (!text) return text.error();
  auto k = kube::ParseKubeconfig(*text);
  if (!k) return "/etc/kubernetes/admin.conf: " + k.error();
  k->server = "https://127.0.0.1:6443";
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string node = host;
  update::KubeView view;
  auto readyz = kube::ApiRequest(*k, "GET", "/readyz");
  if (!readyz) {
    view.readyz_body = readyz.error();
  } else {
    view.readyz_status = readyz->status;
    view.readyz_body = readyz->body;
  }
  if (view.readyz_status == 200) {
    auto nodes = kube::ApiRequest(*k, "GET", "/api/v1/nodes?fieldSelector=metadata.name%3D" + node);
    if (nodes && nodes->status == 200) {
      if (auto list = kube::ParseNodeList(nodes->body); list && !list->empty()) {
        view.node_listed = true;
        view.node_ready = list->front().ready;
      }
    }
    auto pods =
        kube::ApiRequest(*k, "GET", "/api/v1/namespaces/kube-system/pods?fieldSelector=spec.nodeName%3D" + node);
    if (pods && pods->status == 200) {
      if (auto list = update::ParsePodList(pods->body)) view.pods = *list;
    }
  }
  return update::KubeHealthProblem(node, static_pods, view);
}

// EfiBootCounted says whether systemd-boot booted an entry with a boot counter (its
// LoaderBootCountPath variable); nullopt when the EFI variables do not say (no efivarfs,
// or not booted by systemd-boot).
std::optional<bool> EfiBootCounted() {
  const fs::path vars = "/sys/firmware/efi/efivars";
  const std::string vendor = "-4a67b082-0a4c-41cf-b6c7-440b29bb8c4f";  // systemd-boot's loader variables
  std::error_code ec;
  if (!fs::exists(vars / ("LoaderInfo" + vendor), ec)) return std::nullopt;
  return fs::exists(vars / ("LoaderBootCountPath" + vendor), ec);
}

}  // namespace

// Gate succeeds at once on an entry without a counter; on a trial it waits until
// sprout-firstboot reports the node healthy, and fails after the timeout. A boot it
// cannot judge (the disk or ESP unreadable) fails, unless it cannot be a trial
// (UnreadableBoot).
int Gate(const Options& o) {
  std::optional<Entry> booted;
  {
    Lock lock;
    // The ESP may not be mountable the moment this boot reaches the gate; a few tries.
    auto node = OpenNode(o, false);
    for (int attempt = 1; !node && attempt < 3; ++attempt) {
      std::this_thread::sleep_for(std::chrono::seconds(5));
      node = OpenNode(o, false);
    }
    if (!node) {
      auto cmdline = ReadFile(o.cmdline);
      const GateVerdict v = UnreadableBoot(cmdline ? *cmdline : "", EfiBootCounted(), node.error());
      std::cout << "update: " << v.message << "\n";
      return v.pass ? 0 : 1;
    }
    booted = BootedEntry(node->entries, node->running_hash);
  }
  {
    Lock lock;
    Record(o, "update gate");
  }
  if (!booted || !booted->name.counted) {
    std::cout << "update: the booted entry is committed; no health gate\n";
    return 0;
  }
  std::cout << "update: slot " << booted->name.slot << " on trial (" << booted->name.file << "); waiting up to "
            << o.timeout << " s for sprout-firstboot to report this node healthy\n"
            << std::flush;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.timeout);
  const auto static_pods = KubeStaticPods();
  std::string last;
  std::string kube_problem;
  bool member = false;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!member) {
      last = FirstbootStatusText();
      member = HealthyStatus(last);
      if (member && !static_pods.empty()) {
        std::cout << "update: sprout-firstboot: " << last << "; now waiting for the Kubernetes side ("
                  << Join(static_pods, ", ") << ", the kubelet)\n"
                  << std::flush;
      }
    }
    if (member) {
      kube_problem = static_pods.empty() ? "" : KubeProblem(static_pods);
      if (kube_problem.empty()) {
        std::cout << "update: healthy (sprout-firstboot: " << last
                  << (static_pods.empty() ? ""
                                          : "; the apiserver is ready, the Node is Ready, its static pods are Ready")
                  << "); the boot may complete\n";
        return 0;
      }
    }
    std::this_thread::sleep_for(std::chrono::seconds(5));
  }
  std::cout << "update: slot " << booted->name.slot << " not healthy after " << o.timeout
            << " s (sprout-firstboot: " << (last.empty() ? "-" : last)
            << (kube_problem.empty() ? "" : "; " + kube_problem) << "); failing the boot\n";
  return 1;
}

}  // namespace sprout::firstboot::update_cmd
