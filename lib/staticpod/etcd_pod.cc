#include "staticpod/etcd_pod.h"

#include "staticpod/podhost.h"
#include "util/process.h"
#include "util/text.h"

namespace sprout {

namespace fs = std::filesystem;

Result<StaticPodInput> EtcdPodInput(const formation::EtcdArgs& args, const std::map<std::string, std::string>& images,
                                    const std::string& cluster_name) {
  StaticPodInput in;
  in.node_name = args.name;
  in.node_ip = formation::HostOf(args.peer_url);
  in.cluster_name = cluster_name;
  in.etcd_initial_cluster_state = args.initial_cluster_state;
  in.etcd_cluster_token = args.initial_cluster_token.empty() ? cluster_name : args.initial_cluster_token;
  in.etcd_data_dir = args.data_dir;
  // kubeadm's layout: <pki>/etcd/ca.crt
  const fs::path ca(args.trusted_ca_file);
  if (ca.filename() != "ca.crt" || ca.parent_path().filename() != "etcd") {
    return Fail("the etcd CA " + args.trusted_ca_file + " is not in kubeadm's layout (<pki>/etcd/ca.crt)");
  }
  in.pki_dir = ca.parent_path().parent_path().string();
  for (const auto& entry : Split(args.initial_cluster, ',')) {
    auto eq = entry.find('=');
    if (eq == std::string::npos) return Fail("bad --initial-cluster entry '" + entry + "'");
    in.etcd_members.push_back({entry.substr(0, eq), formation::HostOf(entry.substr(eq + 1))});
  }
  in.images = images;
  in.pods_cidr = "unused";
  in.services_cidr = "unused";
  in.kubernetes_version = "unused";
  return in;
}

Status StaticPodEtcdLauncher::Start(const formation::EtcdArgs& args) {
  auto in = EtcdPodInput(args, images_, cluster_name_);
  if (!in) return Fail(in.error());
  if (prepare_) {
    if (auto s = prepare_(); !s) return Fail(s.error());
  }
  const bool podman = host_ == Host::kPodman;
  auto written = WriteNodeManifests(paths_.templates, paths_.manifests, *in, podman, {"etcd"});
  if (!written) return Fail(written.error());
  if (written->written.empty()) {
    return Fail("etcd cannot run as a static pod: " +
                (written->skipped.empty() ? "no etcd template" : written->skipped[0]));
  }
  unit_ = podman ? PodmanKubeUnit(written->written[0].manifest) : "kubelet.service";
  // A running podman pod with the same manifest is adopted (sprout-firstboot restarted).
  if (podman && written->changed.empty() && Ask()) {
    running_ = true;
    checked_ = std::chrono::steady_clock::now();
    return Ok{};
  }
  running_ = true;
  checked_ = std::chrono::steady_clock::now();
  // The kubelet watches the folder: a new or changed manifest needs no restart, only a
  // running kubelet (the first boot starts it here, once its kubeconfig exists). A
  // podman-kube@ unit runs its one manifest, so a new one means a restart.
  const std::string verb = podman ? "restart" : "start";
  auto r = Run({{"systemctl", verb, "--no-block", unit_}});
  if (!r) return Fail(r.error());
  if (r->exit_code != 0) return Fail("systemctl " + verb + " " + unit_ + " failed: " + r->output);
  return Ok{};
}

bool StaticPodEtcdLauncher::Running() {
  if (unit_.empty()) return false;
  // The daemon asks often; systemd is asked at most every ten seconds. Each ask forks
  // systemctl and wakes systemd: at one ask every two seconds, top on a loaded emulated
  // node showed each of the two at about 10 % of its CPU.
  const auto now = std::chrono::steady_clock::now();
  if (now - checked_ < std::chrono::seconds(10)) return running_;
  checked_ = now;
  running_ = Ask();
  return running_;
}

bool StaticPodEtcdLauncher::Ask() {
  auto r = Run({{"systemctl", "show", "--property=ActiveState", "--value", unit_}});
  if (!r || r->exit_code != 0) return false;
  const std::string state(Trim(r->output));
  return state == "active" || state == "activating" || state == "reloading";
}

void StaticPodEtcdLauncher::Stop() {
  // Nothing: the pod is a unit of its own, so etcd outlives a restart of
  // sprout-firstboot, and systemd stops it at shutdown.
}

std::string StaticPodEtcdLauncher::Describe() const { return unit_.empty() ? "static pod (not started)" : unit_; }

}  // namespace sprout
