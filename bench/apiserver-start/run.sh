#!/bin/bash
# bench/apiserver-start: the CPU one kube-apiserver start costs, from its exec to its
# first /readyz ok, under Go garbage-collector settings side by side. The apiserver is
# the one compiled from Debian's source (images/kubernetes/compile.sh, cached) with the
# command sprout renders for a node (staticpods/kube-apiserver.yaml), against a real
# etcd founded by sprout-firstboot, all inside a network namespace of its own
# (198.18.0.33 on a veth pair whose both ends are inside it). In software emulation a
# node's apiserver start is CPU-bound (docs/qemu-cluster.md), so CPU seconds here are
# what an emulated node pays, scaled.
# Each round starts the apiserver once per setting, in turn, the first setting being
# Go's default (GOGC=100): user+system CPU seconds of the process at its first /readyz
# ok, its wall time, and its peak resident memory (VmHWM). Prints the medians and the
# ratios against the default. The first start on the fresh etcd (RBAC and priority
# classes written) is reported apart: the rounds measure starts on a populated etcd, as
# after a power loss.
# Usage: bench/apiserver-start/run.sh [ROUNDS] [SETTING...]
#   SETTING is an environment for the apiserver, e.g. GOGC=400 or GOGC=400,GOMEMLIMIT=600MiB
#   (default: GOGC=200 GOGC=400). Needs root, etcd, python3 and golang-go (the compile);
#   SPROUT_FIRSTBOOT names the sprout-firstboot binary (default build/sprout-firstboot).
set -u
ROUNDS=${1:-5}
shift || true
SETTINGS=(GOGC=100 "$@")
[ $# -gt 0 ] || SETTINGS=(GOGC=100 GOGC=200 GOGC=400)
name=bench-apiserver-start  # read by kube-netns.sh (its log names)
export SPROUT_FIRSTBOOT=${SPROUT_FIRSTBOOT:-build/sprout-firstboot}
export SPROUT_SOURCE_DIR=${SPROUT_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$SPROUT_SOURCE_DIR/tests/lib/kube-netns.sh"
kube_netns_require "iproute2, etcd-server, etcd-client, python3, golang-go" ip etcd etcdctl /usr/bin/python3 go
kube_netns_compile
kube_netns_up sprt-apibench 198.18.0.33
kube_netns_cluster sprt-apibench
kube_netns_firstboot --audit-log-dir "$WORK/audit"
wait_for 60 test -f "$K8S/manifests/kube-apiserver.yaml" || { bad "no apiserver manifest after 60 s"; exit 1; }
kube_netns_pod_command kube-apiserver
ticks=$(getconf CLK_TCK)
ready() { in_ns "$BIN/kubectl" --kubeconfig "$K8S/admin.conf" --request-timeout=2s get --raw /readyz >/dev/null 2>&1; }
start_once() {  # start_once SETTING: prints "cpu-seconds wall-seconds peak-MiB" of one start
  local env pid t0 t1 u s hwm
  IFS=, read -ra env <<<"$1"
  t0=$(date +%s.%N)
  ip netns exec "$NS" env "${env[@]}" "${POD_COMMAND[@]}" >>"$WORK/apiserver.log" 2>&1 &
  pid=$!
  PIDS+=("$pid")
  if ! wait_for 300 ready; then
    kill "$pid"; wait "$pid" 2>/dev/null
    echo "fail"; return 1
  fi
  t1=$(date +%s.%N)
  read -r u s < <(awk '{print $14, $15}' "/proc/$pid/stat")
  hwm=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
  kill "$pid"; wait "$pid" 2>/dev/null
  # The port is free again before the next start.
  wait_for 30 bash -c "! ip netns exec $NS ss -Hltn 'sport = :6443' | grep -q ."
  awk -v u="$u" -v s="$s" -v hz="$ticks" -v t0="$t0" -v t1="$t1" -v kib="$hwm" \
    'BEGIN {printf "%.2f %.2f %d\n", (u + s) / hz, t1 - t0, kib / 1024}'
}
echo "bench/apiserver-start: kube-apiserver 1.20.2 (compiled from Debian's source) to /readyz, $ROUNDS round(s) of: ${SETTINGS[*]}"
first=$(start_once "${SETTINGS[0]}") || { bad "the first start did not reach /readyz; see $WORK/apiserver.log"; exit 1; }
printf 'first start on a fresh etcd (%s): %.1f s CPU, %.1f s wall, %s MiB peak\n' "${SETTINGS[0]}" $first  # three numbers, split on purpose
declare -A all
for ((r = 1; r <= ROUNDS; r++)); do
  for s in "${SETTINGS[@]}"; do
    one=$(start_once "$s") || { bad "a start with $s did not reach /readyz; see $WORK/apiserver.log"; exit 1; }
    all[$s]+="$one;"
    printf '  round %d %-28s %6.1f s CPU %6.1f s wall %5s MiB\n' "$r" "$s" $one
  done
done
. "$SPROUT_SOURCE_DIR/bench/lib.sh"
col() { tr ';' '\n' <<<"${all[$1]}" | awk -v c="$2" 'NF {print $c}' | median; }
base=$(col "${SETTINGS[0]}" 1)
printf '%-30s %10s %10s %10s %12s\n' setting "CPU s" "wall s" "peak MiB" "CPU ratio"
for s in "${SETTINGS[@]}"; do
  cpu=$(col "$s" 1)
  printf '%-30s %10.2f %10.2f %10.0f %12.2f\n' "$s" "$cpu" "$(col "$s" 2)" "$(col "$s" 3)" "$(awk -v a="$cpu" -v b="$base" 'BEGIN {print a / b}')"
done
ok "bench/apiserver-start: ${#SETTINGS[@]} settings x $ROUNDS rounds measured"
