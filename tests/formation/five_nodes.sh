#!/bin/bash
# Five control-plane nodes (N=5) in network namespaces with Debian's etcd: started at
# once, then again staggered (three first, two 3 s later); each time all five must end
# up started, voting and healthy (nodes outside the founding set join as learners and
# are promoted). Traffic stays on a bridge with no uplink (198.18.2.0/24). Run by
# tests/formation_netns_test.sh, or alone as root with SPROUT_FIRSTBOOT set.
set -u

name=formation/five_nodes
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
FIRSTBOOT=$(readlink -f "${SPROUT_FIRSTBOOT:?set SPROUT_FIRSTBOOT to the sprout-firstboot binary}")
export ETCDCTL_API=3

N=5
BR=sprt-gbr
ADDR=(); for i in $(seq 1 $N); do ADDR+=("198.18.2.1$i"); done
PEERS=$(IFS=,; echo "${ADDR[*]}")
ENDPOINTS=$(for a in "${ADDR[@]}"; do printf 'https://%s:2379,' "$a"; done); ENDPOINTS=${ENDPOINTS%,}
WORK=$(mktemp -d /tmp/sprt-formation5.XXXXXX)
PIDS=()
passed=0; failed=0
ok() { echo "ok: $*"; passed=$((passed + 1)); }
bad() { echo "FAIL: $*"; failed=$((failed + 1)); }

stop_all() {
  local pid i
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null; done
  for i in $(seq 1 $N); do
    for pid in $(ip netns pids "sprt-g$i" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
  done
  PIDS=()
}
remove_network() {
  for i in $(seq 1 $N); do ip netns del "sprt-g$i" 2>/dev/null; ip link del "sprt-gv$i" 2>/dev/null; done
  ip link del "$BR" 2>/dev/null
}
cleanup() {
  stop_all
  remove_network
  if [ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]; then
    rm -rf "$WORK"
  else
    echo "$name: logs kept in $WORK"
    for f in "$WORK"/*/n*/firstboot.log; do [ -f "$f" ] && { echo "--- $f (tail)"; tail -n 10 "$f"; }; done
  fi
  echo "$passed passed, $failed failed"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

remove_network
ip link add "$BR" type bridge mcast_snooping 0
ip link set "$BR" up
for i in $(seq 1 $N); do
  ns=sprt-g$i
  ip netns add "$ns"
  ip link add "sprt-gv$i" type veth peer name "sprt-gp$i"
  ip link set "sprt-gp$i" netns "$ns"
  ip link set "sprt-gv$i" master "$BR" up
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "${ADDR[$((i - 1))]}/24" dev "sprt-gp$i"
  ip -n "$ns" link set "sprt-gp$i" up
done
head -c 32 /dev/urandom | base64 >"$WORK/secret"

start_node() {  # start_node scenario index
  # No --apply-system: the node config stays off this host (hostname, address, SSH key).
  local dir=$WORK/$1/n$2
  mkdir -p "$dir"
  ip netns exec "sprt-g$2" "$FIRSTBOOT" run --state-dir "$dir/state" --name "node$2" \
    --listen "${ADDR[$(($2 - 1))]}" --peers "$PEERS" --expected $N --secret-file "$WORK/secret" \
    --cluster-name "sprt-formation5-$1" --etcd-data-dir "$dir/etcd" --pki-dir "$dir/pki" >>"$dir/firstboot.log" 2>&1 &
  PIDS+=($!)
}
SCENARIO=at-once
# ctl runs etcdctl over mTLS with node 1's healthcheck client certificate of the scenario.
ctl() {
  local pki=$WORK/$SCENARIO/n1/pki
  ip netns exec sprt-g1 etcdctl --dial-timeout=1s --command-timeout=2s --endpoints="$ENDPOINTS" \
    --cacert "$pki/etcd/ca.crt" --cert "$pki/etcd/healthcheck-client.crt" --key "$pki/etcd/healthcheck-client.key" "$@"
}

# wait_five scenario: until 5 started voting members, all healthy (bounded, 120 s).
wait_five() {
  local t0=$1 deadline=$(($(date +%s) + 120))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    if [ "$(ctl member list 2>/dev/null | grep -c ', started, .*, false$')" -eq $N ] &&
      [ "$(ctl endpoint health 2>&1 | grep -c 'is healthy')" -eq $N ]; then
      printf '%.2f' "$(echo "$(date +%s.%N) - $t0" | bc)"
      return 0
    fi
    sleep 0.2
  done
  return 1
}

# founding_size scenario: members of the founding set per node 1's state.json, which
# is rewritten once a second (so wait for it, bounded).
founding_size() {
  local n=0
  for _ in $(seq 1 25); do
    n=$("$FIRSTBOOT" status --json --state-dir "$WORK/$1/n1/state" | tr -d '\n ' | grep -o '"members":\[[^]]*\]' | grep -o '"node' | wc -l)
    [ "$n" -gt 0 ] && break
    sleep 0.2
  done
  echo "$n"
}

# 1. All five at once.
t0=$(date +%s.%N)
for i in $(seq 1 $N); do start_node at-once "$i"; done
if t=$(wait_five "$t0"); then
  ok "5 nodes started at once: 5 healthy voting members after $t s (founding set: $(founding_size at-once))"
  ctl member list
else
  bad "5 nodes started at once: no 5 healthy voting members within 120 s"
  ctl member list 2>&1
fi
stop_all

# 2. Staggered: three first, two more 3 s later (a fresh cluster name and data).
SCENARIO=staggered
t0=$(date +%s.%N)
for i in 1 2 3; do start_node staggered "$i"; done
sleep 3
for i in 4 5; do start_node staggered "$i"; done
if t=$(wait_five "$t0"); then
  ok "5 nodes staggered: 5 healthy voting members after $t s (founding set: $(founding_size staggered))"
  ctl member list
else
  bad "5 nodes staggered: no 5 healthy voting members within 120 s"
  ctl member list 2>&1
fi

[ "$failed" -eq 0 ]
