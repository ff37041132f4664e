#!/bin/bash
# Cluster DNS with real parts (docs/dns.md): sprout-firstboot founds etcd in a network
# namespace and renders the control plane; the rendered kube-apiserver runs with the
# binary compiled from Debian's source; Debian's knotd runs with the configuration
# `sprout-firstboot dns --print-knot-config` gives (the text the build bakes), and
# `sprout-firstboot dns` feeds it from the API with the node's kubelet credentials.
# dig (Debian's dnsutils) checks every record kind of the Kubernetes DNS
# specification, times a deleted Service's way out, and checks that DNS still answers
# with the apiserver stopped and after knotd restarts (a power loss). Traffic stays
# inside the namespace (198.18.0.32 on a veth pair whose both ends are inside it, and lo).
set -u
name=dns_test
. "$(dirname "$0")/lib/kube-netns.sh"
. "$(dirname "$0")/lib/dns-records.sh"
kube_netns_require "iproute2, etcd-server, python3, golang-go, knot, dnsutils, curl" ip etcd /usr/bin/python3 go knotd knotc dig curl
kube_netns_compile
kube_netns_up sprt-dns 198.18.0.32
kc() { in_ns "$BIN/kubectl" --kubeconfig "$K8S/admin.conf" --request-timeout=10s "$@"; }

kube_netns_cluster sprt-dns-test
kube_netns_firstboot
wait_for 60 test -f "$K8S/manifests/kube-apiserver.yaml" || {
  bad "no kube-apiserver manifest after 60 s"
  exit 1
}
start_apiserver() {
  kube_netns_pod_command kube-apiserver
  ip netns exec "$NS" "${POD_COMMAND[@]}" >>"$WORK/kube-apiserver.log" 2>&1 &
  API=$!
  PIDS+=("$API")
}
start_apiserver
wait_for 180 kc get --raw /readyz || {
  bad "kube-apiserver is not ready after 180 s"
  exit 1
}
# What the node agent does on a control-plane node: kube-proxy's reading rights (which
# include EndpointSlices) for every node's credentials.
kc create clusterrolebinding sprout:node-proxier --clusterrole=system:node-proxier --group=system:nodes >/dev/null

# The DNS server and its controller, as the image runs them (on 127.0.0.1:5353 here).
mkdir -p "$WORK/zones" "$WORK/run" "$WORK/db"
cat >"$WORK/dns.json" <<'EOF'
{"domain": "cluster.local", "listen": "127.0.0.1", "port": 5353,
 "zones": ["cluster.local", "96.10.in-addr.arpa", "244.10.in-addr.arpa"]}
EOF
"$FIRSTBOOT" dns --config "$WORK/dns.json" --zones-dir "$WORK/zones" --run-dir "$WORK/run" \
  --print-knot-config "$WORK/db" >"$WORK/knot.conf"
start_knot() {
  ip netns exec "$NS" knotd -c "$WORK/knot.conf" >>"$WORK/knotd.log" 2>&1 &
  KNOT=$!
  PIDS+=("$KNOT")
}
start_knot
ip netns exec "$NS" "$FIRSTBOOT" dns --config "$WORK/dns.json" --kubeconfig "$K8S/kubelet.conf" \
  --zones-dir "$WORK/zones" --run-dir "$WORK/run" --state-dir "$WORK/state" >>"$WORK/dns.log" 2>&1 &
PIDS+=($!)
# The record checks (tests/lib/dns-records.sh) with dig inside the namespace on knotd's
# port, the EndpointSlice API of 1.20, and the pod's address set through the API.
DNS_DIG=(ip netns exec "$NS" dig @127.0.0.1 -p 5353)
DNS_SLICE_API=discovery.k8s.io/v1beta1
admin_curl() {
  python3 - "$K8S/admin.conf" "$WORK" <<'PY'
import base64, sys, yaml
c = yaml.safe_load(open(sys.argv[1]))
u = c["users"][0]["user"]; cl = c["clusters"][0]["cluster"]
for f, k in (("ca.pem", cl["certificate-authority-data"]), ("cert.pem", u["client-certificate-data"]), ("key.pem", u["client-key-data"])):
    open(sys.argv[2] + "/" + f, "wb").write(base64.b64decode(k))
PY
}
admin_curl
# (pretty=false: a curl client gets indented JSON, which the 1.20 apiserver built with
# Go 1.19 encodes through the vendored reflect2 1.0.1, whose map iteration breaks on
# Go >= 1.18 and can crash the apiserver; docs/control-plane.md.)
dns_set_pod_ip() {  # dns_set_pod_ip NAMESPACE POD IP
  in_ns curl -sSf --cacert "$WORK/ca.pem" --cert "$WORK/cert.pem" --key "$WORK/key.pem" -X PATCH \
    -H 'Content-Type: application/merge-patch+json' \
    --data "{\"status\":{\"podIP\":\"$3\",\"podIPs\":[{\"ip\":\"$3\"}]}}" \
    "https://$IP:6443/api/v1/namespaces/$1/pods/$2/status?pretty=false"
}

# 1. Every record kind.
dns_records_check

# 2. Churn: a deleted Service's records go, and how fast.
dns_records_delete_timing
for i in $(seq 1 20); do kc create service clusterip "churn-$i" -n shop --tcp=80:80 >/dev/null; done
for i in $(seq 1 20); do kc delete service "churn-$i" -n shop --wait=false >/dev/null; done
wait_for 20 sh -c "[ -z \"\$(ip netns exec $NS dig @127.0.0.1 -p 5353 +short churn-20.shop.svc.cluster.local A)\" ]"
left=0
for i in $(seq 1 20); do [ -n "$(q "churn-$i.shop.svc.cluster.local" A)" ] && left=$((left + 1)); done
[ "$left" -eq 0 ] && ok "20 Services made and deleted in a burst: none left in the zone" ||
  bad "$left of 20 deleted Services still answer"

# 3. The API down: DNS keeps answering, and status says so.
in_ns "$FIRSTBOOT" status --state-dir "$WORK/state" | sed -n '/^dns:/,$p' >"$WORK/status-up.txt"
grep -q "server: answering" "$WORK/status-up.txt" && ok "status: $(grep 'server:' "$WORK/status-up.txt" | xargs)" ||
  bad "status shows no answering DNS server: $(cat "$WORK/status-up.txt")"
kill -9 "$API"  # as a crash or a power cut would: no graceful end
wait "$API" 2>/dev/null
sleep 3
answers 10.96.0.1 kubernetes.default.svc.cluster.local A && answers 10.244.1.5 db-0.db.shop.svc.cluster.local A &&
  ok "with the apiserver stopped, DNS still answers" || bad "DNS stopped answering with the apiserver"
# 4. knotd restarts with the API still down (as after a power loss): the zone files
#    on disk answer at once.
kill "$KNOT"
wait "$KNOT" 2>/dev/null
start_knot
wait_for 10 answers 10.96.0.1 kubernetes.default.svc.cluster.local A &&
  answers smtp.example.org. mail.shop.svc.cluster.local CNAME &&
  ok "a restarted knotd answers from the zone files with the API still down" ||
  bad "a restarted knotd does not answer without the API"
wait_for 15 grep -q "not answering\|no answer\|failed" "$WORK/state/dns.json"
in_ns "$FIRSTBOOT" status --state-dir "$WORK/state" | sed -n '/^dns:/,$p' >"$WORK/status-down.txt"
grep -qi "api: .*\(refused\|failed\|connect\)" "$WORK/status-down.txt" &&
  ok "status names the API problem: $(grep 'api:' "$WORK/status-down.txt" | cut -c1-140)" ||
  bad "status does not say the API is unreachable: $(cat "$WORK/status-down.txt")"
# 5. The API back: the controller catches up by itself.
start_apiserver
wait_for 180 kc get --raw /readyz || bad "the apiserver did not come back"
kc create service clusterip after -n shop --tcp=80:80 >/dev/null
wait_for 60 sh -c "ip netns exec $NS dig @127.0.0.1 -p 5353 +short after.shop.svc.cluster.local A | grep -q ." &&
  ok "after the API returned, a new Service answers with no restart of the controller" ||
  bad "the controller did not catch up after the API came back"
