#!/bin/bash
# The Kubernetes control plane from sprout's own files, with real components: one
# sprout-firstboot in a network namespace founds etcd (Debian's etcd, mutual TLS), then,
# as a voting member, writes the Kubernetes certificates and kubeconfigs and renders
# the static pods of kube-apiserver, kube-controller-manager and kube-scheduler
# (lib/kube). The test runs each rendered pod's command as a process with the binaries
# compiled from Debian's kubernetes source (images/kubernetes/compile.sh, cached), and
# checks through kubectl 1.20 with the rendered kubeconfigs: /readyz, a write that
# reaches etcd, leader election of the controller-manager and the scheduler, the
# service-account controller, each component's identity, and that a restart re-issues
# nothing. Hardening (issue 34): the controller-manager's and scheduler's insecure ports
# 10252 and 10251 refuse connections while their secure ports 10257 and 10259 answer over
# HTTPS; a Secret's value is stored in etcd encrypted (read raw with etcdctl: no
# plaintext, the k8s:enc:aescbc prefix); the audit log is written, without that value.
# Traffic stays inside the namespace (198.18.0.31 on a veth pair whose both ends are inside it, and lo).
set -u
name=control_plane_test
. "$(dirname "$0")/lib/kube-netns.sh"
kube_netns_require "iproute2, etcd-server, etcd-client, python3, golang-go" ip etcd etcdctl /usr/bin/python3 go
kube_netns_compile
kube_netns_up sprt-cp 198.18.0.31
kubectl_as() {  # kubectl_as KUBECONFIG ARGS...: the compiled kubectl 1.20, in the namespace
  local conf=$1
  shift
  in_ns "$BIN/kubectl" --kubeconfig "$K8S/$conf" --request-timeout=5s "$@"
}

kube_netns_cluster sprt-cp-test
start_firstboot() { kube_netns_firstboot --audit-log-dir "$WORK/audit"; }

# 1. Formation founds etcd and, as a member, writes the control plane.
start_firstboot
if wait_for 60 test -f "$K8S/manifests/kube-scheduler.yaml"; then
  ok "sprout-firstboot formed etcd and rendered the control plane's static pods"
else
  bad "no static pods in $K8S/manifests after 60 s"
  exit 1
fi
for f in admin.conf controller-manager.conf scheduler.conf kubelet.conf pki/apiserver.key; do
  mode=$(stat -c %a "$K8S/$f" 2>/dev/null)
  [ "$mode" = 600 ] && ok "$f is mode 600" || bad "$f is mode '$mode', not 600"
done
grep -q -- "--etcd-servers=https://$IP:2379" "$K8S/manifests/kube-apiserver.yaml" &&
  ok "the apiserver uses this node's etcd over TLS" || bad "the apiserver's --etcd-servers is not https://$IP:2379"

# 2. Each static pod's command runs as a process, with the compiled binary.
run_pod() {  # run_pod NAME: the first container's command of manifests/NAME.yaml
  local pod=$1
  kube_netns_pod_command "$pod"
  ip netns exec "$NS" "${POD_COMMAND[@]}" >"$WORK/$pod.log" 2>&1 &
  PIDS+=($!)
}
api_t0=$SECONDS
run_pod kube-apiserver
if wait_for 180 kubectl_as admin.conf get --raw /readyz; then
  ok "kube-apiserver answers /readyz with admin.conf: $(kubectl_as admin.conf get --raw /readyz)"
  echo "figure: kube-apiserver 1.20 from start to /readyz ok: $(cpu_seconds "${PIDS[${#PIDS[@]}-1]}") s of CPU, $((SECONDS - api_t0)) s wall"
else
  bad "kube-apiserver is not ready after 180 s"
  exit 1
fi
kubectl_as admin.conf get --raw '/readyz?verbose' | grep -q '\[+\]etcd ok' &&
  ok "the apiserver reaches etcd (readyz: etcd ok)" || bad "readyz does not report etcd ok"
# /version answers from client-go's version package, which compile.sh stamps beside
# component-base's; unstamped it says v0.0.0-master+<commit>, and clients gated on the
# server's version (the conformance suite among them) take it for a pre-release.
got=$(kubectl_as admin.conf get --raw /version 2>/dev/null | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["gitVersion"])' 2>&1)
[ "$got" = v1.20.2 ] && ok "the apiserver's /version says $got" || bad "the apiserver's /version says '$got', not v1.20.2"
in_ns "$BIN/kubectl" --kubeconfig "$K8S/admin.conf" --server https://127.0.0.1:6443 get --raw /livez >/dev/null 2>&1 &&
  ok "the apiserver's certificate is valid for 127.0.0.1" || bad "127.0.0.1 is not in the apiserver's certificate"
run_pod kube-controller-manager
run_pod kube-scheduler

# 3. A write goes through to etcd and reads back; the controller-manager's
#    service-account controller acts on it.
kubectl_as admin.conf create namespace sprout-check >/dev/null 2>&1
kubectl_as admin.conf create configmap marker -n sprout-check --from-literal=k=written-$$ >/dev/null 2>&1
got=$(kubectl_as admin.conf get configmap marker -n sprout-check -o jsonpath='{.data.k}' 2>/dev/null)
[ "$got" = "written-$$" ] && ok "a ConfigMap written through the apiserver reads back" || bad "read back '$got'"
# Indented JSON (?pretty=true, or a curl, wget or browser User-Agent) walks the object's
# maps through json-iterator and reflect2; reflect2 1.0.1 under Go 1.19 crashed the
# apiserver there (images/kubernetes/patches).
pretty=$(kubectl_as admin.conf get --raw "/api/v1/namespaces/sprout-check/configmaps/marker?pretty=true" 2>&1)
if grep -q "^    \"k\": \"written-$$\"" <<<"$pretty" && kubectl_as admin.conf get --raw /readyz >/dev/null 2>&1; then
  ok "the apiserver indents a ConfigMap's data map for ?pretty=true and keeps running"
else
  bad "a ?pretty=true read: '$(head -c 200 <<<"$pretty" | tr '\n' ' ')'; the apiserver's log ends: $(tail -n 3 "$WORK/kube-apiserver.log" | tr '\n' ' ' | cut -c1-300)"
fi
if wait_for 120 kubectl_as admin.conf get serviceaccount default -n sprout-check; then
  ok "the controller-manager made the new namespace's default ServiceAccount"
else
  bad "no default ServiceAccount in sprout-check after 120 s (controller-manager not working)"
fi

# 4. Leader election with their own kubeconfigs.
# The holder is HOSTNAME_UUID; the namespace shares this host's name.
holder() {
  kubectl_as admin.conf get lease "$1" -n kube-system -o jsonpath='{.spec.holderIdentity}' 2>/dev/null |
    grep -q "^$(hostname)_"
}
for c in kube-controller-manager kube-scheduler; do
  wait_for 120 holder "$c" && ok "$c holds its leader lease ($(kubectl_as admin.conf get lease "$c" -n kube-system \
    -o jsonpath='{.spec.holderIdentity}'))" || bad "no $c lease held by this host"
done

# 5. No plain-HTTP ports: 1.20's insecure ports of the controller-manager (10252) and
#    the scheduler (10251) refuse connections on every address; their secure ports
#    answer /healthz over HTTPS on 127.0.0.1, where the kubelet's probes go.
port_state() {  # port_state HOST PORT: "refused", "open" or another error, from inside the namespace
  in_ns /usr/bin/python3 - "$1" "$2" <<'PY'
import socket, sys
s = socket.socket()
s.settimeout(3)
try:
    s.connect((sys.argv[1], int(sys.argv[2])))
    print("open")
except ConnectionRefusedError:
    print("refused")
except OSError as e:
    print("error: %s" % e)
PY
}
https_healthz() {  # https_healthz PORT: the body of GET https://127.0.0.1:PORT/healthz (no client certificate)
  in_ns /usr/bin/python3 - "$1" <<'PY'
import ssl, sys, urllib.request
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
print(urllib.request.urlopen("https://127.0.0.1:%s/healthz" % sys.argv[1], context=ctx, timeout=5).read().decode())
PY
}
for pair in kube-controller-manager:10252:10257 kube-scheduler:10251:10259; do
  IFS=: read -r c insecure secure <<<"$pair"
  wait_for 120 https_healthz "$secure" && ok "$c answers /healthz over HTTPS on $secure: $(https_healthz "$secure")" ||
    bad "$c does not answer https://127.0.0.1:$secure/healthz"
  for host in 127.0.0.1 "$IP"; do
    state=$(port_state "$host" "$insecure")
    [ "$state" = refused ] && ok "$c's insecure port $host:$insecure refuses connections" ||
      bad "$c's insecure port $host:$insecure is '$state', not refused"
  done
done

# 6. Secrets at rest: a Secret's value is encrypted in etcd with the cluster's key
#    (aescbc), read back raw with etcdctl; a ConfigMap beside it is stored as it is (so
#    the raw read does see values). The audit log is written and holds no Secret value.
etcd_raw() {  # etcd_raw KEY: the raw value under KEY, through the apiserver's etcd client certificate
  in_ns env ETCDCTL_API=3 etcdctl --endpoints "https://$IP:2379" --cacert "$K8S/pki/etcd/ca.crt" \
    --cert "$K8S/pki/apiserver-etcd-client.crt" --key "$K8S/pki/apiserver-etcd-client.key" \
    get "$1" --print-value-only
}
plain="sprout-plaintext-$$-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')"
kubectl_as admin.conf create secret generic known -n sprout-check --from-literal=value="$plain" >/dev/null 2>&1
got=$(kubectl_as admin.conf get secret known -n sprout-check -o jsonpath='{.data.value}' 2>/dev/null | base64 -d)
[ "$got" = "$plain" ] && ok "the Secret reads back through the apiserver" || bad "the Secret read back '$got'"
etcd_raw /registry/secrets/sprout-check/known >"$WORK/secret-raw" 2>>"$WORK/etcdctl.log"
if [ ! -s "$WORK/secret-raw" ]; then
  bad "etcdctl read nothing under /registry/secrets/sprout-check/known (see etcdctl.log)"
elif grep -qaF "$plain" "$WORK/secret-raw"; then
  bad "the Secret's value is in etcd in plaintext"
else
  ok "the Secret's value is not in etcd in plaintext ($(wc -c <"$WORK/secret-raw") bytes stored)"
fi
prefix=$(head -c 40 "$WORK/secret-raw" | tr -c '[:print:]' '.')
case "$prefix" in
  k8s:enc:aescbc:v1:sprout-1:*) ok "etcd holds it encrypted: it begins '${prefix:0:27}'" ;;
  *) bad "the stored Secret does not begin with k8s:enc:aescbc:v1:sprout-1: ('$prefix')" ;;
esac
etcd_raw /registry/configmaps/sprout-check/marker 2>>"$WORK/etcdctl.log" | grep -qaF "written-$$" &&
  ok "a ConfigMap's value is readable raw in etcd (the raw read works; only Secrets are encrypted)" ||
  bad "the raw read of the ConfigMap did not show its value"
audit="$WORK/audit/audit.log"
if wait_for 30 grep -q '"resource":"secrets"' "$audit"; then
  ok "the audit log $audit records Secret requests ($(wc -l <"$audit") events)"
else
  bad "no Secret request in the audit log $audit"
fi
grep -qaF "$plain" "$audit" && bad "the audit log holds the Secret's value" || ok "the audit log does not hold the Secret's value"
grep -q '"level":"Request' "$audit" && bad "the audit log holds request or response bodies" ||
  ok "every audit event is at Metadata level (no bodies)"

# 7. Each kubeconfig is its component's identity, and RBAC sees it so.
who() { kubectl_as "$1" auth can-i "${@:2}" 2>/dev/null | head -n 1; }
[ "$(who kubelet.conf get nodes)" = yes ] && ok "kubelet.conf is a node (system:nodes may get nodes)" ||
  bad "kubelet.conf may not get nodes"
answer=$(who kubelet.conf list secrets -n kube-system)
[ "${answer%% *}" = no ] && ok "kubelet.conf may not list kube-system's secrets ($answer)" ||
  bad "kubelet.conf listing kube-system's secrets: '$answer', not 'no'"
[ "$(who scheduler.conf create bindings -n default)" = yes ] && ok "scheduler.conf may bind pods" ||
  bad "scheduler.conf may not bind pods"
[ "$(who controller-manager.conf get secrets -n kube-system)" = yes ] &&
  ok "controller-manager.conf is system:kube-controller-manager" || bad "controller-manager.conf lacks its rights"
[ "$(who admin.conf '*' '*')" = yes ] && ok "admin.conf is cluster admin" || bad "admin.conf is not cluster admin"

# 8. A restart of sprout-firstboot keeps every certificate and kubeconfig.
sum_before=$(cd "$K8S" && sha256sum admin.conf kubelet.conf pki/apiserver.crt pki/front-proxy-client.crt)
kill "$FB"
wait "$FB" 2>/dev/null
start_firstboot
wait_for 60 grep -q 'issued: none' "$WORK/firstboot.log" && ok "after a restart firstboot issued nothing" ||
  bad "the restarted firstboot did not report 'issued: none'"
sum_after=$(cd "$K8S" && sha256sum admin.conf kubelet.conf pki/apiserver.crt pki/front-proxy-client.crt)
[ "$sum_before" = "$sum_after" ] && ok "certificates and kubeconfigs are unchanged by the restart" ||
  bad "a restart changed the certificates"
wait_for 90 kubectl_as admin.conf get --raw /readyz && ok "the apiserver is ready again after etcd's restart" ||
  bad "the apiserver is not ready after the restart"
