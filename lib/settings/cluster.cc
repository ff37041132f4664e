#include "settings/cluster.h"

#include <nlohmann/json.hpp>

namespace sprout {

Result<ClusterRecord> ParseClusterRecord(const std::string& json) {
  ClusterRecord r;
  try {
    auto j = nlohmann::json::parse(json);
    if (!j.is_object()) return Fail("cluster.json is not a JSON object");
    if (j.contains("name")) r.name = j["name"].get<std::string>();
    if (j.contains("controlPlane")) {
      r.expected_control_planes = j["controlPlane"].value("minimum", 0);
      r.max_control_planes = j["controlPlane"].value("maximum", 0);
    }
    r.kubernetes_version = j.value("kubernetesVersion", "");
    if (j.contains("networking") && j["networking"].is_object()) {
      r.pods_cidr = j["networking"].value("pods", "");
      r.services_cidr = j["networking"].value("services", "");
      r.nodes_cidr = j["networking"].value("nodes", "");
    }
    r.pod_host = j.value("podHost", "podman");
    if (r.pod_host != "podman" && r.pod_host != "kubelet") {
      return Fail("cluster.json: podHost '" + r.pod_host + "' is neither podman nor kubelet");
    }
    if (j.contains("backup") && j["backup"].is_object()) {
      r.backup_dir = j["backup"].value("dir", "");
      r.backup_interval = j["backup"].value("interval", 0L);
      r.backup_keep = j["backup"].value("keep", 0);
    }
    if (j.contains("certificates") && j["certificates"].is_object()) {
      r.cert_validity_seconds = j["certificates"].value("validitySeconds", std::int64_t{0});
      if (r.cert_validity_seconds < 0) return Fail("cluster.json: certificates.validitySeconds is negative");
    }
    if (j.contains("images")) {
      for (const auto& [component, image] : j["images"].items()) r.images[component] = image.get<std::string>();
    }
  } catch (const std::exception& e) {
    return Fail(std::string("cluster.json cannot be read: ") + e.what());
  }
  return r;
}

}  // namespace sprout
