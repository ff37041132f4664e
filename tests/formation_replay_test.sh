#!/bin/bash
# Replays from an earlier install (issue 14, part 4), with real etcd over mTLS in
# network namespaces (198.18.6.0/24 on a bridge with no uplink):
#   1. a first install (nodes a1..a3, cluster sprt-replay) forms while a listener in a
#      fifth namespace captures every formation frame it sends;
#   2. all state is wiped (etcd data, PKI, formation state) and a fresh install with the
#      same secret and cluster name (nodes b1..b3 at the same addresses) starts while the
#      capture is replayed at it, to every node and to the group, five times a second;
#   3. the fresh nodes must drop the captured frames as stale (logged), and found a new
#      cluster of their own: 3 healthy voting members b1..b3, founded by a b node.
# Without the liveness check the fresh nodes learn the first install's cluster from the
# replayed advertisements, wait to join a1..a3 as learners, and never form.
set -u
name=formation_replay_test
REPLAY=$(readlink -f "$(dirname "$0")/formation/replay.py")
NP=sprt-r SUBNET=198.18.6 CLUSTER=sprt-replay NB_MAX=5
# shellcheck source=tests/formation/netns.sh
. "$(dirname "$0")/formation/netns.sh"
nb_preflight "$name" python3
WORK=$(mktemp -d /tmp/sprt-replay.XXXXXX)
SECRET=$WORK/secret
passed=0; failed=0
ok() { echo "ok: $*"; passed=$((passed + 1)); }
bad() { echo "FAIL: $*"; failed=$((failed + 1)); }
cleanup() {
  [ -n "${RP:-}" ] && kill "$RP" 2>/dev/null
  nb_teardown
  if [ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]; then
    rm -rf "$WORK"
  else
    echo "$name: logs kept in $WORK"
    for f in "$WORK"/n*/firstboot.log; do [ -f "$f" ] && { echo "--- $f (tail)"; tail -n 12 "$f"; }; done
  fi
  echo "$passed passed, $failed failed"
  # An EXIT trap's last status is not the script's: without this exit, a run with
  # failures ended 0 and ctest counted it passed.
  [ "$failed" -eq 0 ] && [ "$passed" -gt 0 ] || exit 1
}
trap cleanup EXIT
trap 'exit 1' INT TERM
nb_teardown 2>/dev/null
head -c 32 /dev/urandom | base64 >"$SECRET"
for i in 1 2 3 5; do nb_setup "$i"; done
EAVESDROPPER=$(nb_addr 5)

# start i name: node i as name (not nb_start, whose names are node<i>).
start() {
  ip netns exec "$NP$1" "$FIRSTBOOT" run --state-dir "$WORK/n$1/state" --name "$2" --listen "$(nb_addr "$1")" \
    --peers "$(nb_peers 3)" --expected 3 --secret-file "$SECRET" --cluster-name "$CLUSTER" \
    --etcd-data-dir "$WORK/n$1/etcd" --pki-dir "$WORK/n$1/pki" >>"$WORK/n$1/firstboot.log" 2>&1 &
  NB_PIDS[$1]=$!
}
member_names() { nb_ctl 1 "$(nb_endpoints 1 2 3)" member list 2>/dev/null | cut -d, -f3 | tr -d ' ' | sort | tr '\n' ' '; }

# 1. The first install forms while the eavesdropper records its frames.
ip netns exec "${NP}5" python3 "$REPLAY" capture "$WORK/capture" 12 "$EAVESDROPPER" &
cap=$!
sleep 0.5
for i in 1 2 3; do start "$i" "a$i"; done
if nb_wait_voting 1 3 60 1 2 3; then
  old_token=$(nb_status_wait 1 cluster_token)
  ok "first install formed: members $(member_names)(token $old_token)"
else
  bad "the first install did not form within 60 s"
  exit 1
fi
wait "$cap"
adverts=$(wc -l <"$WORK/capture")
echo "captured $adverts frames of the first install"

# 2. Everything is wiped; the fresh install starts under the replayed capture.
for i in 1 2 3; do nb_kill "$i" TERM; done
for i in 1 2 3; do rm -rf "$WORK/n$i/state" "$WORK/n$i/etcd" "$WORK/n$i/pki"; mv "$WORK/n$i/firstboot.log" "$WORK/n$i/first-install.log"; done
ip netns exec "${NP}5" python3 "$REPLAY" replay "$WORK/capture" 25 "$(nb_peers 3)" "$EAVESDROPPER" >"$WORK/replay.log" 2>&1 &
RP=$!
sleep 1  # the replay is on the wire before the fresh nodes start
t0=$(date +%s.%N)
for i in 1 2 3; do start "$i" "b$i"; done

# 3. The fresh nodes found their own cluster, and say what they dropped.
if nb_wait_voting 1 3 30 1 2 3; then
  printf 'fresh install formed %.2f s after its start, under the replay\n' "$(echo "$(date +%s.%N) - $t0" | bc)"
  names=$(member_names)
  founder=$(nb_status_wait 1 founder)
  token=$(nb_status_wait 1 cluster_token)
  echo "fresh install: members $names founder $founder token $token"
  [ "$names" = "b1 b2 b3 " ] && [ "${founder#b}" != "$founder" ] &&
    ok "the fresh install founded a new cluster of its own (b1 b2 b3), not the captured one" ||
    bad "the fresh install's members or founder are wrong: $names / $founder"
else
  bad "the fresh install did not form 3 healthy voting members within 30 s under the replay"
  for i in 1 2 3; do echo "node $i: $(nb_status_field "$i" phase) founder=$(nb_status_field "$i" founder)"; done
fi
sleep 4  # the replay goes on; held frames expire 3 s after they arrived
kill "$RP" 2>/dev/null; wait "$RP" 2>/dev/null; RP=""
cat "$WORK/replay.log"
stale_lines=0
for i in 1 2 3; do
  n=$(grep -c 'stale formation frame(s) from a[123] ' "$WORK/n$i/firstboot.log")
  stale_lines=$((stale_lines + n))
done
grep -m1 'stale formation frame(s) from a' "$WORK/n1/firstboot.log" | cut -c1-300
learned=$(grep -l "$old_token" "$WORK"/n[123]/firstboot.log 2>/dev/null | wc -l)
if [ "$stale_lines" -gt 0 ] && [ "$learned" -eq 0 ]; then
  ok "the captured frames were logged as stale ($stale_lines log lines on 3 nodes) and the old cluster $old_token was never learnt"
else
  bad "stale log lines: $stale_lines; nodes whose log names the old cluster $old_token: $learned"
fi
