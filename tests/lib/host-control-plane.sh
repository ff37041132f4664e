# A one-node control plane of the 1.36 stack's real binaries as host processes on
# 127.0.0.1, for the tests that need an apiserver and etcd but no node: the cluster CAs
# made here in kubeadm's layout (as formation leaves them), etcd 3.6 and kube-apiserver
# 1.36 on the certificates `sprout-firstboot certs --renew` issues from them. Sourced
# after tests/lib/checks.sh (bad) with EDIR, KDIR (tests/lib/stack-sets.sh), WORK and PKI
# set; only loopback traffic.

# hcp_ports: three free ports on 127.0.0.1, as P_CLIENT (etcd's clients), P_PEER and P_API.
hcp_ports() {
  read -r P_CLIENT P_PEER P_API < <(python3 -c '
import socket
ss=[socket.socket() for _ in range(3)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')
}

# hcp_cas: the Kubernetes, etcd and front-proxy CAs (P-256, PKCS#8), the service-account
# key pair and the encryption key, under PKI.
hcp_cas() {
  local base cn
  mkdir -p "$PKI/etcd"
  for base in ca:kubernetes etcd/ca:etcd-ca front-proxy-ca:front-proxy-ca; do
    cn=${base#*:} base=${base%%:*}
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$PKI/$base.key" \
      -out "$PKI/$base.crt" -days 2 -subj "/CN=$cn" -addext basicConstraints=critical,CA:TRUE \
      -addext keyUsage=critical,keyCertSign,cRLSign >/dev/null 2>&1 || { bad "openssl could not make the CA $cn"; exit 1; }
  done
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$PKI/sa.key" 2>/dev/null
  openssl pkey -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  head -c 32 /dev/urandom | base64 >"$PKI/encryption.key"
}

# hcp_etcd: etcd on the node's certificates, its log appended to WORK/logs/etcd.log; ETCD_PID.
hcp_etcd() {
  "$EDIR/etcd" --name node-1 --data-dir "$WORK/etcd-data" \
    --listen-client-urls "https://127.0.0.1:$P_CLIENT" --advertise-client-urls "https://127.0.0.1:$P_CLIENT" \
    --listen-peer-urls "https://127.0.0.1:$P_PEER" --initial-advertise-peer-urls "https://127.0.0.1:$P_PEER" \
    --initial-cluster "node-1=https://127.0.0.1:$P_PEER" --listen-metrics-urls "" \
    --cert-file "$PKI/etcd/server.crt" --key-file "$PKI/etcd/server.key" --client-cert-auth \
    --trusted-ca-file "$PKI/etcd/ca.crt" --peer-cert-file "$PKI/etcd/peer.crt" --peer-key-file "$PKI/etcd/peer.key" \
    --peer-client-cert-auth --peer-trusted-ca-file "$PKI/etcd/ca.crt" >>"$WORK/logs/etcd.log" 2>&1 &
  ETCD_PID=$!
}

# hcp_apiserver: kube-apiserver on the node's certificates, its log in
# WORK/logs/kube-apiserver.log; API_PID.
hcp_apiserver() {
  "$KDIR/kube-apiserver" --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$P_API" \
    --etcd-servers="https://127.0.0.1:$P_CLIENT" --etcd-cafile="$PKI/etcd/ca.crt" \
    --etcd-certfile="$PKI/apiserver-etcd-client.crt" --etcd-keyfile="$PKI/apiserver-etcd-client.key" \
    --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" --client-ca-file="$PKI/ca.crt" \
    --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
    --proxy-client-cert-file="$PKI/front-proxy-client.crt" --proxy-client-key-file="$PKI/front-proxy-client.key" \
    --requestheader-client-ca-file="$PKI/front-proxy-ca.crt" --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
    --service-account-issuer=https://kubernetes.default.svc --service-account-key-file="$PKI/sa.pub" \
    --service-account-signing-key-file="$PKI/sa.key" --service-cluster-ip-range=10.96.0.0/12 \
    --authorization-mode=Node,RBAC >>"$WORK/logs/kube-apiserver.log" 2>&1 &
  API_PID=$!
}

# hcp_stop PID...: each process TERMed, waited for up to 10 s, then KILLed.
hcp_stop() {
  local p
  for p in "$@"; do
    kill "$p" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
}

# hcp_end PID...: a test's end: its processes stopped (hcp_stop), the tails of WORK/logs
# shown when a check failed or none passed (then counted as a failure), WORK removed.
hcp_end() {
  hcp_stop "$@"
  if [ "$failed" -ne 0 ] || [ "$passed" -eq 0 ]; then
    for f in "$WORK"/logs/*.log; do [ -f "$f" ] && { echo "--- $f (tail)"; tail -n 12 "$f"; }; done
  fi
  rm -rf "$WORK"
  [ "$passed" -gt 0 ] || failed=$((failed + 1))
  tests_end
}
