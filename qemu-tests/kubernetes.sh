#!/bin/bash
# Single-node Kubernetes (issue #13): one control-plane node of the default IMAGE, on a
# network with no uplink, forms a one-member cluster and runs the Kubernetes control
# plane under its kubelet: etcd, kube-apiserver, kube-controller-manager and
# kube-scheduler as static pods from the preloaded images (by digest, nothing pulled),
# the node registered, labelled, tainted, given a pod subnet and Ready. etcd answers
# over TLS only with a client certificate. One boot carries every check.
# Usage: qemu-tests/kubernetes.sh IMAGE   (needs root; KEEP_LOGS=1 keeps logs)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
. "$here/cluster-lib.sh"
image=$(realpath "${1:?usage: kubernetes.sh IMAGE}")
cluster_test_traps

cluster_init "" "$image" || exit 1
node_config 1 control-plane "$(node_ip 1)"
t0=$SECONDS
vm_start 1
if ! wait_until 900 "node-1 a voting member" all_members 1; then
  check "node-1 becomes the founding member" "timeout" '^member$'
  tail -n 30 "$CLUSTER_DIR/node-1.serial"
  exit 1
fi
check "node-1 becomes the one founding member (seconds from power-on)" "$((SECONDS - t0))" '^[0-9]+$'
check "containerd and the kubelet run" "$(node_ssh 1 systemctl is-active containerd kubelet | tr '\n' ' ')" \
  '^active active $'
check "the rendered manifests are in /etc/kubernetes/manifests" \
  "$(node_ssh 1 ls /etc/kubernetes/manifests | tr '\n' ' ')" \
  '^etcd.yaml kube-apiserver.yaml kube-controller-manager.yaml kube-scheduler.yaml $'
check "etcd's manifest names this node as the one initial member" \
  "$(node_ssh 1 grep -c -- '--initial-cluster=node-1=https://198.18.0.11:2380' /etc/kubernetes/manifests/etcd.yaml)" '^1$'
# In software emulation, on a machine running other VMs, the apiserver needs many minutes.
wait_until 1800 "the node Ready" nodes_ready 1
ready=$((SECONDS - t0))
check "the node registers and turns Ready (seconds from power-on)" "$([ -n "${WAITED:-}" ] && echo $ready || echo timeout)" '^[0-9]+$'
cluster_kubectl get nodes -o wide | sed 's/^/     /'
wait_until 600 "the four mirror pods Running" mirror_pods_running node-1
check "etcd, kube-apiserver, kube-controller-manager and kube-scheduler run as static pods (mirror pods)" \
  "${WAITED:-timeout}" '^[0-9]+$'
cluster_kubectl get pods -n kube-system -o wide | sed 's/^/     /'
check "the apiserver's /readyz" "$(readyz 1)" '^ok$'
check "the node is labelled a control-plane node" \
  "$(cluster_kubectl get node node-1 -o jsonpath='{.metadata.labels}')" 'node-role.kubernetes.io/control-plane'
check "the node is tainted NoSchedule" \
  "$(cluster_kubectl get node node-1 -o jsonpath='{range .spec.taints[*]}{.key}:{.effect} {end}')" \
  'node-role.kubernetes.io/control-plane:NoSchedule'
check "the node has a pod subnet from the Shoot's pods network" \
  "$(cluster_kubectl get node node-1 -o jsonpath='{.spec.podCIDR}')" '^10\.244\.[0-9]+\.0/24$'
check "every pod runs its image by digest" \
  "$(cluster_kubectl get pods -n kube-system -o jsonpath='{range .items[*]}{.spec.containers[0].image}{"\n"}{end}' |
     grep -cv '^localhost/sprout/[a-z-]*@sha256:[0-9a-f]\{64\}$')" '^0$'
check "no image was pulled: containerd holds only the preloaded images" \
  "$(node_ssh 1 ctr -n k8s.io images ls -q | grep -v '^sha256:' | sed 's/[:@].*//' | sort -u | tr '\n' ' ')" \
  '^localhost/sprout/etcd localhost/sprout/kube-apiserver localhost/sprout/kube-controller-manager localhost/sprout/kube-scheduler localhost/sprout/pause $'
echo "     $(node_ssh 1 sprout-firstboot status | sed -n '/^kubernetes:/,$p' | tr '\n' ' ')"
check "sprout-firstboot status shows the Kubernetes side" \
  "$(node_ssh 1 sprout-firstboot status | sed -n '/^kubernetes:/,$p' | tr '\n' ' ')" \
  'apiserver: ready \(/readyz ok\).*node: registered, Ready, pod subnet 10\.244\..*static pods: etcd, kube-apiserver'
check "the node has no route off its network" "$(node_ssh 1 ip route show default | wc -l)" '^0$'
check "the etcd server key and the admin kubeconfig are private (0600)" \
  "$(node_ssh 1 stat -L -c %a /etc/kubernetes/pki/etcd/server.key /etc/kubernetes/admin.conf | tr '\n' ' ')" '^600 600 $'
health=$(cluster_etcdctl 1 endpoint health 2>&1)
echo "     $health"
check "etcdctl endpoint health over TLS with the node's certificates" "$health" 'https://198\.18\.0\.11:2379 is healthy'
insecure=$(ip netns exec "$CLUSTER_NS" env ETCDCTL_API=3 etcdctl --endpoints "https://$(node_ip 1):2379" \
  --cacert "$CLUSTER_DIR/pki/ca.crt" --command-timeout=5s endpoint health 2>&1)
check "without a client certificate etcd refuses" "$insecure" 'unhealthy|bad certificate|certificate required|failed'
echo "figures: power-on to Ready ${ready} s (one node, software emulation)"
echo "kubernetes: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
