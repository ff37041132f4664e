#!/bin/bash
# Real formation: three sprout-firstboot processes, each in its own network namespace
# on one bridge, must form one healthy 3-member etcd cluster (Debian's etcd) by
# themselves; a wrong-secret node is refused; after all are killed and restarted, the
# cluster ID and the data remain; a late fourth node joins as a learner; a worker
# holding only the worker secret joins as a worker and is refused control-plane
# credentials; then
# tests/formation/five_nodes.sh runs five nodes at once and staggered. Traffic stays
# inside the namespaces (198.18.0.0/15 on bridges with no uplink).
set -u

name=formation_netns_test
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
FIRSTBOOT=${SPROUT_FIRSTBOOT:?set SPROUT_FIRSTBOOT to the sprout-firstboot binary}
FIRSTBOOT=$(readlink -f "$FIRSTBOOT")
export ETCDCTL_API=3

N=3
BR=sprt-fbr
NS=(); ADDR=(); PIDS=()
for i in $(seq 1 $N); do NS+=("sprt-f$i"); ADDR+=("198.18.0.1$i"); done
PEERS=$(IFS=,; echo "${ADDR[*]}")
ENDPOINTS=$(for a in "${ADDR[@]}"; do printf 'https://%s:2379,' "$a"; done); ENDPOINTS=${ENDPOINTS%,}
WORK=$(mktemp -d /tmp/sprt-formation.XXXXXX)
passed=0; failed=0

ok() { echo "ok: $*"; passed=$((passed + 1)); }
bad() { echo "FAIL: $*"; failed=$((failed + 1)); }

# kill_ns_processes ends what still runs in our namespaces (only processes this test started).
kill_ns_processes() {
  local sig=$1 ns pid
  for pid in "${PIDS[@]}"; do kill "-$sig" "$pid" 2>/dev/null; done
  [ "$sig" = KILL ] && for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null; done
  for ns in "${NS[@]}" sprt-f4 sprt-f5; do
    ip netns list 2>/dev/null | grep -qw "$ns" || continue
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill "-$sig" "$pid" 2>/dev/null; done
  done
}

remove_network() {
  local ns
  for ns in "${NS[@]}" sprt-f4 sprt-f5; do ip netns del "$ns" 2>/dev/null; done
  for i in 1 2 3 4 5; do ip link del "sprt-fv$i" 2>/dev/null; done
  ip link del "$BR" 2>/dev/null
}

cleanup() {
  kill_ns_processes TERM
  sleep 1
  kill_ns_processes KILL
  wait 2>/dev/null
  remove_network
  if [ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]; then
    rm -rf "$WORK"
  else
    echo "$name: logs kept in $WORK"
    for f in "$WORK"/n*/firstboot.log; do [ -f "$f" ] && { echo "--- $f (tail)"; tail -n 15 "$f"; }; done
  fi
  echo "$passed passed, $failed failed"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# A stale run (killed before its trap ran) may have left our namespaces behind.
remove_network

setup_node() {  # setup_node index address
  local i=$1 addr=$2 ns=sprt-f$1
  ip netns add "$ns"
  ip link add "sprt-fv$i" type veth peer name "sprt-fp$i"
  ip link set "sprt-fp$i" netns "$ns"
  ip link set "sprt-fv$i" master "$BR" up
  ip -n "$ns" link set lo up
  ip -n "$ns" link set "sprt-fp$i" name eth0
  ip -n "$ns" addr add "$addr/24" dev eth0
  ip -n "$ns" link set eth0 up
  mkdir -p "$WORK/n$i"
}

ip link add "$BR" type bridge mcast_snooping 0
ip link set "$BR" up
for i in $(seq 1 $N); do setup_node "$i" "${ADDR[$((i - 1))]}"; done
head -c 32 /dev/urandom | base64 >"$WORK/secret"

start_node() {  # start_node index [secret-file]
  # No --apply-system: the node config stays off this host (hostname, address, SSH key).
  local i=$1 secret=${2:-$WORK/secret}
  ip netns exec "sprt-f$i" "$FIRSTBOOT" run --state-dir "$WORK/n$i/state" --name "node$i" \
    --listen "198.18.0.1$i" --peers "$PEERS" --expected $N --secret-file "$secret" \
    --cluster-name sprt-formation-test --etcd-data-dir "$WORK/n$i/etcd" --pki-dir "$WORK/n$i/pki" \
    >>"$WORK/n$i/firstboot.log" 2>&1 &
  PIDS+=($!)
}

# ctl runs etcdctl from node 1's namespace over mTLS with node 1's healthcheck client certificate.
ctl() {
  local pki=$WORK/n1/pki
  ip netns exec sprt-f1 etcdctl --dial-timeout=1s --command-timeout=2s --cacert "$pki/etcd/ca.crt" \
    --cert "$pki/etcd/healthcheck-client.crt" --key "$pki/etcd/healthcheck-client.key" "$@"
}

# wait_healthy seconds: until all N members are started and every endpoint is healthy.
wait_healthy() {
  local deadline=$(($(date +%s) + $1))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    if [ "$(ctl --endpoints="$ENDPOINTS" member list 2>/dev/null | grep -c ', started, ')" -eq $N ] &&
      [ "$(ctl --endpoints="$ENDPOINTS" endpoint health 2>&1 | grep -c 'is healthy')" -eq $N ]; then
      return 0
    fi
    sleep 0.2
  done
  return 1
}

cluster_id() { ctl --endpoints="https://${ADDR[0]}:2379" member list -w json 2>/dev/null | grep -o '"cluster_id":[0-9]*' | cut -d: -f2; }

# 1. Three nodes started at once form one cluster.
t0=$(date +%s.%N)
for i in $(seq 1 $N); do start_node "$i"; done
if wait_healthy 60; then
  t1=$(date +%s.%N)
  ok "3 nodes formed a healthy 3-member etcd cluster"
  printf 'formation time (all started -> 3 healthy members): %.2f s\n' "$(echo "$t1 - $t0" | bc)"
else
  bad "no healthy 3-member cluster within 60 s"
  ctl --endpoints="$ENDPOINTS" member list 2>&1
  exit 1
fi
ctl --endpoints="$ENDPOINTS" member list
ctl --endpoints="$ENDPOINTS" endpoint health 2>&1
"$FIRSTBOOT" status --state-dir "$WORK/n1/state"

# 2. A key written through node 1 is read back through node 3.
if ctl --endpoints="https://${ADDR[0]}:2379" put sprout/formation-test "written via node1" >/dev/null; then
  got=$(ctl --endpoints="https://${ADDR[2]}:2379" get --print-value-only sprout/formation-test)
  echo "read back via node3: $got"
  [ "$got" = "written via node1" ] && ok "key written via node 1 read via node 3" || bad "read back '$got'"
else
  bad "put via node 1 failed"
fi
id_before=$(cluster_id)
echo "cluster ID: $id_before"
# state.json is rewritten once a second: wait (bounded) until it names the cluster.
for _ in $(seq 1 25); do
  token_before=$("$FIRSTBOOT" status --json --state-dir "$WORK/n1/state" | grep -o '"cluster_token": "[^"]\+"')
  [ -n "$token_before" ] && break
  sleep 0.2
done
echo "before restart: $token_before"

# 3. A node with the wrong secret (same cluster name, fourth namespace) is refused:
# its frames fail the MAC check and are logged as forged; it never becomes a member.
setup_node 4 198.18.0.14
head -c 32 /dev/urandom | base64 >"$WORK/wrong-secret"
start_node 4 "$WORK/wrong-secret"
line=""
for _ in $(seq 1 50); do
  line=$(grep -m1 'forged=[1-9]' "$WORK/n1/firstboot.log")
  [ -n "$line" ] && break
  sleep 0.2
done
if [ -n "$line" ]; then
  echo "node1 logged: $line"
  ok "frames of the wrong-secret node are dropped as forged"
else
  bad "node1 never logged a forged frame from the wrong-secret node"
fi
sleep 2
members=$(ctl --endpoints="$ENDPOINTS" member list 2>/dev/null | grep -c ', started, ')
phase4=$("$FIRSTBOOT" status --json --state-dir "$WORK/n4/state" | grep -o '"phase": "[^"]*"')
echo "wrong-secret node: $phase4, etcd members: $members"
[ "$members" -eq $N ] && [ "$phase4" = '"phase": "discovering"' ] && [ ! -d "$WORK/n4/etcd" ] &&
  ok "wrong-secret node stayed out of the cluster" || bad "wrong-secret node got in ($phase4, $members members)"
kill -TERM "${PIDS[3]}" 2>/dev/null
wait "${PIDS[3]}" 2>/dev/null
PIDS=("${PIDS[@]:0:3}")

# 4. Kill every node (and with it its etcd), start them again: same cluster, same data.
etcd_pids=$(for i in $(seq 1 $N); do "$FIRSTBOOT" status --json --state-dir "$WORK/n$i/state" | grep -o '"etcd_pid": [0-9]*' | cut -d' ' -f2; done)
for pid in "${PIDS[@]}"; do
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
done
PIDS=()
for _ in $(seq 1 100); do  # etcd gets SIGTERM when its parent dies
  alive=0
  for pid in $etcd_pids; do [ "$pid" -gt 0 ] && kill -0 "$pid" 2>/dev/null && alive=1; done
  [ $alive -eq 0 ] && break
  sleep 0.1
done
[ $alive -eq 0 ] && ok "all nodes and their etcd stopped" || bad "etcd still running after its node was killed"
for i in $(seq 1 $N); do start_node "$i"; done
if wait_healthy 60; then
  id_after=$(cluster_id)
  token_after=$("$FIRSTBOOT" status --json --state-dir "$WORK/n1/state" | grep -o '"cluster_token": "[^"]*"')
  echo "after restart: cluster ID $id_after, $token_after"
  [ -n "$id_before" ] && [ "$id_after" = "$id_before" ] && [ "$token_after" = "$token_before" ] &&
    ok "restart kept the cluster ID and token" ||
    bad "cluster ID or token changed: '$id_before' -> '$id_after', $token_before -> $token_after"
  got=$(ctl --endpoints="https://${ADDR[2]}:2379" get --print-value-only sprout/formation-test)
  [ "$got" = "written via node1" ] && ok "key survived the restart" || bad "after restart read '$got'"
else
  bad "cluster not healthy within 60 s after restart"
fi

# 5. A fourth control-plane node with the right secret, started after formation, joins
# as an etcd learner through the members' v3 gateway and is promoted.
mkdir -p "$WORK/n5"
ip netns exec sprt-f4 "$FIRSTBOOT" run --state-dir "$WORK/n5/state" --name node4 --listen 198.18.0.14 \
  --peers "$PEERS" --expected $N --secret-file "$WORK/secret" --cluster-name sprt-formation-test \
  --etcd-data-dir "$WORK/n5/etcd" --pki-dir "$WORK/n5/pki" >>"$WORK/n5/firstboot.log" 2>&1 &
PIDS+=($!)
ENDPOINTS4="$ENDPOINTS,https://198.18.0.14:2379"
t0=$(date +%s.%N)
joined=0
for _ in $(seq 1 300); do
  if [ "$(ctl --endpoints="$ENDPOINTS" member list 2>/dev/null | grep -c ', started, .*, false$')" -eq 4 ] &&
    [ "$(ctl --endpoints="$ENDPOINTS4" endpoint health 2>&1 | grep -c 'is healthy')" -eq 4 ]; then
    joined=1
    break
  fi
  sleep 0.2
done
if [ $joined -eq 1 ]; then
  printf 'learner join (node4 started -> 4 healthy voting members): %.2f s\n' "$(echo "$(date +%s.%N) - $t0" | bc)"
  ctl --endpoints="$ENDPOINTS" member list
  got=$(ip netns exec sprt-f4 etcdctl --cacert "$WORK/n5/pki/etcd/ca.crt" --cert "$WORK/n5/pki/etcd/healthcheck-client.crt" \
    --key "$WORK/n5/pki/etcd/healthcheck-client.key" --endpoints=https://198.18.0.14:2379 get --print-value-only sprout/formation-test)
  [ "$got" = "written via node1" ] && ok "node4 joined as learner, was promoted, and reads the key" ||
    bad "node4 joined but read '$got'"
else
  bad "node4 did not become a healthy voting member within 60 s"
  ctl --endpoints="$ENDPOINTS" member list 2>&1
  grep 'join' "$WORK/n5/firstboot.log" | tail -5
fi

# 6. The join endpoint refuses a TLS client without the cluster secret (openssl s_client
# with a random PSK under the same identity, from the fourth namespace), and logs it.
if command -v openssl >/dev/null; then
  echo | ip netns exec sprt-f4 timeout 5 openssl s_client -tls1_3 -connect 198.18.0.11:7777 \
    -psk_identity sprout-join-v1 -psk "$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')" >/dev/null 2>&1
  line=""
  for _ in $(seq 1 25); do
    line=$(grep -m1 'join: refused a connection from 198.18.0.14' "$WORK/n1/firstboot.log")
    [ -n "$line" ] && break
    sleep 0.2
  done
  if [ -n "$line" ]; then
    echo "node1 logged: $line"
    ok "join endpoint refused a client with the wrong secret and logged it"
  else
    bad "node1 did not log the refused join connection"
  fi
else
  echo "skipped the join-endpoint refusal check: no openssl command"
fi

# 7. A worker holding only the worker secret (derived here with the openssl command,
# hex HMAC-SHA256(cluster secret, "sprout worker secret v1"), not by sprout) finds the
# cluster and gets the CA bundle, the API endpoints and a bootstrap token from a
# member's join endpoint, and runs no etcd. The endpoints are the voting members',
# which members refresh from etcd every 15 s: node4, promoted after formation, is among
# them once a founding member has seen it.
for _ in $(seq 1 150); do
  grep -q 'workers are now told the API endpoints.*198\.18\.0\.14' "$WORK"/n[123]/firstboot.log && break
  sleep 0.2
done
setup_node 5 198.18.0.15
mkdir -p "$WORK/w"
# The daemon drops the secret file's line end, so the key is the file's first line.
printf 'sprout worker secret v1' | openssl mac -digest SHA256 -macopt "key:$(cat "$WORK/secret")" HMAC |
  tr 'A-F' 'a-f' >"$WORK/w/worker.secret"
ip netns exec sprt-f5 "$FIRSTBOOT" run --state-dir "$WORK/w/state" --name worker1 --listen 198.18.0.15 \
  --peers "$PEERS" --expected $N --worker-secret-file "$WORK/w/worker.secret" --cluster-name sprt-formation-test \
  --role worker --etcd-data-dir "$WORK/w/etcd" --pki-dir "$WORK/w/pki" >>"$WORK/w/firstboot.log" 2>&1 &
PIDS+=($!)
wdir=$WORK/w/state/worker
for _ in $(seq 1 150); do [ -f "$wdir/bootstrap-token" ] && break; sleep 0.2; done
if [ -f "$wdir/bootstrap-token" ] && cmp -s "$wdir/ca.crt" "$WORK/n1/pki/ca.crt" &&
  [ "$(stat -c %a "$wdir/bootstrap-token")" = 600 ] && [ "$(sort "$wdir/api-endpoints" | tr '\n' ' ')" = "https://198.18.0.11:6443 https://198.18.0.12:6443 https://198.18.0.13:6443 https://198.18.0.14:6443 " ] &&
  grep -Eqx '[a-z0-9]{6}\.[a-z0-9]{16}' "$wdir/bootstrap-token" &&
  ! cmp -s "$wdir/bootstrap-token" "$WORK/n1/state/bootstrap-token" && [ ! -e "$WORK/w/etcd" ] && [ ! -e "$WORK/w/pki" ]; then
  echo "worker got: token $(cut -c1-7 "$wdir/bootstrap-token")... (the base token is $(cut -c1-7 "$WORK/n1/state/bootstrap-token")...), endpoints $(tr '\n' ' ' <"$wdir/api-endpoints")"
  grep -m1 'worker: saved' "$WORK/w/firstboot.log"
  ok "worker with only the worker secret received the Kubernetes CA, API endpoints and a worker token (0600), never the base token, and runs no etcd"
else
  bad "worker credentials missing or wrong"
  ls -la "$wdir" 2>&1
  tail -5 "$WORK/w/firstboot.log"
fi

# 7b. From the worker's namespace, a client holding only that worker secret asks node1
# for control-plane credentials over the worker PSK (openssl s_client, not sprout's
# client: the key schedule is redone here with the openssl command). The handshake
# succeeds, the answer is a refusal without any key or certificate, and node1 logs it.
# The worker's own beacons never count as overreach at the control-plane nodes.
hkdf=$(openssl kdf -keylen 32 -kdfopt digest:SHA256 -kdfopt "key:$(cat "$WORK/w/worker.secret")" \
  -kdfopt "salt:sprout formation v1" -kdfopt "info:cluster:sprt-formation-test" HKDF | tr -d ':')
psk=$(printf 'sprout join psk v1' | openssl mac -digest SHA256 -macopt "hexkey:$hkdf" HMAC)
ask() {  # ask ROLE: one join request over the worker PSK from the worker's namespace
  printf '{"version":1,"role":"%s","name":"worker1","address":"198.18.0.15"}\n' "$1" |
    ip netns exec sprt-f5 timeout 10 openssl s_client -quiet -ign_eof -tls1_3 -connect 198.18.0.11:7777 \
      -psk_identity sprout-join-worker-v1 -psk "$psk" 2>/dev/null
}
as_worker=$(ask worker)
as_cp=$(ask control-plane)
line=""
for _ in $(seq 1 25); do
  line=$(grep -m1 'join: refused a request from 198.18.0.15 (proved the worker key)' "$WORK/n1/firstboot.log")
  [ -n "$line" ] && break
  sleep 0.2
done
echo "asked as worker over the worker PSK: $(cut -c1-60 <<<"$as_worker")..."
echo "asked as control-plane over the worker PSK: $(cut -c1-200 <<<"$as_cp")"
[ -n "$line" ] && echo "node1 logged: $line"
if grep -q '"ok":true' <<<"$as_worker" && grep -q '"role":"worker"' <<<"$as_worker" &&
  ! grep -q 'PRIVATE KEY' <<<"$as_worker" && grep -q '"ok":false' <<<"$as_cp" &&
  grep -q 'proved only the worker secret' <<<"$as_cp" && ! grep -q -e 'PRIVATE KEY' -e 'CERTIFICATE' <<<"$as_cp" &&
  [ -n "$line" ] && ! grep -q 'overreach=[1-9]' "$WORK"/n[1234]/firstboot.log; then
  ok "a worker's secret gets worker credentials only; asking as control-plane over it is refused with no CA key, and logged"
else
  bad "a client with only the worker secret was not refused control-plane credentials (CA keys in the answer: $(grep -c 'PRIVATE KEY' <<<"$as_cp"))"
fi

# 8. Five nodes, at once and staggered (its own namespaces and subnet); stop ours first
# so the two clusters do not compete for the two cores.
kill_ns_processes TERM
for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null; done
PIDS=()
five=$(bash "$(dirname "$0")/formation/five_nodes.sh" 2>&1)
echo "$five"
p5=$(echo "$five" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1/p')
f5=$(echo "$five" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\2/p')
passed=$((passed + ${p5:-0}))
failed=$((failed + ${f5:-1}))

[ "$failed" -eq 0 ]
