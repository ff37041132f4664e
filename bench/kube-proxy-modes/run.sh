#!/bin/bash
# bench/kube-proxy-modes: kube-proxy 1.36 in its iptables mode beside its nftables mode
# (GA since 1.33), with the same Services, in a network namespace of its own. The
# binaries are the 1.36 stack's (images/stack/compile.sh, cached; docs/stack.md); etcd
# 3.6 and kube-apiserver 1.36 run in the namespace on its loopback, and hold SERVICES
# selector-less Services, each with an EndpointSlice of two endpoints on local addresses
# (198.18.1.1 and 198.18.1.2 on the namespace's link), where one listener answers. For each mode,
# in turn (a flushed ruleset between), ROUNDS times:
#   - first sync: from kube-proxy's exec to its first full sync of every Service (its
#     metric kubeproxy_sync_proxy_rules_last_timestamp_seconds set and a connect to the
#     last Service's ClusterIP answered), wall seconds;
#   - the full sync's own time (kubeproxy_sync_proxy_rules_duration_seconds, first sample);
#   - an update: CHANGES Services get a third endpoint, one patch each; the mean sync
#     time over the syncs that followed (the histogram's sum and count, after less before);
#   - per connection: CONNECTS TCP connects to the last Service's ClusterIP, the median
#     microseconds, beside connects to the endpoint's own address, which no Service holds
#     (in iptables mode such a connection still walks every Service's rule: what every
#     other new connection of a node pays);
#   - the ruleset's size (lines of iptables-save, or of nft list ruleset) and kube-proxy's
#     CPU seconds at the end.
# Prints each round, then the medians and the ratio nftables / iptables. The images'
# kube-proxy runs the mode chosen from these figures (docs/stack.md).
# Usage: bench/kube-proxy-modes/run.sh [SERVICES] [ROUNDS] [CHANGES] [CONNECTS]
#   (default 1000 3 50 2000). Needs root, iproute2, iptables, nftables (nft) and python3.
# Only the namespace's own loopback and link addresses carry traffic.
set -u
SERVICES=${1:-1000} ROUNDS=${2:-3} CHANGES=${3:-50} CONNECTS=${4:-2000}
CACHE=${SPROUT_CACHE:-/var/cache/sprout}
name=bench-kube-proxy-modes
NS=sprt-kpbench
say() { echo "$name: $*"; }
for t in ip iptables-save nft python3 openssl; do
  command -v "$t" >/dev/null || { say "needs $t (apt-get install iproute2 iptables nftables python3 openssl)"; exit 1; }
done
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../tests/lib/stack-sets.sh"
. "$here/../lib.sh"
KDIR=$(stack_set "$CACHE" kubernetes kube-proxy) EDIR=$(stack_set "$CACHE" etcd etcd)
if [ -z "$KDIR" ] || [ -z "$EDIR" ]; then
  say "the 1.36 stack is not compiled in $CACHE/stack/bin (images/stack/compile.sh $CACHE kubernetes etcd makes it)"
  exit 1
fi
WORK=$(mktemp -d /tmp/sprout-kpbench.XXXXXX)
PIDS=()
cleanup() {
  # Every process in the namespace (etcd, the apiserver, the listener, a kube-proxy a
  # stopped round left), then the namespace: deleting it ends none of them.
  local p
  for p in $(ip netns pids "$NS" 2>/dev/null) "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
  for _ in $(seq 50); do [ -z "$(ip netns pids "$NS" 2>/dev/null)" ] && break; sleep 0.1; done
  ip netns del "$NS" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
in_ns() { ip netns exec "$NS" "$@"; }
wait_for() {  # wait_for SECONDS CMD...: true once CMD succeeds, polled every 0.1 s
  local n=$(($1 * 10))
  shift
  while ((n-- > 0)); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  return 1
}

ip netns del "$NS" 2>/dev/null
ip netns add "$NS" || exit 1
in_ns ip link set lo up
# A veth pair with both ends inside (this kernel has no dummy links): the node's link.
in_ns ip link add eth0 type veth peer name eth1
in_ns ip addr add 198.18.0.50/24 dev eth0
in_ns ip addr add 198.18.1.1/32 dev eth0
in_ns ip addr add 198.18.1.2/32 dev eth0
in_ns ip addr add 198.18.1.3/32 dev eth0
in_ns ip link set eth0 up
in_ns ip link set eth1 up
# A ClusterIP is no local address: without a route the kernel refuses the connect before
# the rules see it (docs/dns.md's Service route, the same on a node).
in_ns ip route add 10.96.0.0/12 dev eth0

# etcd and the apiserver on the namespace's loopback. A static token and AlwaysAllow:
# the bench measures kube-proxy, not the API's security (tests/stack_control_plane_test.sh
# runs the hardened templates).
mkdir -p "$WORK/etcd" "$WORK/certs" && chmod 700 "$WORK/etcd"
ip netns exec "$NS" "$EDIR/etcd" --data-dir "$WORK/etcd" --listen-client-urls http://127.0.0.1:2379 \
  --advertise-client-urls http://127.0.0.1:2379 --listen-peer-urls http://127.0.0.1:2380 \
  --log-level warn >"$WORK/etcd.log" 2>&1 &
PIDS+=($!)
openssl genrsa -out "$WORK/sa.key" 2048 2>/dev/null
token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
echo "$token,bench,bench,system:masters" >"$WORK/tokens.csv"
ip netns exec "$NS" "$KDIR/kube-apiserver" --etcd-servers http://127.0.0.1:2379 --secure-port 6443 \
  --bind-address 127.0.0.1 --advertise-address 198.18.0.50 --cert-dir "$WORK/certs" \
  --token-auth-file "$WORK/tokens.csv" --authorization-mode AlwaysAllow \
  --service-cluster-ip-range 10.96.0.0/12 --service-account-key-file "$WORK/sa.key" \
  --service-account-signing-key-file "$WORK/sa.key" --service-account-issuer https://kubernetes.default.svc \
  >"$WORK/apiserver.log" 2>&1 &
PIDS+=($!)
cat >"$WORK/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: "$token"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
EOF
kubectl() { in_ns "$KDIR/kubectl" --kubeconfig "$WORK/kubeconfig" --cache-dir "$WORK/kubectl-cache" "$@"; }
if ! wait_for 120 kubectl get --raw /readyz; then
  say "the apiserver was not ready in 120 s; its log ends:"; tail -n 5 "$WORK/apiserver.log"; exit 1
fi

# The Node kube-proxy runs as (its address; without it kube-proxy waits up to 30 s for one).
printf '%s\n' 'apiVersion: v1' 'kind: Node' 'metadata: {name: bench-node}' \
  'spec: {podCIDR: 10.244.0.0/24, podCIDRs: [10.244.0.0/24]}' >"$WORK/node.yaml"
kubectl create -f "$WORK/node.yaml" >/dev/null || { say "creating the Node failed"; exit 1; }
kubectl patch node bench-node --subresource status --type merge \
  -p '{"status":{"addresses":[{"type":"InternalIP","address":"198.18.0.50"}]}}' >/dev/null ||
  { say "setting the Node's address failed"; exit 1; }

# SERVICES Services svc-0..svc-(N-1), port 80 to the endpoints' 8080, each with its slice.
python3 - "$SERVICES" >"$WORK/services.yaml" <<'EOF'
import sys
for i in range(int(sys.argv[1])):
    print(f"""---
apiVersion: v1
kind: Service
metadata: {{name: svc-{i}, namespace: default}}
spec:
  ports: [{{name: http, port: 80, targetPort: 8080, protocol: TCP}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: svc-{i}-a
  namespace: default
  labels: {{kubernetes.io/service-name: svc-{i}}}
addressType: IPv4
ports: [{{name: http, port: 8080, protocol: TCP}}]
endpoints:
  - addresses: [198.18.1.1]
    conditions: {{ready: true}}
  - addresses: [198.18.1.2]
    conditions: {{ready: true}}""")
EOF
t0=$(date +%s.%N)
kubectl create -f "$WORK/services.yaml" >/dev/null || { say "creating the Services failed"; exit 1; }
last=$(kubectl get service "svc-$((SERVICES - 1))" -o jsonpath='{.spec.clusterIP}')
say "$SERVICES Services with their EndpointSlices created in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s; the last one's ClusterIP is $last"

# One listener for every endpoint address (0.0.0.0:8080), and the connect timer.
ip netns exec "$NS" python3 -c '
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 8080)); s.listen(512)
while True:
    c, _ = s.accept(); c.close()' &
PIDS+=($!)
connects() {  # connects ADDRESS PORT COUNT: the median microseconds of COUNT connects
  in_ns python3 - "$@" <<'EOF'
import socket, statistics, sys, time
addr, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
times = []
for _ in range(n):
    s = socket.socket(); s.settimeout(2)
    t = time.perf_counter(); s.connect((addr, port)); times.append(time.perf_counter() - t); s.close()
print(f"{statistics.median(times) * 1e6:.0f}")
EOF
}
metric() {  # metric NAME: its value from kube-proxy's metrics (sum of its series), or nothing
  in_ns python3 - "$1" <<'EOF'
import sys, urllib.request
try:
    text = urllib.request.urlopen("http://127.0.0.1:10249/metrics", timeout=2).read().decode()
except OSError:
    sys.exit(1)
vals = [float(l.split()[-1]) for l in text.splitlines() if l.startswith(sys.argv[1] + " ") or l.startswith(sys.argv[1] + "{")]
if not vals:
    sys.exit(1)
print(sum(vals))
EOF
}
synced() { [ -n "$(metric kubeproxy_sync_proxy_rules_last_timestamp_seconds)" ] && connects "$last" 80 1 >/dev/null; }
ticks=$(getconf CLK_TCK)
round() {  # round MODE: prints "first-sync-s full-sync-s update-sync-s conn-us floor-us rules cpu-s"
  local mode=$1 pid t0 t1 c0 s0 c1 s1 n
  in_ns nft flush ruleset
  cat >"$WORK/proxy-$mode.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: $mode
clientConnection: {kubeconfig: $WORK/kubeconfig}
conntrack: {maxPerCore: 0}
clusterCIDR: 10.244.0.0/16
metricsBindAddress: 127.0.0.1:10249
EOF
  t0=$(date +%s.%N)
  # ip netns exec execs kube-proxy: the pid is kube-proxy's own (its CPU, below).
  ip netns exec "$NS" "$KDIR/kube-proxy" --config "$WORK/proxy-$mode.yaml" --hostname-override bench-node \
    >>"$WORK/kube-proxy-$mode.log" 2>&1 &
  pid=$!
  if ! wait_for 300 synced; then
    kill "$pid"; wait "$pid" 2>/dev/null
    echo fail; return 1
  fi
  t1=$(date +%s.%N)
  local full
  full=$(metric kubeproxy_sync_proxy_rules_duration_seconds_sum)
  c0=$(metric kubeproxy_sync_proxy_rules_duration_seconds_count) s0=$full
  # CHANGES Services get a third endpoint: one patch each, then the syncs settle.
  for ((n = 0; n < CHANGES; n++)); do
    kubectl patch endpointslice "svc-$n-a" --type json \
      -p '[{"op":"add","path":"/endpoints/-","value":{"addresses":["198.18.1.3"],"conditions":{"ready":true}}}]' >/dev/null
  done
  sleep 3
  c1=$(metric kubeproxy_sync_proxy_rules_duration_seconds_count) s1=$(metric kubeproxy_sync_proxy_rules_duration_seconds_sum)
  local conn floor rules u s
  conn=$(connects "$last" 80 "$CONNECTS") floor=$(connects 198.18.1.1 8080 "$CONNECTS")
  # Each mode's own rules: iptables-save's lines, or those of kube-proxy's nftables tables
  # (nft would also print the other mode's leftover iptables-nft tables).
  if [ "$mode" = iptables ]; then
    rules=$(in_ns iptables-save | wc -l)
  else
    rules=$( (in_ns nft list table ip kube-proxy; in_ns nft list table ip6 kube-proxy) 2>/dev/null | wc -l)
  fi
  read -r u s < <(awk '{print $14, $15}' "/proc/$pid/stat")
  kill "$pid"; wait "$pid" 2>/dev/null
  # The patches undone, for the next round.
  for ((n = 0; n < CHANGES; n++)); do
    kubectl patch endpointslice "svc-$n-a" --type json -p '[{"op":"remove","path":"/endpoints/2"}]' >/dev/null
  done
  awk -v t0="$t0" -v t1="$t1" -v full="$full" -v c0="$c0" -v s0="$s0" -v c1="$c1" -v s1="$s1" \
    -v conn="$conn" -v floor="$floor" -v rules="$rules" -v u="$u" -v s="$s" -v hz="$ticks" \
    'BEGIN {printf "%.2f %.3f %.3f %d %d %d %.2f\n", t1 - t0, full, (c1 > c0) ? (s1 - s0) / (c1 - c0) : 0, conn, floor, rules, (u + s) / hz}'
}
modes=(iptables nftables)
declare -A all
say "kube-proxy $("$KDIR/kube-proxy" --version 2>&1 | awk '{print $2}'), $SERVICES Services, $ROUNDS round(s), $CHANGES updates, $CONNECTS connects"
printf '  %-8s %-9s %12s %10s %12s %10s %9s %7s %7s\n' round mode "first sync s" "full s" "update s" "conn us" "floor us" rules "CPU s"
for ((r = 1; r <= ROUNDS; r++)); do
  for m in "${modes[@]}"; do
    one=$(round "$m") || { say "$m: no full sync in 300 s; see $WORK/kube-proxy-$m.log:"; tail -n 5 "$WORK/kube-proxy-$m.log"; exit 1; }
    all[$m]+="$one;"
    # shellcheck disable=SC2086  # the seven numbers, split on purpose
    printf '  %-8s %-9s %12.2f %10.3f %12.3f %10d %9d %7d %7.2f\n' "$r" "$m" $one
  done
done
col() { tr ';' '\n' <<<"${all[$1]}" | awk -v c="$2" 'NF {print $c}' | median; }
echo "medians, and nftables / iptables:"
printf '  %-14s %10s %10s %8s\n' figure iptables nftables ratio
i=1
for f in "first sync s" "full sync s" "update sync s" "connect us" "floor us" "rules" "CPU s"; do
  a=$(col iptables "$i") b=$(col nftables "$i")
  printf '  %-14s %10s %10s %8s\n' "$f" "$a" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN {if (a > 0) printf "%.2f", b / a; else print "-"}')"
  i=$((i + 1))
done
