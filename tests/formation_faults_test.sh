#!/bin/bash
# Formation under faults, with real etcd over mTLS in network namespaces
# (198.18.4.0/24 on a bridge with no uplink), asserted through etcd's member list and
# endpoint health:
#   1. one of three nodes is partitioned away from the start: the other two form the
#      cluster; once healed, the third joins as a learner and is promoted;
#   2. the founder is killed while a fourth node is joining: the surviving majority
#      keeps serving (etcd refuses membership changes while a voter is down, so the
#      joiner retries); after the founder's restart the join completes, same cluster;
#   2b. the founder restarts with its bootstrap token deleted: it keeps its CAs (no
#      second PKI), logs why, and fetches the token from the other members;
#   3. node 4 loses its disk (etcd data and PKI wiped) and starts again: its stale
#      member entry is removed, it joins afresh and becomes a voting member again;
#   4. three nodes started staggered (2 s apart) form one 3-member cluster.
set -u
name=formation_faults_test
NP=sprt-k SUBNET=198.18.4 CLUSTER=sprt-faults NB_MAX=4
# shellcheck source=tests/formation/netns.sh
. "$(dirname "$0")/formation/netns.sh"
nb_preflight "$name"
WORK=$(mktemp -d /tmp/sprt-faults.XXXXXX)
SECRET=$WORK/secret
passed=0; failed=0
ok() { echo "ok: $*"; passed=$((passed + 1)); }
bad() { echo "FAIL: $*"; failed=$((failed + 1)); }
cleanup() {
  nb_teardown
  if [ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]; then
    rm -rf "$WORK"
  else
    echo "$name: logs kept in $WORK"
    for f in "$WORK"/n*/firstboot.log; do [ -f "$f" ] && { echo "--- $f (tail)"; tail -n 12 "$f"; }; done
  fi
  echo "$passed passed, $failed failed"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
nb_teardown 2>/dev/null  # a stale run may have left our namespaces behind
head -c 32 /dev/urandom | base64 >"$SECRET"
for i in 1 2 3 4; do nb_setup "$i"; done

# 1. Node 3 is cut off before anything starts.
nb_cut 3
t0=$(date +%s.%N)
for i in 1 2 3; do nb_start "$i" 3 3; done
if nb_wait_voting 1 2 60 1 2; then
  printf 'nodes 1 and 2 formed without node 3 after %.2f s\n' "$(echo "$(date +%s.%N) - $t0" | bc)"
  nb_ctl 1 "$(nb_endpoints 1 2)" member list
  phase3=$(nb_status_field 3 phase)
  echo "node 3 while partitioned: phase '$phase3'"
  if [ "$phase3" != "founding member" ] && [ ! -d "$WORK/n3/etcd/member" ]; then
    ok "partitioned node 3 stayed out while nodes 1 and 2 formed a 2-member cluster"
  else
    bad "partitioned node 3 started etcd or claims membership ($phase3)"
  fi
else
  bad "nodes 1 and 2 did not form a cluster within 60 s while node 3 was cut off"
  nb_ctl 1 "$(nb_endpoints 1 2)" member list 2>&1
fi
sleep 2
nb_heal 3
t0=$(date +%s.%N)
if nb_wait_voting 1 3 90 1 2 3; then
  printf 'node 3 joined after the heal in %.2f s\n' "$(echo "$(date +%s.%N) - $t0" | bc)"
  nb_ctl 1 "$(nb_endpoints 1 2 3)" member list
  grep -m1 -E 'joining it as an etcd learner|promoted' "$WORK/n3/firstboot.log"
  ok "healed node 3 joined as a learner and became a voting member"
else
  bad "node 3 did not become a healthy voting member within 90 s of the heal"
  nb_ctl 1 "$(nb_endpoints 1 2)" member list 2>&1
fi
id_before=$(nb_ctl 1 "$(nb_endpoints 1)" member list -w json 2>/dev/null | grep -o '"cluster_id":[0-9]*' | cut -d: -f2)
nb_ctl 1 "$(nb_endpoints 1)" put sprout/faults "before the founder died" >/dev/null

# 2. Node 4 joins; the founder is killed as soon as node 4 has begun its join.
founder=$(nb_status_field 1 founder)
f=${founder#node}
echo "founder: $founder"
case "$f" in 1 | 2 | 3) ;; *) bad "cannot tell the founder from node 1's status ('$founder')"; exit 1 ;; esac
nb_start 4 3 3
for _ in $(seq 1 200); do
  grep -q 'joining it as an etcd learner' "$WORK/n4/firstboot.log" 2>/dev/null && break
  sleep 0.01
done
nb_kill "$f" KILL
echo "killed $founder (SIGKILL) while node 4 had logged:"
sed 's/^/  | /' "$WORK/n4/firstboot.log" | grep -E 'learner|credentials|join' | tail -n 4
survivors=""
for i in 1 2 3; do [ "$i" != "$f" ] && survivors+="$i "; done
via=${survivors%% *}
# With a voter down etcd refuses membership changes ("unhealthy cluster": its strict
# reconfiguration check wants every voter connected), so node 4 waits and retries;
# meanwhile the surviving majority must keep serving.
sleep 3
# shellcheck disable=SC2086
if nb_ctl "$via" "$(nb_endpoints $survivors)" put sprout/faults-during "founder down" >/dev/null &&
  [ "$(nb_ctl "$via" "$(nb_endpoints $survivors)" endpoint health 2>&1 | grep -c 'is healthy')" -eq 2 ]; then
  ok "with the founder down the surviving majority is healthy and takes writes"
else
  bad "the surviving members are not healthy with the founder down"
fi
echo "node 4 while the founder is down:"
grep -E 'learner|credentials|join' "$WORK/n4/firstboot.log" | tail -n 3 | sed 's/^/  | /'
t0=$(date +%s.%N)
nb_start "$f" 3 3
if nb_wait_voting "$via" 4 90 1 2 3 4; then
  printf 'node 4 joined and the founder is back %.2f s after its restart\n' "$(echo "$(date +%s.%N) - $t0" | bc)"
  nb_ctl "$via" "$(nb_endpoints 1 2 3 4)" member list
  id_after=$(nb_ctl "$via" "$(nb_endpoints 1)" member list -w json 2>/dev/null | grep -o '"cluster_id":[0-9]*' | cut -d: -f2)
  got=$(nb_ctl 4 "$(nb_endpoints 4)" get --print-value-only sprout/faults)
  echo "after the founder's restart: cluster ID $id_before -> $id_after; node 4 reads '$got'"
  [ -n "$id_before" ] && [ "$id_after" = "$id_before" ] && [ "$got" = "before the founder died" ] &&
    ok "after the founder's restart node 4's join completed: 4 healthy voting members, same cluster ID, data kept" ||
    bad "cluster ID or data changed across the founder's restart"
else
  bad "no 4 healthy voting members within 90 s of the founder's restart"
  nb_ctl "$via" "$(nb_endpoints 1 2 3 4)" member list 2>&1
fi

# 2b. The founder restarts with its bootstrap token gone (its PKI no longer loads): it
# must not make a second PKI, but say so and fetch the one it made from the members.
fp=$WORK/n$f/pki
ca_before=$(cat "$fp/ca.crt" "$fp/etcd/ca.crt" "$fp/front-proxy-ca.crt" | sha256sum)
nb_kill "$f" TERM
rm -f "$WORK/n$f/state/bootstrap-token"
t0=$(date +%s.%N)
nb_start "$f" 3 3
restored=""
for _ in $(seq 1 300); do
  [ -s "$WORK/n$f/state/bootstrap-token" ] && restored=yes && break
  sleep 0.2
done
if [ -n "$restored" ] && nb_wait_voting "$via" 4 90 1 2 3 4; then
  printf 'the founder without its token is back %.2f s after its restart\n' "$(echo "$(date +%s.%N) - $t0" | bc)"
  grep -m1 'not making a second PKI' "$WORK/n$f/firstboot.log" | cut -c1-240
  ca_after=$(cat "$fp/ca.crt" "$fp/etcd/ca.crt" "$fp/front-proxy-ca.crt" | sha256sum)
  [ "$ca_after" = "$ca_before" ] && grep -q 'not making a second PKI' "$WORK/n$f/firstboot.log" &&
    cmp -s "$WORK/n$f/state/bootstrap-token" "$WORK/n$via/state/bootstrap-token" &&
    ok "a founder that lost its token kept its CAs, said so, got the members' token back; 4 healthy voters" ||
    bad "the founder's CAs changed or its token was not the members' after it lost its token"
else
  bad "the founder without its token did not come back with 4 healthy voting members within 90 s"
  tail -n 5 "$WORK/n$f/firstboot.log"
fi

# 3. Node 4 comes back with an empty disk under the same name and address.
old4=$(nb_ctl 1 "$(nb_endpoints 1 2 3)" member list 2>/dev/null | grep 'node4,' | cut -d, -f1)
nb_kill 4 TERM
rm -rf "$WORK/n4/etcd" "$WORK/n4/pki" "$WORK/n4/state"
t0=$(date +%s.%N)
nb_start 4 3 3
if nb_wait_voting 1 4 90 1 2 3 4; then
  new4=$(nb_ctl 1 "$(nb_endpoints 1 2 3)" member list 2>/dev/null | grep 'node4,' | cut -d, -f1)
  printf 'node 4 rejoined with an empty disk in %.2f s: member %s -> %s\n' "$(echo "$(date +%s.%N) - $t0" | bc)" "$old4" "$new4"
  grep -m1 'removed stale member' "$WORK/n4/firstboot.log"
  [ -n "$old4" ] && [ -n "$new4" ] && [ "$old4" != "$new4" ] && grep -q 'removed stale member [0-9]* (node4)' "$WORK/n4/firstboot.log" &&
    ok "the stale member of node 4 was removed before it was added again; 4 healthy voting members" ||
    bad "node 4 is back but its stale entry was not replaced ($old4 -> $new4)"
else
  bad "node 4 did not rejoin with an empty disk within 90 s"
  nb_ctl 1 "$(nb_endpoints 1 2 3)" member list 2>&1
fi

# 4. Three nodes of a new cluster started 2 s apart (same namespaces, fresh state).
for i in 1 2 3 4; do nb_kill "$i" TERM; done
WORK=$WORK/staggered CLUSTER=sprt-faults-staggered
mkdir -p "$WORK"/n{1,2,3}
t0=$(date +%s.%N)
for i in 1 2 3; do nb_start "$i" 3 3; [ "$i" -lt 3 ] && sleep 2; done
if nb_wait_voting 1 3 90 1 2 3; then
  printf '3 nodes started 2 s apart: 3 healthy voting members %.2f s after the first start (founding set: %s)\n' \
    "$(echo "$(date +%s.%N) - $t0" | bc)" "$("$FIRSTBOOT" status --state-dir "$WORK/n1/state" | sed -n 's/^founding members: \(.*\) (etcd.*/\1/p')"
  nb_ctl 1 "$(nb_endpoints 1 2 3)" member list
  ok "3 nodes started staggered formed one healthy 3-member cluster"
else
  bad "3 staggered nodes did not form a healthy 3-member cluster within 90 s"
  nb_ctl 1 "$(nb_endpoints 1 2 3)" member list 2>&1
fi
WORK=${WORK%/staggered}
[ "$failed" -eq 0 ]
