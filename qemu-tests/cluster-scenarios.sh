#!/bin/bash
# Cluster scenarios on booted images of the etcd-only image (issue #7), by hand; CI runs
# the same scenarios on the default image, Kubernetes and all (kubernetes-cluster.sh):
#   0. one node boots alone to its login prompt: the plain boot time, for the ratio;
#   1. three control-plane nodes of one image, powered on together on a network with no
#      uplink, form etcd with no human step: three voting members with the right peer
#      URLs, and a key written through node 1 reads back through node 3;
#   2. all three lose power (QEMU killed) and boot again: same cluster ID, key still there;
#   3. two more nodes of the same image are powered on, told only the first three as
#      peers: a worker, which gets the Kubernetes CA, the API endpoints and a bootstrap
#      token and runs no etcd; and a fourth control-plane node, which joins as a learner
#      and is promoted, leaving four voting members (the even-count policy of
#      docs/formation.md: a late control-plane node is always promoted);
#   5. (4 is cluster-media.sh) node-2 writes a backup bundle to an NFS share the harness
#      serves on the bridge (nfs-ganesha; the nodes were given it as backup-dir at first
#      boot) and copies it to the other voting members; then all five nodes and their
#      disks are destroyed, and three fresh nodes of the image, given the bundle as
#      restore-from, form one cluster holding the key written before the backup and not
#      the one written after it (docs/backup.md).
#   6. (run after 2, before 3) a rolling update of the three nodes to build B (the
#      image's profile with one more file, qemu-tests/etcd-cluster-b.yaml), served over
#      HTTP on the bridge (the image and B are signed with one key; first node-1 refuses
#      B unsigned and B signed with another key): one node at a time applies it, reboots, passes its health gate
#      and commits; etcd is sampled every 5-8 s throughout (endpoint health of each node
#      and a write) and must never lose quorum; the key and the cluster ID are unchanged
#      (docs/updates.md).
# Usage: qemu-tests/cluster-scenarios.sh IMAGE [BUILD-B-DIR]   (needs root; KEEP_LOGS=1
# keeps logs; without BUILD-B-DIR scenario 6 is skipped, saying so)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
. "$here/cluster-lib.sh"
image=$(realpath "${1:?usage: cluster-scenarios.sh IMAGE [BUILD-B-DIR]}")
update_build=${2:+$(realpath "$2")}
cluster_test_traps
find_ovmf || exit 1
# Each node's disk is 1 GiB larger than the image, as on real hardware: the etcd-only
# image's 256 MiB state partition has no room for a backup's test restore (etcd's
# write-ahead log alone is 64 MiB) until it grows at first boot.
CLUSTER_DISK_GROW=${CLUSTER_DISK_GROW:-1G}
cluster_init "" "$image" || exit 1

echo "== 0. plain boot of one node to login (no cluster settings)"
plain=""
if [ "${CLUSTER_PLAIN_BOOT:-1}" = 1 ]; then
  cluster_plain_boot "$image"
else
  echo "   SKIPPED: CLUSTER_PLAIN_BOOT=0 (CI: the boot only gives the ratio's baseline; the smoke test times its own boots)"
fi

echo "== 1. three nodes form a cluster"
peers=("$(node_ip 1)" "$(node_ip 2)" "$(node_ip 3)")
CLUSTER_CP_CONFIG=("backup-dir=$CLUSTER_SHARE")  # for scenario 5; no schedule, so unused until then
t0=$SECONDS
for i in 1 2 3; do node_config "$i" control-plane "${peers[@]}"; vm_start "$i"; done
expect_members 3 1200 "$t0" "all three reach phase member" || exit 1
expect_healthy "etcd healthy on all three nodes after they became members"
quorum=$((SECONDS - t0))
# Each node's own clock (seconds since its kernel started): when it reached
# multi-user.target and when formation said "member"; the gap is formation's own time.
for i in 1 2 3; do echo "     node-$i: $(node_timeline "$i")"; done
expect_member_list 1 "etcd has three voting members with their peer URLs" \
  '^node-1:https://198\.18\.0\.11:2380:voter node-2:https://198\.18\.0\.12:2380:voter node-3:https://198\.18\.0\.13:2380:voter$'
cluster_etcdctl 1 member list -w table
value="written-through-node-1-$RANDOM"
cluster_etcdctl 1 put /sprout/test/key "$value" >/dev/null
got=$(cluster_etcdctl 3 get /sprout/test/key --print-value-only)
echo "     node-3 reads /sprout/test/key = $got"
check "a key written through node 1 reads back through node 3" "$([ "$got" = "$value" ] && echo same || echo "'$got' != '$value'")" '^same$'
id_before=$(cluster_id 2)
echo "     cluster ID $id_before"

echo "== 2. power loss of all three, then boot again"
for i in 1 2 3; do vm_kill "$i"; done
t1=$SECONDS
for i in 1 2 3; do vm_start "$i"; done
expect_members 3 1200 "$t1" "all three are members again after power loss"
# A member's phase is persisted; its etcd pod may need a while after boot to serve.
expect_healthy "etcd healthy on all three after power loss, after they were members"
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

# CLUSTER_ROLL names the nodes scenario 6 updates, one at a time (default: all three).
# CI updates node-3 alone: a node's update takes 6-9 minutes in emulation (its
# download of a 1 GiB raw image alone about 5), and the other two are the same path.
roll=(${CLUSTER_ROLL:-1 2 3})
echo "== 6. a rolling update of ${#roll[@]} of the three (${roll[*]/#/node-}) to build B, served over HTTP on the bridge"
if [ -z "$update_build" ]; then
  echo "   SKIP scenario 6: no build B given (usage: cluster-scenarios.sh IMAGE [BUILD-B-DIR])"
elif within_budget "scenario 6" "${CLUSTER_BUDGET_6:-$((200 + 600 * ${#roll[@]}))}"; then
  cluster_update_scenario "$update_build" "${roll[@]}"
  got=$(cluster_etcdctl 3 get /sprout/test/key --print-value-only)
  check "the key written before the update is still there" "$([ "$got" = "$value" ] && echo same || echo "'$got' != '$value'")" '^same$'
  check "the cluster ID is unchanged by the update" "$(cluster_id 1)" "^$id_before\$"
  expect_member_list 1 "three voting members after the update" \
    '^node-1:https://198\.18\.0\.11:2380:voter node-2:https://198\.18\.0\.12:2380:voter node-3:https://198\.18\.0\.13:2380:voter$'
  roll_figures=$ROLL_SUMMARY
fi

# Scenario 5 backs up from the four control-plane nodes of scenario 3: the two go together.
echo "== 3 and 5 (the joins, then the backup and restore)"
if within_budget "scenarios 3 and 5" "${CLUSTER_BUDGET_3_5:-1500}"; then
  echo "== 3. a worker and a fourth control-plane node join"
  node_config 4 worker "${peers[@]}"
  node_config 5 control-plane "${peers[@]}"
  t3=$SECONDS
  vm_start 4
  vm_start 5
  if wait_until 900 "node-4 saved its worker credentials" node_ssh 4 test -s /var/lib/sprout/worker/bootstrap-token; then
    check "the worker saved its credentials (seconds from power-on)" "$((SECONDS - t3))" '^[0-9]+$'
  else
    check "the worker saved its credentials" "timeout" '^[0-9]+$'
    tail -n 25 "$CLUSTER_DIR/node-4.serial"
  fi
  check "the worker's phase" "$(node_phase 4)" '^worker$'
  check "the worker's CA is the cluster's Kubernetes CA" \
    "$([ "$(node_ssh 4 sha256sum /var/lib/sprout/worker/ca.crt | cut -d' ' -f1)" = \
         "$(node_ssh 1 sha256sum /etc/kubernetes/pki/ca.crt | cut -d' ' -f1)" ] && echo "same as node-1's" || echo differs)" '^same'
  check "the worker's bootstrap token is a Kubernetes token, mode 600" \
    "$(node_ssh 4 'stat -c %a /var/lib/sprout/worker/bootstrap-token; cat /var/lib/sprout/worker/bootstrap-token' | tr '\n' ' ' | sed 's/\(\.[a-z0-9]\{4\}\)[a-z0-9]*/\1.../')" \
    '^600 [a-z0-9]{6}\.[a-z0-9]{4}\.\.\. $'
  check "the worker knows the API endpoints of the control plane" \
    "$(node_ssh 4 cat /var/lib/sprout/worker/api-endpoints | tr '\n' ' ')" '198\.18\.0\.11.*198\.18\.0\.12.*198\.18\.0\.13'
  check "the worker was given the worker secret only, never the cluster secret" \
    "$(grep -c '^cluster-secret=' "$CLUSTER_DIR/node-4.conf") $(grep -c '^worker-secret=[0-9a-f]\{64\}$' "$CLUSTER_DIR/node-4.conf")" '^0 1$'
  check "the worker runs no etcd and holds no etcd CA" \
    "$(node_ssh 4 'podman ps -q | wc -l; ls /etc/kubernetes/pki/etcd 2>/dev/null | wc -l' | tr '\n' ' ')" '^0 0 $'
  if wait_until 900 "node-5 a voting member" eval 'is_member "$(node_phase 5)"'; then
    check "the fourth control-plane node joined and was promoted (seconds from power-on)" "$((SECONDS - t3))" '^[0-9]+$'
  else
    check "the fourth control-plane node joined and was promoted" "timeout" '^[0-9]+$'
    tail -n 25 "$CLUSTER_DIR/node-5.serial"
  fi
  check "node-5's phase says it joined as a learner" "$(node_phase 5)" '^member \(joined as learner\)$'
  expect_healthy "etcd healthy on all four control-plane nodes"
  expect_member_list 5 "four voting members, no learner left, no worker among them" \
    '^node-1:https://198\.18\.0\.11:2380:voter node-2:https://198\.18\.0\.12:2380:voter node-3:https://198\.18\.0\.13:2380:voter node-5:https://198\.18\.0\.15:2380:voter$'
  got=$(cluster_etcdctl 5 get /sprout/test/key --print-value-only)
  check "the key reads back through the new node" "$([ "$got" = "$value" ] && echo same || echo "'$got' != '$value'")" '^same$'
  check "the cluster ID is unchanged" "$(cluster_id 5)" "^$id_before\$"

  echo "== 5. a backup to an NFS share on the bridge, then every node and disk lost; three fresh nodes restore the cluster from it"
  cluster_backup_now 1 3 5
  bundle=$BUNDLE backup_seconds=$BACKUP_SECONDS backup_bytes=$BACKUP_BYTES
  # Written after the backup: a restore must not have it.
  cluster_etcdctl 1 put /sprout/test/after-backup "$RANDOM" >/dev/null

  cluster_lose_everything 1 2 3 4 5
  CLUSTER_CP_CONFIG=("restore-from=$CLUSTER_SHARE/$bundle" "backup-dir=$CLUSTER_SHARE")
  t5=$SECONDS
  for i in 1 2 3; do node_config "$i" control-plane "${peers[@]}"; vm_start "$i"; done
  expect_members 3 1200 "$t5" "three fresh nodes given the bundle are voting members"
  expect_healthy "etcd healthy on the three restored nodes"
  restored=$((SECONDS - t5))
  expect_member_list 1 "etcd has three voting members with their peer URLs" \
    '^node-1:https://198\.18\.0\.11:2380:voter node-2:https://198\.18\.0\.12:2380:voter node-3:https://198\.18\.0\.13:2380:voter$'
  cluster_etcdctl 1 member list -w table
  got=$(cluster_etcdctl 3 get /sprout/test/key --print-value-only)
  echo "     node-3 reads /sprout/test/key = $got"
  check "the key written before the backup reads back from the restored cluster" \
    "$([ "$got" = "$value" ] && echo same || echo "'$got' != '$value'")" '^same$'
  check "the key written after the backup is not there" \
    "$(cluster_etcdctl 2 get /sprout/test/after-backup -w json | python3 -c 'import json,sys; print(json.load(sys.stdin).get("count", 0))')" '^0$'
  cluster_restore_kinds "$bundle"
  echo "     cluster ID before the loss $id_before, restored $(cluster_id 1)"
fi
echo
if [ -n "$plain" ]; then
  echo "figures: plain boot to login ${plain} s; boot to quorum ${quorum} s (3 nodes on $(nproc) cores);" \
    "ratio $(echo "scale=2; $quorum / $plain" | bc)"
else
  echo "figures: boot to quorum ${quorum} s (3 nodes on $(nproc) cores); no plain boot in this run"
fi
[ -z "${restored:-}" ] || echo "figures: backup now ${backup_seconds:-?} s, ${backup_bytes:-?} bytes; restore to healthy ${restored} s," \
  "ratio to the fresh formation $(echo "scale=2; $restored / $quorum" | bc)"
[ -z "${roll_figures:-}" ] || echo "figures: $roll_figures"
echo "cluster-scenarios: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
