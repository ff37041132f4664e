// The control-plane node's files on disk: the Kubernetes certificates and kubeconfigs
// (kube/certs.h) and the static pods of kube-apiserver, kube-controller-manager and
// kube-scheduler, rendered from the baked templates. The disk edge of lib/kube.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "kube/certs.h"
#include "staticpod/staticpod.h"
#include "util/result.h"

namespace sprout::kube {

// ControlPlanePaths says where the files go (kubeadm's layout by default).
struct ControlPlanePaths {
  std::filesystem::path kubernetes_dir = "/etc/kubernetes";           // *.conf
  std::filesystem::path pki_dir = "/etc/kubernetes/pki";              // CAs (from formation) and pki/* files
  std::filesystem::path templates = "/usr/share/sprout/staticpods";   // the baked templates
  std::filesystem::path manifests = "/etc/kubernetes/manifests";      // the kubelet's staticPodPath
  std::filesystem::path audit_log_dir = "/var/log/kubernetes/audit";  // the apiserver's audit log (state partition)
};

// ControlPlaneReport says what WriteControlPlane changed.
struct ControlPlaneReport {
  std::vector<std::string> issued;     // files (re)written, relative to kubernetes_dir
  std::vector<std::string> manifests;  // static pods whose manifest changed
};

// ControlPlaneComponentsAfterEtcd are the static pods this step renders.
const std::vector<std::string>& ControlPlaneComponentsAfterEtcd();

// WriteControlPlaneFiles reads the cluster CAs from paths.pki_dir, keeps every
// certificate and kubeconfig that is still good and issues the rest
// (UpdateControlPlaneFiles); it returns the files it wrote. The kubelet of a
// control-plane node needs kubelet.conf before etcd runs under it, so this runs first.
Result<std::vector<std::string>> WriteControlPlaneFiles(const ControlPlanePaths& paths, const ControlPlaneNode& node);

// ApiserverStart says when a control-plane node renders its kube-apiserver,
// kube-controller-manager and kube-scheduler pods once it is a voting etcd member.
enum class ApiserverStart {
  kNow,              // the founder, or pods rendered before (a reboot: never wait)
  kAfterOneIsReady,  // once another member's apiserver answers /readyz, or after a bound
};

// DecideApiserverStart: the first start of a cluster's apiservers is staggered. The
// founder's apiserver alone writes the bootstrap objects (about 100 RBAC roles,
// priority levels and the like, each a write through etcd); the others start once it
// is ready and find them there. Started together, three apiservers make the same
// writes three times over on a quorum that is still settling.
ApiserverStart DecideApiserverStart(bool founder, bool rendered_before);

// kApiserverStaggerLimitSeconds bounds the wait of kAfterOneIsReady: a founder that
// died before its apiserver was ready must not keep the others waiting for good.
inline constexpr int kApiserverStaggerLimitSeconds = 600;

// WriteControlPlane reads the cluster CAs from paths.pki_dir, keeps every certificate
// and kubeconfig that is still good and issues the rest (UpdateControlPlaneFiles),
// makes paths.audit_log_dir (0700), then renders the three control-plane static pods
// from pods. A component whose image
// is not preloaded is an error that names it, never a silent skip.
Result<ControlPlaneReport> WriteControlPlane(const ControlPlanePaths& paths, const ControlPlaneNode& node,
                                             const StaticPodInput& pods);

}  // namespace sprout::kube
