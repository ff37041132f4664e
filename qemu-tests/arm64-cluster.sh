#!/bin/bash
# Three arm64 nodes form a cluster (issue 17), run by hand: too slow for CI's 90 minutes
# next to the amd64 scenarios (docs/arm64.md has the measured run). The image is the
# cluster scenarios' etcd-only node built with --arch arm64; the nodes run under
# qemu-system-aarch64 -M virt with AAVMF, in software emulation, on the same private
# network and with the same fw_cfg settings as the amd64 scenarios (cluster-lib.sh):
#   1. three control-plane nodes powered on together form etcd with no human step:
#      three voting members with their peer URLs, and a key written through node 1
#      reads back through node 3;
#   2. all three lose power and boot again: same cluster ID, the key still there.
# Usage: qemu-tests/arm64-cluster.sh [IMAGE]   (needs root; KEEP_LOGS=1 keeps logs)
# IMAGE defaults to out/etcd-arm64/etcd-cluster.raw, built first when missing with
# `sprout build qemu-tests/etcd-cluster.yaml --arch arm64`.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
. "$here/lib.sh"
. "$here/cluster-lib.sh"
SPROUT=${SPROUT:-$top/build/sprout}
CACHE=${SPROUT_CACHE:-/var/cache/sprout}
image=${1:-$top/out/etcd-arm64/etcd-cluster.raw}
if [ ! -f "$image" ]; then
  echo "== build $image (qemu-tests/etcd-cluster.yaml for arm64)"
  "$SPROUT" build "$here/etcd-cluster.yaml" --arch arm64 -o "$(dirname "$image")" --cache-dir "$CACHE" || exit 1
fi
[ "$(image_arch "$image")" = arm64 ] || { echo "arm64-cluster: $image is not an arm64 image" >&2; exit 2; }
cluster_test_traps
cluster_init "" "$image" || exit 1
echo "   nodes run under: ${QEMU_CMD[*]}"

echo "== 1. three arm64 nodes form a cluster"
peers=("$(node_ip 1)" "$(node_ip 2)" "$(node_ip 3)")
t0=$SECONDS
for i in 1 2 3; do node_config "$i" control-plane "${peers[@]}"; vm_start "$i"; done
expect_members 3 2400 "$t0" "all three arm64 nodes reach phase member" || exit 1
expect_healthy "etcd healthy on all three after they became members"
for i in 1 2 3; do echo "     node-$i: $(node_timeline "$i") uname -m: $(node_ssh "$i" uname -m)"; done
check "the nodes are aarch64" "$(for i in 1 2 3; do node_ssh "$i" uname -m; done | sort -u | tr '\n' ' ')" '^aarch64 $'
expect_member_list 1 "etcd has three voting members with their peer URLs" \
  '^node-1:https://198\.18\.0\.11:2380:voter node-2:https://198\.18\.0\.12:2380:voter node-3:https://198\.18\.0\.13:2380:voter$'
cluster_etcdctl 1 member list -w table
value="written-through-arm64-node-1-$RANDOM"
cluster_etcdctl 1 put /sprout/test/key "$value"
got=$(cluster_etcdctl 3 get /sprout/test/key --print-value-only)
echo "     node-3 reads /sprout/test/key = $got"
check "a key written through node 1 reads back through node 3" "$([ "$got" = "$value" ] && echo same || echo "'$got' != '$value'")" '^same$'
id_before=$(cluster_id 2)
echo "     cluster ID $id_before"

echo "== 2. power loss of all three, then boot again"
for i in 1 2 3; do vm_kill "$i"; done
t1=$SECONDS
for i in 1 2 3; do vm_start "$i"; done
expect_members 3 2400 "$t1" "all three are members again after power loss"
expect_healthy "etcd healthy on all three after power loss"
id_after=$(cluster_id 3)
check "the cluster ID is the same after power loss" "$([ "$id_after" = "$id_before" ] && echo "same ($id_after)" || echo "'$id_after' != '$id_before'")" '^same'
got=$(cluster_etcdctl 2 get /sprout/test/key --print-value-only)
check "the key written before power loss is still there" "$([ "$got" = "$value" ] && echo same || echo "'$got' != '$value'")" '^same$'
echo "arm64-cluster: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
