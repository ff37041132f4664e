// Static-pod templates of the control plane: rendering per node, and Pod validation.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/diag.h"
#include "util/result.h"

namespace sprout {

// ControlPlaneComponents lists the baked templates, in start order.
const std::vector<std::string>& ControlPlaneComponents();

// EtcdPeer is one member of the etcd initial cluster.
struct EtcdPeer {
  std::string name;
  std::string ip;
};

// StaticPodInput is everything a node knows when it completes the templates.
struct StaticPodInput {
  std::string node_name;
  std::string node_ip;
  std::string cluster_name;
  std::string kubernetes_version;
  std::string pods_cidr;
  std::string services_cidr;
  std::vector<EtcdPeer> etcd_members;  // the initial cluster (founding set, or members + this joiner)
  std::string etcd_initial_cluster_state = "new";
  std::string etcd_cluster_token;
  std::map<std::string, std::string> images;  // component name -> "reference@sha256:..."
  std::string pki_dir = "/etc/kubernetes/pki";
  std::string kubernetes_dir = "/etc/kubernetes";
  std::string etcd_data_dir = "/var/lib/etcd";
  std::string audit_log_dir = "/var/log/kubernetes/audit";  // the apiserver's audit log
};

// EtcdInitialCluster renders "name=https://ip:2380,..." in the given order.
std::string EtcdInitialCluster(const std::vector<EtcdPeer>& members);

// TemplateValues maps every placeholder name (docs/shoot.md) to its value. Components
// without an image get no image_* entry, so their template fails to render.
std::map<std::string, std::string> TemplateValues(const StaticPodInput& in);

// RenderTemplate replaces every {{name}} in text. An unknown or unterminated placeholder
// is an error naming the template (name) and its line.
Result<std::string> RenderTemplate(std::string_view text, const std::map<std::string, std::string>& values,
                                   const std::string& name);

// ValidatePod checks that yaml is a usable Pod: apiVersion v1, kind Pod, metadata.name,
// at least one container with a name and an image, unique container names, and every
// volumeMount naming a defined volume. Problems go into diags, located in file name.
void ValidatePod(std::string_view yaml, const std::string& name, Diagnostics& diags);

// RenderStaticPod renders one template and validates the result.
Result<std::string> RenderStaticPod(std::string_view text, const StaticPodInput& in, const std::string& name);

// ForPodman adapts a rendered manifest for `podman kube play`: podman runs probes as
// commands inside the container (the images have no curl), so HTTP probes are dropped;
// liveness is left to systemd's restart of podman-kube@.service.
Result<std::string> ForPodman(std::string_view pod_yaml);

}  // namespace sprout
