#!/bin/bash
# Single-node static-pod test (issue #6): one control-plane node of IMAGE, on a network
# with no uplink, forms a one-member cluster; etcd runs from the rendered static-pod
# manifest under podman (podman-kube@.service) from the preloaded image, by digest; and
# `etcdctl endpoint health` over TLS succeeds with the certificates the node made.
# Usage: qemu-tests/staticpod.sh IMAGE   (needs root; KEEP_LOGS=1 keeps logs)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
. "$here/cluster-lib.sh"
image=$(realpath "${1:?usage: staticpod.sh IMAGE}")
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
# The phase turns "founding member" when etcd is launched; podman then starts the pod.
pod_up() { [ "$(node_ssh 1 podman ps --filter name=etcd-etcd --format '{{.Status}}')" != "" ]; }
wait_until 300 "the etcd pod running" pod_up
check "the etcd pod is up (seconds after formation)" "${WAITED:-timeout}" '^[0-9]+$'
check "the node has no route off its network" "$(node_ssh 1 ip route show default | wc -l)" '^0$'
check "the rendered manifest is in /etc/kubernetes/manifests" \
  "$(node_ssh 1 grep -c -- '--initial-cluster=node-1=https://198.18.0.11:2380' /etc/kubernetes/manifests/etcd.yaml)" '^1$'
check "podman-kube@ runs it" \
  "$(node_ssh 1 systemctl is-active 'podman-kube@etc-kubernetes-manifests-etcd.yaml.service')" '^active$'
image_ref=$(node_ssh 1 podman ps --filter name=etcd-etcd --format '{{.Image}}')
check "etcd's container runs the preloaded image by digest" "$image_ref" '^localhost/sprout/etcd@sha256:[0-9a-f]{64}$'
check "no image was pulled: podman has only the preloaded and its local pause image" \
  "$(node_ssh 1 podman images --format '{{.Repository}}' | sort | tr '\n' ' ')" '^localhost/podman-pause localhost/sprout/etcd $'
check "the etcd server key made by the node is private (0600)" \
  "$(node_ssh 1 stat -L -c %a /etc/kubernetes/pki/etcd/server.key)" '^600$'
health=$(cluster_etcdctl 1 endpoint health 2>&1)
echo "     $health"
check "etcdctl endpoint health over TLS with the node's certificates" "$health" 'https://198\.18\.0\.11:2379 is healthy'
insecure=$(ip netns exec "$CLUSTER_NS" env ETCDCTL_API=3 etcdctl --endpoints "https://$(node_ip 1):2379" \
  --cacert "$CLUSTER_DIR/pki/ca.crt" --command-timeout=5s endpoint health 2>&1)
check "without a client certificate etcd refuses" "$insecure" 'unhealthy|bad certificate|certificate required|failed'
echo "staticpod: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
