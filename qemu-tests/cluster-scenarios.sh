#!/bin/bash
# Cluster scenarios on booted images (issue #7), run in CI:
#   0. one node boots alone to its login prompt: the plain boot time, for the ratio;
#   1. three control-plane nodes of one image, powered on together on a network with no
#      uplink, form etcd with no human step: three voting members with the right peer
#      URLs, and a key written through node 1 reads back through node 3;
#   2. all three lose power (QEMU killed) and boot again: same cluster ID, key still there.
# Usage: qemu-tests/cluster-scenarios.sh IMAGE   (needs root; KEEP_LOGS=1 keeps logs)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
. "$here/cluster-lib.sh"
image=$(realpath "${1:?usage: cluster-scenarios.sh IMAGE}")
work=$(mktemp -d /tmp/sprout-scenarios.XXXXXX)
passed=0 failed=0
check() {  # check NAME ACTUAL EXPECTED-REGEX
  if [[ "$2" =~ $3 ]]; then echo "ok   $1: $2"; passed=$((passed + 1))
  else echo "FAIL $1: got '$2', want /$3/"; failed=$((failed + 1)); fi
}
finish() { cluster_teardown $([ "$failed" -gt 0 ] || [ -n "${KEEP_LOGS:-}" ] && echo keep); }
trap finish EXIT
trap 'exit 130' INT TERM
find_ovmf || exit 1

echo "== 0. plain boot of one node to login (no cluster settings)"
mkdir -p "$work/plain"
qemu-img create -q -f qcow2 -b "$image" -F raw "$work/plain/disk.qcow2"
cp "$OVMF_VARS" "$work/plain/vars"
QEMU_EXTRA="-smp 1" boot_vm "$work/plain/disk.qcow2" "$work/plain/vars" "$work/plain/serial.log" 300 'login:'
plain=${BOOT_LOGIN_SECONDS%.*}
check "one node boots to its login prompt" "${plain:-none}" '^[0-9]+$'
rm -rf "$work/plain"

echo "== 1. three nodes form a cluster"
cluster_init "$work/cluster" "$image" || exit 1
peers=("$(node_ip 1)" "$(node_ip 2)" "$(node_ip 3)")
t0=$SECONDS
for i in 1 2 3; do node_config "$i" control-plane "${peers[@]}"; vm_start "$i"; done
if wait_until 1200 "three nodes in phase member" all_members 3; then
  check "all three reach phase member (seconds from power-on)" "$((SECONDS - t0))" '^[0-9]+$'
else
  check "all three reach phase member" "timeout" '^[0-9]+$'
  for i in 1 2 3; do echo "--- node-$i"; tail -n 25 "$CLUSTER_DIR/node-$i.serial"; done
  exit 1
fi
wait_until 300 "etcd healthy on all three" cluster_etcdctl 1 endpoint health --cluster
check "etcd healthy on all three nodes (seconds after they became members)" "${WAITED:-timeout}" '^[0-9]+$'
quorum=$((SECONDS - t0))
members=$(cluster_etcdctl 1 member list -w json)
summary=$(python3 -c '
import json,sys
m=json.load(sys.stdin)["members"]
print(" ".join(sorted("%s:%s:%s" % (x["name"], ",".join(x["peerURLs"]), "learner" if x.get("isLearner") else "voter") for x in m)))' <<<"$members")
echo "     member list: $summary"
check "etcd has three voting members with their peer URLs" "$summary" \
  '^node-1:https://198\.18\.0\.11:2380:voter node-2:https://198\.18\.0\.12:2380:voter node-3:https://198\.18\.0\.13:2380:voter$'
cluster_etcdctl 1 member list -w table
value="written-through-node-1-$RANDOM"
cluster_etcdctl 1 put /sprout/test/key "$value" >/dev/null
got=$(cluster_etcdctl 3 get /sprout/test/key --print-value-only)
echo "     node-3 reads /sprout/test/key = $got"
check "a key written through node 1 reads back through node 3" "$([ "$got" = "$value" ] && echo same || echo "'$got' != '$value'")" '^same$'
cluster_id() { cluster_etcdctl "$1" endpoint status -w json | python3 -c 'import json,sys; print("%x" % json.load(sys.stdin)[0]["Status"]["header"]["cluster_id"])'; }
id_before=$(cluster_id 2)
echo "     cluster ID $id_before"

echo "== 2. power loss of all three, then boot again"
for i in 1 2 3; do vm_kill "$i"; done
t1=$SECONDS
for i in 1 2 3; do vm_start "$i"; done
if wait_until 1200 "three nodes back in phase member" all_members 3; then
  check "all three are members again after power loss (seconds)" "$((SECONDS - t1))" '^[0-9]+$'
fi
# A member's phase is persisted; its etcd pod may need a while after boot to serve.
wait_until 600 "etcd healthy on all three after power loss" cluster_etcdctl 1 endpoint health --cluster
check "etcd healthy on all three after power loss (seconds after they were members)" "${WAITED:-timeout}" '^[0-9]+$'
id_after=""
for _ in $(seq 20); do
  id_after=$(cluster_id 3 2>/dev/null) && [ -n "$id_after" ] && break
  sleep 3
done
check "the cluster ID is the same after power loss" "$([ "$id_after" = "$id_before" ] && echo "same ($id_after)" || echo "'$id_after' != '$id_before'")" '^same'
got=$(cluster_etcdctl 2 get /sprout/test/key --print-value-only)
check "the key written before power loss is still there" "$([ "$got" = "$value" ] && echo same || echo "'$got' != '$value'")" '^same$'
check "no node was restarted by hand: every node booted twice" \
  "$(for i in 1 2 3; do node_ssh "$i" sprout-firstboot status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["boots"])'; done | tr '\n' ' ')" '^2 2 2 $'

echo
echo "figures: plain boot to login ${plain} s; boot to quorum ${quorum} s (3 nodes on $(nproc) cores);" \
  "ratio $(echo "scale=2; $quorum / $plain" | bc)"
echo "cluster-scenarios: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
