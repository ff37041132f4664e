// The node agent: once the kubelet runs, sprout-firstboot keeps this node's Kubernetes
// side in shape from the Node objects (lib/kube/nodes.h): the control-plane label on a
// control-plane node, the CNI configuration for the pod subnet the controller-manager
// gave it, and routes to every other node's pod subnet.
#pragma once

#include <csignal>
#include <filesystem>
#include <functional>
#include <string>

namespace sprout::firstboot {

struct NodeAgentOptions {
  std::string node_name;
  // Read the nodes with the admin kubeconfig on a control-plane node (it also labels the
  // node), else with the kubelet's own.
  std::filesystem::path admin_kubeconfig = "/etc/kubernetes/admin.conf";
  std::filesystem::path kubelet_kubeconfig = "/etc/kubernetes/kubelet.conf";
  bool control_plane = false;
  std::filesystem::path cni_dir = "/etc/kubernetes/cni/net.d";  // containerd's conf_dir
  bool routes = true;                                            // program routes with `ip route`
};

using AgentLog = std::function<void(int priority, const std::string& message)>;

// RunNodeAgent checks every few seconds until *stop is set. Problems are logged once
// each (not every round) and retried.
void RunNodeAgent(const NodeAgentOptions& options, const volatile std::sig_atomic_t* stop, const AgentLog& log);

}  // namespace sprout::firstboot
