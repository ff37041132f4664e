#!/bin/bash
# etcd backups to a real NFS share and a cluster rebuilt from it (docs/backup.md), with
# real etcd over mTLS and a real NFS server: Debian's user-space nfs-ganesha (NFSv4,
# VFS backend) in its own network namespace on the test bridge (198.18.15.0/24, no
# uplink); sprout-firstboot reaches it with libnfs, no mount:
#   1. three nodes form and 10,000 keys are written (BACKUP_KEYS=N changes it);
#   2. `backup now` writes a good bundle to nfs://…; its time and size are printed;
#   3. scheduled bundles appear on the share every slot, each slot once, written by the
#      etcd leader only; retention keeps the newest 3 (seen through nfs-ls);
#   4. the share goes away during a snapshot (ganesha is frozen with SIGSTOP while the
#      leader writes): the attempt fails in bounded time, status shows it, etcd still
#      takes writes, nothing partial is listed; the next bundle is good once it returns;
#   5. three nodes take one slot's bundle at the same moment: one writes it, the others
#      are refused by NFS LINK (the name exists);
#   6. a corrupted bundle on the share is refused at restore: the node starts nothing;
#   7. every node and its disk is destroyed; three fresh nodes given the newest bundle
#      as an nfs:// URL form one cluster holding the keys; restore-to-healthy is printed
#      as a ratio to the fresh formation of step 1.
set -u
name=backup_nfs_test
NP=sprt-n SUBNET=198.18.15 CLUSTER=sprt-nfs NB_MAX=7
# shellcheck source=tests/formation/netns.sh
. "$(dirname "$0")/formation/netns.sh"
# shellcheck source=tests/backup/form.sh
. "$(dirname "$0")/backup/form.sh"
nb_preflight "$name" ganesha.nfsd nfs-ls
if [ ! -e /usr/lib/x86_64-linux-gnu/ganesha/libfsalvfs.so ] && ! ls /usr/lib/*/ganesha/libfsalvfs.so >/dev/null 2>&1; then
  echo "$name: skipped: nfs-ganesha's VFS backend is missing (scripts/install-deps installs nfs-ganesha-vfs)"
  exit 0
fi
WORK=$(mktemp -d /tmp/sprt-nfs.XXXXXX)
SECRET=$WORK/secret
EXPORT=$WORK/export             # the folder ganesha exports; the test looks at it only to corrupt a copy
G=7                             # ganesha's namespace: sprt-n7 at 198.18.15.17
NFS_HOST=$SUBNET.1$G
SHARE="nfs://$NFS_HOST/backups" # what the nodes are given
INTERVAL=${BACKUP_INTERVAL:-10}
KEEP=3
KEYS=${BACKUP_KEYS:-10000}
GANESHA_PID=""
passed=0; failed=0
ok() { echo "ok: $*"; passed=$((passed + 1)); }
bad() { echo "FAIL: $*"; failed=$((failed + 1)); }
cleanup() {
  [ -n "$GANESHA_PID" ] && { kill -CONT "$GANESHA_PID" 2>/dev/null; kill -TERM "$GANESHA_PID" 2>/dev/null; }
  nb_teardown
  if [ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]; then
    rm -rf "$WORK"
  else
    echo "$name: logs kept in $WORK"
    for f in "$WORK"/n*/firstboot.log; do [ -f "$f" ] && { echo "--- $f (tail)"; tail -n 15 "$f"; }; done
  fi
  echo "$passed passed, $failed failed"
  # An EXIT trap's last status is not the script's: without this exit, a run with
  # failures ended 0 and ctest counted it passed.
  [ "$failed" -eq 0 ] && [ "$passed" -gt 0 ] || exit 1
}
trap cleanup EXIT
trap 'exit 1' INT TERM
nb_teardown 2>/dev/null # a stale run may have left our namespaces behind
head -c 32 /dev/urandom | base64 >"$SECRET"
for i in 1 2 3 4 $G; do nb_setup "$i"; done

# The NFS server: NFSv4 only over TCP (no rpcbind here), bound to its namespace's
# address, exporting $EXPORT as /backups, its recovery state in $WORK.
mkdir -p "$EXPORT" "$WORK/ganesha/recovery"
cat >"$WORK/ganesha/ganesha.conf" <<EOF
NFS_CORE_PARAM { Protocols = 4; NFS_Port = 2049; Enable_NLM = false; Enable_RQUOTA = false; Bind_addr = $NFS_HOST; }
NFSV4 { Graceless = true; RecoveryRoot = $WORK/ganesha/recovery; }
EXPORT { Export_Id = 1; Path = $EXPORT; Pseudo = /backups; Access_Type = RW; Squash = No_Root_Squash;
         SecType = sys; Protocols = 4; Transports = TCP; FSAL { Name = VFS; } }
LOG { Default_Log_Level = EVENT; }
EOF
ip netns exec "$NP$G" ganesha.nfsd -F -L "$WORK/ganesha/log" -f "$WORK/ganesha/ganesha.conf" -p "$WORK/ganesha/pid" \
  -N NIV_EVENT &
GANESHA_PID=$!
# share_ls: the share's listing as a client sees it (libnfs's nfs-ls, from node 1's namespace).
share_ls() { ip netns exec "${NP}1" timeout 30 nfs-ls "$SHARE?version=4" 2>&1; }
up=""
for _ in $(seq 1 40); do
  share_ls >/dev/null 2>&1 && { up=1; break; }
  sleep 0.5
done
if [ -z "$up" ]; then
  bad "nfs-ganesha did not serve $SHARE within 20 s"
  tail -n 20 "$WORK/ganesha/log"
  exit 1
fi
echo "share: $SHARE, served by nfs-ganesha $(dpkg-query -W -f='${Version}' nfs-ganesha 2>/dev/null) (pid $GANESHA_PID) in namespace $NP$G"

bflags=(--backup-dir "$SHARE" --backup-keep "$KEEP" --etcdctl "$(command -v etcdctl)")
# fb i ARGS...: sprout-firstboot ARGS as node i, in node i's namespace.
fb() {
  local i=$1
  shift
  ip netns exec "$NP$i" "$FIRSTBOOT" "$@" --state-dir "$WORK/n$i/state" --name "node$i" --secret-file "$SECRET" \
    --cluster-name "$CLUSTER" --pki-dir "$WORK/n$i/pki" --etcd-data-dir "$WORK/n$i/etcd" --listen "$(nb_addr "$i")" \
    --peers "$(nb_peers 3)" "${bflags[@]}"
}
scheduled_good() { cat "$WORK"/n[123]/firstboot.log | grep -c 'backup: good: .*-scheduled.sprout-backup'; }

# 1. Three nodes form; keys are written.
form_and_write

# 2. A manual backup from node 2 to the share: its time and size.
out=$(fb 2 backup now 2>&1)
echo "$out"
# etcd's key count in the bundle: the test's keys plus the few formation keeps.
bkeys=$(echo "$out" | grep -o ', [0-9]* keys,' | head -1 | tr -dc 0-9)
if echo "$out" | grep -q "^backup: good: $SHARE/$CLUSTER-.*-manual-node2.sprout-backup: [0-9]* bytes, revision [0-9]*, [0-9]* keys" &&
  [ "${bkeys:-0}" -ge $((KEYS + 1)) ]; then
  ok "backup now wrote a good bundle of $bkeys keys (the test's $((KEYS + 1)) among them) to the NFS share"
else
  bad "backup now did not report a good bundle on the share"
fi
ls_out=$(share_ls)
echo "$ls_out" | grep -q 'manual-node2.sprout-backup' && ok "nfs-ls sees the manual bundle on the share" ||
  bad "nfs-ls does not see the manual bundle: $ls_out"
list=$(fb 1 backup list 2>&1)
echo "$list"
echo "$list" | grep -q 'manual-node2.sprout-backup .* revision [0-9]* .*sha256 [0-9a-f]\{64\}  good$' &&
  ok "backup list (over NFS) shows the manual bundle with size, time, revision and sha256, and it opens" ||
  bad "backup list does not show the manual bundle as good"
if grep -l 'PRIVATE KEY' "$EXPORT"/* >/dev/null 2>&1; then
  bad "a bundle on the share holds a private key in the clear"
else
  ok "no private key in the clear on the share"
fi

# 3. Scheduled bundles on the share, one per slot, by the leader only; retention.
want=$((KEEP + 1))
deadline=$(($(date +%s) + INTERVAL * (want + 2) + 15))
while [ "$(scheduled_good)" -lt "$want" ] && [ "$(date +%s)" -lt "$deadline" ]; do sleep 1; done
echo "scheduled bundles reported good:"
for i in 1 2 3; do
  grep 'backup: good: .*-scheduled' "$WORK/n$i/firstboot.log" | sed "s/^sprout-firstboot: /  node$i: /; s/ (PHASE=.*//"
done
good=$(grep -ho 'backup: good: [^ ]*-scheduled.sprout-backup' "$WORK"/n[123]/firstboot.log | sort)
n_good=$(echo "$good" | grep -c .)
n_unique=$(echo "$good" | sort -u | grep -c .)
if [ "$n_good" -ge "$want" ] && [ "$n_good" -eq "$n_unique" ]; then
  ok "$n_good scheduled bundles, each slot written by exactly one node"
else
  bad "scheduled bundles: $n_good reported good, $n_unique distinct (want >= $want, all distinct)"
fi
# On schedule: every slot reported good is a multiple of INTERVAL. A slot can pass with no
# bundle when the leader is still busy through all of it (a CI run wrote the 10,000 keys
# while the schedule ran, on a host with a VM beside it, and one 10 s slot passed with
# no bundle), so a gap is printed as a figure, not failed: how long a snapshot takes is
# the machine's, and the next slot's bundle covers it.
slots=$(echo "$good" | grep -o '[0-9]\{8\}T[0-9]\{6\}Z' | while read -r t; do
  date -u -d "${t:0:4}-${t:4:2}-${t:6:2} ${t:9:2}:${t:11:2}:${t:13:2}" +%s
done | sort -n)
gaps=$(echo "$slots" | awk -v iv="$INTERVAL" 'NR > 1 && $1 - prev != iv { n++ } { prev = $1 } END { print n + 0 }')
misaligned=$(echo "$slots" | awk -v iv="$INTERVAL" '$1 % iv != 0 { n++ } END { print n + 0 }')
[ "$misaligned" -eq 0 ] && ok "on schedule: every bundle is on a $INTERVAL s slot boundary ($gaps slot(s) between the first and the last passed without one)" ||
  bad "schedule: $misaligned slots not on a multiple of $INTERVAL s ($gaps gaps)"
leader_node=""
for i in 1 2 3; do
  st_json=$(nb_ctl "$i" "$(nb_endpoints "$i")" endpoint status -w json)
  mid=$(echo "$st_json" | grep -o '"member_id":[0-9]*' | head -1 | cut -d: -f2)
  lid=$(echo "$st_json" | grep -o '"leader":[0-9]*' | head -1 | cut -d: -f2)
  [ -n "$mid" ] && [ "$mid" = "$lid" ] && leader_node=$i
done
writers=$(grep -l 'backup: good: .*-scheduled' "$WORK"/n[123]/firstboot.log | sed 's|.*/n\([0-9]\)/.*|\1|' | tr '\n' ' ')
echo "nodes that wrote scheduled bundles: $writers(etcd leader: node$leader_node)"
[ "$writers" = "$leader_node " ] && ok "only the etcd leader (node$leader_node) wrote scheduled bundles" ||
  bad "scheduled bundles written by node(s) $writers, the leader is node$leader_node"
sleep 1
ls_out=$(share_ls)
echo "on the share (nfs-ls $SHARE):"
echo "$ls_out" | sed 's/^/  /'
# Every good bundle so far (manual and scheduled), newest KEEP by name (names sort by time).
written=$({ grep -ho "$CLUSTER-[0-9T]*Z-scheduled.sprout-backup" "$WORK"/n[123]/firstboot.log
  echo "$out" | grep -o "$CLUSTER-[0-9T]*Z-manual-node2.sprout-backup"; } | sort -u)
expect=$(echo "$written" | tail -n "$KEEP")
have=$(echo "$ls_out" | grep -o "$CLUSTER-[^ ]*\.sprout-backup" | sort)
n_bundles=$(echo "$have" | grep -c .)
if [ "$have" = "$expect" ] && grep -q 'backup: retention removed ' "$WORK"/n[123]/firstboot.log; then
  ok "retention on the share kept the newest $KEEP of $(echo "$written" | grep -c .) bundles and removed the older ones"
else
  bad "retention: $n_bundles bundles on the share; want the newest $KEEP of: $(echo "$written" | tr '\n' ' ')"
fi
echo "$ls_out" | grep -q 'tmp-' && bad "a temporary file is left on the share" || ok "no temporary file on the share"
st=$("$FIRSTBOOT" status --state-dir "$WORK/n$leader_node/state")
echo "$st" | grep '^backup:'
echo "$st" | grep -q "^backup: last good $SHARE/$CLUSTER-.*-scheduled.sprout-backup at .*, revision [0-9]*, [0-9]* bytes, sha256 [0-9a-f]\{64\}" &&
  ok "status names the last good bundle on the share" || bad "status of node $leader_node has no last good bundle line"

# 4. The share goes away during a snapshot: ganesha is frozen (SIGSTOP) the moment the
# leader's temporary file appears in the export, so the write is cut mid-way. If no
# write is caught within three slots, it is frozen between slots instead (said below).
before_fail=$(grep -c 'backup: scheduled snapshot failed' "$WORK/n$leader_node/firstboot.log")
caught=""
deadline=$(($(date +%s) + INTERVAL * 3 + 5))
shopt -s nullglob dotglob
while [ "$(date +%s)" -lt "$deadline" ]; do
  tmps=("$EXPORT"/.*.tmp-*)
  if [ ${#tmps[@]} -gt 0 ]; then
    kill -STOP "$GANESHA_PID"
    caught=$(basename "${tmps[0]}")
    break
  fi
done
shopt -u nullglob dotglob
[ -n "$caught" ] || kill -STOP "$GANESHA_PID"
t_stop=$(date +%s.%N)
n_at_stop=$(scheduled_good)
if [ -n "$caught" ]; then
  echo "share frozen (SIGSTOP to nfs-ganesha) while $caught was being written: $(stat -c %s "$EXPORT/$caught" 2>/dev/null || echo '?') bytes so far"
else
  echo "share frozen (SIGSTOP to nfs-ganesha) between writes: no write was caught in flight within three slots"
fi
deadline=$(($(date +%s) + INTERVAL + 45))
while [ "$(grep -c 'backup: scheduled snapshot failed' "$WORK/n$leader_node/firstboot.log")" -le "$before_fail" ] &&
  [ "$(date +%s)" -lt "$deadline" ]; do
  sleep 0.5
done
t_fail=$(echo "$(date +%s.%N) - $t_stop" | bc)
grep -h 'backup: scheduled snapshot failed' "$WORK/n$leader_node/firstboot.log" | tail -1 | sed 's/ (PHASE=.*//'
if [ "$(grep -c 'backup: scheduled snapshot failed' "$WORK/n$leader_node/firstboot.log")" -gt "$before_fail" ]; then
  printf 'the attempt failed %.1f s after the share froze\n' "$t_fail"
  ok "a write to a frozen share fails in bounded time and is logged"
else
  bad "no failed attempt logged within $((INTERVAL + 45)) s of the share freezing"
fi
tp=$(date +%s.%N)
nb_ctl 1 "$eps" put /backup/during-outage "etcd kept going" >/dev/null && put_ok=1 || put_ok=0
printf 'a write to etcd while the share is frozen took %.2f s\n' "$(echo "$(date +%s.%N) - $tp" | bc)"
[ "$put_ok" -eq 1 ] && ok "etcd takes writes while the share is frozen" || bad "etcd refused a write while the share was frozen"
st=$("$FIRSTBOOT" status --state-dir "$WORK/n$leader_node/state")
echo "$st" | grep '^backup: last attempt failed'
echo "$st" | grep -q "^backup: last attempt failed at .*cannot .*$SHARE" &&
  ok "status shows the failed attempt and names the share" || bad "status does not show the failed attempt"
echo "export folder while frozen (the server's own view):"
ls -la "$EXPORT" | sed 's/^/  /'
n_after=$(scheduled_good)
[ "$n_after" -eq "$n_at_stop" ] && ok "no bundle was reported good while the share was frozen" ||
  bad "a bundle was reported good during the outage ($n_at_stop before, $n_after after)"
kill -CONT "$GANESHA_PID"
echo "share back (SIGCONT)"
deadline=$(($(date +%s) + INTERVAL * 2 + 45))
while [ "$(scheduled_good)" -le "$n_after" ] && [ "$(date +%s)" -lt "$deadline" ]; do sleep 1; done
grep -h 'backup: good: .*-scheduled' "$WORK"/n[123]/firstboot.log | tail -1 | sed 's/ (PHASE=.*//'
list=$(fb 1 backup list 2>&1)
echo "$list"
listed=$(echo "$list" | grep -c '\.sprout-backup ')
if [ "$(scheduled_good)" -gt "$n_after" ] && ! echo "$list" | grep -q 'BAD' && ! echo "$list" | grep -q 'tmp-' &&
  [ "$listed" -ge 1 ]; then
  ok "after the share came back the next bundle is good, and nothing partial is listed ($listed bundles, all good)"
else
  bad "no good bundle after the share came back, or something partial or bad is listed"
fi
share_ls | grep 'tmp-' | sed 's/^/  left on the share, never listed: /'

# 5. Two (here three) nodes at one slot: each takes a snapshot and links the slot's name
# on the share at the same moment; NFS LINK lets exactly one through.
# The current slot of the running schedule: the leader's daemon races too. (A longer
# slot would start before the newest bundles, and retention would remove it at once,
# letting the next writer link the name again.)
RACE=$INTERVAL
race_pids=()
for i in 1 2 3; do
  fb "$i" backup now --scheduled --backup-interval "$RACE" >"$WORK/race$i.out" 2>&1 &
  race_pids+=($!)
done
wait "${race_pids[@]}"
for i in 1 2 3; do sed "s/^/  node$i: /" "$WORK/race$i.out"; done
slotfile=$(grep -ho "$CLUSTER-[0-9T]*Z-scheduled.sprout-backup" "$WORK"/race[123].out | head -1)
race_good=$(cat "$WORK"/race[123].out | grep -c '^backup: good: .*-scheduled.sprout-backup')
race_refused=$(cat "$WORK"/race[123].out | grep -c 'is in the sink already; nothing written')
race_linked=$(cat "$WORK"/race[123].out | grep -c 'linked the name first')
daemon_good=$(cat "$WORK"/n[123]/firstboot.log | grep -c "backup: good: .*$slotfile")
echo "slot $slotfile: written by $race_good of the three commands and $daemon_good of the daemons"
if [ -n "$slotfile" ] && [ $((race_good + daemon_good)) -eq 1 ] && [ $((race_good + race_refused)) -eq 3 ]; then
  ok "three nodes (and the leader's schedule) at one slot: one bundle written, the others refused ($race_linked by NFS LINK on the existing name)"
else
  bad "slot race: $race_good + $daemon_good written, $race_refused refused (want 1 written in all)"
fi

# 6. A corrupted bundle on the share is refused at restore; the node starts nothing.
newest=$(share_ls | grep -o "$CLUSTER-[0-9T]*Z-scheduled.sprout-backup" | sort | tail -1)
cp "$EXPORT/$newest" "$EXPORT/corrupt-copy.sprout-backup"
size=$(stat -c %s "$EXPORT/corrupt-copy.sprout-backup")
printf '\xff' | dd of="$EXPORT/corrupt-copy.sprout-backup" bs=1 seek=$((size / 2)) conv=notrunc status=none
rm -rf "$WORK/n4"
mkdir -p "$WORK/n4"
timeout 60 ip netns exec "${NP}4" "$FIRSTBOOT" run --state-dir "$WORK/n4/state" --name node4 --listen "$(nb_addr 4)" \
  --peers "$(nb_addr 4)" --expected 1 --secret-file "$SECRET" --cluster-name "$CLUSTER" --etcd-data-dir "$WORK/n4/etcd" \
  --pki-dir "$WORK/n4/pki" --restore-from "$SHARE/corrupt-copy.sprout-backup" \
  --etcdctl "$(command -v etcdctl)" >"$WORK/n4/firstboot.log" 2>&1
code=$?
grep 'restore-from' "$WORK/n4/firstboot.log" | sed 's/ (PHASE=.*//'
if [ "$code" -eq 1 ] && grep -q 'refused, starting nothing: .*does not open' "$WORK/n4/firstboot.log" &&
  [ ! -e "$WORK/n4/etcd" ] && [ ! -e "$WORK/n4/pki" ]; then
  ok "a corrupted bundle on the share is refused at restore (exit $code), no etcd data and no PKI made"
else
  bad "the corrupted bundle: exit $code, etcd dir $(ls -d "$WORK/n4/etcd" 2>&1), pki $(ls -d "$WORK/n4/pki" 2>&1)"
fi
rm -f "$EXPORT/corrupt-copy.sprout-backup"

# 7. Every node and its disk is destroyed; three fresh nodes restore from the newest
# bundle on the share, given as an nfs:// URL.
newest=$(share_ls | grep -o "$CLUSTER-[0-9T]*Z-scheduled.sprout-backup" | sort | tail -1)
old_id=$(nb_ctl 1 "$eps" endpoint status -w json | grep -o '"cluster_id":[0-9]*' | head -1 | cut -d: -f2)
for i in 1 2 3; do nb_kill "$i"; done
rm -rf "$WORK/n1" "$WORK/n2" "$WORK/n3"
echo "destroyed nodes 1-3 and their state, etcd data and PKI; restoring from $SHARE/$newest"
tr=$(date +%s.%N)
for i in 1 2 3; do
  mkdir -p "$WORK/n$i"
  nb_start "$i" 3 3 --restore-from "$SHARE/$newest" --etcdctl "$(command -v etcdctl)"
done
if nb_wait_voting 1 3 60 1 2 3; then
  restored=$(echo "$(date +%s.%N) - $tr" | bc)
  printf 'restored: 3 voting members after %.2f s (fresh formation took %.2f s; ratio %.2f)\n' "$restored" "$formed" \
    "$(echo "$restored / $formed" | bc -l)"
  nb_ctl 1 "$eps" member list -w table
  ok "three fresh nodes formed a cluster from the bundle on the share"
else
  bad "three fresh nodes did not form a cluster from the bundle within 60 s"
fi
for i in 1 2 3; do grep -h 'restored etcd from' "$WORK/n$i/firstboot.log" | sed 's/ (PHASE=.*//'; done
check_restored_founders
ids=$(for i in 1 2 3; do nb_ctl "$i" "$(nb_endpoints "$i")" endpoint status -w json | grep -o '"cluster_id":[0-9]*' | cut -d: -f2; done | sort -u)
echo "cluster IDs: old $old_id, restored $(echo "$ids" | tr '\n' ' ')"
[ "$(echo "$ids" | grep -c .)" -eq 1 ] && ok "one cluster ID on every restored member" || bad "restored members disagree: $ids"
count=$(keycount 3 "$eps")
marker=$(nb_ctl 3 "$eps" get /backup/marker --print-value-only)
k=$(printf '/backup/k%05d' $((KEYS / 2)))
kv=$(nb_ctl 2 "$eps" get "$k" --print-value-only)
echo "read back via node 3: $count keys under /backup/, /backup/marker = '$marker'; via node 2: $k = '$kv'"
if [ "$count" -ge $((KEYS + 1)) ] && [ "$marker" = "written before the backup" ] &&
  [ "$kv" = "$(printf 'value-%05d' $((KEYS / 2)))" ]; then
  ok "the restored cluster holds every key written before the backup"
else
  bad "the restored cluster does not hold the keys (count '$count', marker '$marker')"
fi
nb_ctl 1 "$eps" put /backup/after "written after the restore" >/dev/null &&
  [ "$(nb_ctl 3 "$eps" get /backup/after --print-value-only)" = "written after the restore" ] &&
  ok "the restored cluster takes writes" || bad "the restored cluster does not take a write"
