#!/bin/bash
# scripts/serve-builds serves a build and nothing else (issue 54, N5): beside a build
# folder sit what a user's out/ folder holds after the README's steps (the harness's
# admin.conf, a personalized image, a signing key, a symbolic link to /etc), and only
# the files the build's own sha256sums names, that sha256sums and the manifest's
# signature answer; every other name, every folder (no listing) and every link is 404.
# A range request still answers 206 with the bytes asked for. Loopback only.
set -u
name=serve_builds_test
src=${SPROUT_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
. "$src/tests/lib/checks.sh"
tests_require "python3 curl" python3 curl
work=$(mktemp -d /tmp/sprt-serve.XXXXXX)
pid=""
cleanup() {
  [ -z "$pid" ] || kill "$pid" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$work"
  tests_end
}
trap cleanup EXIT

# A build folder as `sprout build` writes it (names in sha256sums, the signature beside
# them), one nested under out/, and what else a user's out/ holds.
out=$work/out
mkdir -p "$out/default/pxe" "$out/other"
head -c 4096 /dev/urandom >"$out/default/default.raw"
echo '{"outputs":[]}' >"$out/default/manifest.json"
echo '#!ipxe' >"$out/default/pxe/boot.ipxe"
(cd "$out/default" && sha256sum default.raw manifest.json pxe/boot.ipxe >sha256sums)
echo signature >"$out/default/manifest.json.sig"
echo 'apiVersion: v1  # admin credentials' >"$out/admin.conf"
echo 'apiVersion: v1' >"$out/default/admin.conf"
echo key >"$out/default/update-key.key"
cp "$out/default/default.raw" "$out/default/node-1.raw"  # a personalized copy: not in sha256sums
ln -s /etc "$out/default/etc"
ln -s default.raw "$out/default/alias.raw"
echo x >"$out/other/file"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 "$src/scripts/serve-builds" "$out" --bind 127.0.0.1 --port "$port" 2>"$work/log" &
pid=$!
for _ in $(seq 50); do
  curl -sf -o /dev/null "http://127.0.0.1:$port/default/sha256sums" && break
  sleep 0.1
done
status() { curl -s -o /dev/null -w '%{http_code}' --path-as-is "http://127.0.0.1:$port/$1"; }
for f in default/default.raw default/manifest.json default/pxe/boot.ipxe default/sha256sums default/manifest.json.sig; do
  s=$(status "$f")
  if [ "$s" = 200 ]; then ok "a build's own file is served: /$f"; else bad "/$f answered $s, want 200"; fi
done
for f in admin.conf default/admin.conf default/update-key.key default/node-1.raw default/etc/passwd default/alias.raw \
  other/file default/ default default/pxe/ "" default/../admin.conf default/%2e%2e/admin.conf; do
  s=$(status "$f")
  if [ "$s" = 404 ]; then ok "not a build's file, answered 404: /$f"; else bad "/$f answered $s, want 404"; fi
done
got=$(curl -s -r 100-199 "http://127.0.0.1:$port/default/default.raw" | sha256sum | cut -d' ' -f1)
want=$(tail -c +101 "$out/default/default.raw" | head -c 100 | sha256sum | cut -d' ' -f1)
if [ "$got" = "$want" ]; then ok "a range request answers the bytes asked for"; else bad "the range 100-199 differs"; fi
if grep -q '^GET /default/default.raw bytes=100-199 206$' "$work/log"; then
  ok "the range was answered 206 and logged"
else
  bad "no 206 line for the range in the log: $(tail -n 3 "$work/log")"
fi
