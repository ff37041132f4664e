#!/bin/bash
# The applier of the image's workloads (firstboot/workloads.cc, docs/workloads-node.md)
# against the real 1.36 binaries (images/stack, cached): etcd 3.6 and kube-apiserver 1.36
# as host processes on 127.0.0.1, certificates from CAs made here with openssl and
# `sprout-firstboot certs`. A fixture index.json with its objects (a CRD and an object of
# it, a Namespace, ConfigMaps, a Deployment) is applied with `sprout-firstboot workloads
# --apply-once`, as a control-plane node's applier does. Checks: every object exists,
# applied by the field manager sprout, and the record ConfigMap kube-system/sprout-workloads
# names them; a second run changes nothing (every resourceVersion unchanged); a new
# index with objects removed prunes exactly those, leaves a hand-made object alone, and
# also one sprout had applied but a user made again by hand; a bad object fails with the
# API's message while the others are applied, and says so in the status, the record and
# a Warning Event; a Namespace and a CRD that would take hand-made objects with them are
# kept; a Lease held by another node is waited for and taken over once it stops being
# renewed; the applier as a node runs it (--run) retries a failed object and applies again
# when the record is deleted. Only loopback traffic. Usage: tests/workloads_apply_test.sh   (exit 0: passed
# or skipped)
set -u
name=workloads_apply_test
. "$(dirname "$0")/lib/checks.sh"
tests_require "openssl, python3" openssl python3
tests_cache
FIRSTBOOT=$(readlink -f "${SPROUT_FIRSTBOOT:-$SRC/build/sprout-firstboot}")
. "$(dirname "$0")/lib/stack-sets.sh"
. "$(dirname "$0")/lib/host-control-plane.sh"
KDIR=$(stack_set "$CACHE" kubernetes kube-apiserver)
EDIR=$(stack_set "$CACHE" etcd etcd)
for b in "$KDIR/kube-apiserver" "$KDIR/kubectl" "$EDIR/etcd"; do
  if [ ! -x "$b" ]; then
    echo "$name: skipped: the 1.36 stack is not compiled in $CACHE/stack/bin ($(basename "$b") missing; images/stack/compile.sh $CACHE kubernetes etcd makes it)"
    exit 0
  fi
done

WORK=$(mktemp -d /tmp/sprout-workloads.XXXXXX)
PKI=$WORK/k8s/pki WL=$WORK/workloads
mkdir -p "$PKI/etcd" "$WORK/etcd-data" "$WORK/logs" "$WORK/state" "$WL/objects"
chmod 700 "$WORK/etcd-data"
ETCD_PID="" API_PID="" RUN_PID=""
cleanup() {
  # shellcheck disable=SC2086
  hcp_end $RUN_PID $API_PID $ETCD_PID
}
trap cleanup EXIT
trap 'exit 1' INT TERM

hcp_ports
hcp_cas
if ! out=$("$FIRSTBOOT" certs --renew --no-restart --pki-dir "$PKI" --state-dir "$WORK/state" --name node-1 \
  --address 127.0.0.1 --cluster-file "$WORK/none.json" --validity 7200 2>&1); then
  bad "sprout-firstboot certs --renew failed: $out"
  exit 1
fi
# admin.conf names the node's own apiserver at :6443; this one listens on a free port.
sed "s#server: https://.*#server: https://127.0.0.1:$P_API#" "$WORK/k8s/admin.conf" >"$WORK/admin.conf"

hcp_etcd
hcp_apiserver
kc() { "$KDIR/kubectl" --kubeconfig "$WORK/admin.conf" --cache-dir "$WORK/kubectl-cache" --request-timeout=10s "$@"; }
up=0
for _ in $(seq 90); do
  kc get --raw /readyz >/dev/null 2>&1 && kc get namespace kube-system >/dev/null 2>&1 && { up=1; break; }
  kill -0 "$API_PID" 2>/dev/null || break
  sleep 1
done
if [ "$up" = 1 ]; then ok "kube-apiserver 1.36 is ready"; else bad "kube-apiserver did not become ready"; exit 1; fi

# The fixture, in the builder's contract: index.json and one compact JSON object a file.
obj() {  # obj N JSON: objects/000N.json
  printf '%s' "$2" >"$WL/objects/000$1.json"
}
obj 1 '{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"widgets.example.com"},"spec":{"group":"example.com","scope":"Namespaced","names":{"kind":"Widget","listKind":"WidgetList","plural":"widgets","singular":"widget"},"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}}}]}}'
obj 2 '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"demo"}}'
obj 3 '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings","namespace":"demo"},"data":{"greeting":"hello"}}'
obj 4 '{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"demo"},"spec":{"replicas":1,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"web","image":"localhost/sprout/busybox:1.35","command":["httpd","-f","-p","8080"]}]}}}}'
obj 5 '{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w1","namespace":"demo"},"spec":{"size":3}}'
obj 6 '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"extra","namespace":"demo"},"data":{"a":"1"}}'
obj 7 '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"taken","namespace":"demo"},"data":{"a":"1"}}'
obj 8 '{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"broken","namespace":"demo"},"spec":{"replicas":1,"template":{"spec":{"containers":[]}}}}'
obj 9 '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"added","namespace":"demo"},"data":{"b":"2"}}'
entry() {  # entry N APIVERSION KIND NAMESPACE NAME
  printf '{"file":"objects/000%s.json","apiVersion":"%s","kind":"%s","namespace":"%s","name":"%s","images":[]}' "$@"
}
E1=$(entry 1 apiextensions.k8s.io/v1 CustomResourceDefinition "" widgets.example.com)
E2=$(entry 2 v1 Namespace "" demo)
E3=$(entry 3 v1 ConfigMap demo settings)
E4=$(entry 4 apps/v1 Deployment demo web)
E5=$(entry 5 example.com/v1 Widget demo w1)
E6=$(entry 6 v1 ConfigMap demo extra)
E7=$(entry 7 v1 ConfigMap demo taken)
E8=$(entry 8 apps/v1 Deployment demo broken)
E9=$(entry 9 v1 ConfigMap demo added)
index() {  # index ENTRY...: index.json of one chart workload "demo" holding the entries
  local IFS=, digest
  digest=$(printf '%s' "$*" | sha256sum | cut -d' ' -f1)
  printf '{"version":1,"digest":"sha256:%s","workloads":[{"name":"demo","type":"chart","source":"charts/demo","release":"demo","namespace":"demo","chartVersion":"0.1.0","objects":[%s]}]}' \
    "$digest" "$*" >"$WL/index.json"
}
apply() {  # apply [FLAGS]: one pass; its output in $out, its log in $err, status in $rc, seconds in $took
  local t0
  t0=$(date +%s%N)
  out=$("$FIRSTBOOT" workloads --apply-once --workloads-dir "$WL" --kubeconfig "$WORK/admin.conf" \
    --state-dir "$WORK/state" --name node-1 "$@" 2>"$WORK/stderr")
  rc=$?
  err=$(cat "$WORK/stderr")
  took=$(python3 -c "print(round(($(date +%s%N) - $t0) / 1e9, 2))")
  { echo "$out"; echo "$err"; } >>"$WORK/logs/applier.log"
}
rv() {  # rv RESOURCE NAME [-n NS]: its resourceVersion
  kc get "$@" -o 'jsonpath={.metadata.resourceVersion}' 2>/dev/null
}
rvs() {
  echo "crd=$(rv crd widgets.example.com) ns=$(rv namespace demo) cm=$(rv configmap settings -n demo)" \
    "deploy=$(rv deployment web -n demo) widget=$(rv widgets.example.com w1 -n demo)" \
    "extra=$(rv configmap extra -n demo) taken=$(rv configmap taken -n demo)"
}

# 1. The first pass applies everything, CRD first.
index "$E1" "$E2" "$E3" "$E4" "$E5" "$E6" "$E7"
apply
first=$took
if [ "$rc" = 0 ] && [ "$(grep -c '^applied: ' <<<"$out")" = 7 ]; then
  ok "the first pass applied all 7 objects in ${took} s"
else
  bad "the first pass (status $rc): $out"
fi
if [ "$(head -1 <<<"$out")" = "applied: demo: CustomResourceDefinition widgets.example.com" ] &&
  [ "$(sed -n 2p <<<"$out")" = "applied: demo: Namespace demo" ]; then
  ok "the CRD went first, then the Namespace"
else
  bad "the order: $(head -2 <<<"$out" | tr '\n' ' ')"
fi
missing=""
for o in "crd widgets.example.com" "namespace demo" "configmap settings -n demo" "deployment web -n demo" \
  "widgets.example.com w1 -n demo" "configmap extra -n demo" "configmap taken -n demo"; do
  # shellcheck disable=SC2086
  kc get $o >/dev/null 2>&1 || missing="$missing [$o]"
done
if [ -z "$missing" ]; then ok "every object exists in the cluster"; else bad "missing:$missing"; fi
managers=$(kc get deployment web -n demo -o 'jsonpath={.metadata.managedFields[*].manager}/{.metadata.managedFields[*].operation}')
if [ "$managers" = "sprout/Apply" ]; then
  ok "applied by server-side apply under the field manager sprout ($managers)"
else
  bad "the Deployment's managedFields: $managers"
fi
record=$(kc get configmap sprout-workloads -n kube-system -o 'jsonpath={.data.objects}')
digest1=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["digest"])' "$WL/index.json")
if [ "$(kc get configmap sprout-workloads -n kube-system -o 'jsonpath={.data.digest}')" = "$digest1" ] &&
  [ "$(python3 -c 'import json,sys; print(len(json.loads(sys.argv[1])))' "$record")" = 7 ]; then
  ok "the record kube-system/sprout-workloads holds the index's digest and the 7 objects"
else
  bad "the record: digest $(kc get configmap sprout-workloads -n kube-system -o 'jsonpath={.data.digest}'), objects $record"
fi
if grep -q 'workload demo: applied (7 objects)' <<<"$(kc get events -n kube-system --field-selector reason=Applied \
  -o 'jsonpath={.items[*].message}')"; then
  ok "an Event in kube-system says: $(kc get events -n kube-system --field-selector reason=Applied -o 'jsonpath={.items[0].message}')"
else
  bad "no Applied Event: $(kc get events -n kube-system 2>&1 | tail -3)"
fi
holder=$(kc get lease sprout-workloads -n kube-system -o 'jsonpath={.spec.holderIdentity}' 2>&1)
if kc get lease sprout-workloads -n kube-system >/dev/null 2>&1 && [ -z "$holder" ]; then
  ok "the Lease kube-system/sprout-workloads exists and was released after the pass"
else
  bad "the Lease: holder '$holder'"
fi

# 2. A second pass (another start of sprout-firstboot) changes nothing.
before=$(rvs) record_rv=$(rv configmap sprout-workloads -n kube-system)
events_before=$(kc get events -n kube-system -o name | wc -l)
apply
after=$(rvs)
if [ "$rc" = 0 ] && [ "$before" = "$after" ]; then
  ok "a second pass (${took} s) changed nothing: $after"
else
  bad "the second pass (status $rc) changed resourceVersions: before $before, after $after"
fi
if [ "$record_rv" = "$(rv configmap sprout-workloads -n kube-system)" ] &&
  [ "$events_before" = "$(kc get events -n kube-system -o name | wc -l)" ]; then
  ok "nor the record, and it made no new Event"
else
  bad "the second pass rewrote the record ($record_rv -> $(rv configmap sprout-workloads -n kube-system)) or made Events"
fi

# 3. A new build: extra and taken removed, added and a bad Deployment new. A user made
# by-hand by hand, and replaced sprout's taken with one of their own.
kc create configmap by-hand -n demo --from-literal=x=1 >/dev/null
kc delete configmap taken -n demo >/dev/null
kc create configmap taken -n demo --from-literal=mine=yes >/dev/null
hand_rv=$(rv configmap by-hand -n demo) taken_rv=$(rv configmap taken -n demo)
index "$E1" "$E2" "$E3" "$E4" "$E5" "$E8" "$E9"
apply
if [ "$rc" = 1 ] && grep -q '^failed: demo: Deployment demo/broken: Deployment.apps "broken" is invalid: ' <<<"$out"; then
  ok "the bad object failed with the API's message: $(grep '^failed:' <<<"$out" | cut -c1-160)"
else
  bad "the bad object (status $rc): $out"
fi
if grep -q '^applied: demo: ConfigMap demo/added' <<<"$out" && kc get configmap added -n demo >/dev/null 2>&1 &&
  [ "$(grep -c '^applied: ' <<<"$out")" = 6 ]; then
  ok "the other 6 objects were applied, the new one among them"
else
  bad "the others: $out"
fi
if ! kc get configmap extra -n demo >/dev/null 2>&1 && grep -q '^pruned: ConfigMap demo/extra$' <<<"$out"; then
  ok "the object the new index no longer carries was pruned"
else
  bad "ConfigMap demo/extra: $(kc get configmap extra -n demo 2>&1 | tail -1); $out"
fi
if [ "$(rv configmap by-hand -n demo)" = "$hand_rv" ]; then
  ok "a hand-made object in sprout's namespace is untouched (resourceVersion $hand_rv)"
else
  bad "ConfigMap demo/by-hand changed or went: '$(rv configmap by-hand -n demo)', was $hand_rv"
fi
if [ "$(rv configmap taken -n demo)" = "$taken_rv" ] && grep -q '^left alone: ConfigMap demo/taken: ' <<<"$out"; then
  ok "a recorded object a user made again by hand is left alone (no manager sprout)"
else
  bad "ConfigMap demo/taken: '$(rv configmap taken -n demo)', was $taken_rv; $out"
fi
st=$("$FIRSTBOOT" workloads --state-dir "$WORK/state")
if grep -q '^  demo: failed: 1 of 7 objects: Deployment demo/broken: Deployment.apps "broken" is invalid' <<<"$st"; then
  ok "sprout-firstboot workloads (status) says: $(grep '^  demo:' <<<"$st" | cut -c1-140)"
else
  bad "the status: $st"
fi
echo '{"phase":"member","boots":1}' >"$WORK/state/state.json"
full=$("$FIRSTBOOT" status --state-dir "$WORK/state" 2>&1)
if grep -q '^workloads (sha256:' <<<"$full" && grep -q '^  demo: failed' <<<"$full" &&
  "$FIRSTBOOT" status --json --state-dir "$WORK/state" | python3 -c '
import json,sys; w=json.load(sys.stdin)["workloads"]["workloads"][0]
sys.exit(0 if w["status"].startswith("failed") and any(o["state"]=="failed" for o in w["objects"]) else 1)'; then
  ok "sprout-firstboot status shows it, and status --json has each object's state"
else
  bad "sprout-firstboot status: $full"
fi
if grep -q '^demo: failed: 1 of 7' <<<"$(kc get configmap sprout-workloads -n kube-system -o 'jsonpath={.data.status}')" &&
  grep -q 'Deployment demo/broken: Deployment.apps "broken" is invalid' <<<"$(kc get events -n kube-system \
    --field-selector reason=ApplyFailed,type=Warning -o 'jsonpath={.items[*].message}')"; then
  ok "the record's status and a Warning Event (ApplyFailed) say so where kubectl users look"
else
  bad "record status: $(kc get configmap sprout-workloads -n kube-system -o 'jsonpath={.data.status}'); events: $(kc get events -n kube-system 2>&1 | tail -3)"
fi
record=$(kc get configmap sprout-workloads -n kube-system -o 'jsonpath={.data.objects}')
if ! grep -q '"extra"\|"taken"\|"broken"' <<<"$record" && grep -q '"added"' <<<"$record"; then
  ok "the record forgets the pruned and left-alone objects, never lists the failed one, and lists the new one"
else
  bad "the record's objects: $record"
fi

# 4. A build with none of these objects: the Deployment, the ConfigMaps and the Widget go;
# the Namespace (it holds by-hand) and the CRD (a hand-made Widget) are kept.
printf '%s' '{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w-hand","namespace":"demo"},"spec":{}}' |
  kc create -f - >/dev/null
printf '%s' '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"other","namespace":"default"},"data":{}}' >"$WL/objects/0010.json"
index "$(printf '{"file":"objects/0010.json","apiVersion":"v1","kind":"ConfigMap","namespace":"default","name":"other","images":[]}')"
apply
gone=1
for o in "deployment web -n demo" "configmap settings -n demo" "configmap added -n demo" "widgets.example.com w1 -n demo"; do
  # shellcheck disable=SC2086
  kc get $o >/dev/null 2>&1 && gone=0
done
if [ "$rc" = 0 ] && [ "$gone" = 1 ] && [ "$(grep -c '^pruned: ' <<<"$out")" = 4 ]; then
  ok "a build without the workload's objects pruned all four that sprout applied"
else
  bad "the last pass (status $rc): $out"
fi
if grep -q '^kept: Namespace demo: deleting it would delete what sprout did not apply (.*ConfigMap demo/by-hand' <<<"$out" &&
  grep -q '^kept: CustomResourceDefinition widgets.example.com: .*Widget demo/w-hand' <<<"$out" &&
  [ -z "$(kc get namespace demo -o 'jsonpath={.metadata.deletionTimestamp}')" ] &&
  kc get widgets.example.com w-hand -n demo >/dev/null 2>&1; then
  ok "the Namespace and the CRD that hold hand-made objects are kept, and say why"
else
  bad "the guard: $out"
fi
if grep -q 'Namespace demo' <<<"$(kc get events -n kube-system --field-selector reason=PruneKept,type=Warning \
  -o 'jsonpath={.items[*].message}')"; then
  ok "a Warning Event (PruneKept) says why they were kept"
else
  bad "no PruneKept Event"
fi

# 5. Another node holds the Lease: a pass waits, then takes it over once it stops renewing.
now=$(date -u +%Y-%m-%dT%H:%M:%S.000000Z)
kc apply --server-side --force-conflicts --field-manager=test -f - >/dev/null <<EOF
{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"sprout-workloads","namespace":"kube-system"},
 "spec":{"holderIdentity":"node-9","leaseDurationSeconds":6,"renewTime":"$now"}}
EOF
apply --lease-wait 2
if [ "$rc" = 1 ] && grep -q 'Lease kube-system/sprout-workloads is held by node-9' <<<"$out"; then
  ok "a pass with the Lease held by node-9 applies nothing and says who holds it"
else
  bad "with node-9's Lease (status $rc): $out"
fi
apply --lease-wait 30
if [ "$rc" = 0 ] && grep -q 'took over the Lease kube-system/sprout-workloads from node-9' <<<"$err"; then
  ok "node-9 did not renew: the next pass took the Lease over after ${took} s and applied"
else
  bad "taking over (status $rc, ${took} s): $out $err"
fi

# 6. The node's applier as it runs (--run): an object of a kind the API does not serve yet
# fails, and is applied on a later try once its CRD exists; a record deleted (as after a
# restore from an older backup) is written again, and what it held applied again.
printf '%s' '{"apiVersion":"example.com/v1","kind":"Gadget","metadata":{"name":"g1","namespace":"default"},"spec":{}}' >"$WL/objects/0011.json"
index "$(printf '{"file":"objects/0010.json","apiVersion":"v1","kind":"ConfigMap","namespace":"default","name":"other","images":[]}')" \
  "$(printf '{"file":"objects/0011.json","apiVersion":"example.com/v1","kind":"Gadget","namespace":"default","name":"g1","images":[]}')"
"$FIRSTBOOT" workloads --run --check-seconds 2 --workloads-dir "$WL" --kubeconfig "$WORK/admin.conf" \
  --state-dir "$WORK/state" --name node-2 >"$WORK/logs/run.log" 2>&1 &
RUN_PID=$!
seen=0
for i in $(seq 30); do
  grep -q 'Gadget default/g1: the API serves no kind Gadget' "$WORK/state/workloads.json" 2>/dev/null && { seen=$i; break; }
  sleep 0.5
done
if [ "$seen" -gt 0 ]; then
  ok "the running applier failed the Gadget alone: $(grep -o '"message": "the API serves no kind Gadget[^"]*' "$WORK/state/workloads.json" | cut -c13-)"
else
  bad "no failed Gadget in workloads.json: $(cat "$WORK/state/workloads.json" 2>&1)"
fi
kc create -f - >/dev/null <<'EOF'
{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"gadgets.example.com"},"spec":{"group":"example.com","scope":"Namespaced","names":{"kind":"Gadget","plural":"gadgets"},"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}
EOF
t0=$(date +%s)
back=0
for _ in $(seq 60); do
  kc get gadgets.example.com g1 -n default >/dev/null 2>&1 && { back=1; break; }
  sleep 1
done
if [ "$back" = 1 ]; then
  ok "once its CRD existed, a retry applied the Gadget ($(($(date +%s) - t0)) s later, by the backoff)"
else
  bad "the Gadget was not applied on a retry: $(tail -5 "$WORK/logs/run.log")"
fi
for _ in $(seq 20); do grep -q '"status": "applied (2 objects)"' "$WORK/state/workloads.json" && break; sleep 0.5; done
kc delete configmap sprout-workloads -n kube-system >/dev/null
kc delete configmap other -n default >/dev/null
t0=$(date +%s)
back=0
for _ in $(seq 30); do
  kc get configmap sprout-workloads -n kube-system >/dev/null 2>&1 && kc get configmap other -n default >/dev/null 2>&1 &&
    { back=1; break; }
  sleep 1
done
if [ "$back" = 1 ] && grep -q 'no record of applied workloads' "$WORK/logs/run.log"; then
  ok "with the record deleted, the running applier applied again within $(($(date +%s) - t0)) s (checks every 2 s) and wrote the record"
else
  bad "after the record was deleted: $(tail -5 "$WORK/logs/run.log")"
fi
t0=$(date +%s%N)
kill "$RUN_PID"
wait "$RUN_PID"
run_rc=$?
RUN_PID=""
stop_ms=$((($(date +%s%N) - t0) / 1000000))
if [ "$run_rc" = 0 ] && [ "$stop_ms" -lt 3000 ]; then
  ok "the applier stopped on SIGTERM in ${stop_ms} ms"
else
  bad "the applier took ${stop_ms} ms to stop, status $run_rc"
fi
echo "$name: measured: first pass ${first} s (7 objects, a CRD waited for)"
