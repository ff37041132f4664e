#!/bin/bash
# etcd backups and a cluster rebuilt from one (docs/backup.md), with real etcd over
# mTLS in network namespaces (198.18.12.0/24 on a bridge with no uplink):
#   1. three nodes form; a backup before any write waits for the one that holds the
#      node's scratch lock, then is good; keys are written;
#   2. `backup now` writes a good bundle to the share; `backup list` shows it;
#   3. scheduled bundles appear every slot, each written by exactly one node (the etcd
#      leader), retention keeps the newest N; `status` names the last good bundle;
#   4. a corrupted bundle is refused at restore: the node starts nothing;
#   3c. every other control-plane node keeps a byte-identical copy of each good bundle
#      (sent to its join endpoint by the leader), with the same retention;
#   5. every node and its disk is destroyed; three fresh nodes given the newest copy a
#      peer kept (restore-from) form one cluster that holds the keys;
#   6. a founding member that starts empty stays out of the restored cluster;
#   7. two `backup now` started together on one node both write good bundles, each
#      under its own name;
#   8. (after 3c) whoever writes to the share cannot steer the backups: pre-created slot
#      names, a sparse bundle claiming 8 GiB, 64 junk names and a renamed old bundle are
#      each survived, with figures (peak RSS from VmHWM or GNU time, seconds).
# The share is a plain folder all namespaces see (SHARE says so in the output); with
# BACKUP_NFS=1 it is an NFS export of the host, mounted over the namespaces' bridge.
set -u
name=backup_test
NP=sprt-u SUBNET=198.18.12 CLUSTER=sprt-backup NB_MAX=6
# shellcheck source=tests/formation/netns.sh
. "$(dirname "$0")/formation/netns.sh"
# shellcheck source=tests/backup/form.sh
. "$(dirname "$0")/backup/form.sh"
nb_preflight "$name"
WORK=$(mktemp -d /tmp/sprt-backup.XXXXXX)
SECRET=$WORK/secret
SHARE=$WORK/share
INTERVAL=${BACKUP_INTERVAL:-8}
KEEP=3
KEYS=${BACKUP_KEYS:-1000}
passed=0; failed=0
ok() { echo "ok: $*"; passed=$((passed + 1)); }
bad() { echo "FAIL: $*"; failed=$((failed + 1)); }
cleanup() {
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
nb_teardown 2>/dev/null  # a stale run may have left our namespaces behind
head -c 32 /dev/urandom | base64 >"$SECRET"
mkdir -p "$SHARE"
echo "share: a plain folder ($SHARE) seen by every namespace"
for i in 1 2 3 4 5 6; do nb_setup "$i"; done
# Nodes 4..6 are the fresh nodes of the restore; they use the same addresses as 1..3
# would, so they get 1..3's slots: node i+3 runs in namespace i after 1..3 are gone.

bflags=(--backup-dir "$SHARE" --backup-keep "$KEEP" --etcdctl "$(command -v etcdctl)")
# fb i ARGS...: sprout-firstboot ARGS as node i, in node i's namespace (its etcd is on 127.0.0.1 there).
fb() { local i=$1; shift; ip netns exec "$NP$i" "$FIRSTBOOT" "$@" --state-dir "$WORK/n$i/state" --name "node$i" --secret-file "$SECRET" \
  --cluster-name "$CLUSTER" --pki-dir "$WORK/n$i/pki" --etcd-data-dir "$WORK/n$i/etcd" --listen "$(nb_addr "$i")" \
  --peers "$(nb_peers 3)" "${bflags[@]}"; }

# 1. Three nodes form. A backup of the cluster before any key is written is good (its
# test restore once failed: etcd's restore adds a key to a database that has none).
# One backup at a time on a node: this first `backup now` finds the node's scratch
# folder locked (as a scheduled backup holds it), says so, and waits its turn (once,
# a manual and a scheduled backup on one node failed the test restore, each replacing
# the snapshot file the other was restoring).
form_cluster
mkdir -p "$WORK/n1/state/backup-scratch"
flock "$WORK/n1/state/backup-scratch/lock" sleep 3 &
holder=$!
sleep 0.5
t0=$(date +%s.%N)
out=$(fb 1 backup now 2>&1)
took=$(echo "$(date +%s.%N) - $t0" | bc)
wait "$holder"
echo "$out" | grep 'waiting for it'
printf 'backup now beside a held lock took %.2f s (the lock was held 2.5 s more)\n' "$took"
if echo "$out" | grep -q 'another backup is under way on this node' && [ "$(echo "$took >= 2" | bc)" = 1 ] &&
  echo "$out" | grep -q '^backup: good: '; then
  ok "backup now waits for the backup that holds the node's scratch lock, then writes a good bundle"
else
  echo "$out"
  bad "backup now beside a held scratch lock: no wait reported, too quick ($took s), or no good bundle"
fi
echo "$out" | grep '^backup: good:'
if echo "$out" | grep -q '^backup: good: .*-manual-node1.sprout-backup: [0-9]* bytes, revision 0, '; then
  ok "a backup of the cluster before any write is good"
else
  echo "$out"
  bad "backup now of the empty cluster did not report a good bundle"
fi
# etcd's raft term now: if it moves before the writers are checked, the leader changed
# (a loaded host can miss etcd's 1 s election timeout), and no single writer is expected.
raft_term() { nb_ctl "$1" "$(nb_endpoints "$1")" endpoint status -w json | grep -o '"raftTerm":[0-9]*' | cut -d: -f2; }
term0=$(raft_term 1)
# Then the keys.
write_keys

# 2. A manual backup from node 2, listed from node 1.
out=$(fb 2 backup now 2>&1)
echo "$out"
if echo "$out" | grep -q '^backup: good: .*-manual-node2.sprout-backup: [0-9]* bytes, revision [0-9]*'; then
  old_name=$(basename "$(ls "$SHARE"/*-manual-node2.sprout-backup | head -1)")
  cp "$SHARE/$old_name" "$WORK/old-bundle"  # for 8: an old, real bundle
  ok "backup now wrote a good bundle"
else
  bad "backup now did not report a good bundle"
fi
list=$(fb 1 backup list 2>&1)
echo "$list"
echo "$list" | grep -q 'manual-node2.sprout-backup .* revision [0-9]* .*sha256 [0-9a-f]\{64\}  good$' &&
  ok "backup list shows the manual bundle with size, time, revision and sha256, and it opens" ||
  bad "backup list does not show the manual bundle as good"
if grep -l 'CA PRIVATE\|PRIVATE KEY' "$SHARE"/* >/dev/null 2>&1; then
  bad "a bundle on the share holds a private key in the clear"
else
  ok "no private key in the clear on the share"
fi

# 3. Scheduled bundles: one per slot of INTERVAL seconds, by the leader only; retention.
# Retention orders bundles by their time, so the manual bundles go only once KEEP
# scheduled ones are newer than the later of them; where the slots fall against the
# manual backups decides whether that takes KEEP or KEEP + 1 slots. The two manual
# bundles are often sealed in the same second; retention breaks that tie by sealing,
# not by node, so either may go first (CI once saw node 2's go before node 1's).
# Wait for the slots and for both removals.
want=$((KEEP + 1))  # enough slots for retention to have removed something
deadline=$(($(date +%s) + INTERVAL * (want + 2) + 10))
manuals_removed() {
  grep -q 'backup: retention removed .*manual-node1' "$WORK"/n[123]/firstboot.log &&
    grep -q 'backup: retention removed .*manual-node2' "$WORK"/n[123]/firstboot.log
}
while { [ "$(cat "$WORK"/n[123]/firstboot.log | grep -c 'backup: good: .*-scheduled.sprout-backup')" -lt "$want" ] ||
  ! manuals_removed; } && [ "$(date +%s)" -lt "$deadline" ]; do
  sleep 1
done
good=$(grep -ho 'backup: good: [^ ]*-scheduled.sprout-backup' "$WORK"/n[123]/firstboot.log | sort)
echo "scheduled bundles reported good:"
for i in 1 2 3; do
  grep 'backup: good: .*-scheduled' "$WORK/n$i/firstboot.log" | sed "s/^sprout-firstboot: /  node$i: /; s/ (PHASE=.*//"
done
n_good=$(echo "$good" | grep -c .)
n_unique=$(echo "$good" | sort -u | grep -c .)
if [ "$n_good" -ge "$want" ] && [ "$n_good" -eq "$n_unique" ]; then
  ok "$n_good scheduled bundles, each slot written by exactly one node"
else
  bad "scheduled bundles: $n_good reported good, $n_unique distinct (want >= $want, all distinct)"
fi
# The leader, by etcd: the node whose own member ID is the leader it reports.
leader_node=""
for i in 1 2 3; do
  st_json=$(nb_ctl "$i" "$(nb_endpoints "$i")" endpoint status -w json)
  mid=$(echo "$st_json" | grep -o '"member_id":[0-9]*' | head -1 | cut -d: -f2)
  lid=$(echo "$st_json" | grep -o '"leader":[0-9]*' | head -1 | cut -d: -f2)
  [ -n "$mid" ] && [ "$mid" = "$lid" ] && leader_node=$i
done
writers=$(grep -l 'backup: good: .*-scheduled' "$WORK"/n[123]/firstboot.log | sed 's|.*/n\([0-9]\)/.*|\1|' | tr '\n' ' ')
echo "nodes that wrote scheduled bundles: $writers(etcd leader: node$leader_node)"
term1=$(raft_term "${leader_node:-1}")
if [ -n "$term0" ] && [ -n "$term1" ] && [ "$term0" != "$term1" ] && [ "$writers" != "$leader_node " ]; then
  echo "skipped: only the etcd leader wrote scheduled bundles: etcd's leader changed during the test (raft term $term0 -> $term1), so more than one node led"
else
  [ "$writers" = "$leader_node " ] && ok "only the etcd leader (node$leader_node, raft term $term0 -> $term1) wrote scheduled bundles" ||
    bad "scheduled bundles written by node(s) $writers, the leader is node$leader_node (raft term $term0 -> $term1)"
fi
sleep 1
on_share=$(ls "$SHARE")
echo "on the share:"; ls -l "$SHARE" | sed 's/^/  /'
n_bundles=$(echo "$on_share" | grep -c '\.sprout-backup$')
if [ "$n_bundles" -eq "$KEEP" ] && ! echo "$on_share" | grep -q 'manual-node' && manuals_removed; then
  ok "retention kept the newest $KEEP bundles and removed the oldest (the two manual ones)"
else
  bad "retention: $n_bundles bundles on the share (want $KEEP, the manual ones removed)"
fi
echo "$on_share" | grep -q 'tmp-' && bad "a temporary file is left on the share" || ok "no temporary file on the share"
writer=$(grep -l 'backup: good: .*-scheduled' "$WORK"/n[123]/firstboot.log | head -1 | sed 's|.*/n\([0-9]\)/.*|\1|')
st=$("$FIRSTBOOT" status --state-dir "$WORK/n$writer/state")
echo "$st" | grep '^backup:'
echo "$st" | grep -q "^backup: last good $SHARE/$CLUSTER-.*-scheduled.sprout-backup at .*, revision [0-9]*, [0-9]* bytes, sha256 [0-9a-f]\{64\}" &&
  ok "status names the last good bundle" || bad "status of node $writer has no last good bundle line"

# 3b. The share goes away (its folder is moved off, as an unmounted share looks): the
# leader's attempts fail, are reported in the journal and in status, nothing partial is
# listed; once the share is back, the next slot's bundle is good.
failed_before=$(cat "$WORK"/n[123]/firstboot.log | grep -c 'backup: scheduled snapshot failed')
if [ "$failed_before" -eq 0 ]; then
  ok "no scheduled attempt failed while the share was there"
else
  grep -h -A6 'backup: scheduled snapshot failed' "$WORK"/n[123]/firstboot.log | sed 's/ (PHASE=.*//'
  bad "$failed_before scheduled attempts failed while the share was there"
fi
failed_before=$(grep -c 'backup: scheduled snapshot failed' "$WORK/n$leader_node/firstboot.log")
mv "$SHARE" "$SHARE.away"
t_away=$(date +%s)
deadline=$((t_away + INTERVAL * 3 + 10))
while [ "$(grep -c 'backup: scheduled snapshot failed' "$WORK/n$leader_node/firstboot.log")" -le "$failed_before" ] &&
  [ "$(date +%s)" -lt "$deadline" ]; do
  sleep 1
done
grep -h 'backup: scheduled snapshot failed' "$WORK/n$leader_node/firstboot.log" | tail -n +$((failed_before + 1)) | head -1 |
  sed 's/ (PHASE=.*//'
st=$("$FIRSTBOOT" status --state-dir "$WORK/n$leader_node/state")
echo "$st" | grep '^backup: last attempt failed'
echo "$st" | grep -q '^backup: last attempt failed at .*cannot write to the sink' &&
  ok "an unreachable share is reported in the journal and in status" || bad "no failure reported while the share was away"
mkdir -p "$SHARE.away.check" && rmdir "$SHARE.away.check"
mv "$SHARE.away" "$SHARE"
before=$(grep -c 'backup: good: .*-scheduled' "$WORK/n$leader_node/firstboot.log")
deadline=$(($(date +%s) + INTERVAL * 2 + 35))
while [ "$(grep -c 'backup: good: .*-scheduled' "$WORK/n$leader_node/firstboot.log")" -le "$before" ] &&
  [ "$(date +%s)" -lt "$deadline" ]; do
  sleep 1
done
list=$(fb 1 backup list 2>&1)
echo "$list"
if [ "$(grep -c 'backup: good: .*-scheduled' "$WORK/n$leader_node/firstboot.log")" -gt "$before" ] &&
  ! ls -a "$SHARE" | grep -q 'tmp-' && ! echo "$list" | grep -q 'BAD'; then
  ok "after the share came back the next bundle is good, and nothing partial is listed"
else
  bad "no good bundle after the share came back, or a partial one is listed"
fi

# 3c. Copies on the other control-plane nodes: the leader hands each good bundle to the
# other members' join endpoints; each keeps it, byte for byte, in <state>/backup-copies,
# with the same retention. (Restore in 5. uses such a copy, not the share.)
newest_shared=$(ls "$SHARE"/*-scheduled.sprout-backup | sort | tail -1)
copies_ok=1
for i in 1 2 3; do
  [ "$i" = "$leader_node" ] && continue
  copy=$WORK/n$i/state/backup-copies/$(basename "$newest_shared")
  for _ in $(seq 1 30); do cmp -s "$copy" "$newest_shared" && break; sleep 0.5; done
  n_copies=$(ls "$WORK/n$i/state/backup-copies" | grep -c '\.sprout-backup$')
  echo "node$i keeps $n_copies copies; $(basename "$newest_shared"): $(cmp -s "$copy" "$newest_shared" && echo identical to the share\'s || echo MISSING or different)"
  cmp -s "$copy" "$newest_shared" && [ "$n_copies" -le "$KEEP" ] || copies_ok=0
done
[ "$copies_ok" = 1 ] && ok "every other control-plane node keeps a byte-identical copy of the newest bundle (at most $KEEP)" ||
  bad "a peer lacks the copy of $(basename "$newest_shared"), or keeps more than $KEEP"
st=$("$FIRSTBOOT" status --state-dir "$WORK/n$leader_node/state")
echo "$st" | grep '^backup: copies'
echo "$st" | grep -q '^backup: copies of it: node[0-9] kept it; node[0-9] kept it$' &&
  ok "status on the leader says both peers kept the copy" || bad "status on the leader does not report the copies"
list=$(fb "$leader_node" backup list --backup-dir "$WORK/n$(( ${leader_node:-1} % 3 + 1 ))/state/backup-copies" 2>&1)
echo "$list" | head -3
echo "$list" | grep -q "$(basename "$newest_shared") .*good$" && ok "backup list opens a peer's copy as good" ||
  bad "backup list does not show the peer's copy as good"

# 8. The share's writer attacks (issue 54, N6). Whoever can write to the share can make
# any name and any bytes; none of it may stop a backup, grow memory, stop retention or
# make an old bundle the newest.
utc() { date -u -d "@$1" +%Y%m%dT%H%M%SZ; }
leader_of() {
  local i st_json mid lid
  for i in 1 2 3; do
    st_json=$(nb_ctl "$i" "$(nb_endpoints "$i")" endpoint status -w json)
    mid=$(echo "$st_json" | grep -o '"member_id":[0-9]*' | head -1 | cut -d: -f2)
    lid=$(echo "$st_json" | grep -o '"leader":[0-9]*' | head -1 | cut -d: -f2)
    [ -n "$mid" ] && [ "$mid" = "$lid" ] && echo "$i"
  done
}
# forge FILE: a real bundle with its last byte flipped: its clear header reads and its
# size matches, but it does not open (what anyone can make without the secret).
forge() { cp "$WORK/old-bundle" "$1"; printf '\x00' | dd of="$1" bs=1 seek=$(($(stat -c %s "$1") - 1)) conv=notrunc status=none; }
# all_lines: a mark of where each node's log ends now ("L1 L2 L3"); logs_since MARK: the
# lines every node logged after it (per node: the logs grow side by side).
all_lines() { local i; for i in 1 2 3; do printf '%s ' "$(wc -l <"$WORK/n$i/firstboot.log")"; done; }
logs_since() {
  local i=1 n
  for n in $1; do tail -n +"$((n + 1))" "$WORK/n$i/firstboot.log"; i=$((i + 1)); done
}

# 8a. Pre-created slot names: the next three slots' names hold junk, an older real
# bundle renamed, and a forged bundle. Before, each slot found "its" name and wrote
# nothing ("is in the sink already"): three slots with no backup.
now=$(date +%s)
slot=$(((now / INTERVAL + 1) * INTERVAL))
[ $((slot - now)) -lt 3 ] && slot=$((slot + INTERVAL))
echo "not a bundle" >"$SHARE/$CLUSTER-$(utc "$slot")-scheduled.sprout-backup"
cp "$WORK/old-bundle" "$SHARE/$CLUSTER-$(utc $((slot + INTERVAL)))-scheduled.sprout-backup"
forge "$SHARE/$CLUSTER-$(utc $((slot + 2 * INTERVAL)))-scheduled.sprout-backup"
echo "pre-created the names of the slots at $(utc "$slot"), $(utc $((slot + INTERVAL))) and $(utc $((slot + 2 * INTERVAL))) (junk, an old bundle renamed, a forged bundle)"
from="$(all_lines)"
deadline=$((slot + 3 * INTERVAL + 20))
slots_written() {
  local k n=0
  for k in 0 1 2; do
    # Under a tagged name; or its own, when retention removed the renamed old bundle first.
    logs_since "$from" | grep -q "backup: good: .*$CLUSTER-$(utc $((slot + k * INTERVAL)))-scheduled\(-[0-9a-f]\{16\}\)\?\.sprout-backup" && n=$((n + 1))
  done
  echo "$n"
}
while [ "$(slots_written)" -lt 3 ] && [ "$(date +%s)" -lt "$deadline" ]; do sleep 1; done
logs_since "$from" | grep -h "the slot's name held\|backup: good: .*-scheduled\|is in the sink already" | sed 's/^sprout-firstboot: /  /; s/ (PHASE=.*//; s/, snapshot .*//'
n_written=$(slots_written)
# A slot can pass with no attempt on a loaded host (the one before it ran past its end);
# what must never happen is a slot given up because of the name ("is in the sink already").
stopped=$(logs_since "$from" | grep "is in the sink already" | grep -c "$CLUSTER-\($(utc "$slot")\|$(utc $((slot + INTERVAL)))\|$(utc $((slot + 2 * INTERVAL)))\)-scheduled")
tagged=$(logs_since "$from" | grep -c "backup: good: .*-scheduled-[0-9a-f]\{16\}\.sprout-backup")
echo "pre-created slots backed up anyway: $n_written of 3 ($tagged under a tagged name); given up because of the name: $stopped"
if [ "$stopped" = 0 ] && [ "$tagged" -ge 1 ] && [ -e "$SHARE/$CLUSTER-$(utc "$slot")-scheduled.sprout-backup" ] &&
  [ -e "$SHARE/$CLUSTER-$(utc $((slot + 2 * INTERVAL)))-scheduled.sprout-backup" ]; then
  ok "no pre-created slot name stopped its slot's backup: the bundle went under a name of its own (the files left alone)"
else
  bad "pre-created slot names stopped $stopped scheduled backups ($tagged written under a tagged name)"
fi

# 8b. A sparse bundle claiming 8 GiB: a clear header that reads, and a file of the size
# it claims, all holes. Before, a prune and `backup list` read it whole (8 GiB, then a
# second buffer for the plaintext). The one-shot commands run first against a folder
# only they use, under a 3 GiB limit of private memory (ulimit -d; etcdctl's file
# mappings are not counted), so the old code fails there and
# never makes a scheduler on this host read 16 GiB; only then does it go on the share.
SPARSE_DIR=$WORK/sparse-share
mkdir -p "$SPARSE_DIR"
zeros64=$(printf '0%.0s' $(seq 64))
hdr='{"cluster":"'$CLUSTER'","created":4102444790,"kind":"scheduled","node":"node1","revision":1,"keys":1,"snapshot_sha256":"'$zeros64'","snapshot_size":1,"payload_size":8589934592,"salt":"'${zeros64:0:32}'"}'
sparse_name=$CLUSTER-20991231T235950Z-scheduled.sprout-backup
sparse=$SPARSE_DIR/$sparse_name
{ printf 'SPRB\x01'; printf "$(printf '\\x%02x\\x%02x\\x00\\x00' $((${#hdr} & 255)) $((${#hdr} >> 8)))"; printf '%s' "$hdr"; } >"$sparse"
truncate -s $((9 + ${#hdr} + 12 + 8589934592 + 16)) "$sparse"
echo "sparse bundle: $(stat -c '%s bytes listed, %b blocks of %B on disk' "$sparse")"
cp "$WORK/old-bundle" "$SPARSE_DIR/$old_name"
saved=("${bflags[@]}")
bflags=(--backup-dir "$SPARSE_DIR" --backup-keep "$KEEP" --etcdctl "$(command -v etcdctl)")
# limited I CMD...: sprout-firstboot CMD as node I under a 3 GiB private-memory limit,
# its peak RSS (GNU time's maximum resident set, the process's VmHWM) and time printed.
limited() {
  local i=$1
  shift
  (
    ulimit -d 3145728
    /usr/bin/time -o "$WORK/time.out" -f '%M %e %x' ip netns exec "$NP$i" "$FIRSTBOOT" "$@" --state-dir "$WORK/n$i/state" \
      --name "node$i" --secret-file "$SECRET" --cluster-name "$CLUSTER" --pki-dir "$WORK/n$i/pki" \
      --etcd-data-dir "$WORK/n$i/etcd" --listen "$(nb_addr "$i")" --peers "$(nb_peers 3)" "${bflags[@]}"
  )
}
list=$(limited 1 backup list 2>&1)
read -r rss_list secs_list code_list < <(tail -1 "$WORK/time.out")
echo "$list" | sed 's/^/  /'
echo "backup list over the sparse bundle: exit $code_list, peak RSS $((rss_list / 1024)) MiB, $secs_list s"
if [ "$code_list" = 0 ] && [ "$rss_list" -lt 262144 ] && echo "$list" | grep -q "^$sparse_name .*BAD: " &&
  echo "$list" | sed -n 2p | grep -q ' good$'; then
  ok "backup list reads the sparse 8 GiB bundle in pieces (peak RSS $((rss_list / 1024)) MiB), refuses it and lists it last"
else
  bad "backup list over a sparse bundle claiming 8 GiB: exit $code_list, peak RSS $((rss_list / 1024)) MiB"
fi
out=$(limited 2 backup now 2>&1)
read -r rss_now secs_now code_now < <(tail -1 "$WORK/time.out")
echo "$out" | grep 'good:\|retention' | sed 's/^/  /'
echo "backup now beside the sparse bundle: exit $code_now, peak RSS $((rss_now / 1024)) MiB, $secs_now s"
if [ "$code_now" = 0 ] && [ "$rss_now" -lt 262144 ] && echo "$out" | grep -q '^backup: good: '; then
  ok "backup now and its retention beside the sparse bundle stay small (peak RSS $((rss_now / 1024)) MiB, $secs_now s)"
  sparse_safe=1
else
  echo "$out" | tail -5
  bad "backup now beside a sparse bundle claiming 8 GiB: exit $code_now, peak RSS $((rss_now / 1024)) MiB"
  sparse_safe=0
fi
bflags=("${saved[@]}")
leader_node=$(leader_of)
if [ "$sparse_safe" = 1 ]; then
  mv "$sparse" "$SHARE/"
  from="$(all_lines)"
  t_sparse=$(date +%s)
  deadline=$((t_sparse + 3 * INTERVAL + 20))
  while [ "$(logs_since "$from" | grep -c 'backup: good: .*-scheduled')" -lt 2 ] && [ "$(date +%s)" -lt "$deadline" ]; do sleep 1; done
  pid=${NB_PIDS[$leader_node]}
  hwm=$(grep VmHWM "/proc/$pid/status" 2>/dev/null | awk '{print $2}')
  n_after=$(logs_since "$from" | grep -c 'backup: good: .*-scheduled')
  echo "leader node$leader_node ($(cat "/proc/$pid/comm" 2>/dev/null), pid $pid): $n_after scheduled bundles with the sparse bundle on the share; VmHWM ${hwm:-?} kB"
  if [ "$n_after" -ge 2 ] && [ -n "$hwm" ] && [ "$hwm" -lt 262144 ]; then
    ok "the scheduler goes on beside the sparse 8 GiB bundle ($n_after bundles; the node's peak RSS $((hwm / 1024)) MiB)"
  else
    bad "the scheduler beside the sparse bundle: $n_after good bundles, VmHWM ${hwm:-?} kB"
  fi
  rm -f "$SHARE/$sparse_name"
else
  bad "the sparse bundle was not put on the scheduler's share: the old code would read it whole in every prune"
fi

# 8c. 64 junk names, newer than every bundle, each a forged bundle whose header reads.
# Before, a prune opened only the 64 newest names: all junk, so no real bundle counted
# and retention held for good ("no bundle ... opens"), while the share filled.
for k in $(seq 1 64); do forge "$SHARE/$CLUSTER-$(utc $((4070908800 + k)))-scheduled.sprout-backup"; done
from="$(all_lines)"
deadline=$(($(date +%s) + 3 * INTERVAL + 20))
while [ "$(logs_since "$from" | grep -c 'backup: good: .*-scheduled')" -lt 2 ] && [ "$(date +%s)" -lt "$deadline" ]; do sleep 1; done
removed=$(logs_since "$from" | grep -c 'backup: retention removed')
held=$(logs_since "$from" | grep -c 'backup: retention held')
real=0
for f in "$SHARE"/*.sprout-backup; do
  case $(basename "$f") in "$CLUSTER"-209*|"$CLUSTER-$(utc "$slot")-scheduled.sprout-backup"|"$CLUSTER-$(utc $((slot + 2 * INTERVAL)))-scheduled.sprout-backup") ;; *) real=$((real + 1)) ;; esac
done
echo "with 64 junk names: retention removed $removed bundles, held $held times; $real real bundles on the share (keep $KEEP)"
if [ "$removed" -ge 1 ] && [ "$held" = 0 ] && [ "$real" -le $((KEEP + 1)) ]; then
  ok "64 junk names do not stop retention"
else
  bad "64 junk names stopped retention (removed $removed, held $held, $real real bundles left)"
fi

# 8d. A renamed old bundle: node2's first manual bundle, under a name far in the future.
# Before, `backup list` sorted by the name and showed it first, and the runbook restores
# the first good one.
renamed=$CLUSTER-20990101T000000Z-scheduled.sprout-backup
cp "$WORK/old-bundle" "$SHARE/$renamed"
list=$(fb 1 backup list 2>&1)
echo "$list" | head -4 | sed 's/^/  /'
first=$(echo "$list" | grep ' good' | head -1 | cut -d' ' -f1)
leader_node=$(leader_of)
last_good=$("$FIRSTBOOT" status --state-dir "$WORK/n$leader_node/state" | grep '^backup: last good' | sed 's/^backup: last good \([^ ]*\) at .*/\1/')
echo "the first good bundle listed: $first; the leader's last good: $(basename "$last_good")"
if [ -n "$first" ] && [ "$first" != "$renamed" ] &&
  echo "$list" | grep -q "^$renamed .* good (sealed .*, its name says 2099-01-01 00:00:00Z)$"; then
  ok "backup list orders by the sealed time: the renamed old bundle is listed at its own time, not first"
else
  bad "backup list shows the renamed old bundle $renamed first, or not as renamed"
fi
# The attack files go (the later parts pick bundles by name).
rm -f "$SHARE/$CLUSTER"-209*.sprout-backup "$SHARE/$CLUSTER-$(utc "$slot")-scheduled.sprout-backup" \
  "$SHARE/$CLUSTER-$(utc $((slot + INTERVAL)))-scheduled.sprout-backup" "$SHARE/$CLUSTER-$(utc $((slot + 2 * INTERVAL)))-scheduled.sprout-backup"

# 4. A corrupted bundle is refused at restore, and the node starts nothing.
newest=$(ls "$SHARE"/*.sprout-backup | sort | tail -1)
cp "$newest" "$WORK/corrupt.sprout-backup"
size=$(stat -c %s "$WORK/corrupt.sprout-backup")
printf '\xff' | dd of="$WORK/corrupt.sprout-backup" bs=1 seek=$((size / 2)) conv=notrunc status=none
mkdir -p "$WORK/n4"
timeout 30 ip netns exec "${NP}4" "$FIRSTBOOT" run --state-dir "$WORK/n4/state" --name node4 --listen "$(nb_addr 4)" \
  --peers "$(nb_addr 4)" --expected 1 --secret-file "$SECRET" --cluster-name "$CLUSTER" --etcd-data-dir "$WORK/n4/etcd" \
  --pki-dir "$WORK/n4/pki" --restore-from "$WORK/corrupt.sprout-backup" --etcdctl "$(command -v etcdctl)" \
  >"$WORK/n4/firstboot.log" 2>&1
code=$?
grep 'restore-from' "$WORK/n4/firstboot.log"
if [ "$code" -eq 1 ] && grep -q 'refused, starting nothing: .*does not open' "$WORK/n4/firstboot.log" &&
  [ ! -e "$WORK/n4/etcd" ] && [ ! -e "$WORK/n4/pki" ]; then
  ok "a corrupted bundle is refused at restore (exit $code), no etcd data and no PKI made"
else
  bad "the corrupted bundle: exit $code, etcd dir $(ls -d "$WORK/n4/etcd" 2>&1), pki $(ls -d "$WORK/n4/pki" 2>&1)"
fi

# 5. Every node and its disk is destroyed; three fresh nodes given the newest bundle
# form one cluster from it. The bundle is the newest copy a node other than the leader
# kept (taken off its disk first, as one would from the last surviving node), not the
# share's: a site with no share restores so.
old_id=$(nb_ctl 1 "$eps" endpoint status -w json | grep -o '"cluster_id":[0-9]*' | head -1 | cut -d: -f2)
survivor=$(( ${leader_node:-1} % 3 + 1 ))
newest=$WORK/$(basename "$(ls "$WORK/n$survivor/state/backup-copies"/*.sprout-backup | sort | tail -1)")
cp "$(ls "$WORK/n$survivor/state/backup-copies"/*.sprout-backup | sort | tail -1)" "$newest"
for i in 1 2 3; do nb_kill "$i"; done
rm -rf "$WORK/n1" "$WORK/n2" "$WORK/n3"
echo "destroyed nodes 1-3 and their state, etcd data and PKI; restoring from node$survivor's copy $(basename "$newest")"
tr=$(date +%s.%N)
for i in 1 2 3; do mkdir -p "$WORK/n$i"; nb_start "$i" 3 3 --restore-from "$newest" --etcdctl "$(command -v etcdctl)"; done
if nb_wait_voting 1 3 60 1 2 3; then
  restored=$(echo "$(date +%s.%N) - $tr" | bc)
  printf 'restored: 3 voting members after %.2f s (fresh formation took %.2f s; ratio %.2f)\n' "$restored" "$formed" \
    "$(echo "$restored / $formed" | bc -l)"
  nb_ctl 1 "$eps" member list -w table
  ok "three fresh nodes formed a cluster from the bundle"
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
k500=$(nb_ctl 2 "$eps" get /backup/k00500 --print-value-only)
echo "read back via node 3: $count keys under /backup/, /backup/marker = '$marker'; via node 2: /backup/k00500 = '$k500'"
if [ "$count" = $((KEYS + 1)) ] && [ "$marker" = "written before the backup" ] && [ "$k500" = "value-00500" ]; then
  ok "the restored cluster holds every key written before the backup"
else
  bad "the restored cluster does not hold the keys (count '$count', marker '$marker')"
fi
nb_ctl 1 "$eps" put /backup/after "written after the restore" >/dev/null &&
  [ "$(nb_ctl 3 "$eps" get /backup/after --print-value-only)" = "written after the restore" ] &&
  ok "the restored cluster takes writes" || bad "the restored cluster does not take a write"

# 6. Never a mix: the founding members are given the bundle except node 3, which starts
# empty. Its etcd uses the founding's plain token, so another cluster ID: the restored
# members refuse it, and it never holds or serves data of its own as part of theirs.
for i in 1 2 3; do nb_kill "$i"; done
rm -rf "$WORK/n1" "$WORK/n2" "$WORK/n3"
for i in 1 2; do mkdir -p "$WORK/n$i"; nb_start "$i" 3 3 --restore-from "$newest" --etcdctl "$(command -v etcdctl)"; done
mkdir -p "$WORK/n3"
nb_start 3 3 3
eps12=$(nb_endpoints 1 2)
deadline=$(($(date +%s) + 60))
until [ "$(nb_ctl 1 "$eps12" endpoint health 2>&1 | grep -c 'is healthy')" -eq 2 ] || [ "$(date +%s)" -ge "$deadline" ]; do
  sleep 0.5
done
sleep 3
nb_ctl 1 "$eps12" member list -w table
count=$(keycount 1 "$eps12")
id3=$(nb_ctl 3 "$(nb_endpoints 3)" endpoint status -w json 2>/dev/null | grep -o '"cluster_id":[0-9]*' | cut -d: -f2)
id1=$(nb_ctl 1 "$(nb_endpoints 1)" endpoint status -w json 2>/dev/null | grep -o '"cluster_id":[0-9]*' | cut -d: -f2)
started3=$(nb_ctl 1 "$eps12" member list | grep -c ', started, node3,')
echo "restored members' cluster ID $id1 holding $count keys; empty node 3: cluster ID '${id3:-none answered}', started in theirs: $started3"
grep -ho 'request cluster ID mismatch[^"]*\|cluster ID mismatch' "$WORK"/n[12]/etcd.log "$WORK"/n[12]/state/etcd.log 2>/dev/null | sort | uniq -c | head -3
if [ "$count" = $((KEYS + 1)) ] && [ "$started3" -eq 0 ] && [ "$id3" != "$id1" ]; then
  ok "a founding member that started empty stays out of the restored cluster (no mix)"
else
  bad "mix check: count '$count', node 3 started in the restored cluster: $started3, IDs '$id1' / '$id3'"
fi

# 7. Two `backup now` started in the same second on one node: the second waits for the
# first's scratch lock and is named for when it is written, so both are good, under two
# names (both were once named for when they were asked for: the second failed, "a bundle
# named ... exists already").
fb 1 backup now >"$WORK/twin-1.log" 2>&1 &
twin1=$!
fb 1 backup now >"$WORK/twin-2.log" 2>&1 &
twin2=$!
wait "$twin1"
rc1=$?
wait "$twin2"
rc2=$?
name1=$(grep '^backup: good: ' "$WORK/twin-1.log" | grep -o '[^/ ]*-manual-node1\.sprout-backup' | head -n 1)
name2=$(grep '^backup: good: ' "$WORK/twin-2.log" | grep -o '[^/ ]*-manual-node1\.sprout-backup' | head -n 1)
echo "two backups at once on node 1: status $rc1 '$name1', status $rc2 '$name2'"
if [ "$rc1" = 0 ] && [ "$rc2" = 0 ] && [ -n "$name1" ] && [ -n "$name2" ] && [ "$name1" != "$name2" ] &&
  [ -s "$SHARE/$name1" ] && [ -s "$SHARE/$name2" ]; then
  ok "two backups started together on one node are both good, under two names"
else
  cat "$WORK/twin-1.log" "$WORK/twin-2.log"
  bad "two backups at once on one node: status $rc1 and $rc2, names '$name1' and '$name2'"
fi
