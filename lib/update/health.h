// The Kubernetes side of the update health gate (docs/updates.md): on a node that runs
// the Kubernetes control plane, a new slot is healthy only when this node's apiserver
// is ready, its Node is Ready (the kubelet reports) and each of its static pods has a
// Ready mirror pod. Pure over what the API answered; the requests are the gate's edge.
#pragma once

#include <string>
#include <vector>

#include "util/result.h"

namespace sprout::update {

// PodReadiness is the part of a v1 Pod the gate reads.
struct PodReadiness {
  std::string name;    // metadata.name
  std::string node;    // spec.nodeName
  bool ready = false;  // status.conditions Ready is "True"
};

// ParsePodList reads a v1 PodList (GET /api/v1/namespaces/NS/pods).
Result<std::vector<PodReadiness>> ParsePodList(const std::string& json);

// KubeView is what the gate learned this round.
struct KubeView {
  long readyz_status = 0;          // HTTP status of this node's apiserver's /readyz (0: no answer)
  std::string readyz_body;         // its body, or why there was no answer
  bool node_listed = false;        // the Node object exists
  bool node_ready = false;         // and its Ready condition is True
  std::vector<PodReadiness> pods;  // kube-system pods
};

// KubeHealthProblem is "" when node's Kubernetes side is healthy, else the first thing
// missing, for the gate's log: the apiserver's /readyz answered 200 "ok"; the Node is
// Ready; every static pod (the names of the manifests in /etc/kubernetes/manifests)
// has a Ready mirror pod NAME-NODE on this node.
std::string KubeHealthProblem(const std::string& node, const std::vector<std::string>& static_pods,
                              const KubeView& view);

}  // namespace sprout::update
