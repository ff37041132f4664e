// The cluster settings: the Shoot manifest, static pods, the pod host, and the backup
// and kubelet blocks (section_backup.cc, section_kubelet.cc).
#include <yaml-cpp/yaml.h>

#include "profile/layer.h"

namespace sprout {

namespace fs = std::filesystem;

void LayerParser::ParseCluster(const YAML::Node& root, Layer& layer) {
  if (auto n = root["shoot"]) {
    if (auto s = String(n, "shoot")) {
      fs::path p = Resolve(*s);
      std::error_code ec;
      if (!fs::is_regular_file(p, ec)) {
        diags_.Error(At(n), "Shoot manifest '" + *s + "' does not exist (looked for " + p.string() + ")",
                     "relative paths start at the profile's folder");
      } else {
        layer.shoot = p;
        layer.shoot_where = At(n);
      }
    }
  }
  if (auto n = root["staticPods"]) {
    layer.static_pods = Folders(n, "staticPods", "an item of staticPods", "staticPods folder",
                                "a folder of Pod manifests (NAME.yaml) that replace or add to sprout's templates");
  }
  if (auto n = root["withoutStaticPods"]) {
    for (const auto& item : Seq(n, "withoutStaticPods")) {
      auto s = String(item, "an item of withoutStaticPods");
      if (s) layer.without_static_pods.push_back(*s);
    }
  }
  if (auto n = root["podHost"]) {
    layer.pod_host =
        OneOf<PodHost>(n, "podHost", {{"podman", PodHost::kPodman}, {"kubelet", PodHost::kKubelet}},
                       "podman runs the static pods with podman-kube@.service; kubelet needs 'kubelet:' too");
  }
  if (auto n = root["backup"]) ParseBackup(n, layer);
  if (auto n = root["kubelet"]) ParseKubelet(n, layer);
}

}  // namespace sprout
