#!/bin/bash
# The upstream Kubernetes conformance suite on a QEMU cluster of the default image, by
# hand (docs/conformance.md): three control-plane nodes (CONFORMANCE_CONTROL_PLANES, 1 or
# 3; one gets two virtual CPUs) boot on the harness's private network and turn Ready,
# then CONFORMANCE_WORKERS workers (default 0; one virtual CPU each) join; the suite's test
# images (images/conformance/test-images.sh, built from Debian packages and the Kubernetes
# source tree) are served from Debian's docker-registry inside the same network
# namespace; then e2e.test, compiled from the same source as the cluster, runs the tests
# LIST names (default: all 311 [Conformance] tests of 1.20) as the cluster's admin.
# Before the suite, cluster DNS figures from a pod (qemu-tests/dns-figures.sh); after it,
# a full power loss, and a pod resolves a Service made before it, with no human step.
# Nothing outside the namespace is reached.
#
# The control-plane nodes take pods for the run (their NoSchedule taint is removed):
# several tests need two or more schedulable nodes, and on two host cores a fourth and
# fifth emulated machine would slow every test more than they add.
#
# Writes the suite's JUnit reports, logs and summary.txt (each test that did not pass,
# with its failure or reason) to OUT (default ./conformance-results), and prints the
# summary. CONFORMANCE_PARALLEL (default 4) tests run at a time; CONFORMANCE_TIMEOUT
# bounds each pass (default 14400 s here). The other knobs (CONFORMANCE_CHUNK, _DEADLINE,
# _RETRIES, _QUIET, _WAIT_SCALE) are qemu-tests/conformance/lib.sh's; tally.py there
# counts the tests over several runs.
# Usage: qemu-tests/conformance.sh IMAGE [LIST [OUT]]   (needs root; KEEP_LOGS=1 keeps logs)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cps=${CONFORMANCE_CONTROL_PLANES:-3}
case $cps in 1 | 3) ;; *) echo "conformance: CONFORMANCE_CONTROL_PLANES must be 1 or 3" >&2; exit 2 ;; esac
# One node alone gets both host cores (as the single-node CI test); three get one each.
export CLUSTER_SMP=${CLUSTER_SMP:-$((cps == 1 ? 2 : 1))} CLUSTER_MEM=${CLUSTER_MEM:-3072}  # room for the test pods
. "$here/lib.sh"
. "$here/cluster-lib.sh"
. "$here/conformance/lib.sh"
. "$here/dns-figures.sh"
. "$here/timeline.sh"
image=$(realpath "${1:?usage: conformance.sh IMAGE [LIST [OUT]]}")
list=${2:-}
out=$(realpath -m "${3:-conformance-results}")
cache=${SPROUT_CACHE:-/var/cache/sprout}
workers=${CONFORMANCE_WORKERS:-0}
export CONFORMANCE_TIMEOUT=${CONFORMANCE_TIMEOUT:-14400}
cluster_test_traps

echo "== the suite (cached after the first run); its test images build while the nodes boot"
e2e=$(bash "$here/../images/conformance/compile.sh" "$cache") || { echo "conformance: the suite did not compile" >&2; exit 1; }
mkdir -p "$out"
bash "$here/../images/conformance/test-images.sh" "$cache" >"$out/test-images.path" 2>"$out/test-images.log" &
images_job=$!
if [ -z "$list" ]; then
  # Every [Conformance] test of the release, from the tree's own list.
  list=$out/all.txt
  python3 -c 'import sys, yaml; [print(t["codename"]) for t in yaml.safe_load(open(sys.argv[1]))]' \
    "$e2e/conformance.yaml" >"$list" || exit 1
fi
echo "   $(grep -cv '^\s*\(#\|$\)' "$list") tests listed in $list"

echo "== $cps control-plane nodes powered on together, then $workers workers"
cluster_init "" "$image" || exit 1
peers=()
for i in $(seq "$cps"); do peers+=("$(node_ip "$i")"); done
t0=$SECONDS
for i in $(seq "$cps"); do node_config "$i" control-plane "${peers[@]}"; vm_start "$i"; done
# The workers power on once the control plane is Ready, as ones added to a running
# cluster would: an emulated worker booting beside starting control planes on two host
# cores more than doubled their time to Ready (docs/qemu-cluster.md, the sixth measurement).
if ! wait_until "${SPROUT_K8S_LIMIT:-3000}" "$cps Ready control-plane nodes" nodes_ready "$cps"; then
  check "$cps control-plane nodes Ready" timeout '^[0-9]+$'
  cluster_kubectl get nodes -o wide; exit 1
fi
check "$cps control-plane nodes Ready (seconds from power-on)" "$((SECONDS - t0))" '^[0-9]+$'
for i in $(seq $((cps + 1)) $((cps + workers))); do  # a worker runs no control plane: one virtual CPU
  export "CLUSTER_SMP_$i=1"; node_config "$i" worker "${peers[@]}"; vm_start "$i"
done
total=$((cps + workers))
if [ "$workers" -gt 0 ]; then
  tw=$SECONDS
  if ! wait_until "${SPROUT_K8S_LIMIT:-3000}" "$total Ready nodes" nodes_ready "$total"; then
    check "$total nodes Ready" timeout '^[0-9]+$'
    cluster_kubectl get nodes -o wide; exit 1
  fi
  check "$workers worker(s) Ready (seconds from their power-on)" "$((SECONDS - tw))" '^[0-9]+$'
fi
TIMELINE_TITLE="$total nodes to Ready ($(cluster_accel_name))" cluster_timeline "$out/timeline" $(seq "$total")
cluster_kubectl taint nodes -l node-role.kubernetes.io/control-plane node-role.kubernetes.io/control-plane:NoSchedule- >/dev/null
check "the control-plane nodes take pods for the run" \
  "$(cluster_kubectl get nodes -o jsonpath='{range .items[*]}{.spec.taints}{end}')" '^$'
cluster_kubectl get nodes -o wide | sed 's/^/     /'

echo "== cluster DNS from a pod: figures"
dns_figures 1 kubernetes.default.svc.cluster.local.

echo "== the test registry"
if ! wait "$images_job"; then
  echo "conformance: the test images did not build (images/conformance/test-images.sh); the end of its log:" >&2
  tail -n 20 "$out/test-images.log" >&2
  exit 1
fi
layout=$(cat "$out/test-images.path")
echo "   $(wc -l <"$layout/refs.txt") test images in $layout"
conformance_registry "$layout" || exit 1
check "the test images are served in the namespace and every node knows the registry" "${CONFORMANCE_REPO_LIST:-}" 'repo-list.yaml$'

echo "== the conformance suite (${CONFORMANCE_PARALLEL:-4} at a time, then the serial tests alone)"
# The suite reaches the API through a forwarder in the namespace to the first live
# control-plane node (conformance_api_forward), not through node-1 alone.
CONFORMANCE_NODES=$total CONFORMANCE_API_NODES="$(seq -s ' ' "$cps")" conformance_run "$list" "$out"
check "the listed [Conformance] tests pass (e2e.test ran ${CONFORMANCE_SECONDS:-?} s)" \
  "$(tail -n 1 "$out/summary.txt" 2>/dev/null)" '^conformance: [0-9]+ passed, 0 failed, 0 skipped(; [0-9]+ of them on a second try)?$'

echo "== full power loss, then cluster DNS answers again with no human step"
cluster_kubectl create service clusterip before-power-loss --tcp=80:8080 >/dev/null
before_ip=$(cluster_kubectl get service before-power-loss -o jsonpath='{.spec.clusterIP}')
for i in $(seq "$total"); do vm_kill "$i"; done
t1=$SECONDS
for i in $(seq "$total"); do vm_start "$i"; done
if wait_until "${SPROUT_K8S_LIMIT:-3000}" "$total Ready nodes after the power loss" nodes_ready "$total"; then
  check "$total nodes Ready again (seconds from power-on)" "$((SECONDS - t1))" '^[0-9]+$'
  dns_figures "$total" before-power-loss.default.svc.cluster.local.
  check "a pod on node-$total resolves a Service made before the power loss, 1,000 times in a row" \
    "$(echo "$DNS_FIGURES" | head -n 1)" '^before-power-loss\.default\.svc\.cluster\.local\. n=1000 failed=0 '
  check "the answer is the Service's ClusterIP" "$(echo "$DNS_FIGURES" | head -n 1 | sed -n 's/.* addr=//p')" "^$before_ip\$"
else
  check "$total nodes Ready again after the power loss" timeout '^[0-9]+$'
fi
echo "conformance.sh: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
