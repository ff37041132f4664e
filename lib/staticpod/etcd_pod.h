// StaticPodEtcdLauncher: etcd as a static pod (podman host), for the formation daemon.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <string>

#include "formationd/etcd.h"
#include "staticpod/staticpod.h"

namespace sprout {

// EtcdPodInput turns the daemon's etcd arguments into template values: the member name,
// its address (from the peer URL), the initial cluster, state and token, the PKI folder
// (from the CA file's place in kubeadm's layout) and the data folder. images names the
// preloaded image of each component.
Result<StaticPodInput> EtcdPodInput(const formation::EtcdArgs& args, const std::map<std::string, std::string>& images,
                                    const std::string& cluster_name);

// StaticPodEtcdLauncher renders the baked etcd template into the manifest folder and
// has the node's pod host run it: podman-kube@.service runs that one manifest, or the
// kubelet (kubelet.service) runs every manifest of the folder. systemd supervises
// either; Running asks systemd.
class StaticPodEtcdLauncher : public formation::EtcdLauncher {
 public:
  struct Paths {
    std::filesystem::path templates = "/usr/share/sprout/staticpods";
    std::filesystem::path manifests = "/etc/kubernetes/manifests";
  };
  enum class Host { kPodman, kKubelet };
  // prepare runs before each start (the kubelet host: write the kubelet's kubeconfig,
  // which it needs before it runs any pod); an error stops the start.
  StaticPodEtcdLauncher(Paths paths, std::map<std::string, std::string> images, std::string cluster_name,
                        Host host = Host::kPodman, std::function<Status()> prepare = {})
      : paths_(std::move(paths)),
        images_(std::move(images)),
        cluster_name_(std::move(cluster_name)),
        host_(host),
        prepare_(std::move(prepare)) {}

  Status Start(const formation::EtcdArgs& args) override;
  bool Running() override;
  void Stop() override;
  std::string Describe() const override;

 private:
  Paths paths_;
  std::map<std::string, std::string> images_;
  std::string cluster_name_;
  Host host_;
  std::function<Status()> prepare_;
  bool Ask();
  std::string unit_;
  bool running_ = false;
  std::chrono::steady_clock::time_point checked_{};
};

}  // namespace sprout
