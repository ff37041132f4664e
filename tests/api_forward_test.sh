#!/bin/bash
# The cluster harness's API forwarder (qemu-tests/api-forward.py), with no cluster: two
# HTTP servers stand for two nodes' apiservers at 198.18.3.11:6443 and 198.18.3.12:6443
# in a network namespace this test makes (no uplink). The forwarder must listen on the
# host's loopback only, write its port, send a request from the host to the first live
# server, switch to the other when that one dies, close a client's connection when none
# is live, and come back to a server that returns; TLS through it verifies against a
# certificate that names 127.0.0.1, as each apiserver's does.
set -u
name=api_forward_test
if [ "$(id -u)" -ne 0 ]; then
  echo "$name: skipped: needs root to create a network namespace"
  exit 0
fi
for tool in ip python3 curl ss; do
  command -v "$tool" >/dev/null || { echo "$name: skipped: '$tool' not found"; exit 0; }
done
src=${SPROUT_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
. "$src/qemu-tests/lib.sh"  # check
ns=sprt-apifwd-$$
work=$(mktemp -d /tmp/sprt-apifwd.XXXXXX)
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  ip netns del "$ns" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

ip netns add "$ns" || exit 1
ip -n "$ns" link set lo up
ip -n "$ns" addr add 198.18.3.11/32 dev lo
ip -n "$ns" addr add 198.18.3.12/32 dev lo

# server I: an HTTP server in the namespace at 198.18.3.1I:6443 whose page says node-I.
server() {
  mkdir -p "$work/node-$1"
  echo "node-$1" > "$work/node-$1/index.html"
  ip netns exec "$ns" python3 -m http.server --bind "198.18.3.1$1" --directory "$work/node-$1" 6443 \
    >/dev/null 2>&1 &
  eval "server_$1=$!"
  pids+=($!)
  local _
  for _ in $(seq 50); do
    ip netns exec "$ns" curl -s -o /dev/null "http://198.18.3.1$1:6443/" && return 0
    sleep 0.1
  done
  echo "server node-$1 did not start" >&2
  return 1
}
server 1 && server 2 || exit 1

python3 "$src/qemu-tests/api-forward.py" "$ns" "$work/port" 198.18.3.11:6443 198.18.3.12:6443 --port 0 \
  >"$work/forward.log" 2>&1 &
fwd=$!
pids+=($fwd)
for _ in $(seq 50); do [ -s "$work/port" ] && break; sleep 0.1; done
port=$(cat "$work/port" 2>/dev/null)
check "the forwarder writes the port it listens on" "$port" '^[1-9][0-9]*$'
listening=$(ss -Hltnp "sport = :$port" | awk '{print $4}')
check "it listens on the host's loopback only" "$listening" '^127\.0\.0\.1:[0-9]+$'
check "nothing listens on that port in the namespace" "$(ip netns exec "$ns" ss -Hltn "sport = :$port" | wc -l)" '^0$'
get() { curl -s --max-time 10 "http://127.0.0.1:$port/"; }
check "a request from the host reaches the first live server" "$(get)" '^node-1$'
kill "$server_1"; wait "$server_1" 2>/dev/null
check "with node-1 dead, the next request reaches node-2" "$(get)" '^node-2$'
check "... and stays there" "$(get)" '^node-2$'
kill "$server_2"; wait "$server_2" 2>/dev/null
t=$SECONDS
out=$(get); rc=$?
check "with none live, the client's connection is closed (curl fails)" "$rc:$out" '^(52|56|7):$'
check "... within seconds" "$((SECONDS - t))" '^[0-9]$'
server 1 || exit 1
check "a server that comes back is found again" "$(get)" '^node-1$'
check "the forwarder logs where it forwards" "$(cat "$work/forward.log")" 'now forwarding to 198\.18\.3\.12:6443'

# TLS through the forwarder, as kubectl talks to an apiserver: a server in the namespace
# whose certificate names 127.0.0.1 (as every apiserver's does, docs/control-plane.md)
# verifies for a client that dials https://127.0.0.1:PORT on the host.
if command -v openssl >/dev/null; then
  ip -n "$ns" addr add 198.18.3.13/32 dev lo
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=kube-apiserver \
    -addext "subjectAltName=DNS:localhost,IP:198.18.3.13,IP:127.0.0.1" \
    -keyout "$work/tls.key" -out "$work/tls.crt" 2>/dev/null
  ip netns exec "$ns" openssl s_server -accept 198.18.3.13:6443 -cert "$work/tls.crt" -key "$work/tls.key" \
    -www -quiet </dev/null >/dev/null 2>&1 &
  pids+=($!)
  python3 "$src/qemu-tests/api-forward.py" "$ns" "$work/tls.port" 198.18.3.13:6443 --port 0 >/dev/null 2>&1 &
  pids+=($!)
  for _ in $(seq 50); do
    [ -s "$work/tls.port" ] && curl -s -o /dev/null --cacert "$work/tls.crt" "https://127.0.0.1:$(cat "$work/tls.port")/" && break
    sleep 0.1
  done
  check "TLS through the forwarder verifies a certificate that names 127.0.0.1" \
    "$(curl -s -o /dev/null -w '%{http_code}' --cacert "$work/tls.crt" "https://127.0.0.1:$(cat "$work/tls.port")/")" '^200$'
fi
echo "$name: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
