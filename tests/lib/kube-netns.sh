#!/bin/bash
# Sourced by the shell tests that run the Kubernetes components compiled from Debian's
# source inside a network namespace of their own (control_plane_test, dns_test): the
# checks that decide whether the test can run, the cached compile, the namespace (a veth
# pair whose both ends are inside it, and lo: no way out), and a cleanup that keeps the
# logs of a failed run. The counters and ok/bad are checks.sh's.
#
#   name=my_test
#   . "$(dirname "$0")/lib/kube-netns.sh"
#   kube_netns_require "iproute2, etcd-server, ..." ip etcd ...   # skips when missing
#   kube_netns_compile                                           # sets BIN, or fails
#   kube_netns_up NAMESPACE ADDRESS                              # sets NS, IP, WORK, K8S
# then ok/bad for each check, in_ns to run a command inside, wait_for SECONDS COMMAND to
# wait (bounded), PIDS+=(pid) for each process to stop at the end.

. "$(dirname "${BASH_SOURCE[0]}")/checks.sh"

# kube_netns_require PACKAGES TOOL...: as root, with every TOOL on the PATH, sets
# FIRSTBOOT, SRC and CACHE; otherwise the test is skipped (status 0), saying why.
kube_netns_require() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "$name: skipped: needs root to create a network namespace"
    exit 0
  fi
  tests_require "$@"
  FIRSTBOOT=$(readlink -f "${SPROUT_FIRSTBOOT:?set SPROUT_FIRSTBOOT to the sprout-firstboot binary}")
  SRC=$(readlink -f "${SPROUT_SOURCE_DIR:-$(dirname "$0")/..}")
  CACHE=${SPROUT_CACHE:-/var/cache/sprout}
}

# kube_netns_compile: BIN is the folder of the Kubernetes binaries compiled from Debian's
# source (images/kubernetes/compile.sh: about 15 minutes cold on 2 cores; a cached build
# returns at once). A failed compile fails the test with its log's tail.
kube_netns_compile() {
  local log=$CACHE/kubernetes-compile-$name.log
  BIN=$(bash "$SRC/images/kubernetes/compile.sh" "$CACHE" 2>"$log") || {
    echo "$name: FAIL: compiling Kubernetes failed; see $log"
    tail -n 20 "$log"
    exit 1
  }
}

PIDS=()
in_ns() { ip netns exec "$NS" "$@"; }
wait_for() {  # wait_for SECONDS COMMAND...: until COMMAND succeeds (bounded)
  local deadline=$(($(date +%s) + $1))
  shift
  while [ "$(date +%s)" -lt "$deadline" ]; do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  return 1
}

kube_netns_cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; done
  sleep 1
  for pid in $(ip netns pids "$NS" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
  wait 2>/dev/null
  ip netns del "$NS" 2>/dev/null
  if [ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]; then
    rm -rf "$WORK"
  else
    echo "$name: logs kept in $WORK"
    for f in "$WORK"/*.log; do [ -f "$f" ] && { echo "--- $f (tail)"; tail -n 12 "$f"; }; done
  fi
  tests_end
}

# kube_netns_up NAMESPACE ADDRESS: a fresh namespace NAMESPACE with ADDRESS/24 on eth0,
# WORK a new scratch folder (K8S inside it for the certificates, kubeconfigs and
# manifests), and the cleanup on exit.
kube_netns_up() {
  NS=$1 IP=$2
  WORK=$(mktemp -d "/tmp/$NS.XXXXXX")
  K8S=$WORK/kubernetes
  trap kube_netns_cleanup EXIT
  trap 'exit 1' INT TERM
  ip netns del "$NS" 2>/dev/null
  ip netns add "$NS"
  ip -n "$NS" link set lo up
  ip -n "$NS" link add eth0 type veth peer name eth1  # both ends inside: a link with no way out
  ip -n "$NS" link set eth1 up
  ip -n "$NS" addr add "$IP/24" dev eth0
  ip -n "$NS" link set eth0 up
}

# kube_netns_cluster NAME: the cluster secret and the cluster record an image would carry
# (builder/cluster.cc) in WORK: the Shoot's fields and the component images (the pods
# run as processes here, so the references only need to be present).
kube_netns_cluster() {
  head -c 32 /dev/urandom | base64 >"$WORK/secret"
  cat >"$WORK/cluster.json" <<JSON
{"name": "$1", "kubernetesVersion": "1.20.2",
 "networking": {"pods": "10.244.0.0/16", "services": "10.96.0.0/12", "nodes": "198.18.0.0/24"},
 "controlPlane": {"pool": "control-plane", "minimum": 1, "maximum": 1},
 "images": {"kube-apiserver": "localhost/sprout/kube-apiserver@sha256:$(printf 'a%.0s' {1..64})",
            "kube-controller-manager": "localhost/sprout/kube-controller-manager@sha256:$(printf 'b%.0s' {1..64})",
            "kube-scheduler": "localhost/sprout/kube-scheduler@sha256:$(printf 'c%.0s' {1..64})"}}
JSON
}

# kube_netns_firstboot [ARG...]: one sprout-firstboot in the namespace founds etcd alone
# (a process, not a pod) and, as its member, writes the control plane's certificates,
# kubeconfigs and static pods into K8S; ARGs are added to its command. FB is its pid
# (ip netns exec itself, not in_ns: $! must be firstboot's own); no --apply-system, so
# the node config stays off this host.
kube_netns_firstboot() {
  ip netns exec "$NS" "$FIRSTBOOT" run --state-dir "$WORK/state" --name cp-1 --listen "$IP" --expected 1 --group "" \
    --secret-file "$WORK/secret" --cluster-file "$WORK/cluster.json" --etcd-launch process \
    --etcd-data-dir "$WORK/etcd" --pki-dir "$K8S/pki" --templates "$SRC/staticpods" \
    --manifests-dir "$K8S/manifests" "$@" >>"$WORK/firstboot.log" 2>&1 &
  FB=$!
  PIDS+=("$FB")
}

# kube_netns_pod_command POD: POD_COMMAND is the first container's command and args of
# K8S/manifests/POD.yaml, its binary the compiled one in BIN.
kube_netns_pod_command() {
  mapfile -t POD_COMMAND < <(/usr/bin/python3 -c '
import sys, yaml
c = yaml.safe_load(open(sys.argv[1]))["spec"]["containers"][0]
for a in c.get("command", []) + c.get("args", []): print(a)' "$K8S/manifests/$1.yaml")
  POD_COMMAND[0]="$BIN/${POD_COMMAND[0]}"
}
