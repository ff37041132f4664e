// The cluster record baked into an image (/usr/share/sprout/cluster.json), as
// sprout-firstboot reads it.
#pragma once

#include <map>
#include <string>

#include "util/result.h"

namespace sprout {

// ClusterRecord is what the builder wrote: the Shoot's name and control-plane count
// (when the profile named a Shoot) and the preloaded image of each component.
struct ClusterRecord {
  std::string name;                           // "" when the image has no Shoot
  int expected_control_planes = 0;            // 0 when the image has no Shoot
  int max_control_planes = 0;                 // the control-plane pool's maximum (0: none)
  std::string kubernetes_version;             // the Shoot's spec.kubernetes.version ("" without a Shoot)
  std::string pods_cidr;                      // the Shoot's networking.pods
  std::string services_cidr;                  // the Shoot's networking.services
  std::string nodes_cidr;                     // the Shoot's networking.nodes
  std::map<std::string, std::string> images;  // component -> "repository@sha256:..."
  std::string pod_host = "podman";            // what runs the static pods: podman | kubelet
  std::string backup_dir;                     // the profile's backup.dir ("" none)
  long backup_interval = 0;                   // backup.interval in seconds (0 none)
  int backup_keep = 0;                        // backup.keep (0: the default)
  // certificates.validity in seconds: the nodes' own leaf certificates (0: one year).
  std::int64_t cert_validity_seconds = 0;
};

// ParseClusterRecord reads the JSON text of cluster.json.
Result<ClusterRecord> ParseClusterRecord(const std::string& json);

}  // namespace sprout
