#!/bin/bash
# bench/formation: time from "all processes started" to a healthy 3-member etcd
# cluster, sprout-firstboot formation against etcd's own static bootstrap (three etcd
# started with a fixed --initial-cluster), alternating, in network namespaces on one
# bridge (198.18.1.0/24, no uplink). Both sides run etcd with mutual TLS: the static
# side gets certificates made beforehand with the openssl command (untimed, as an
# operator would), sprout makes and distributes its own inside the timed span.
# Needs root, Debian's etcd-server and etcd-client, openssl.
#   SPROUT_FIRSTBOOT=build/sprout-firstboot bench/formation/run.sh [rounds]
# With JOINS=K it then starts 5 nodes at the same instant K times (in 198.18.3.0/24)
# and counts failed joins: runs without 5 healthy voting members within 60 s.
set -u
ROUNDS=${1:-5}
[ "$(id -u)" -eq 0 ] || { echo "bench/formation: needs root (network namespaces)"; exit 1; }
FIRSTBOOT=$(readlink -f "${SPROUT_FIRSTBOOT:?set SPROUT_FIRSTBOOT to the sprout-firstboot binary}")
export ETCDCTL_API=3
N=3
BR=sprt-bbr
ADDR=(198.18.1.11 198.18.1.12 198.18.1.13)
PEERS=$(IFS=,; echo "${ADDR[*]}")
ENDPOINTS=$(for a in "${ADDR[@]}"; do printf 'https://%s:2379,' "$a"; done); ENDPOINTS=${ENDPOINTS%,}
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

# The static side's PKI: one CA, per node a server/peer certificate with its address,
# and a client certificate for etcdctl (P-256, as sprout makes them).
S=$WORK/static-pki
mkdir -p "$S"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=etcd-ca \
  -keyout "$S/ca.key" -out "$S/ca.crt" 2>/dev/null
issue() {  # issue name subject-alt-names extended-key-usage
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" -keyout "$S/$1.key" \
    -out "$S/$1.csr" 2>/dev/null
  printf 'subjectAltName=%s\nextendedKeyUsage=%s\n' "$2" "$3" >"$S/$1.ext"
  openssl x509 -req -in "$S/$1.csr" -CA "$S/ca.crt" -CAkey "$S/ca.key" -CAcreateserial -days 1 \
    -extfile "$S/$1.ext" -out "$S/$1.crt" 2>/dev/null
}
for i in 1 2 3; do issue "b$i" "DNS:b$i,IP:${ADDR[$((i - 1))]},IP:127.0.0.1" serverAuth,clientAuth; done
issue client "DNS:localhost" clientAuth
TLS=()  # etcdctl flags of the round being measured
healthy() {
  [ "$(ip netns exec sprt-b1 etcdctl --dial-timeout=1s --command-timeout=2s "${TLS[@]}" --endpoints="$ENDPOINTS" member list 2>/dev/null | grep -c ', started, ')" -eq $N ] &&
    [ "$(ip netns exec sprt-b1 etcdctl --dial-timeout=1s --command-timeout=2s "${TLS[@]}" --endpoints="$ENDPOINTS" endpoint health 2>&1 | grep -c 'is healthy')" -eq $N ]
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
  for i in 1 2 3; do ic+="b$i=https://${ADDR[$((i - 1))]}:2380,"; done
  ic=${ic%,}
  TLS=(--cacert "$S/ca.crt" --cert "$S/client.crt" --key "$S/client.key")
  local t0; t0=$(date +%s.%N)
  for i in 1 2 3; do
    local a=${ADDR[$((i - 1))]}
    ip netns exec "sprt-b$i" etcd --name "b$i" --data-dir "$WORK/static-$1-$i" \
      --listen-peer-urls "https://$a:2380" --initial-advertise-peer-urls "https://$a:2380" \
      --listen-client-urls "https://$a:2379" --advertise-client-urls "https://$a:2379" \
      --initial-cluster "$ic" --initial-cluster-token "static-$1" --initial-cluster-state new \
      --client-cert-auth --trusted-ca-file "$S/ca.crt" --cert-file "$S/b$i.crt" --key-file "$S/b$i.key" \
      --peer-client-cert-auth --peer-trusted-ca-file "$S/ca.crt" --peer-cert-file "$S/b$i.crt" \
      --peer-key-file "$S/b$i.key" >"$WORK/static-$1-$i.log" 2>&1 &
    PIDS+=($!)
  done
  wait_time "$t0"
  stop_all
}

run_sprout() {  # run_sprout round
  local t0 i p=$WORK/sprout-$1-1/pki
  TLS=(--cacert "$p/etcd/ca.crt" --cert "$p/etcd/healthcheck-client.crt" --key "$p/etcd/healthcheck-client.key")
  t0=$(date +%s.%N)
  for i in 1 2 3; do
    ip netns exec "sprt-b$i" "$FIRSTBOOT" run --state-dir "$WORK/sprout-$1-$i" --name "b$i" \
      --listen "${ADDR[$((i - 1))]}" --peers "$PEERS" --expected $N --secret-file "$WORK/secret" \
      --cluster-name "bench-$1" --etcd-data-dir "$WORK/sprout-$1-$i/etcd" --pki-dir "$WORK/sprout-$1-$i/pki" \
      >"$WORK/sprout-$1-$i.log" 2>&1 &
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

# Failed joins: JOINS times, 5 nodes started at the same instant must end as 5 healthy
# voting members; each run gets a fresh cluster name, state and PKI.
JOINS=${JOINS:-0}
[ "$JOINS" -gt 0 ] || exit 0
stop_all
remove_network
N=5
ADDR=(198.18.3.11 198.18.3.12 198.18.3.13 198.18.3.14 198.18.3.15)
PEERS=$(IFS=,; echo "${ADDR[*]}")
ENDPOINTS=$(for a in "${ADDR[@]}"; do printf 'https://%s:2379,' "$a"; done); ENDPOINTS=${ENDPOINTS%,}
remove_network5() {
  for i in 1 2 3 4 5; do ip netns del "sprt-b$i" 2>/dev/null; ip link del "sprt-bv$i" 2>/dev/null; done
  ip link del "$BR" 2>/dev/null
}
stop_all() {
  local pid ns
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null; done
  for ns in sprt-b1 sprt-b2 sprt-b3 sprt-b4 sprt-b5; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
  done
  PIDS=()
}
cleanup() { stop_all; remove_network5; rm -rf "$WORK"; }
ip link add "$BR" type bridge mcast_snooping 0
ip link set "$BR" up
for i in 1 2 3 4 5; do
  ns=sprt-b$i
  ip netns add "$ns"
  ip link add "sprt-bv$i" type veth peer name "sprt-bp$i"
  ip link set "sprt-bp$i" netns "$ns"
  ip link set "sprt-bv$i" master "$BR" up
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "${ADDR[$((i - 1))]}/24" dev "sprt-bp$i"
  ip -n "$ns" link set "sprt-bp$i" up
done
healthy5() {
  [ "$(ip netns exec sprt-b1 etcdctl --dial-timeout=1s --command-timeout=2s "${TLS[@]}" --endpoints="$ENDPOINTS" member list 2>/dev/null | grep -c ', started, .*, false$')" -eq 5 ] &&
    [ "$(ip netns exec sprt-b1 etcdctl --dial-timeout=1s --command-timeout=2s "${TLS[@]}" --endpoints="$ENDPOINTS" endpoint health 2>&1 | grep -c 'is healthy')" -eq 5 ]
}
failed=0; times=()
start_time=$(date +%s)
for r in $(seq 1 "$JOINS"); do
  d=$WORK/joins-$r
  p=$d-1/pki
  TLS=(--cacert "$p/etcd/ca.crt" --cert "$p/etcd/healthcheck-client.crt" --key "$p/etcd/healthcheck-client.key")
  t0=$(date +%s.%N)
  for i in 1 2 3 4 5; do
    ip netns exec "sprt-b$i" "$FIRSTBOOT" run --state-dir "$d-$i" --name "b$i" --listen "${ADDR[$((i - 1))]}" \
      --peers "$PEERS" --expected 5 --secret-file "$WORK/secret" --cluster-name "joins-$r" \
      --etcd-data-dir "$d-$i/etcd" --pki-dir "$d-$i/pki" >"$d-$i.log" 2>&1 &
    PIDS+=($!)
  done
  ok=0
  deadline=$(($(date +%s) + 60))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    if healthy5; then ok=1; break; fi
    sleep 0.2
  done
  if [ $ok -eq 1 ]; then
    times+=("$(echo "$(date +%s.%N) - $t0" | bc)")
  else
    failed=$((failed + 1))
    echo "run $r: no 5 healthy voting members within 60 s; logs:"
    for i in 1 2 3 4 5; do tail -n 3 "$d-$i.log"; done
  fi
  stop_all
  rm -rf "$d"-*
done
echo "5-node simultaneous starts: $JOINS runs, $failed failed joins, median $(printf '%s\n' "${times[@]}" | median) s to 5 healthy voting members, $(($(date +%s) - start_time)) s in all"
