// What sprout-firstboot needs to know about the cluster's Node objects, and what it
// derives from them: this node's CNI configuration, routes to the other nodes' pod
// subnets, and the control-plane role label. Pure over plain structs; the HTTP side
// is kube/api.h.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "util/result.h"

namespace sprout::kube {

// NodeView is the part of a v1 Node that sprout reads.
struct NodeView {
  std::string name;                           // metadata.name
  std::string pod_cidr;                       // spec.podCIDR (empty until the controller assigns one)
  std::string internal_ip;                    // the first status.addresses entry of type InternalIP
  std::map<std::string, std::string> labels;  // metadata.labels
  std::vector<std::string> taint_keys;        // spec.taints[].key
  bool ready = false;                         // status.conditions Ready is "True"
  std::string created;                        // metadata.creationTimestamp, set by the API server ("" if absent)
};

// ParseNodeList reads a v1 NodeList (GET /api/v1/nodes) in the order of its items.
Result<std::vector<NodeView>> ParseNodeList(const std::string& json);

// CniConfList is /etc/cni/net.d/10-sprout.conflist for a node owning pod_cidr: a
// bridge cni0 with host-local addresses from pod_cidr, then portmap for hostPort.
std::string CniConfList(const std::string& pod_cidr);

// PodRoute is "ip route replace CIDR via VIA": another node's pod subnet behind it.
struct PodRoute {
  std::string cidr;  // the other node's spec.podCIDR
  std::string via;   // the other node's InternalIP
  bool operator==(const PodRoute&) const = default;
};

// PodNetworks are the Shoot's networks (spec.networking, from the cluster record) that
// bound which pod subnets may be routed; "" is a network the Shoot does not give.
struct PodNetworks {
  std::string pods;      // networking.pods: every routed subnet must lie inside it
  std::string nodes;     // networking.nodes: no routed subnet may touch it; every next hop lies in it
  std::string services;  // networking.services: nor this
};

// SkippedRoute is a Node whose pod subnet is not routed, and why.
struct SkippedRoute {
  std::string node;
  std::string cidr;
  std::string why;
  bool operator==(const SkippedRoute&) const = default;
};

// KnownAddresses are the node addresses formation vouches for, by node name: on a
// control-plane node, each started etcd member's name and the host of its first peer
// URL (formation::MemberAddresses; etcd's member name is the node name). Formation
// keeps no record of the workers it handed credentials to (a worker's join request
// names it only for the log, and proves no more than the worker secret), and a worker
// cannot read etcd, so a worker's agent has none: empty.
using KnownAddresses = std::map<std::string, std::string>;

// kMaxRememberedNodes bounds RouteMemory, which any holder of the worker secret could
// otherwise grow by creating Nodes: past it, a Node not yet remembered is not routed.
inline constexpr std::size_t kMaxRememberedNodes = 4096;

// RouteMemory is what the node agent keeps of other Nodes between rounds and across
// restarts (pod-routes.json in the state folder): the address each Node name was first
// seen with as a next hop that passed the checks. It is never forgotten, not even when
// the Node is deleted: deleting and creating its own Node again is within the power of
// whoever holds that node's kubelet certificate.
struct RouteMemory {
  std::map<std::string, std::string> first_seen;  // node name -> InternalIP
  bool operator==(const RouteMemory&) const = default;
};

// ParseRouteMemory reads pod-routes.json ({"version": 1, "firstSeen": {NAME: IP}}). It
// refuses anything else with a reason: a version it does not know, more than
// kMaxRememberedNodes entries, an empty name or an address that is not one (a fuzzing
// entry point).
Result<RouteMemory> ParseRouteMemory(const std::string& json);

// RenderRouteMemory is memory as pod-routes.json; ParseRouteMemory reads it back.
std::string RenderRouteMemory(const RouteMemory& memory);

// PodRoutePlan is what PeerRoutes decided: the routes to install, the Nodes refused, and
// the memory to keep for the next round.
struct PodRoutePlan {
  std::vector<PodRoute> routes;       // sorted by cidr
  std::vector<SkippedRoute> skipped;  // each refused Node once: first those bad on their own, then overlaps
  RouteMemory memory;                 // the memory passed in, plus each Node first seen now
};

// PeerRoutes are the routes to every node but self that has a pod subnet and an
// InternalIP, sorted by cidr, keeping only those that are safe to route. Any holder of
// the bootstrap token can create a Node with any spec.podCIDR and any InternalIP, and
// any holder of the worker secret can get a kubelet certificate for an existing node's
// name and rewrite that Node's InternalIP. So a Node is routed only when:
//   its pod subnet is a network inside networking.pods (same family, prefix at least
//   as long), written in its canonical form, touching neither networking.nodes nor
//   networking.services nor self's own pod subnet;
//   its InternalIP (the next hop) is an address in its canonical form inside
//   networking.nodes;
//   where known names the Node, the InternalIP is that address; where known does not,
//   it is the address memory first saw for that name (a name not seen before is
//   remembered with its InternalIP now: trust on first use). A changed InternalIP is
//   thus refused unless formation's record names the new address, and then memory
//   follows the record;
//   its pod subnet overlaps no other routable Node's, or it wins the overlap: a Node
//   whose address formation's record names beats one whose address it does not, then
//   the older Node (metadata.creationTimestamp, which the API server sets) beats the
//   newer. Where neither tells them apart, neither is routed. The controller-manager's
//   allocator never gives out overlapping subnets, so an overlap is always someone's
//   doing.
// Without a valid networking.pods or networking.nodes nothing is routed. A Node without
// a pod subnet is not routed but its address is remembered all the same, so the
// first-use window closes when the kubelet registers, not when the subnet is given.
PodRoutePlan PeerRoutes(const std::string& self, const std::vector<NodeView>& nodes, const PodNetworks& networks,
                        const KnownAddresses& known = {}, const RouteMemory& memory = {});

// KernelRoutes reads what `ip route show` (or `ip -6 route show`) printed: each route
// that has a next hop, as destination -> gateway. A host route the kernel prints
// without its length gets /32 (or /128), so it compares with a CIDR's text.
std::map<std::string, std::string> KernelRoutes(const std::string& ip_route_output);

// MissingRoutes are the planned routes the kernel's table lacks, or holds with another
// next hop: the node agent installs these every round, so a route flushed by hand or
// lost with a link comes back, and a next hop the plan changed (a control-plane node
// that formation's record now gives another address; PeerRoutes refuses other changes)
// is followed.
std::vector<PodRoute> MissingRoutes(const std::vector<PodRoute>& planned,
                                    const std::map<std::string, std::string>& kernel);

// ServiceRoute is the route a node needs so that its own processes reach Service
// ClusterIPs: networking.services on the node's link. kube-proxy rewrites a ClusterIP to
// a pod's address in iptables' OUTPUT chain, but the kernel routes a host's packet
// before that chain runs, so a node with no default route (an air-gapped site) fails
// every connect to a ClusterIP with "Network is unreachable". That breaks the
// apiserver's calls to admission and conversion webhooks and to aggregated APIs, which
// it makes to their Services' ClusterIPs from the node's network. Pods are not
// affected: their packets are rewritten as they enter the node. Empty when
// networking.services is not a valid network.
std::optional<std::string> ServiceRoute(const PodNetworks& networks);

// ControlPlaneLabelPatch is a JSON merge patch (application/merge-patch+json) for a
// Node that sets node-role.kubernetes.io/control-plane "" and, with master (for tools of
// the 1.20 era), node-role.kubernetes.io/master "" too; without master it removes that
// label, which kubeadm stopped setting in 1.24.
std::string ControlPlaneLabelPatch(bool master = true);

// NeedsControlPlaneLabel says whether node's labels differ from what
// ControlPlaneLabelPatch(master) makes them.
bool NeedsControlPlaneLabel(const NodeView& node, bool master = true);

// WantsMasterLabel says whether a cluster of this Kubernetes version ("1.20.2",
// "v1.36.5") labels its control-plane nodes master too: below 1.24, and when the version
// cannot be read (the old behaviour).
bool WantsMasterLabel(const std::string& kubernetes_version);

}  // namespace sprout::kube
