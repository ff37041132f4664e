#!/bin/bash
# Spare control-plane nodes with real etcd over mTLS in network namespaces
# (198.18.8.0/24, a bridge with no uplink): more control-plane nodes than the expected
# N=3 start at the same instant, with no static peer list (multicast discovery only),
# again and again, and every run must end with exactly one etcd cluster ID across all
# nodes (docs/formation.md, "Spare nodes: the electorate"). Configurations:
#   5 nodes, N=3, M=5   the default Shoot (minimum 3, maximum 5), fully powered on
#   7 nodes, N=3, M=5   more nodes than the Shoot's maximum, all hearing each other
#   7 nodes, N=3, static list of 3: four spares that must join as learners
# Usage: spare_nodes_test.sh [RUNS] (default 1 per configuration in CI; the figures in docs/formation.md use 50).
set -u
name=spare_nodes_test
runs=${1:-1}
if [ "$(id -u)" -ne 0 ]; then
  echo "$name: skipped: needs root to create network namespaces"
  exit 0
fi
for tool in ip etcd etcdctl; do
  if ! command -v "$tool" >/dev/null; then
    echo "$name: skipped: '$tool' not found (scripts/install-deps installs iproute2, etcd-server, etcd-client)"
    exit 0
  fi
done
if [ ! -x "${SPROUT_FIRSTBOOT:-}" ]; then
  echo "$name: set SPROUT_FIRSTBOOT to the sprout-firstboot binary (got '${SPROUT_FIRSTBOOT:-}')"
  exit 1
fi
FIRSTBOOT=$(readlink -f "$SPROUT_FIRSTBOOT")
export ETCDCTL_API=3
NP=sprt-s SUBNET=198.18.8 CLUSTER=sprt-spares NB_MAX=7
WORK=$(mktemp -d /tmp/sprt-spares.XXXXXX)
SECRET=$WORK/secret
# shellcheck source=tests/formation/netns.sh
. "$(dirname "$0")/formation/netns.sh"
failed=0
cleanup() {
  nb_teardown
  if [ "$failed" -eq 0 ]; then rm -rf "$WORK"; else echo "$name: logs kept in $WORK"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM
nb_teardown 2>/dev/null
for i in $(seq 1 7); do nb_setup "$i"; done

# cluster_id i: the etcd cluster ID node i's own etcd reports (empty until it serves).
cluster_id() {
  nb_ctl "$1" "$(nb_endpoints "$1")" endpoint status -w json 2>/dev/null | grep -o '"cluster_id":[0-9]*' | cut -d: -f2
}

# one_run nodes max-control-planes static-list-size: starts the nodes at once, waits
# until each reports an etcd cluster ID (90 s at most), prints one line, and returns 1
# when more than one cluster ID (or a node without any) was seen.
one_run() {
  local nodes=$1 max=$2 listed=$3 i extra=()
  for i in $(seq 1 "$nodes"); do rm -rf "$WORK/n$i/state" "$WORK/n$i/etcd" "$WORK/n$i/pki" "$WORK/n$i/firstboot.log"; done
  head -c 32 /dev/urandom | base64 >"$SECRET"  # a new cluster every run
  [ "$listed" -gt 0 ] && extra=(--peers "$(nb_peers "$listed")")
  local t0; t0=$(date +%s.%N)
  for i in $(seq 1 "$nodes"); do
    ip netns exec "$NP$i" "$FIRSTBOOT" run --state-dir "$WORK/n$i/state" --name "node$i" --listen "$(nb_addr "$i")" \
      --expected 3 --max-control-planes "$max" "${extra[@]}" --secret-file "$SECRET" --cluster-name "$CLUSTER" \
      --etcd-data-dir "$WORK/n$i/etcd" --pki-dir "$WORK/n$i/pki" >>"$WORK/n$i/firstboot.log" 2>&1 &
    NB_PIDS[$i]=$!
  done
  local deadline=$(($(date +%s) + 90)) ids=() all=0
  while [ "$(date +%s)" -lt "$deadline" ]; do
    ids=()
    for i in $(seq 1 "$nodes"); do ids[$i]=$(cluster_id "$i"); done
    all=1
    for i in $(seq 1 "$nodes"); do [ -n "${ids[$i]}" ] || all=0; done
    [ "$all" -eq 1 ] && break
    sleep 0.3
  done
  local took distinct founders
  took=$(printf '%.2f' "$(echo "$(date +%s.%N) - $t0" | bc)")
  distinct=$(printf '%s\n' "${ids[@]}" | grep -v '^$' | sort -u | wc -l)
  founders=$(cat "$WORK"/n*/state/state.json 2>/dev/null | grep -o '"founder": *"[^"]*"' | sort -u | wc -l)
  echo "  $nodes nodes (N=3, M=$max, static list ${listed:-0}): cluster IDs $distinct, founders named $founders," \
    "every node in a cluster: $([ "$all" -eq 1 ] && echo yes || echo no), $took s"
  for i in $(seq 1 "$nodes"); do nb_kill "$i"; done
  [ "$distinct" -eq 1 ] && [ "$all" -eq 1 ]
}

start=$(date +%s)
for config in "5 5 0" "7 5 0" "7 5 3"; do
  read -r nodes max listed <<<"$config"
  bad_runs=0 times=()
  for r in $(seq 1 "$runs"); do
    out=$(one_run "$nodes" "$max" "$listed") || bad_runs=$((bad_runs + 1))
    echo "$out"
    times+=("$(echo "$out" | grep -o '[0-9.]* s$' | cut -d' ' -f1)")
  done
  median=$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  echo "$nodes nodes, N=3, M=$max, static list $listed: $runs runs, runs with more than one cluster ID or a node" \
    "left out: $bad_runs, median time to every node in the cluster $median s"
  [ "$bad_runs" -eq 0 ] || failed=1
done
echo "$name: $([ "$failed" -eq 0 ] && echo passed || echo FAILED) in $(($(date +%s) - start)) s"
exit "$failed"
