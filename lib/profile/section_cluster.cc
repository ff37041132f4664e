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
  if (auto n = root["certificates"]) ParseCertificates(n, layer);
  if (auto n = root["kubelet"]) ParseKubelet(n, layer);
}

// `certificates:` the lifetime of the leaf certificates and kubeconfigs a node issues
// itself from the cluster CAs; each is renewed two thirds into it (docs/control-plane.md).
void LayerParser::ParseCertificates(const YAML::Node& n, Layer& layer) {
  if (!ExpectMap(n, "certificates")) return;
  CheckKeys(n, "'certificates'", {"validity"});
  if (auto v = n["validity"]) {
    auto s = String(v, "certificates.validity");
    auto seconds = s ? ParseDuration(*s) : std::nullopt;
    // From a minute (renewal checks run at most every 5 s) to the CAs' ten years.
    constexpr std::int64_t kMin = 60, kMax = 3650LL * 86400;
    if (s && (!seconds || *seconds < kMin || *seconds > kMax)) {
      diags_.Error(At(v), "'certificates.validity' must be a duration from 1m to 3650d; got '" + *s + "'",
                   "write seconds or a number with s, m, h or d, such as 365d (the default) or 90d");
    } else if (seconds) {
      layer.cert_validity = *seconds;
    }
  }
}

}  // namespace sprout
