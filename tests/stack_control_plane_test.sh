#!/bin/bash
# The 1.36 control plane's templates (staticpods/1.36) against the real 1.36 binaries
# (images/stack/compile.sh, cached): etcd 3.6, then kube-apiserver,
# kube-controller-manager and kube-scheduler 1.36 as plain host processes on 127.0.0.1,
# each with the `command:` of its rendered template (placeholders filled with test
# values; only the ports are moved to free ones, and etcd's duplicate loopback URL is
# dropped, since the node address is 127.0.0.1 too). Certificates are made with openssl.
# Checks: /readyz; kubectl reports the server's v1.36.5; a Secret is stored encrypted
# (k8s:enc:aescbc:v1: in etcd); the audit log has entries; a namespace enforcing the
# restricted Pod Security level refuses a privileged pod; NodeRestriction refuses node
# a's credential modifying Node b. Then CoreDNS: the objects `sprout-firstboot dns
# --print-coredns` gives are applied, the stack's coredns runs as a host process with the
# Corefile of their ConfigMap and the coredns ServiceAccount's token, answers every record
# kind (tests/lib/dns-records.sh), and keeps answering with the apiserver killed. Only
# loopback traffic.
# Usage: tests/stack_control_plane_test.sh   (exit 0: passed or skipped; 1: failed)
set -u
name=stack_control_plane_test
. "$(dirname "$0")/lib/checks.sh"
. "$(dirname "$0")/lib/dns-records.sh"
tests_require "openssl, python3, curl" openssl python3 curl
tests_cache
# sprout-firstboot (for the CoreDNS objects at the end): ctest's SPROUT_FIRSTBOOT, else
# the build folder of this checkout. Resolved here, before the test changes directory.
FIRSTBOOT=$(readlink -f "${SPROUT_FIRSTBOOT:-$SRC/build/sprout-firstboot}")
BUILD=$(dirname "$FIRSTBOOT")
# The stack's binaries, only if already compiled (the test never starts the compile).
. "$(dirname "$0")/lib/stack-sets.sh"
KDIR=$(stack_set "$CACHE" kubernetes kube-apiserver)
EDIR=$(stack_set "$CACHE" etcd etcd)
for b in "$KDIR/kube-apiserver" "$KDIR/kube-controller-manager" "$KDIR/kube-scheduler" "$KDIR/kubectl" \
  "$EDIR/etcd" "$EDIR/etcdctl"; do
  if [ ! -x "$b" ]; then
    echo "$name: skipped: the 1.36 stack is not compiled in $CACHE/stack/bin ($(basename "$b") missing; images/stack/compile.sh $CACHE kubernetes etcd makes it)"
    exit 0
  fi
done

WORK=$(mktemp -d /tmp/sprout-stack-control-plane.XXXXXX)
KWORK=
PKI=$WORK/pki K8S=$WORK/k8s
mkdir -p "$PKI/etcd" "$K8S" "$WORK/audit" "$WORK/etcd-data" "$WORK/logs"
chmod 700 "$WORK/etcd-data"
PIDS=()
cleanup() {
  local i p
  # The components first and etcd last (it was started first), each given 10 s.
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    p=${PIDS[i]}
    kill "$p" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
  if [ "$failed" -ne 0 ] || [ "$passed" -eq 0 ]; then
    for f in "$WORK"/logs/*.log; do [ -f "$f" ] && { echo "--- $f (tail)"; tail -n 8 "$f"; }; done
  fi
  rm -rf "$WORK" "${KWORK:-}"
  [ "$passed" -gt 0 ] || failed=$((failed + 1))
  tests_end
}
trap cleanup EXIT
trap 'exit 1' INT TERM

wait_for() {  # wait_for SECONDS CMD...: true once CMD succeeds, polled every second
  local t=$1 i
  shift
  for ((i = 0; i < t; i++)); do "$@" >/dev/null 2>&1 && return 0; sleep 1; done
  return 1
}

wait_up() {  # wait_up SECONDS CMD...: wait_for, but it gives up once the last process started exits
  local t=$1 i p=${PIDS[${#PIDS[@]}-1]}
  shift
  for ((i = 0; i < t; i++)); do
    "$@" >/dev/null 2>&1 && return 0
    kill -0 "$p" 2>/dev/null || { echo "$name: the process $p exited early"; return 1; }
    sleep 1
  done
  return 1
}

# Free loopback ports, picked by the kernel.
read -r P_CLIENT P_PEER P_METRICS P_API P_KCM P_SCHED < <(python3 -c '
import socket
ss=[socket.socket() for _ in range(6)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')

# --- certificates -----------------------------------------------------------------
cd "$WORK" || exit 1
ssl() { openssl "$@" >/dev/null 2>&1 || { bad "openssl $1 failed"; exit 1; }; }
ca() {  # ca FILE-BASE CN
  ssl req -x509 -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.crt" -days 2 -subj "/CN=$2" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
}
cert() {  # cert FILE-BASE CA-BASE SUBJECT USAGE [SAN]
  local ext=$WORK/ext.cnf
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=%s\n' "$4" >"$ext"
  [ -n "${5:-}" ] && echo "subjectAltName=$5" >>"$ext"
  ssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$3"
  ssl x509 -req -in "$1.csr" -CA "$2.crt" -CAkey "$2.key" -CAcreateserial -out "$1.crt" -days 2 -extfile "$ext"
  rm -f "$1.csr"
}
SAN_LO="IP:127.0.0.1,DNS:localhost"
ca "$PKI/ca" kubernetes-ca
ca "$PKI/etcd/ca" etcd-ca
ca "$PKI/front-proxy-ca" front-proxy-ca
cert "$PKI/etcd/server" "$PKI/etcd/ca" /CN=n1 serverAuth,clientAuth "$SAN_LO"
cert "$PKI/etcd/peer" "$PKI/etcd/ca" /CN=n1 serverAuth,clientAuth "$SAN_LO"
cert "$PKI/apiserver-etcd-client" "$PKI/etcd/ca" "/CN=kube-apiserver-etcd-client" clientAuth
cert "$PKI/apiserver" "$PKI/ca" /CN=kube-apiserver serverAuth \
  "$SAN_LO,DNS:kubernetes,DNS:kubernetes.default.svc.cluster.local,IP:10.96.0.1"
cert "$PKI/apiserver-kubelet-client" "$PKI/ca" "/O=kubeadm:cluster-admins/CN=kube-apiserver-kubelet-client" clientAuth
cert "$PKI/front-proxy-client" "$PKI/front-proxy-ca" /CN=front-proxy-client clientAuth
cert "$WORK/admin" "$PKI/ca" "/O=system:masters/CN=kubernetes-admin" clientAuth
cert "$WORK/kcm" "$PKI/ca" /CN=system:kube-controller-manager clientAuth
cert "$WORK/sched" "$PKI/ca" /CN=system:kube-scheduler clientAuth
cert "$WORK/node-a" "$PKI/ca" "/O=system:nodes/CN=system:node:a" clientAuth
ssl genrsa -out "$PKI/sa.key" 2048
ssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub"
cat >"$PKI/encryption-config.yaml" <<EOF
apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
  - resources: [secrets]
    providers:
      - aescbc:
          keys:
            - name: key1
              secret: $(head -c 32 /dev/urandom | base64)
      - identity: {}
EOF
cat >"$K8S/audit-policy.yaml" <<'EOF'
apiVersion: audit.k8s.io/v1
kind: Policy
rules:
  - level: Metadata
EOF
kubeconfig() {  # kubeconfig FILE CERT-BASE, or kubeconfig FILE --token TOKEN
  local user="{client-certificate: \"$2.crt\", client-key: \"$2.key\"}"
  [ "$2" = --token ] && user="{token: \"$3\"}"
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
  - name: c
    cluster: {server: "https://127.0.0.1:$P_API", certificate-authority: "$PKI/ca.crt"}
users:
  - name: u
    user: $user
contexts:
  - name: c
    context: {cluster: c, user: u}
current-context: c
EOF
}
kubeconfig "$K8S/admin.conf" "$WORK/admin"
kubeconfig "$K8S/controller-manager.conf" "$WORK/kcm"
kubeconfig "$K8S/scheduler.conf" "$WORK/sched"
kubeconfig "$K8S/node-a.conf" "$WORK/node-a"
ok "certificates, keys, kubeconfigs, encryption and audit configuration made with openssl"

# --- the templates' commands ------------------------------------------------------
# render TEMPLATE: the template's container command, one argument per line, with the
# placeholders filled and the ports moved to the free ones above.
render() {
  python3 - "$SRC/staticpods/1.36/$1.yaml" <<EOF
import re, sys, yaml
values = {
  "node_name": "n1", "node_ip": "127.0.0.1", "cluster_name": "sprt-stack",
  "kubernetes_version": "v1.36.5", "pods_cidr": "10.244.0.0/16", "services_cidr": "10.96.0.0/12",
  "etcd_initial_cluster": "n1=https://127.0.0.1:2380", "etcd_initial_cluster_state": "new",
  "etcd_cluster_token": "sprt-stack-test", "etcd_servers": "https://127.0.0.1:2379",
  "image_etcd": "x", "image_kube_apiserver": "x", "image_kube_controller_manager": "x",
  "image_kube_scheduler": "x", "pki_dir": "$PKI", "etcd_data_dir": "$WORK/etcd-data",
  "kubernetes_dir": "$K8S", "audit_log_dir": "$WORK/audit",
}
text = open(sys.argv[1]).read()
def fill(m):
    if m.group(1) not in values:
        sys.exit("unknown placeholder " + m.group(1))
    return values[m.group(1)]
text = re.sub(r"\{\{([a-z_]+)\}\}", fill, text)
ports = {":2379": ":$P_CLIENT", ":2380": ":$P_PEER", ":2381": ":$P_METRICS"}
out = []
for arg in yaml.safe_load(text)["spec"]["containers"][0]["command"][1:]:
    for a, b in ports.items():
        arg = arg.replace(a, b)
    if arg.startswith("--listen-client-urls="):  # node_ip is 127.0.0.1: one URL, once
        urls = arg.split("=", 1)[1].split(",")
        arg = "--listen-client-urls=" + ",".join(dict.fromkeys(urls))
    if arg.startswith("--secure-port="):
        arg = "--secure-port=$P_API"
    out.append(arg)
print("\n".join(out))
EOF
}
for t in etcd kube-apiserver kube-controller-manager kube-scheduler; do
  if render "$t" >"$WORK/$t.args" && [ -s "$WORK/$t.args" ]; then :; else
    bad "staticpods/1.36/$t.yaml: its command could not be rendered"
    exit 1
  fi
done
ok "the four templates rendered: $(wc -l <"$WORK/kube-apiserver.args") apiserver flags, $(wc -l <"$WORK/etcd.args") etcd flags"
# The controller-manager and scheduler listen on fixed secure ports (10257, 10259) in the
# templates; here they get free ones.
echo "--secure-port=$P_KCM" >>"$WORK/kube-controller-manager.args"
echo "--secure-port=$P_SCHED" >>"$WORK/kube-scheduler.args"
# --- the kubelet's draft configuration ------------------------------------------------------
# The 1.36 kubelet reads and validates --config before it needs a container runtime or
# root: run as nobody with no kubeconfig, it stops at "unable to load kubeconfig" once the
# file is good, and at "failed to validate kubelet configuration" when it is not. An
# unknown field is only logged ("strict decoding error"), so that line is checked too.
if [ -x "$KDIR/kubelet" ] && command -v setpriv >/dev/null; then
  # A folder of its own that nobody may write to (the PKI stays private in WORK).
  KWORK=$(mktemp -d /tmp/sprout-stack-kubelet.XXXXXX)
  chmod 777 "$KWORK"
  cp "$SRC/staticpods/kubelet/1.36.yaml" "$KWORK/config.yaml"
  chmod 644 "$KWORK/config.yaml"
  kout=$(timeout 60 setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all "$KDIR/kubelet" \
    --config="$KWORK/config.yaml" --kubeconfig="$KWORK/none.conf" \
    --root-dir="$KWORK/root" --cert-dir="$KWORK/root/pki" 2>&1)
  if grep -q 'unable to load kubeconfig' <<<"$kout" && ! grep -qE 'strict decoding|failed to validate' <<<"$kout"; then
    ok "the 1.36 kubelet accepts staticpods/kubelet/1.36.yaml (no unknown field, valid; it stops at the missing kubeconfig)"
  else
    bad "the 1.36 kubelet on staticpods/kubelet/1.36.yaml: $(grep -E 'strict decoding|failed|command failed' <<<"$kout" | head -n 3)"
  fi
  rm -rf "$KWORK"
else
  echo "note: the kubelet's configuration is not checked (no kubelet in $KDIR, or no setpriv)"
fi

start() {  # start NAME BINARY: the binary with NAME.args, logged
  mapfile -t args <"$WORK/$1.args"
  "$2" "${args[@]}" >"$WORK/logs/$1.log" 2>&1 &
  PIDS+=($!)
}

# --- etcd 3.6 -----------------------------------------------------------------------
start etcd "$EDIR/etcd"
ETCDCTL=("$EDIR/etcdctl" --endpoints="https://127.0.0.1:$P_CLIENT" --cacert="$PKI/etcd/ca.crt"
  --cert="$PKI/apiserver-etcd-client.crt" --key="$PKI/apiserver-etcd-client.key" --command-timeout=5s)
if wait_up 60 "${ETCDCTL[@]}" endpoint health; then
  ok "etcd $("$EDIR/etcd" --version | sed -n 's/^etcd Version: //p') is healthy over mutual TLS"
else
  bad "etcd not healthy in 60 s (or it exited)"
  exit 1
fi

# --- kube-apiserver -------------------------------------------------------------------
api_t0=$SECONDS
start kube-apiserver "$KDIR/kube-apiserver"
API_PID=${PIDS[${#PIDS[@]}-1]}
KC=("$KDIR/kubectl" --kubeconfig "$K8S/admin.conf" --request-timeout=10s)
readyz() { [ "$(curl -sS --max-time 5 --cacert "$PKI/ca.crt" --cert "$WORK/admin.crt" --key "$WORK/admin.key" \
  "https://127.0.0.1:$P_API/readyz")" = ok ]; }
if wait_up 120 readyz; then
  ok "kube-apiserver /readyz is ok"
  echo "figure: kube-apiserver 1.36 from start to /readyz ok: $(cpu_seconds "$API_PID") s of CPU, $((SECONDS - api_t0)) s wall"
else
  bad "kube-apiserver /readyz not ok in 120 s (or it exited)"
  exit 1
fi
# Which health endpoints read etcd (the template sets both timeouts to 10 s).
for ep in livez readyz; do
  v=$(curl -sS --max-time 5 --cacert "$PKI/ca.crt" --cert "$WORK/admin.crt" --key "$WORK/admin.key" \
    "https://127.0.0.1:$P_API/$ep?verbose" 2>&1)
  if grep -q '^\[+\]etcd ok' <<<"$v"; then ok "/$ep checks etcd"; else echo "note: /$ep does not check etcd"; fi
done
start kube-controller-manager "$KDIR/kube-controller-manager"
start kube-scheduler "$KDIR/kube-scheduler"
v=$("${KC[@]}" version 2>&1)
if grep -q '^Server Version: v1.36.5$' <<<"$v"; then ok "kubectl version: Server Version v1.36.5"; else bad "kubectl version: $v"; fi

# --- Secrets encrypted at rest ----------------------------------------------------------
"${KC[@]}" create secret generic sprt-enc -n default --from-literal=v=plain-text-sprout-4711 >/dev/null 2>&1
raw=$("${ETCDCTL[@]}" get /registry/secrets/default/sprt-enc --print-value-only 2>/dev/null | tr -d '\0' | head -c 200)
if [[ $raw == k8s:enc:aescbc:v1:* ]]; then
  ok "the Secret is stored encrypted in etcd (${raw:0:23}...)"
else
  bad "the Secret in etcd does not start with k8s:enc:aescbc:v1: (${raw:0:40})"
fi
if "${ETCDCTL[@]}" get /registry/secrets/default/sprt-enc 2>/dev/null | grep -aq plain-text-sprout-4711; then
  bad "the Secret's value is readable in etcd"
else
  ok "the Secret's value is not in etcd in plain text"
fi
# Read back through the API: it decrypts.
if [ "$("${KC[@]}" get secret sprt-enc -n default -o 'jsonpath={.data.v}' 2>/dev/null | base64 -d)" = plain-text-sprout-4711 ]; then
  ok "the Secret reads back through the API"
else
  bad "the Secret does not read back"
fi

# --- the audit log ----------------------------------------------------------------------
if wait_for 30 grep -q '"objectRef":{"resource":"secrets","namespace":"default","name":"sprt-enc"' "$WORK/audit/audit.log"; then
  ok "the audit log has the Secret's create ($(wc -l <"$WORK/audit/audit.log") entries)"
else
  bad "no audit entry for the Secret in $WORK/audit/audit.log"
fi
if grep -q plain-text-sprout-4711 "$WORK/audit/audit.log"; then bad "the Secret's value is in the audit log"; else ok "the audit log does not hold the Secret's value"; fi

# --- Pod Security admission ---------------------------------------------------------------
"${KC[@]}" create namespace sprt-restricted >/dev/null 2>&1
"${KC[@]}" label namespace sprt-restricted pod-security.kubernetes.io/enforce=restricted >/dev/null 2>&1
# A pod needs its namespace's ServiceAccount, which the controller-manager makes.
sa() { "${KC[@]}" get serviceaccount default -n sprt-restricted >/dev/null 2>&1; }
if wait_for 90 sa; then ok "the controller-manager made the new namespace's ServiceAccount"; else bad "no ServiceAccount in sprt-restricted in 90 s"; fi
cat >"$WORK/priv.yaml" <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: priv, namespace: sprt-restricted}
spec:
  containers:
    - name: c
      image: localhost/none:1
      securityContext: {privileged: true}
EOF
out=$("${KC[@]}" create -f "$WORK/priv.yaml" 2>&1)
if grep -q 'violates PodSecurity "restricted' <<<"$out"; then
  ok "the restricted namespace refuses a privileged pod: $(grep -o 'violates PodSecurity "[^"]*"' <<<"$out")"
else
  bad "a privileged pod in the restricted namespace: $out"
fi

# --- NodeRestriction ------------------------------------------------------------------------
NK=("$KDIR/kubectl" --kubeconfig "$K8S/node-a.conf" --request-timeout=10s)
node() { printf 'apiVersion: v1\nkind: Node\nmetadata: {name: %s}\n' "$1"; }
node b | "${KC[@]}" create -f - >/dev/null 2>&1
out=$(node a | "${NK[@]}" create -f - 2>&1)
if grep -q 'node/a created' <<<"$out"; then ok "node a's credential creates its own Node"; else bad "node a cannot create Node a: $out"; fi
# A PATCH straight to the API: kubectl label would GET Node b first, which the Node
# authorizer already refuses (a node reads only its own Node), so admission would never
# be asked. A PATCH passes authorization (nodes may patch nodes) and meets NodeRestriction.
out=$(curl -sS --max-time 10 --cacert "$PKI/ca.crt" --cert "$WORK/node-a.crt" --key "$WORK/node-a.key" \
  -X PATCH -H 'Content-Type: application/merge-patch+json' -d '{"metadata":{"labels":{"sprt":"1"}}}' \
  "https://127.0.0.1:$P_API/api/v1/nodes/b" 2>&1)
if grep -q 'is not allowed to modify node' <<<"$out" && grep -q '"code": *403' <<<"$out" &&
  [ -z "$("${KC[@]}" get node b -o 'jsonpath={.metadata.labels.sprt}' 2>/dev/null)" ]; then
  ok "NodeRestriction refuses node a modifying Node b (403, is not allowed to modify node \"b\"; the label is not set)"
else
  bad "node a labelling Node b: $out"
fi
out=$(node c | "${NK[@]}" create -f - 2>&1)
if grep -q 'is not allowed to modify node "c"' <<<"$out"; then
  ok "NodeRestriction refuses node a creating Node c"
else
  bad "node a creating Node c: $out"
fi

# --- controller-manager and scheduler ----------------------------------------------------------
health() { [ "$(curl -sSk --max-time 5 "https://127.0.0.1:$1/healthz")" = ok ]; }
if wait_for 60 health "$P_KCM"; then ok "kube-controller-manager /healthz ok on its secure port"; else bad "kube-controller-manager /healthz"; fi
if wait_for 60 health "$P_SCHED"; then ok "kube-scheduler /healthz ok on its secure port"; else bad "kube-scheduler /healthz"; fi
lease() { "${KC[@]}" get lease -n kube-system "$1" -o 'jsonpath={.spec.holderIdentity}' 2>/dev/null | grep -q .; }
if wait_for 90 lease kube-controller-manager; then ok "kube-controller-manager holds its leader lease"; else bad "no kube-controller-manager lease"; fi
if wait_for 90 lease kube-scheduler; then ok "kube-scheduler holds its leader lease"; else bad "no kube-scheduler lease"; fi

# --- CoreDNS ------------------------------------------------------------------------------------
# What a control-plane node creates for cluster DNS (lib/kube/coredns.cc), applied to this
# apiserver; the stack's coredns then runs as a host process with the Corefile of that
# ConfigMap, changed only where a host process must differ from the pod: it listens on free
# loopback ports (DNS, health, ready, metrics) instead of the pod's own address, and reads a
# kubeconfig with the coredns ServiceAccount's token instead of the in-cluster one (so the
# ClusterRole is what it gets, and must be enough).
CDIR=$(stack_set "$CACHE" coredns coredns)
coredns_skip=
if [ ! -x "$FIRSTBOOT" ]; then
  coredns_skip="no sprout-firstboot in $BUILD (set SPROUT_FIRSTBOOT to it)"
elif [ -z "$CDIR" ]; then
  coredns_skip="CoreDNS is not compiled in $CACHE/stack/bin (images/stack/compile.sh $CACHE coredns makes it)"
elif ! command -v dig >/dev/null; then
  coredns_skip="'dig' not found (scripts/install-deps installs dnsutils)"
fi

coredns_checks() {
  local out objects token p_dns p_health p_ready p_metrics
  cat >"$WORK/cluster.json" <<JSON
{"podHost": "kubelet",
 "networking": {"pods": "10.244.0.0/16", "services": "10.96.0.0/12", "nodes": "198.18.0.0/24"},
 "images": {"coredns": "localhost/sprout/coredns@sha256:$(printf 'd%.0s' {1..64})"}}
JSON
  if ! "$FIRSTBOOT" dns --print-coredns "$WORK/cluster.json" >"$WORK/coredns-list.json" 2>"$WORK/print-coredns.err"; then
    bad "$BUILD/sprout-firstboot dns --print-coredns: $(head -c 400 "$WORK/print-coredns.err")"
    return
  fi
  out=$("${KC[@]}" apply -f - <"$WORK/coredns-list.json" 2>&1)
  objects=$({ "${KC[@]}" get -n kube-system serviceaccount/coredns configmap/coredns deployment.apps/coredns \
    poddisruptionbudget.policy/coredns service/kube-dns -o name
    "${KC[@]}" get clusterrole.rbac.authorization.k8s.io/system:coredns \
      clusterrolebinding.rbac.authorization.k8s.io/system:coredns -o name; } 2>&1)
  if [ "$(grep -c ' created$' <<<"$out")" -eq 7 ] && [ "$(grep -c / <<<"$objects")" -eq 7 ] &&
    ! grep -qi error <<<"$objects"; then
    ok "kubectl apply of sprout-firstboot dns --print-coredns created all seven objects: $(tr '\n' ' ' <<<"$objects")"
  else
    bad "kubectl apply of the CoreDNS objects: $out / $objects"
    return
  fi
  out=$("${KC[@]}" get service kube-dns -n kube-system -o 'jsonpath={.spec.clusterIP}' 2>&1)
  [ "$out" = 10.96.0.10 ] && ok "Service kube-system/kube-dns has the 10th service address $out" ||
    bad "kube-dns's clusterIP is '$out', not 10.96.0.10"

  if ! token=$("${KC[@]}" create token coredns -n kube-system 2>&1); then
    bad "kubectl create token coredns -n kube-system: $token"
    return
  fi
  kubeconfig "$WORK/coredns.conf" --token "$token"
  chmod 600 "$WORK/coredns.conf"
  out=$("$KDIR/kubectl" --kubeconfig "$WORK/coredns.conf" --request-timeout=10s get secrets -n kube-system 2>&1)
  grep -q Forbidden <<<"$out" && ok "the coredns ServiceAccount's token may not read Secrets (Forbidden)" ||
    bad "the coredns ServiceAccount reading Secrets: $out"

  read -r p_dns p_health p_ready p_metrics < <(python3 -c '
import socket
ss=[socket.socket() for _ in range(4)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')
  "${KC[@]}" get configmap coredns -n kube-system -o 'jsonpath={.data.Corefile}' >"$WORK/Corefile.configmap"
  if ! out=$(python3 - "$WORK/Corefile.configmap" "$WORK/Corefile" "$p_dns" "$p_health" "$p_ready" "$p_metrics" \
    "$WORK/coredns.conf" 2>&1 <<'PY'
import sys
src, dst, dns, health, ready, metrics, kubeconfig = sys.argv[1:]
# Each line the host process must change, and what it becomes (indentation kept).
subs = {
    ".:53 {": [".:%s {" % dns, "    bind 127.0.0.1"],
    "health {": ["health 127.0.0.1:%s {" % health],
    "ready": ["ready 127.0.0.1:%s" % ready],
    "prometheus :9153": ["prometheus 127.0.0.1:%s" % metrics],
}
seen = {k: 0 for k in subs}
seen["kubernetes"] = 0
out = []
for line in open(src).read().split("\n"):
    key = line.strip()
    indent = line[: len(line) - len(line.lstrip())]
    if key in subs:
        seen[key] += 1
        out += [indent + x for x in subs[key]]
        continue
    out.append(line)
    if key.startswith("kubernetes ") and key.endswith("{"):
        seen["kubernetes"] += 1
        out.append(indent + "    kubeconfig %s c" % kubeconfig)
wrong = [k for k, n in seen.items() if n != 1]
if wrong:
    sys.exit("the Corefile does not have exactly one of: " + ", ".join(wrong))
open(dst, "w").write("\n".join(out))
PY
  ); then
    bad "the ConfigMap's Corefile could not be adapted: $out ($(tr '\n' '|' <"$WORK/Corefile.configmap"))"
    return
  fi
  "$CDIR/coredns" -conf "$WORK/Corefile" >"$WORK/logs/coredns.log" 2>&1 &
  PIDS+=($!)
  coredns_ready() { [ "$(curl -sS --max-time 2 "http://127.0.0.1:$p_ready/ready")" = OK ]; }
  if wait_up 60 coredns_ready; then
    ok "$("$CDIR/coredns" -version | head -n 1) is ready on 127.0.0.1:$p_dns with the ConfigMap's Corefile and the coredns ServiceAccount's token"
  else
    bad "CoreDNS not ready in 60 s (or it exited): $(tail -n 5 "$WORK/logs/coredns.log" | tr '\n' '|')"
    return
  fi

  # Every record kind, with dig on the host's loopback, EndpointSlices of discovery.k8s.io/v1,
  # and the pod's address set through the status subresource.
  DNS_DIG=(dig @127.0.0.1 -p "$p_dns")
  DNS_SLICE_API=discovery.k8s.io/v1
  kc() { "${KC[@]}" "$@"; }
  dns_set_pod_ip() {  # dns_set_pod_ip NAMESPACE POD IP
    "${KC[@]}" patch pod "$2" -n "$1" --subresource=status --type=merge \
      -p "{\"status\":{\"podIP\":\"$3\",\"podIPs\":[{\"ip\":\"$3\"}]}}"
  }
  dns_records_check
  dns_records_delete_timing
  # Authoritative for the Shoot's own reverse zones: an address there that names nothing
  # is NXDOMAIN (not SERVFAIL), as from knotd.
  s=$(status_of -x 10.96.0.77)
  [ "$s" = NXDOMAIN ] && ok "PTR of an unused service address is NXDOMAIN" || bad "PTR of 10.96.0.77 answered '$s'"

  # The API gone (as a crash or power cut would: no graceful end): CoreDNS answers from
  # what it has listed. The wait outlasts the Corefile's cache (5 s), so the answers come
  # from the kubernetes plugin, not from the cache plugin.
  kill -9 "$API_PID"
  wait "$API_PID" 2>/dev/null
  if readyz 2>/dev/null; then bad "the apiserver still answers after kill -9"; fi
  sleep 7
  if answers 10.96.0.1 kubernetes.default.svc.cluster.local A && answers 10.244.1.5 db-0.db.shop.svc.cluster.local A; then
    ok "with the apiserver killed, CoreDNS still answers kubernetes.default.svc.cluster.local -> $(q kubernetes.default.svc.cluster.local A) and db-0.db.shop.svc.cluster.local -> $(q db-0.db.shop.svc.cluster.local A)"
  else
    bad "with the apiserver killed, CoreDNS answers kubernetes.default '$(q kubernetes.default.svc.cluster.local A)', db-0.db.shop '$(q db-0.db.shop.svc.cluster.local A)'"
  fi
}
if [ -n "$coredns_skip" ]; then
  echo "note: the CoreDNS checks are skipped: $coredns_skip"
else
  coredns_checks
fi
