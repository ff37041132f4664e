// Cluster DNS on an image that preloads CoreDNS (the Kubernetes 1.36 stack; docs/dns.md):
// the API objects a control-plane node's agent creates once its apiserver answers, as
// kubeadm lays CoreDNS out. A `coredns` Deployment labelled k8s-app=kube-dns behind the
// `kube-system/kube-dns` Service on the Shoot's 10th service address, its Corefile in the
// `coredns` ConfigMap, and its rights (the ServiceAccount, ClusterRole and binding
// system:coredns). A site's additions go in an optional `coredns-custom` ConfigMap, as
// on a Gardener shoot: its `*.override` keys are imported into the cluster server block
// (a `forward . 198.18.0.53`, say), its `*.server` keys as further server blocks.
// Pure: JSON text for the node agent to POST.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "kube/bootstrap.h"
#include "kube/node_list.h"
#include "util/result.h"

namespace sprout::kube {

struct CoreDnsInput {
  std::string image;       // the preloaded image, repository@sha256:... (cluster.json's images.coredns)
  std::string service_ip;  // the kube-dns Service's ClusterIP: the Shoot's 10th service address
  std::string domain = "cluster.local";
  // The reverse zones CoreDNS answers for: those that cover the Shoot's service and pod
  // networks ("96.10.in-addr.arpa" ... for 10.96.0.0/12; dns::ReverseZones).
  std::vector<std::string> reverse_zones;
  int replicas = 2;
  int ttl = 5;  // seconds, for every record (and the cache's ceiling)
};

// Corefile is the Corefile of the `coredns` ConfigMap: the kubernetes plugin for the
// domain and the reverse zones of the cluster's own networks, authoritative there (an
// address of them that names nothing is NXDOMAIN; pods verified: an A-B-C-D.NS.pod name
// answers only for a pod that exists), health and readiness for the probes, metrics on
// :9153, a cache, and reload (a changed ConfigMap takes effect with no restart). No
// forwarder, so no loop detection: an air-gapped site has no upstream, and a name outside
// the cluster is SERVFAIL; a site's `forward` goes in coredns-custom.
std::string Corefile(const CoreDnsInput& in);

// CoreDnsServiceIp is the 10th address of the services network ("10.96.0.10" for
// 10.96.0.0/12), where kubeadm and Gardener put kube-dns and the kubelet's clusterDNS
// points. A network too small or not a CIDR is an error.
Result<std::string> CoreDnsServiceIp(const std::string& services_cidr);

// CoreDnsInputFor is the input for an image's cluster record: its preloaded images
// (component -> repository@digest; without `coredns` an error saying the image runs no
// CoreDNS) and the Shoot's services and pods networks.
Result<CoreDnsInput> CoreDnsInputFor(const std::map<std::string, std::string>& images, const std::string& services_cidr,
                                     const std::string& pods_cidr);

// CoreDnsObjects are the objects in creation order (the rights and the configuration
// before the Deployment that uses them, the Service last). An input without an image
// or a service address is an error.
Result<std::vector<ApiObject>> CoreDnsObjects(const CoreDnsInput& in);

// CoreDnsList is the same objects as one v1 List, for `kubectl apply -f -`
// (`sprout-firstboot dns --print-coredns`).
Result<std::string> CoreDnsList(const CoreDnsInput& in);

// DnsPod is what the spreading below needs of a CoreDNS pod (GET
// /api/v1/namespaces/kube-system/pods?labelSelector=k8s-app%3Dkube-dns).
struct DnsPod {
  std::string name;
  std::string node;          // spec.nodeName ("" not scheduled yet)
  bool ready = false;        // status.conditions Ready is "True"
  bool terminating = false;  // metadata.deletionTimestamp is set
};

// ParseDnsPods reads a v1 PodList.
Result<std::vector<DnsPod>> ParseDnsPods(const std::string& json);

// CoreDnsPodToMove is the CoreDNS pod to delete so that the Deployment's ReplicaSet makes
// it again and the scheduler, with the preferred anti-affinity, puts it on a node that
// has none: the scheduler placed both at once when the first control-plane node alone
// was Ready, and it never moves a running pod. A pod is named only when every pod is
// scheduled, Ready and not terminating (so one move at a time, and never while a
// replica is missing), some node runs two or more of them, and a Ready node whose every
// taint the Deployment tolerates runs none. The name is the last, in order, of the
// crowded node's pods, so agents that decide at once delete the same pod. "" otherwise.
std::string CoreDnsPodToMove(const std::vector<DnsPod>& pods, const std::vector<NodeView>& nodes);

}  // namespace sprout::kube
