// The node agent: on a kubelet node, sprout-firstboot keeps the node's Kubernetes side
// in shape, every few seconds, from what formation left on disk and from the Node
// objects (lib/kube/nodes.h, lib/kube/bootstrap.h):
//   a worker, once formation saved its credentials: the Kubernetes CA, a
//     bootstrap-kubelet.conf with the bootstrap token, its kubelet arguments, and the
//     kubelet started (it then registers through TLS bootstrapping);
//   a control-plane node, once its apiserver answers: the bootstrap-token Secret and
//     kubeadm's bootstrap RBAC (created once, kept if present), on an image with
//     CoreDNS its Deployment behind kube-dns (created once: a site's edits stay), and
//     its own node-role.kubernetes.io/control-plane label;
//   every node, once the controller-manager gave it a pod subnet: the CNI
//     configuration for it, kube-proxy started, networking.services routed on the
//     link of the node's address (kube::ServiceRoute), and routes to the other nodes' pod
//     subnets, only those kube::PeerRoutes finds safe (inside networking.pods, clear
//     of the node and service networks and of each other, via an InternalIP inside
//     networking.nodes that is the address the etcd member list gives that node name
//     (read on control-plane nodes), else the address the Node was first seen with
//     (pod-routes.json keeps them across restarts)); the rest are logged once as
//     warnings and listed in kubernetes.json, never installed.
#pragma once

#include <csignal>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "kube/bootstrap.h"
#include "kube/node_list.h"

namespace sprout::firstboot {

struct NodeAgentOptions {
  std::string node_name;
  std::string node_ip;
  std::string cluster_name;
  bool control_plane = false;
  std::filesystem::path kubernetes_dir = "/etc/kubernetes";     // admin.conf, kubelet.conf, pki/
  std::filesystem::path pki_dir = "/etc/kubernetes/pki";        // a control-plane node's etcd client certificate
  std::filesystem::path state_dir = "/var/lib/sprout";          // bootstrap-token, worker/, pod-routes.json
  std::filesystem::path cni_dir = "/etc/kubernetes/cni/net.d";  // containerd's conf_dir
  bool routes = true;                                           // program routes with `ip route`
  kube::PodNetworks networks;                                   // the Shoot's networks that bound the routes
  std::filesystem::path kube_proxy_unit = "/usr/lib/systemd/system/kube-proxy.service";  // started if present
  std::vector<kube::ApiObject> coredns;  // on an image with CoreDNS: its objects (kube/coredns.h), else none
  bool master_label = true;              // label control-plane nodes master too (below 1.24)
};

using AgentLog = std::function<void(int priority, const std::string& message)>;

// RunNodeAgent checks every few seconds until *stop is set. A problem is logged when it
// changes (not every round) and retried.
void RunNodeAgent(const NodeAgentOptions& options, const volatile std::sig_atomic_t* stop, const AgentLog& log);

}  // namespace sprout::firstboot
