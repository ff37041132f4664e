#!/bin/bash
# A/B update on a disk image, on the host (issues 16 and 34; docs/updates.md): the real
# `sprout-firstboot update` against a copy of a built raw image as the node's disk, a
# folder as its ESP and a file as its kernel command line. Builds of the tiny fake
# profile tests/repro/profile.yaml (A) and a copy with another /etc/motd (B), both
# signed with one key, so A's root carries that key as the node's update trust root
# (read from A's root as the node's --root).
# Checks: the running slot's bytes never change; the inactive slot gets B's root and
# verity, its GPT entry B's PARTUUIDs and label (both GPT copies valid); the entry
# sprout-2-b+3.conf boots B's kernel from /sprout/b with the node's own state and
# config partitions; a retry works; bless commits the booted entry; a wrong key, an
# unsigned and a wrongly signed build, a node without a trust root (unless
# --insecure-unsigned), an older build or one of the same serial (unless
# --allow-downgrade), a build of another profile, role or cluster (unless
# --allow-cross-profile), a build that would
# leave less than the floor free (before its download), a build that changes whether
# the state is encrypted (before anything is written), a changed image, a redirect
# to file: or from https to http, a running slot on trial are refused with the reason;
# the raw image of a folder is read once (a FIFO); the gate fails a boot it cannot read.
# Needs root (the build's ESP is read through a read-only loop mount); skipped
# otherwise, saying so.
set -uo pipefail
SPROUT=$(realpath "${SPROUT:?set SPROUT to the sprout binary}")
FIRSTBOOT=$(realpath "${SPROUT_FIRSTBOOT:?set SPROUT_FIRSTBOOT to the sprout-firstboot binary}")
src=$(realpath "${SPROUT_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}")
if [ "$(id -u)" -ne 0 ]; then echo "SKIP update_test: needs root for a read-only loop mount of the build's ESP"; exit 0; fi
if ! command -v mcopy >/dev/null; then echo "SKIP update_test: needs mtools (mcopy)"; exit 0; fi
work=$(mktemp -d /tmp/sprout-update-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0
check() {
  if [[ "$2" =~ $3 ]]; then echo "ok   $1"; passed=$((passed + 1)); else echo "FAIL $1: got '$2', want /$3/"; failed=$((failed + 1)); fi
}
cache=$work/cache
"$SPROUT" base "$src/tests/repro/profile.yaml" --cache-dir "$cache" >/dev/null 2>&1 || { echo "FAIL fake base"; exit 1; }
echo "B's motd" > "$work/motd-b"
cat > "$work/b.yaml" <<EOY
extends: $src/tests/repro/profile.yaml
name: repro
formats: [raw]
files:
  - {path: /etc/motd, source: $work/motd-b, mode: 0644}
EOY
"$SPROUT" keygen -o "$work/key" >/dev/null && "$SPROUT" keygen -o "$work/other" >/dev/null
"$SPROUT" build "$src/tests/repro/profile.yaml" -o "$work/a" --cache-dir "$cache" --format raw --sign "$work/key.key" \
  >"$work/build-a.log" 2>&1 ||
  { tail "$work/build-a.log"; exit 1; }
# B is a later build of A's profile: its serial is above A's (A's is its epoch, the default).
"$SPROUT" build "$work/b.yaml" -o "$work/b" --cache-dir "$cache" --sign "$work/key.key" --serial 1700000001 \
  >"$work/build-b.log" 2>&1 ||
  { tail "$work/build-b.log"; exit 1; }
check "A's manifest records its serial (its epoch), B's the one --serial gave" \
  "$(python3 -c 'import json,sys; print(*(json.load(open(f))["update"]["serial"] for f in sys.argv[1:]))' \
    "$work/a/manifest.json" "$work/b/manifest.json")" '^1700000000 1700000001$'
hash_b=$(python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['rootHash'])" "$work/b/manifest.json")

# part IMAGE N FIELD: a field of partition N (1-based) from sfdisk.
part() { sfdisk --json "$1" | python3 -c "import json,sys; print(json.load(sys.stdin)['partitiontable']['partitions'][$2-1]['$3'])"; }
# range_sum IMAGE N [BYTES]: sha256 of partition N (or its first BYTES).
range_sum() {
  local start size
  start=$(part "$1" "$2" start) size=$(( $(part "$1" "$2" size) * 512 ))
  [ -n "${3:-}" ] && size=$3
  dd if="$1" bs=1M iflag=skip_bytes,count_bytes skip=$((start * 512)) count="$size" status=none | sha256sum | cut -c1-64
}
root_a=$work/root-a
mkdir -p "$root_a/etc/sprout" "$work/no-root"
dd if="$work/a/repro.raw" of="$work/a-root.squashfs" bs=512 skip="$(part "$work/a/repro.raw" 2 start)" \
  count="$(part "$work/a/repro.raw" 2 size)" status=none
rdsquashfs -c /etc/sprout/update.pub "$work/a-root.squashfs" >"$work/root-a/etc/sprout/update.pub" 2>/dev/null
check "A's root carries the signing key's public key as /etc/sprout/update.pub" \
  "$(cmp "$work/root-a/etc/sprout/update.pub" "$work/key.pub" 2>&1 && echo same)" '^same$'
# Unsigned and wrongly signed copies of B: the same manifest without its signature, or
# signed with another key.
cp -a --sparse=always "$work/b" "$work/b-unsigned" && rm "$work/b-unsigned/manifest.json.sig"
cp -a --sparse=always "$work/b" "$work/b-wrong"
openssl pkeyutl -sign -rawin -inkey "$work/other.key" -in "$work/b/manifest.json" -out "$work/b-wrong/manifest.json.sig"
# resigned NAME FIELD VALUE: a copy of B as b-NAME whose manifest's update.FIELD is
# VALUE, its sums and signature made to match (signed with the right key, as a build of
# its own would be).
resigned() {
  cp -a --sparse=always "$work/b" "$work/b-$1"
  python3 - "$work/b-$1/manifest.json" "$2" "$3" <<'PY2'
import json, sys
m = json.load(open(sys.argv[1]))
m["update"][sys.argv[2]] = int(sys.argv[3]) if sys.argv[2] == "serial" else sys.argv[3]
open(sys.argv[1], "w").write(json.dumps(m, indent=2) + "\n")
PY2
  sed -i "s/^[0-9a-f]*  manifest.json\$/$(sha256sum "$work/b-$1/manifest.json" | cut -c1-64)  manifest.json/" "$work/b-$1/sha256sums"
  openssl pkeyutl -sign -rawin -inkey "$work/key.key" -in "$work/b-$1/manifest.json" -out "$work/b-$1/manifest.json.sig"
}
resigned old serial 1699913600   # made before A
resigned same serial 1700000000  # A's serial
resigned other profile other     # for the nodes of another profile
resigned worker role worker      # for workers
resigned elsewhere cluster other-cluster

node=$work/node.raw esp=$work/esp
cp --sparse=always "$work/a/repro.raw" "$node"
esp_start=$(part "$node" 1 start)
mkdir -p "$esp"
MTOOLS_SKIP_CHECK=1 mcopy -s -i "$node@@$((esp_start * 512))" ::/loader ::/sprout "$esp/"
sed -n 's/^options //p' "$esp/loader/entries/sprout-1-a.conf" > "$work/cmdline"
sums_of_others() { for n in 2 3 6 7; do range_sum "$node" "$n"; done | tr '\n' ' '; }
before=$(sums_of_others)
# The node runs A, whose root (--root) holds the trust root.
run() { "$FIRSTBOOT" update "$@" --disk "$node" --esp "$esp" --cmdline "$work/cmdline" --state-dir "$work/state" --root "$root_a"; }
run_bare() { "$FIRSTBOOT" update "$@" --disk "$node" --esp "$esp" --cmdline "$work/cmdline" --state-dir "$work/state"; }

out=$(run apply "$work/b" --key "$work/other.pub" 2>&1)
check "a build signed by another key than --key is refused" "$? $out" '^1 .*signature does not match'
out=$(run apply "$work/b-unsigned" 2>&1)
check "an unsigned build is refused by a node of a signed image" "$? $out" \
  "^1 .*b-unsigned is not signed \(no manifest.json.sig\) and this node trusts only builds signed by $root_a/etc/sprout/update.pub"
out=$(run apply "$work/b-unsigned" --insecure-unsigned 2>&1)
check "... also with --insecure-unsigned" "$? $out" '^1 .*is not signed'
out=$(run apply "$work/b-wrong" 2>&1)
check "a wrongly signed build is refused by a node of a signed image" "$? $out" \
  '^1 .*b-wrong/manifest.json: the signature does not match .*this node trusts only builds signed by'
out=$(run_bare apply "$work/b" --root "$work/no-root" 2>&1)
check "a node without a trust root refuses even a signed build" "$? $out" \
  "^1 .*this node has no update trust root \($work/no-root/etc/sprout/update.pub\).*--insecure-unsigned"
# --insecure-unsigned goes on, warning; the floor (set above the free space) stops it
# before the copy.
out=$(run_bare apply "$work/b-unsigned" --root "$work/no-root" --insecure-unsigned --min-free 1125899906842624 2>&1)
check "... unless --insecure-unsigned, which warns" "$? $out" \
  '^1 .*WARNING: --insecure-unsigned: .*b-unsigned is installed without checking who made it'
check "the space check refuses before the copy, naming the floor" "$out" \
  "not enough room in $work/state: the build needs [0-9.]+ [KMG]iB and 1024.0 TiB must stay free for etcd"
check "... and copied nothing" "$(ls -A "$work/state" 2>/dev/null | tr '\n' ' ')" '^$'
out=$(run apply "$work/b-old" 2>&1)
check "an older build is refused, naming both serials and how to allow it" "$? $out" \
  '^1 .*refusing a downgrade: the new build.s serial is 1699913600, this node.s \(the running build.s\) 1700000000, so the new build is older; .*pass --allow-downgrade to install it anyway'
check "... before anything is written" "$(ls "$esp/loader/entries" | tr '\n' ' ')" '^sprout-1-a.conf $'
out=$(run apply "$work/b-same" 2>&1)
check "a build of the running build's serial is refused" "$? $out" \
  '^1 .*refusing the update: the new build.s serial is 1700000000, this node.s \(the running build.s\) 1700000000: the same serial.*--allow-downgrade'
out=$(run apply "$work/b-other" 2>&1)
check "a build of another profile is refused, naming it and the flag" "$? $out" \
  "^1 .*refusing a build for other nodes: it differs from the running build in its profile 'other' \\(this node.s: 'repro'\\);.*--allow-cross-profile"
out=$(run apply "$work/b-worker" 2>&1)
check "a worker build on a control-plane node is refused" "$? $out" \
  "^1 .*in its role 'worker' \\(this node.s: 'control-plane'\\);"
out=$(run apply "$work/b-elsewhere" 2>&1)
check "a build of another cluster is refused" "$? $out" \
  "^1 .*in its cluster 'other-cluster' \\(this node.s: 'edge'\\);"
check "... before anything is written" "$(ls "$esp/loader/entries" | tr '\n' ' ')" '^sprout-1-a.conf $'
# A node whose command line says its image encrypts the state (sprout.state.encryption=)
# is not updated to B, which does not: the update cannot convert the state.
cp "$work/cmdline" "$work/cmdline.plain"
sed -i 's/$/ sprout.state.encryption=tpm2 sprout.state.without-tpm=refuse/' "$work/cmdline"
gpt_before=$(sfdisk --json "$node")
out=$(run apply "$work/b" 2>&1)
check "a build that changes the state's encryption is refused, naming both" "$? $out" \
  '^1 .*the new image does not encrypt the state partition \(no sprout\.state\.encryption= on its command line\) and this node.s image encrypts its state \(sprout\.state\.encryption=tpm2\); an update cannot convert a node.s state'
# The flags let the serial and identity rules pass: what refuses these is the later
# encryption rule, so nothing is written.
out=$(run apply "$work/b-old" --allow-downgrade 2>&1)
check "--allow-downgrade takes an older build (the next rule refuses it here)" "$? $out" \
  '--allow-downgrade: the new build.s serial is 1699913600.*the new image does not encrypt the state partition'
out=$(run apply "$work/b-other" --allow-cross-profile 2>&1)
check "--allow-cross-profile takes another profile's build (the next rule refuses it here)" "$? $out" \
  "--allow-cross-profile: the new build differs in its profile 'other'.*the new image does not encrypt the state partition"
check "... before anything is written" \
  "$(ls "$esp/loader/entries" | tr '\n' ' ')$([ "$(sfdisk --json "$node")" = "$gpt_before" ] && echo same-gpt)" \
  '^sprout-1-a.conf same-gpt$'
check "... and the copy is removed" "$(ls -A "$work/state" | tr '\n' ' ')" '^$'
mv "$work/cmdline.plain" "$work/cmdline"
# Changed: one byte of B's root; grown: a zero block of B's image made data, more than
# the manifest's dataBytes.
cp -a --sparse=always "$work/b" "$work/b-changed"
printf 'x' | dd of="$work/b-changed/repro.raw" bs=1 seek=$(( $(part "$work/b/repro.raw" 2 start) * 512 + 12345 )) \
  conv=notrunc status=none
out=$(run apply "$work/b-changed" 2>&1)
check "a changed raw image is refused, naming it" "$? $out" '^1 .*repro.raw: sha256 [0-9a-f]+ differs from the manifest'
cp -a --sparse=always "$work/b" "$work/b-grown"
printf 'x' | dd of="$work/b-grown/repro.raw" bs=1 seek=$((3 << 20)) conv=notrunc status=none
out=$(run apply "$work/b-grown" 2>&1)
check "a raw image with more data than its manifest says is refused while it is copied" "$? $out" \
  '^1 .*b-grown/repro.raw is more than the [0-9]+ bytes of data it may hold'
check "... and the copy is removed" "$(ls -A "$work/state" | tr '\n' ' ')" '^$'

# The raw image is read once, into the private copy that was checked: here it is a FIFO
# that gives B's bytes to its first reader and A's to any later one. The feeder opens
# the FIFO again only once apply has said the copy is done (or after 60 s): a writer
# that opened it while the first reader still held it would extend that first read.
mkdir "$work/b-fifo"
cp "$work/b/manifest.json" "$work/b/manifest.json.sig" "$work/b/sha256sums" "$work/b-fifo/"
mkfifo "$work/b-fifo/repro.raw"
: >"$work/fifo.log"
timeout 300 bash -c 'cat "$1" >"$3"
  for _ in $(seq 600); do grep -q "] copied " "$4" && break; sleep 0.1; done
  for _ in 1 2 3; do cat "$2" >"$3" 2>/dev/null; done' _ \
  "$work/b/repro.raw" "$work/a/repro.raw" "$work/b-fifo/repro.raw" "$work/fifo.log" &
feeder=$!
timeout 240 "$FIRSTBOOT" update apply "$work/b-fifo" --disk "$node" --esp "$esp" --cmdline "$work/cmdline" \
  --state-dir "$work/state" --root "$root_a" >"$work/fifo.log" 2>&1
rc=$?
out=$(cat "$work/fifo.log")
kill "$feeder" 2>/dev/null
echo "$out" | sed 's/^/   /'
check "apply A -> B (its raw image given as a FIFO, which can be read only once)" "$rc" '^0$'
check "apply checked the signature with the trust root from A's root" "$out" \
  "signature of manifest.json checked with $root_a/etc/sprout/update.pub"
check "apply copied the raw image into the state partition first" "$out" \
  "copying $work/b-fifo/repro.raw into $work/state/update-download"
check "the copy is removed once the update is written" "$(ls -A "$work/state" | tr '\n' ' ')" '^update.json $'
after=$(sums_of_others)
check "the running slot, config and state are unchanged (partitions 2, 3, 6, 7)" \
  "$([ "$after" = "$before" ] && echo same || echo "changed: $before -> $after")" '^same$'
check "sfdisk finds both GPT copies valid" "$(sfdisk --verify "$node" 2>&1)" 'No errors detected'
check "slot b's root partition: label and B's PARTUUID" "$(part "$node" 4 name) $(part "$node" 4 uuid)" \
  "^sprout-root-b $(part "$work/b/repro.raw" 2 uuid)$"
check "slot b's verity partition: label and B's PARTUUID" "$(part "$node" 5 name) $(part "$node" 5 uuid)" \
  "^sprout-root-b-verity $(part "$work/b/repro.raw" 3 uuid)$"
data=$(python3 - "$work/b/repro.raw" "$(part "$work/b/repro.raw" 3 start)" <<'PY'
import struct, sys
f = open(sys.argv[1], "rb"); f.seek(int(sys.argv[2]) * 512); sb = f.read(512)
print(struct.unpack_from("<I", sb, 64)[0] * struct.unpack_from("<Q", sb, 72)[0])
PY
)
check "slot b holds B's root (verity's $data data bytes)" "$(range_sum "$node" 4 "$data")" \
  "^$(range_sum "$work/b/repro.raw" 2 "$data")$"
check "slot b holds B's verity superblock and tree" "$(range_sum "$node" 5 8192)" "^$(range_sum "$work/b/repro.raw" 3 8192)$"
entry=$esp/loader/entries/sprout-2-b+3.conf
check "the new entry is counted: sprout-2-b+3.conf" "$(ls "$esp/loader/entries" | tr '\n' ' ')" '^sprout-1-a.conf sprout-2-b\+3.conf $'
check "the new entry boots B's kernel and initrd from /sprout/b" "$(grep -E '^(linux|initrd)' "$entry" | tr '\n' ' ')" \
  '^linux /sprout/b/vmlinuz initrd /sprout/b/initrd.img $'
state=$(grep -o 'sprout.state=[^ ]*' "$work/cmdline") config=$(grep -o 'sprout.config=[^ ]*' "$work/cmdline")
check "the new entry keeps this disk's state and config partitions, with B's root hash" \
  "$(grep -c -e "$state" -e "$config" "$entry") $(grep -o "sprout.roothash=$hash_b" "$entry")" "^1 sprout.roothash=$hash_b$"
MTOOLS_SKIP_CHECK=1 mcopy -o -i "$work/b/repro.raw@@$(( $(part "$work/b/repro.raw" 1 start) * 512 ))" ::/sprout/vmlinuz "$work/b-vmlinuz"
check "B's kernel is in /sprout/b" "$(cmp "$esp/sprout/b/vmlinuz" "$work/b-vmlinuz" && echo same)" '^same$'
check "A's kernel is still in /sprout" "$(ls "$esp/sprout" | tr '\n' ' ')" 'vmlinuz'
check "no temporary files are left on the ESP" "$(find "$esp" -name '*.tmp.*' | wc -l)" '^0$'

out=$(run apply "$work/b" 2>&1)
# Generations never repeat: the replaced trial entry's number is not used again.
check "the update can be run again before the reboot (the trial entry is replaced by the next generation)" \
  "$? $(ls "$esp/loader/entries" | tr '\n' ' ')" '^0 sprout-1-a.conf sprout-3-b\+3.conf $'

# Boot B as systemd-boot would: the counter goes down before the kernel starts.
mv "$esp/loader/entries/sprout-3-b+3.conf" "$esp/loader/entries/sprout-3-b+2-1.conf"
sed -n 's/^options //p' "$esp/loader/entries/sprout-3-b+2-1.conf" > "$work/cmdline"
out=$(run apply "$work/a" --allow-downgrade 2>&1)
check "no update while the running slot is on trial" "$? $out" '^1 .*still on trial'
out=$(run status 2>&1)
echo "$out" | sed 's/^/   /'
check "status: slot b booted, on trial" "$out" 'booted: root hash [0-9a-f]{12}\.\.\., entry sprout-3-b\+2-1\.conf \(trial: 2 tries left, 1 done\)'
out=$(run bless 2>&1)
check "bless commits the booted entry" "$? $out" '^0 update: committed slot b: sprout-3-b\+2-1\.conf -> sprout-3-b\.conf'
out=$(run status 2>&1)
check "status: slot b committed" "$out" 'entry sprout-3-b\.conf \(committed\)'
out=$("$FIRSTBOOT" status --state-dir "$work/state" 2>&1)
check "sprout-firstboot status shows the slots bless recorded" "$out" 'entry sprout-3-b\.conf: committed, booted.*as seen by `sprout-firstboot update (bless|status)`'
out=$(run bless 2>&1)
check "bless again: nothing to commit" "$? $out" '^0 .*nothing to commit'

# The gate fails closed: a boot whose disk it cannot read is not committed.
out=$("$FIRSTBOOT" update gate --disk "$work/no-such-disk" --esp "$esp" --cmdline "$work/cmdline" \
  --state-dir "$work/state" 2>&1)
check "the gate fails a boot it cannot judge" "$? $out" '^1 .*no-such-disk.*this boot cannot be judged, so it is not committed'

# The same over HTTP, from a web server on loopback that serves the build folders (the
# way a site serves a build on its network): B is committed and running, so A goes into
# slot a.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# serve LOG COMMAND...: runs a server on loopback for the rest of the test, its output in
# LOG; answering URL [CURL-FLAGS...]: waits up to 5 s for URL to answer.
servers=()
trap 'kill "${servers[@]}" 2>/dev/null; rm -rf "$work"' EXIT
serve() {
  local log=$1; shift
  "$@" >"$log" 2>&1 &
  servers+=($!)
}
answering() { for _ in $(seq 50); do curl -s "${@:2}" -o /dev/null "$1" && return 0; sleep 0.1; done; return 1; }
port=$(free_port)
serve "$work/http.log" python3 -m http.server --bind 127.0.0.1 --directory "$work" "$port"
answering "http://127.0.0.1:$port/a/manifest.json" -f
# The node runs B now, so B's copies have its own serial: --allow-downgrade lets them
# reach the checks these lines are about.
out=$(run apply "http://127.0.0.1:$port/missing" 2>&1)
check "a URL with no build is refused, naming the file and the answer" "$? $out" \
  "^1 .*cannot fetch http://127\.0\.0\.1:$port/missing/manifest\.json: the server answered HTTP 404"
out=$(run apply "http://127.0.0.1:$port/b-changed/" --allow-downgrade 2>&1)
check "a changed raw image served over HTTP is refused after its download" "$? $out" '^1 .*repro.raw: sha256 [0-9a-f]+ differs from the manifest'
check "a server that ignores range requests (python's http.server) gets one whole download" \
  "$(grep -o 'downloaded [0-9]* MiB ([0-9]* MiB of data), whole: the server does not answer range requests' <<<"$out")" '^downloaded'
check "the refused download is removed from the state partition" "$(ls -A "$work/state" | tr '\n' ' ')" '^update.json $'
out=$(run apply "http://127.0.0.1:$port/b/" --allow-downgrade --min-free 1125899906842624 2>&1)
check "a build that would leave less than the floor free is refused before its download" "$? $out" \
  '^1 .*not enough room in .*must stay free for etcd'
check "... and its raw image was never requested" "$(grep -c 'GET /b/repro.raw' "$work/http.log")" '^0$'

# Redirects: a server on loopback that redirects to file:, and a TLS server on loopback
# (its own CA) that redirects to plain http.
cat >"$work/redirect.py" <<'PY2'
import http.server, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(302)
        self.send_header("Location", sys.argv[2] + self.path.split("/", 2)[2])
        self.end_headers()
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H)
if len(sys.argv) > 3:
    c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    c.load_cert_chain(sys.argv[3], sys.argv[4])
    s.socket = c.wrap_socket(s.socket, server_side=True)
s.serve_forever()
PY2
rport=$(free_port) tport=$(free_port)
serve "$work/redirect.log" python3 "$work/redirect.py" "$rport" "file://$work/b/"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=127.0.0.1 \
  -addext subjectAltName=IP:127.0.0.1 -keyout "$work/tls.key" -out "$work/tls.crt" 2>/dev/null
serve "$work/tls.log" python3 "$work/redirect.py" "$tport" "http://127.0.0.1:$port/b/" "$work/tls.crt" "$work/tls.key"
answering "http://127.0.0.1:$rport/x/"
answering "https://127.0.0.1:$tport/x/" -k
out=$(run apply "http://127.0.0.1:$rport/x/" 2>&1)
check "a redirect to file: is refused" "$? $out" \
  "^1 .*cannot fetch http://127\.0\.0\.1:$rport/x/manifest\.json: it redirects to file://$work/b/manifest\.json, which is refused: a redirect may not leave https, nor go to file:"
plain_gets=$(grep -c 'GET /b/manifest.json' "$work/http.log")
out=$(run apply "https://127.0.0.1:$tport/b/" --ca-file "$work/tls.crt" 2>&1)
check "a redirect from https to http is refused" "$? $out" \
  "^1 .*cannot fetch https://127\.0\.0\.1:$tport/b/manifest\.json: it redirects to http://127\.0\.0\.1:$port/b/manifest\.json, which is refused"
check "... before anything was fetched over http" "$(grep -c 'GET /b/manifest.json' "$work/http.log")" "^$plain_gets\$"

# A server that answers range requests (scripts/serve-builds): the node fetches only the
# extents of the raw image that hold data (manifest.json's dataExtents), and the sha256
# of the whole image, zeros between them, still decides.
sport=$(free_port)
serve "$work/ranges.log" "$src/scripts/serve-builds" "$work" --bind 127.0.0.1 --port "$sport"
answering "http://127.0.0.1:$sport/a/manifest.json" -f
out=$(run apply "http://127.0.0.1:$sport/b-changed/" --allow-downgrade 2>&1)
check "a changed raw image fetched in ranges is refused: the whole image's sha256 decides" "$? $out" \
  '^1 .*range requests.*repro.raw: sha256 [0-9a-f]+ differs from the manifest'
out=$(run apply "http://127.0.0.1:$sport/a/" 2>&1)
check "B -> A is a downgrade: refused over HTTP too" "$? $out" '^1 .*refusing a downgrade: the new build.s serial is 1700000000, this node.s \(the running build.s\) 1700000001'
out=$(run apply "http://127.0.0.1:$sport/a/" --allow-downgrade 2>&1)
rc=$?
echo "$out" | sed 's/^/   /'
check "apply B -> A over HTTP (--allow-downgrade)" "$rc" '^0$'
check "apply logged the serials and the profile compared" "$out" \
  "--allow-downgrade: the new build.s serial is 1700000000, this node.s \\(the running build.s\\) 1700000001.*"
check "apply downloaded the raw image into the state partition" "$out" "downloading http://127\.0\.0\.1:$sport/a/repro\.raw into $work/state/update-download"
extents=$(python3 -c 'import json,sys; print(len([o for o in json.load(open(sys.argv[1]))["outputs"] if o["file"] == "repro.raw"][0]["dataExtents"]))' "$work/a/manifest.json")
check "the raw image came in one range request per extent of the manifest's map" \
  "$(grep -o 'in [0-9]* range requests' <<<"$out") $(grep -c '^GET /a/repro.raw bytes=[0-9]*-[0-9]* 206$' "$work/ranges.log") $(grep -c '^GET /a/repro.raw - ' "$work/ranges.log")" \
  "^in $extents range requests $extents 0\$"
check "the ranges fetched are fewer bytes than the image" "$(grep -o 'downloaded [0-9]* MiB in [0-9]* range requests, the extents of the [0-9]* MiB image' <<<"$out" |
  awk '{ print ($2 < $9) ? "fewer" : $2 " of " $9 }')" '^fewer$'
check "the download is removed once the update is written" "$(ls -A "$work/state" | tr '\n' ' ')" '^update.json $'
data_a=$(python3 - "$work/a/repro.raw" "$(part "$work/a/repro.raw" 3 start)" <<'PY'
import struct, sys
f = open(sys.argv[1], "rb"); f.seek(int(sys.argv[2]) * 512); sb = f.read(512)
print(struct.unpack_from("<I", sb, 64)[0] * struct.unpack_from("<Q", sb, 72)[0])
PY
)
check "slot a holds A's root, fetched over HTTP" "$(range_sum "$node" 2 "$data_a")" "^$(range_sum "$work/a/repro.raw" 2 "$data_a")$"
check "slot a's root partition: label and A's PARTUUID" "$(part "$node" 2 name) $(part "$node" 2 uuid)" \
  "^sprout-root-a $(part "$work/a/repro.raw" 2 uuid)$"
check "the new entry for slot a is counted" "$(ls "$esp/loader/entries" | tr '\n' ' ')" '^sprout-3-b.conf sprout-4-a\+3.conf $'

echo "update_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
