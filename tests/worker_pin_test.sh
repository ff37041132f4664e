#!/bin/bash
# Workers pin the cluster CA (docs/formation.md, "Workers pin the cluster CA"), with real
# sprout-firstboot and etcd over mTLS in network namespaces (198.18.16.0/24 on a bridge
# with no uplink):
#   1. three control-plane nodes form; the founder's Kubernetes CA has the hash that
#      `sprout ca-cert-hash` computes from the cluster secret before any node ran (and
#      that openssl computes from the CA file), and `status` prints it;
#   2. worker C, with no pin, joins while only the real control plane answers: it trusts
#      that CA on first use and warns that it has no pin;
#   3. the founder is stopped and, at its address, a rogue holding only the worker secret
#      (tests/tools/rogue_join_endpoint.cc: the real join server with a CA of its own)
#      answers as its join endpoint. Workers ask the founder first:
#      - worker A, pinned (--ca-cert-hash, what personalize writes), refuses the rogue's
#        CA, saves nothing of it, and joins through a real endpoint;
#      - worker B, not pinned and new, keeps the rogue's CA: the attack the pin stops
#        (and what every worker did before);
#      - worker C, not pinned but holding the real CA from step 2, has to fetch again
#        (its token is gone) and refuses the rogue's CA (trust on first use).
set -u
name=worker_pin_test
NP=sprt-w SUBNET=198.18.16 CLUSTER=sprt-pin NB_MAX=6
# shellcheck source=tests/formation/netns.sh
. "$(dirname "$0")/formation/netns.sh"
# shellcheck source=tests/lib/ca-cert-hash.sh
. "$(dirname "$0")/lib/ca-cert-hash.sh"
nb_preflight "$name" openssl python3
for tool in "${SPROUT:-}" "${SPROUT_ROGUE_JOIN:-}"; do
  if [ ! -x "$tool" ]; then
    echo "$name: set SPROUT and SPROUT_ROGUE_JOIN to the sprout and sprout-rogue-join-endpoint binaries"
    exit 1
  fi
done
WORK=$(mktemp -d /tmp/sprt-pin.XXXXXX)
SECRET=$WORK/secret
passed=0; failed=0
ok() { echo "ok: $*"; passed=$((passed + 1)); }
bad() { echo "FAIL: $*"; failed=$((failed + 1)); }
ROGUE_PID=""
cleanup() {
  [ -z "$ROGUE_PID" ] || kill -TERM "$ROGUE_PID" 2>/dev/null
  nb_teardown
  if [ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]; then
    rm -rf "$WORK"
  else
    echo "$name: logs kept in $WORK"
    for f in "$WORK"/n*/firstboot.log "$WORK"/rogue.log; do [ -f "$f" ] && { echo "--- $f (tail)"; tail -n 12 "$f"; }; done
  fi
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}
trap cleanup EXIT
trap 'exit 1' INT TERM
nb_teardown 2>/dev/null  # a stale run may have left our namespaces behind
# No line end: the daemon drops it from --secret-file, `sprout ca-cert-hash` takes the
# file's bytes as they are (as personalize does), and both must see one secret.
head -c 32 /dev/urandom | base64 | tr -d '\n' >"$SECRET"
"$SPROUT" worker-secret --cluster-secret "$SECRET" >"$WORK/worker.secret"
for i in 1 2 3 4 5 6; do nb_setup "$i"; done

# spki_hash FILE: kubeadm's CA hash of a certificate, by the openssl command.
spki_hash() { echo "sha256:$(openssl x509 -in "$1" -pubkey -noout | openssl pkey -pubin -outform der | sha256sum | cut -d' ' -f1)"; }

# start_worker i name [flags]: a worker holding only the worker secret, in namespace i.
start_worker() {
  local i=$1 wname=$2
  shift 2
  ip netns exec "$NP$i" "$FIRSTBOOT" run --state-dir "$WORK/n$i/state" --name "$wname" --listen "$(nb_addr "$i")" \
    --peers "$(nb_peers 3)" --expected 3 --worker-secret-file "$WORK/worker.secret" --cluster-name "$CLUSTER" \
    --role worker --etcd-data-dir "$WORK/n$i/etcd" --pki-dir "$WORK/n$i/pki" "$@" >>"$WORK/n$i/firstboot.log" 2>&1 &
  NB_PIDS[$i]=$!
}

# wait_saved i: until worker i logged that it saved its credentials (30 s).
wait_saved() {
  local n
  for n in $(seq 1 150); do
    grep -q 'worker: saved the CA bundle' "$WORK/n$1/firstboot.log" 2>/dev/null && return 0
    sleep 0.2
  done
  return 1
}

pin=$("$SPROUT" ca-cert-hash --cluster-secret "$SECRET")
echo "pin from the cluster secret (sprout ca-cert-hash): $pin"
apart=$(ca_cert_hash_of_secret "$SECRET")
[ "$apart" = "$pin" ] && ok "the pin computed with openssl and python3 alone is sprout's ($apart)" ||
  bad "openssl and python3 compute $apart, sprout $pin"

# 1. Three control-plane nodes form; the founder's Kubernetes CA is the derived one.
for i in 1 2 3; do nb_start "$i" 3 3; done
if ! nb_wait_voting 1 3 60 1 2 3; then
  bad "no healthy 3-member cluster within 60 s"
  exit 1
fi
founder=$(nb_status_wait 1 founder)
f=${founder#node}
echo "founder: $founder"
made=$(spki_hash "$WORK/n$f/pki/ca.crt")
echo "the founder's ca.crt (openssl): $made"
grep -m1 'founder: made the etcd' "$WORK/n$f/firstboot.log"
status_line=$("$FIRSTBOOT" status --state-dir "$WORK/n$f/state" --pki-dir "$WORK/n$f/pki" | grep '^cluster CA:')
echo "status: $status_line"
if [ "$made" = "$pin" ] && cmp -s "$WORK/n1/pki/ca.crt" "$WORK/n2/pki/ca.crt" && cmp -s "$WORK/n1/pki/ca.crt" "$WORK/n3/pki/ca.crt" &&
  grep -q "^cluster CA: $pin " <<<"$status_line"; then
  ok "the founder's Kubernetes CA has the pin derived from the cluster secret, every member holds it, status prints it"
else
  bad "the founder's CA hash is $made, the pin $pin (or the members differ, or status said '$status_line')"
fi

# 2. Worker C (namespace 6), no pin, while only the real control plane answers.
start_worker 6 worker-c
if wait_saved 6 && cmp -s "$WORK/n6/state/worker/ca.crt" "$WORK/n1/pki/ca.crt"; then
  grep -m1 'worker: no pin of the cluster CA' "$WORK/n6/firstboot.log" | cut -c1-220
  grep -m1 'on first use' "$WORK/n6/firstboot.log"
  grep -q 'worker: no pin of the cluster CA (ca-cert-hash): it will trust the first CA' "$WORK/n6/firstboot.log" &&
    grep -q "worker: trusting the cluster CA $pin of the join endpoint .* on first use" "$WORK/n6/firstboot.log" &&
    ok "an unpinned worker warns at start, and trusts the real CA it is handed first" ||
    bad "worker C did not warn or did not log its first use"
else
  bad "worker C did not save the real CA"
fi
nb_kill 6

# 3. The founder stops; a rogue with the worker secret answers at its address.
nb_kill "$f"
ip netns exec "$NP$f" "$SPROUT_ROGUE_JOIN" --listen "$(nb_addr "$f")" --port 7777 \
  --worker-secret-file "$WORK/worker.secret" --cluster-name "$CLUSTER" >"$WORK/rogue.log" 2>&1 &
ROGUE_PID=$!
for _ in $(seq 1 50); do grep -q 'hands out the CA' "$WORK/rogue.log" 2>/dev/null && break; sleep 0.1; done
rogue=$(sed -n 's/.*hands out the CA \(sha256:[0-9a-f]*\).*/\1/p' "$WORK/rogue.log")
echo "rogue at $(nb_addr "$f"):7777 hands out $rogue"
[ -n "$rogue" ] && [ "$rogue" != "$pin" ] || bad "the rogue did not start, or hands out the real CA ('$rogue')"
others=()
for i in 1 2 3; do [ "$i" = "$f" ] || others+=("$i"); done
nb_wait_voting "${others[0]}" 3 30 "${others[@]}" >/dev/null 2>&1 || true  # etcd still has its quorum of 2

# 3a. Worker A (namespace 4), pinned.
start_worker 4 worker-a --ca-cert-hash "$pin"
if wait_saved 4; then
  refusal=$(grep -m1 'worker: refused the credentials of the join endpoint' "$WORK/n4/firstboot.log")
  echo "worker A logged: $refusal"
  grep -m1 'worker: saved the CA bundle' "$WORK/n4/firstboot.log"
  grep -m1 "join: gave worker credentials to worker-a" "$WORK/rogue.log" | sed 's/^/rogue logged: /'
  if grep -qF "join endpoint $(nb_addr "$f"):7777: it hands out the cluster CA $rogue, and this worker pins $pin (--ca-cert-hash); nothing was saved, trying the next endpoint" <<<"$refusal" &&
    grep -q 'join: gave worker credentials to worker-a' "$WORK/rogue.log" &&
    [ "$(spki_hash "$WORK/n4/state/worker/ca.crt")" = "$pin" ] &&
    cmp -s "$WORK/n4/state/worker/ca.crt" "$WORK/n${others[0]}/pki/ca.crt"; then
    ok "the pinned worker refused the rogue's CA, logged the endpoint, both hashes and the fix, and joined through a real endpoint"
  else
    bad "worker A: refusal '$refusal', its CA $(spki_hash "$WORK/n4/state/worker/ca.crt")"
  fi
else
  bad "worker A did not save credentials within 30 s"
fi
a_status=$("$FIRSTBOOT" status --state-dir "$WORK/n4/state" --pki-dir "$WORK/n4/pki" --role worker --ca-cert-hash "$pin" | grep '^cluster CA')
echo "$a_status"
grep -q "^cluster CA pin: $pin (--ca-cert-hash)$" <<<"$a_status" && ok "status shows the worker's pin" ||
  bad "status of worker A: $a_status"

# 3b. Worker B (namespace 5), not pinned, new: it keeps whatever answers first.
start_worker 5 worker-b
if wait_saved 5; then
  got=$(spki_hash "$WORK/n5/state/worker/ca.crt")
  echo "unpinned worker B saved the CA $got"
  grep -m1 'on first use' "$WORK/n5/firstboot.log"
  [ "$got" = "$rogue" ] && ok "without a pin a new worker keeps the rogue's CA: the attack the pin stops" ||
    bad "worker B kept $got, not the rogue's $rogue (the rogue was not asked first?)"
else
  bad "worker B did not save credentials within 30 s"
fi

# 3c. Worker C again: its token is gone, so it fetches; it trusted the real CA first.
rm -f "$WORK/n6/state/worker/bootstrap-token"
before=$(grep -c 'worker: saved the CA bundle' "$WORK/n6/firstboot.log")
start_worker 6 worker-c
for _ in $(seq 1 150); do
  [ "$(grep -c 'worker: saved the CA bundle' "$WORK/n6/firstboot.log")" -gt "$before" ] && break
  sleep 0.2
done
refusal=$(grep -m1 'worker: refused the credentials of the join endpoint' "$WORK/n6/firstboot.log")
echo "worker C logged: $refusal"
if grep -qF "it hands out the cluster CA $rogue, and this worker trusted $pin on first use ($WORK/n6/state/worker/ca.crt); nothing was saved" <<<"$refusal" &&
  [ "$(grep -c 'worker: saved the CA bundle' "$WORK/n6/firstboot.log")" -gt "$before" ] &&
  [ "$(spki_hash "$WORK/n6/state/worker/ca.crt")" = "$pin" ]; then
  ok "an unpinned worker refuses a CA other than the one it trusted first, and fetches again from a real endpoint"
else
  bad "worker C: refusal '$refusal', its CA $(spki_hash "$WORK/n6/state/worker/ca.crt")"
fi
