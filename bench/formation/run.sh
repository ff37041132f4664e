#!/bin/bash
# bench/formation: time from "all processes started" to a healthy 3-member etcd
# cluster, sprout-firstboot formation against etcd's own static bootstrap (three etcd
# started with a fixed --initial-cluster), alternating, in network namespaces on one
# bridge (198.18.1.0/24, no uplink). Needs root, Debian's etcd-server and etcd-client.
#   SPROUT_FIRSTBOOT=build/sprout-firstboot bench/formation/run.sh [rounds]
set -u
ROUNDS=${1:-5}
[ "$(id -u)" -eq 0 ] || { echo "bench/formation: needs root (network namespaces)"; exit 1; }
FIRSTBOOT=$(readlink -f "${SPROUT_FIRSTBOOT:?set SPROUT_FIRSTBOOT to the sprout-firstboot binary}")
export ETCDCTL_API=3
N=3
BR=sprt-bbr
ADDR=(198.18.1.11 198.18.1.12 198.18.1.13)
PEERS=$(IFS=,; echo "${ADDR[*]}")
ENDPOINTS=$(for a in "${ADDR[@]}"; do printf 'http://%s:2379,' "$a"; done); ENDPOINTS=${ENDPOINTS%,}
WORK=$(mktemp -d /tmp/sprt-bench.XXXXXX)
PIDS=()

stop_all() {
  local pid ns
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null; done
  for ns in sprt-b1 sprt-b2 sprt-b3; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
  done
  PIDS=()
}
remove_network() {
  for i in 1 2 3; do ip netns del "sprt-b$i" 2>/dev/null; ip link del "sprt-bv$i" 2>/dev/null; done
  ip link del "$BR" 2>/dev/null
}
cleanup() { stop_all; remove_network; rm -rf "$WORK"; }
trap cleanup EXIT
trap 'exit 1' INT TERM

remove_network
ip link add "$BR" type bridge mcast_snooping 0
ip link set "$BR" up
for i in 1 2 3; do
  ns=sprt-b$i
  ip netns add "$ns"
  ip link add "sprt-bv$i" type veth peer name "sprt-bp$i"
  ip link set "sprt-bp$i" netns "$ns"
  ip link set "sprt-bv$i" master "$BR" up
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "${ADDR[$((i - 1))]}/24" dev "sprt-bp$i"
  ip -n "$ns" link set "sprt-bp$i" up
done
head -c 32 /dev/urandom | base64 >"$WORK/secret"

healthy() {
  [ "$(ip netns exec sprt-b1 etcdctl --dial-timeout=1s --command-timeout=2s --endpoints="$ENDPOINTS" member list 2>/dev/null | grep -c ', started, ')" -eq $N ] &&
    [ "$(ip netns exec sprt-b1 etcdctl --dial-timeout=1s --command-timeout=2s --endpoints="$ENDPOINTS" endpoint health 2>&1 | grep -c 'is healthy')" -eq $N ]
}
# measure: prints seconds from now until healthy (bounded by 60 s), or "fail".
wait_time() {
  local t0=$1 deadline=$(($(date +%s) + 60))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    if healthy; then echo "$(date +%s.%N) - $t0" | bc; return; fi
    sleep 0.1
  done
  echo fail
}

run_static() {  # run_static round
  local ic="" i
  for i in 1 2 3; do ic+="b$i=http://${ADDR[$((i - 1))]}:2380,"; done
  ic=${ic%,}
  local t0; t0=$(date +%s.%N)
  for i in 1 2 3; do
    local a=${ADDR[$((i - 1))]}
    ip netns exec "sprt-b$i" etcd --name "b$i" --data-dir "$WORK/static-$1-$i" \
      --listen-peer-urls "http://$a:2380" --initial-advertise-peer-urls "http://$a:2380" \
      --listen-client-urls "http://$a:2379" --advertise-client-urls "http://$a:2379" \
      --initial-cluster "$ic" --initial-cluster-token "static-$1" --initial-cluster-state new \
      >"$WORK/static-$1-$i.log" 2>&1 &
    PIDS+=($!)
  done
  wait_time "$t0"
  stop_all
}

run_sprout() {  # run_sprout round
  local t0 i; t0=$(date +%s.%N)
  for i in 1 2 3; do
    ip netns exec "sprt-b$i" "$FIRSTBOOT" run --state-dir "$WORK/sprout-$1-$i" --name "b$i" \
      --listen "${ADDR[$((i - 1))]}" --peers "$PEERS" --expected $N --secret-file "$WORK/secret" \
      --cluster-name "bench-$1" >"$WORK/sprout-$1-$i.log" 2>&1 &
    PIDS+=($!)
  done
  wait_time "$t0"
  stop_all
}

median() { sort -n | awk '{a[NR]=$1} END {if (NR==0) print "nan"; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
static=(); sprout=()
for r in $(seq 1 "$ROUNDS"); do
  s=$(run_static "$r"); f=$(run_sprout "$r")
  printf 'round %d: etcd static %s s, sprout %s s\n' "$r" "$s" "$f"
  [ "$s" != fail ] && static+=("$s")
  [ "$f" != fail ] && sprout+=("$f")
done
ms=$(printf '%s\n' "${static[@]}" | median)
mf=$(printf '%s\n' "${sprout[@]}" | median)
echo "median over $ROUNDS rounds: etcd static ${ms} s (${#static[@]} ok), sprout ${mf} s (${#sprout[@]} ok)"
printf 'ratio sprout/static: %.2f (goal: at most 1.5)\n' "$(echo "$mf / $ms" | bc -l)"
