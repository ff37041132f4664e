#!/bin/bash
# Certificate renewal under load, against the real 1.36 binaries (images/stack, cached):
# `sprout-firstboot certs --renew` issues a node's certificates with a 60 s lifetime from
# CAs made here, etcd 3.6 and kube-apiserver 1.36 run on them as host processes on
# 127.0.0.1, and a client reads /readyz and writes a ConfigMap every half second through
# admin.conf. Checks: a second pass at once renews nothing; at two thirds of the lifetime
# a pass renews every certificate; kube-apiserver and etcd then serve the new serving
# certificates with no restart; not one request failed across the renewal and past the
# old certificates' end; etcd started again after the old ones expired takes the
# apiserver back (its etcd client certificate is read anew, or etcd would refuse it).
# Only loopback traffic. Usage: tests/cert_renewal_test.sh   (exit 0: passed or skipped)
set -u
name=cert_renewal_test
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

WORK=$(mktemp -d /tmp/sprout-cert-renewal.XXXXXX)
PKI=$WORK/k8s/pki
mkdir -p "$PKI/etcd" "$WORK/etcd-data" "$WORK/logs" "$WORK/state"
chmod 700 "$WORK/etcd-data"
ETCD_PID="" API_PID="" CLIENT_PID=""
cleanup() {
  # shellcheck disable=SC2086
  hcp_end $CLIENT_PID $API_PID $ETCD_PID
}
trap cleanup EXIT
trap 'exit 1' INT TERM

hcp_ports
hcp_cas

certs=("$FIRSTBOOT" certs --pki-dir "$PKI" --state-dir "$WORK/state" --name node-1 --address 127.0.0.1
  --cluster-file "$WORK/none.json" --validity 60)
serial() { openssl x509 -noout -serial -in "$1" | cut -d= -f2; }
served() {  # served PORT: the serial of the certificate that the server on PORT presents
  openssl s_client -connect "127.0.0.1:$1" -cert "$PKI/etcd/healthcheck-client.crt" \
    -key "$PKI/etcd/healthcheck-client.key" </dev/null 2>/dev/null | openssl x509 -noout -serial 2>/dev/null |
    cut -d= -f2
}

if out=$("${certs[@]}" --renew --no-restart 2>&1); then
  n=$(grep -c '^  ' <<<"$out")
  if [ "$n" -ge 16 ]; then ok "the first pass issued $n files (every certificate, key and kubeconfig)"; else bad "the first pass issued $n files: $out"; fi
else
  bad "sprout-firstboot certs --renew failed: $out"
  exit 1
fi
issued_at=$(date +%s)
out=$("${certs[@]}" --renew --no-restart 2>&1)
if grep -q 'nothing was due' <<<"$out"; then ok "a second pass at once renews nothing"; else bad "a second pass renewed: $out"; fi
if grep -q 'apiserver.crt .* 66s' <<<"$out"; then
  ok "the list gives each certificate's lifetime (60 s asked, 6 s backdated)"
else
  bad "the list does not show apiserver.crt with 66s: $out"
fi

hcp_etcd
start_etcd_again() {
  kill "$ETCD_PID"; wait "$ETCD_PID" 2>/dev/null
  hcp_etcd
}
hcp_apiserver
kc() { "$KDIR/kubectl" --kubeconfig "$WORK/k8s/admin.conf" --server "https://127.0.0.1:$P_API" \
  --cache-dir "$WORK/kubectl-cache" --request-timeout=5s "$@"; }
up=0
for _ in $(seq 60); do
  kc get --raw /readyz >/dev/null 2>&1 && { up=1; break; }
  kill -0 "$API_PID" 2>/dev/null || break
  sleep 1
done
if [ "$up" = 1 ]; then ok "kube-apiserver 1.36 is ready on the certificates the pass issued"; else bad "kube-apiserver did not become ready"; exit 1; fi

# The client: /readyz and a ConfigMap write every half second; one line per request.
(
  for i in $(seq 400); do
    if kc get --raw /readyz >/dev/null 2>&1; then echo "ok readyz"; else echo "FAIL readyz $(date +%s)"; fi
    if [ $((i % 2)) = 0 ]; then
      if kc create configmap "c-$i" -n default >/dev/null 2>&1; then echo "ok write"; else echo "FAIL write $(date +%s)"; fi
    fi
    [ -f "$WORK/stop-client" ] && break
    sleep 0.5
  done
) >"$WORK/client.log" 2>&1 &
CLIENT_PID=$!

old_api=$(served "$P_API") old_etcd=$(served "$P_CLIENT")
[ -n "$old_api" ] && [ "$old_api" = "$(serial "$PKI/apiserver.crt")" ] &&
  ok "kube-apiserver presents the issued certificate ($old_api)" || bad "kube-apiserver presents '$old_api'"
renew_at=$((issued_at + 40))  # notBefore issued-6 s, lifetime 66 s: two thirds is issued+38 s
while [ "$(date +%s)" -lt "$renew_at" ]; do sleep 1; done
out=$("${certs[@]}" --renew --no-restart 2>&1)
n=$(grep -c '^  ' <<<"$out")
if [ "$n" -ge 16 ] && grep -q 'pki/etcd/server.crt' <<<"$out" && grep -q 'admin.conf' <<<"$out"; then
  ok "two thirds into the lifetime, a pass renewed $n files, etcd's and the kubeconfigs included"
else
  bad "the pass at two thirds renewed: $out"
fi
new_file=$(serial "$PKI/apiserver.crt")
new_api="" new_etcd=""
for _ in $(seq 90); do
  new_api=$(served "$P_API") new_etcd=$(served "$P_CLIENT")
  [ "$new_api" = "$new_file" ] && [ -n "$new_etcd" ] && [ "$new_etcd" != "$old_etcd" ] && break
  sleep 1
done
waited=$(($(date +%s) - renew_at))
if [ "$new_api" = "$new_file" ] && [ "$new_api" != "$old_api" ]; then
  ok "kube-apiserver serves the renewed certificate $new_api with no restart (seen within ${waited} s)"
else
  bad "kube-apiserver still serves $new_api, the file holds $new_file"
fi
if [ -n "$new_etcd" ] && [ "$new_etcd" = "$(serial "$PKI/etcd/server.crt")" ]; then
  ok "etcd serves its renewed certificate $new_etcd with no restart"
else
  bad "etcd serves '$new_etcd', the file holds $(serial "$PKI/etcd/server.crt") (before: $old_etcd)"
fi
# Past the old certificates' end (issued + 60 s), with a few requests after it.
while [ "$(date +%s)" -lt $((issued_at + 66)) ]; do sleep 1; done
touch "$WORK/stop-client"
wait "$CLIENT_PID" 2>/dev/null
CLIENT_PID=""
good=$(grep -c '^ok' "$WORK/client.log") fails=$(grep -c '^FAIL' "$WORK/client.log")
if [ "$fails" = 0 ] && [ "$good" -gt 40 ]; then
  ok "$good requests, 0 failed, across the renewal and past the old certificates' end"
else
  bad "$fails of $((good + fails)) requests failed: $(grep '^FAIL' "$WORK/client.log" | head -3 | tr '\n' ' ')"
fi
if kill -0 "$API_PID" 2>/dev/null; then ok "kube-apiserver ran throughout (pid $API_PID)"; else bad "kube-apiserver exited"; fi
# etcd started again now that the first certificates are expired: the apiserver's new
# connections must present the renewed client certificate.
start_etcd_again
back=0
for i in $(seq 40); do
  if kc create configmap after-etcd-restart -n default >/dev/null 2>&1; then back=$i; break; fi
  sleep 1
done
if [ "$back" -gt 0 ]; then
  ok "etcd started again after the old certificates expired; the apiserver wrote through it within ${back} s"
else
  bad "after etcd started again, the apiserver could not write for 40 s"
  grep -i 'certificate\|tls' "$WORK/logs/etcd.log" | tail -3
fi
