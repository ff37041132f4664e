#!/bin/bash
# sprout's OCI client against Debian's docker-registry on 127.0.0.1, over TLS from a
# CA this test makes: basic auth (htpasswd) on one registry, token auth (a tiny token
# server, tests/oci/token_server.py) on another. Checks digests, platform selection in
# a manifest list, wrong credentials, a corrupted blob, a connection cut mid-blob
# (tests/oci/cut_proxy.py), --offline with warm and cold caches, and local sources.
set -uo pipefail
SPROUT=$(realpath "${SPROUT:?set SPROUT to the sprout binary}")
src=${SPROUT_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
for tool in docker-registry skopeo htpasswd openssl python3; do
  command -v $tool >/dev/null || { echo "SKIP: $tool is not installed (scripts/install-deps)"; exit 77; }
done
work=$(mktemp -d /tmp/sprout-oci.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
passed=0 failed=0
check() {  # check NAME ACTUAL EXPECTED-REGEX
  if [[ "$2" =~ $3 ]]; then echo "ok   $1"; passed=$((passed + 1));
  else echo "FAIL $1: got '$2', want /$3/"; failed=$((failed + 1)); fi
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0; sleep 0.1; done; return 1; }

# --- a CA, a server certificate for 127.0.0.1, a token-signing certificate
cd "$work"
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj /CN=sprout-test-ca 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=127.0.0.1 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >san.ext
openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 2 -extfile san.ext 2>/dev/null
openssl req -x509 -newkey rsa:2048 -nodes -keyout sign.key -out sign.crt -days 2 -subj /CN=sprout-token 2>/dev/null
mkdir -p certs && cp ca.crt certs/ca.crt
htpasswd -Bbn alice s3cret >htpasswd 2>/dev/null

# --- the images: etcd and busybox from the recipes, and a two-platform manifest list
SPROUT_IMAGE_REF=etcd "$src/images/etcd/build.sh" "$work/src" >etcd.digest
SPROUT_IMAGE_REF=busybox "$src/images/busybox/build.sh" "$work/src" >busybox.digest
SPROUT_IMAGE_REF=bb-arm64 SPROUT_IMAGE_ARCH=arm64 "$src/images/busybox/build.sh" "$work/src" >arm.digest
etcd_digest=$(awk '{print $2}' etcd.digest)
bb_digest=$(awk '{print $2}' busybox.digest)
arm_digest=$(awk '{print $2}' arm.digest)
python3 - "$work/src" <<'PY' >multi.digest
import hashlib, json, os, sys
lay = sys.argv[1]
idx = json.load(open(os.path.join(lay, "index.json")))
by = {m["annotations"]["org.opencontainers.image.ref.name"]: m for m in idx["manifests"]}
entries = []
for name, arch in (("busybox", "amd64"), ("bb-arm64", "arm64")):
    m = dict(by[name]); m.pop("annotations"); m["platform"] = {"os": "linux", "architecture": arch}
    entries.append(m)
doc = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                  "manifests": entries}).encode()
d = hashlib.sha256(doc).hexdigest()
open(os.path.join(lay, "blobs", "sha256", d), "wb").write(doc)
idx["manifests"].append({"mediaType": "application/vnd.oci.image.index.v1+json", "digest": "sha256:" + d,
                         "size": len(doc), "annotations": {"org.opencontainers.image.ref.name": "multi"}})
json.dump(idx, open(os.path.join(lay, "index.json"), "w"))
print("multi sha256:" + d)
PY
multi_digest=$(awk '{print $2}' multi.digest)

# --- registry B (basic auth) and registry T (token auth)
start_registry() {  # NAME PORT AUTH-YAML
  mkdir -p "$work/$1-data"
  cat >"$work/$1.yml" <<YAML
version: 0.1
log: {level: warn, accesslog: {disabled: true}}
storage: {filesystem: {rootdirectory: $work/$1-data}, delete: {enabled: true}}
http:
  addr: 127.0.0.1:$2
  tls: {certificate: $work/server.crt, key: $work/server.key}
auth:
$3
YAML
  docker-registry serve "$work/$1.yml" >"$work/$1.log" 2>&1 &
  pids+=($!)
  wait_port "$2" || { echo "FAIL registry $1 did not start:"; cat "$work/$1.log"; exit 1; }
}
pb=$(free_port); pt=$(free_port); ptok=$(free_port)
start_registry basic "$pb" "  htpasswd: {realm: sprout-test, path: $work/htpasswd}"
python3 "$src/tests/oci/token_server.py" "$ptok" server.crt server.key sign.crt sign.key alice s3cret sprout-test sprout-issuer 2>token.log &
pids+=($!)
wait_port "$ptok" || { echo "FAIL token server did not start"; cat token.log; exit 1; }
start_registry token "$pt" "  token: {realm: https://127.0.0.1:$ptok/token, service: sprout-test, issuer: sprout-issuer, rootcertbundle: $work/sign.crt}"

seed() {  # SRC-NAME PORT DEST [--all]
  skopeo copy -q ${4:-} --dest-cert-dir certs --dest-creds alice:s3cret "oci:$work/src:$1" "docker://127.0.0.1:$2/$3" 2>&1
}
for port in "$pb" "$pt"; do
  out=$(seed etcd "$port" sprout/etcd:3.4) || echo "seed etcd: $out"
  out=$(seed busybox "$port" sprout/busybox:1.35) || echo "seed busybox: $out"
  out=$(seed multi "$port" sprout/multi:1 --all) || echo "seed multi: $out"
done

printf '{"auths":{"127.0.0.1:%s":{"auth":"%s"},"https://127.0.0.1:%s":{"username":"alice","password":"s3cret"}}}\n' \
  "$pb" "$(printf alice:s3cret | base64)" "$pt" >creds.json
printf '{"auths":{"127.0.0.1:%s":{"auth":"%s"},"127.0.0.1:%s":{"auth":"%s"}}}\n' \
  "$pb" "$(printf alice:wrong | base64)" "$pt" "$(printf alice:wrong | base64)" >wrong.json
profile() {  # FILE PORT CREDS IMAGE-LINES...
  local f=$1 port=$2 creds=$3; shift 3
  { echo "name: t"; echo "base: ."; echo "images:"
    for i in "$@"; do
      echo "  - ref: 127.0.0.1:$port/${i%%|*}"; echo "    credentials: $creds"
      [[ "$i" == *"|"* ]] && echo "    platform: ${i#*|}"
    done; } >"$f"
}

# --- basic auth over TLS: digests as built
profile basic.yaml "$pb" creds.json sprout/etcd:3.4 sprout/busybox:1.35
out=$("$SPROUT" pull basic.yaml --cache-dir "$work/c1" --ca-bundle ca.crt 2>&1); rc=$?
check "basic auth: pull exits 0" "$rc" '^0$'
check "basic auth: etcd digest as built" "$out" "sprout/etcd:3.4 $etcd_digest"
check "basic auth: busybox digest as built" "$out" "sprout/busybox:1.35 $bb_digest"
ok=1; for f in "$work"/c1/oci/blobs/sha256/*; do [ "$(sha256sum <"$f" | cut -c1-64)" = "$(basename "$f")" ] || ok=0; done
check "basic auth: every cached blob hashes to its name" "$ok" '^1$'
check "basic auth: the shared base layer is cached once" \
  "$(ls "$work/c1/oci/blobs/sha256" | wc -l)" '^7$'

# --- progress on a TTY: a bar per image with bytes and rate, and a total
if command -v script >/dev/null; then
  out=$(script -qc "'$SPROUT' pull '$work/basic.yaml' --cache-dir '$work/c1tty' --ca-bundle '$work/ca.crt'" /dev/null 2>&1 | tr '\r' '\n')
  check "tty progress: a bar for each image with bytes and rate" \
    "$(grep -cE 'sprout/(etcd|busybox):[0-9.]+ +\[#+\] +[0-9.]+ [KM]iB / [0-9.]+ [KM]iB +[0-9.]+ [KMG]?i?B/s' <<<"$out")" '^[1-9]'
  check "tty progress: a total line" "$out" 'total +\[#+\] +[0-9.]+ MiB / [0-9.]+ MiB'
else
  echo "skip tty progress: no script(1)"
fi

# --- token auth over TLS
profile token.yaml "$pt" creds.json sprout/etcd:3.4
out=$("$SPROUT" pull token.yaml --cache-dir "$work/c2" --ca-bundle ca.crt 2>&1); rc=$?
check "token auth: pull exits 0" "$rc" '^0$'
check "token auth: etcd digest as built" "$out" "sprout/etcd:3.4 $etcd_digest"
check "token auth: the token server was asked" "$(grep -c 'GET /token' token.log)" '^[1-9]'

# --- without the CA bundle, TLS verification fails clearly
out=$("$SPROUT" pull token.yaml --cache-dir "$work/c2b" 2>&1); rc=$?
check "no CA bundle: refused" "$rc:$out" '^1:.*(certificate|SSL).*--ca-bundle'

# --- manifest list: platform selection
profile multi.yaml "$pb" creds.json "sprout/multi:1|linux/arm64" 
out=$("$SPROUT" pull multi.yaml --cache-dir "$work/c3" --ca-bundle ca.crt 2>&1); rc=$?
check "manifest list: pull exits 0" "$rc" '^0$'
check "manifest list: tag resolves to the index digest" "$out" "sprout/multi:1 $multi_digest"
check "manifest list: linux/arm64 picks the arm64 manifest" "$out" "linux/arm64: $arm_digest"
profile multi2.yaml "$pb" creds.json "sprout/multi:1|linux/amd64"
out=$("$SPROUT" pull multi2.yaml --cache-dir "$work/c3" --ca-bundle ca.crt 2>&1)
check "manifest list: linux/amd64 picks the amd64 manifest" "$out" "linux/amd64: $bb_digest"
# An entry without a platform is taken for the profile's arch (docs/arm64.md):
# `--arch arm64` (or `arch: arm64`) resolves the index to its arm64 manifest.
profile multi4.yaml "$pb" creds.json "sprout/multi:1"
out=$("$SPROUT" pull multi4.yaml --arch arm64 --cache-dir "$work/c3" --ca-bundle ca.crt 2>&1)
check "manifest list: --arch arm64 picks the arm64 manifest" "$out" "linux/arm64: $arm_digest"
{ cat multi4.yaml; echo "arch: arm64"; } >multi5.yaml
out=$("$SPROUT" pull multi5.yaml --cache-dir "$work/c3" --ca-bundle ca.crt 2>&1)
check "manifest list: arch: arm64 in the profile picks the arm64 manifest" "$out" "linux/arm64: $arm_digest"
out=$("$SPROUT" pull multi4.yaml --cache-dir "$work/c3" --ca-bundle ca.crt 2>&1)
check "manifest list: no arch picks the amd64 manifest" "$out" "linux/amd64: $bb_digest"
profile multi3.yaml "$pb" creds.json "sprout/multi:1|linux/s390x"
out=$("$SPROUT" pull multi3.yaml --cache-dir "$work/c3" --ca-bundle ca.crt 2>&1); rc=$?
check "manifest list: a missing platform is named with the offer" "$rc:$out" '^1:.*no image for linux/s390x; it offers linux/amd64, linux/arm64'

# --- wrong credentials
profile wrong.yaml "$pb" wrong.json sprout/etcd:3.4
out=$("$SPROUT" pull wrong.yaml --cache-dir "$work/c4" --ca-bundle ca.crt 2>&1); rc=$?
echo "     basic, wrong password: $out"
check "wrong credentials (basic): clear error" "$rc:$out" "^1:.*refused the credentials for 127.0.0.1:$pb/sprout/etcd .*user 'alice'"
profile wrongt.yaml "$pt" wrong.json sprout/etcd:3.4
out=$("$SPROUT" pull wrongt.yaml --cache-dir "$work/c4" --ca-bundle ca.crt 2>&1); rc=$?
echo "     token, wrong password: $out"
check "wrong credentials (token): clear error" "$rc:$out" "^1:.*token server .* refused user 'alice'"
check "wrong credentials: nothing cached" "$(ls "$work/c4/oci/blobs/sha256" 2>/dev/null | wc -l)" '^0$'

# --- network loss in the middle of a blob: resumed with a Range request
pp=$(free_port)
python3 "$src/tests/oci/cut_proxy.py" "$pp" "$pb" 1500000 2 >proxy.log 2>&1 &
pids+=($!)
wait_port "$pp"
sed "s/127.0.0.1:$pb/127.0.0.1:$pp/" creds.json >creds-proxy.json
profile cut.yaml "$pp" creds-proxy.json sprout/etcd:3.4
out=$("$SPROUT" pull cut.yaml --cache-dir "$work/c5" --ca-bundle ca.crt --parallel 1 2>&1); rc=$?
check "cut mid-blob: the proxy cut a connection" "$(cat proxy.log)" 'cut connection [0-9]+ after 1500000 bytes'
check "cut mid-blob: sprout resumed the blob" "$out" 'resuming blob sha256:[0-9a-f]{64} of .* at byte [1-9]'
check "cut mid-blob: pull exits 0 with the right digest" "$rc:$out" "^0:.*sprout/etcd:3.4 $etcd_digest"

# --- offline: warm cache works, cold cache names the image
out=$("$SPROUT" pull basic.yaml --cache-dir "$work/c1" --offline 2>&1); rc=$?
check "offline, warm cache: exits 0 with the digests" "$rc:$out" "^0:.*sprout/etcd:3.4 $etcd_digest"
out=$("$SPROUT" pull basic.yaml --cache-dir "$work/c6" --offline 2>&1); rc=$?
check "offline, cold cache: fails naming the image" "$rc:$out" "^1:.*image 127.0.0.1:$pb/sprout/etcd:3.4 is not in the cache .* --offline"

# --- local sources: OCI layout, oci-archive, docker-archive
skopeo copy -q "oci:$work/src:busybox" "oci-archive:$work/bb-oci.tar:busybox" 2>&1
skopeo copy -q "oci:$work/src:busybox" "docker-archive:$work/bb-docker.tar:localhost/bb:1" 2>&1
cat >local.yaml <<YAML
name: t
base: .
images:
  - {ref: localhost/sprout/etcd:3.4, source: "oci:src"}
  - {ref: localhost/sprout/busybox:1.35, source: "oci-archive:bb-oci.tar"}
  - {ref: localhost/bb:1, source: "docker-archive:bb-docker.tar"}
YAML
sed -i 's|oci:src|oci:src|' local.yaml
# The layout names images by short name; sprout matches the tag or the full reference.
python3 - "$work/src" <<'PY'
import json, os, sys
p = os.path.join(sys.argv[1], "index.json"); idx = json.load(open(p))
for m in idx["manifests"]:
    if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == "etcd":
        m["annotations"]["org.opencontainers.image.ref.name"] = "localhost/sprout/etcd:3.4"
json.dump(idx, open(p, "w"))
PY
out=$("$SPROUT" pull local.yaml --cache-dir "$work/c7" --offline --layout "$work/layout" 2>&1); rc=$?
check "local sources: pull --offline exits 0" "$rc" '^0$'
check "local sources: OCI layout keeps the digest" "$out" "localhost/sprout/etcd:3.4 $etcd_digest"
check "local sources: oci-archive keeps the digest" "$out" "localhost/sprout/busybox:1.35 $bb_digest"
check "local sources: docker-archive imported" "$out" 'localhost/bb:1 sha256:[0-9a-f]{64}'
out=$(skopeo inspect --raw "oci:$work/layout:localhost/sprout/etcd:3.4" 2>&1 | sha256sum | cut -c1-64)
check "layout: skopeo reads the written layout" "sha256:$out" "^$etcd_digest$"

# --- build: the warm cache builds with --offline once every registry is gone; the
# root holds one OCI layout with the shared layer once; a cold cache fails clearly.
base="$work/fakebase"
mkdir -p "$base/boot" "$base/usr/lib/systemd/boot/efi" "$base/etc"
head -c 300000 /dev/urandom >"$base/boot/vmlinuz-6.1.0-99-amd64"
head -c 200001 /dev/urandom >"$base/boot/initrd.img-6.1.0-99-amd64"
head -c 50000 /dev/urandom >"$base/usr/lib/systemd/boot/efi/systemd-bootx64.efi"
echo 'ID=debian' >"$base/etc/os-release"
mkdir -p "$work/bp"
sed -e 's/^name: t/name: imgs/' -e "s|^base: .|base: $base|" -e "s|credentials: |credentials: $work/|" basic.yaml >"$work/bp/build.yaml"
printf '  - {ref: localhost/bb:1, source: "docker-archive:%s"}\n' "$work/bb-docker.tar" >>"$work/bp/build.yaml"
for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
wait 2>/dev/null
pids=()
out=$("$SPROUT" build "$work/bp/build.yaml" -o "$work/out" --cache-dir "$work/c1" --offline 2>&1); rc=$?
check "offline build, warm cache, registries stopped: exits 0" "$rc" '^0$'
[ "$rc" -eq 0 ] || echo "$out" | tail -5
m=$(python3 -c 'import json,sys; print(" ".join(i["reference"]+"="+i["digest"] for i in json.load(open(sys.argv[1]))["images"]))' "$work/out/manifest.json" 2>&1)
check "offline build: manifest.json lists reference and digest" "$m" "127.0.0.1:$pb/sprout/etcd:3.4=$etcd_digest 127.0.0.1:$pb/sprout/busybox:1.35=$bb_digest localhost/bb:1=sha256:"
read -r start size < <(sfdisk --json "$work/out/imgs.raw" | python3 -c "import json,sys; p=json.load(sys.stdin)['partitiontable']['partitions'][1]; print(p['start'], p['size'])")
dd if="$work/out/imgs.raw" of="$work/root.sqfs" bs=512 skip="$start" count="$size" status=none
listing=$(rdsquashfs -l /usr/share/sprout/images/blobs/sha256 "$work/root.sqfs" 2>&1)
base_layer=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["layers"][0]["digest"][7:])' "$work/src/blobs/sha256/${etcd_digest#sha256:}")
check "in the root: the layer etcd and busybox share is stored once" "$(grep -c "$base_layer" <<<"$listing")" '^1$'
rdsquashfs -c /usr/share/sprout/images/index.json "$work/root.sqfs" >"$work/index.json" 2>/dev/null
check "in the root: index.json names every image" "$(grep -o 'ref.name": *"[^"]*' "$work/index.json" | wc -l)" '^3$'
check "in the root: the boot-time import unit is enabled" \
  "$(rdsquashfs -l /etc/systemd/system/multi-user.target.wants "$work/root.sqfs" 2>&1)" 'sprout-images.service'
out=$("$SPROUT" build "$work/bp/build.yaml" -o "$work/out2" --cache-dir "$work/c-cold" --offline 2>&1); rc=$?
echo "     offline build, cold cache: $(tail -1 <<<"$out")"
check "offline build, cold cache: fails naming the image" "$rc:$out" "^1:.*image 127.0.0.1:$pb/sprout/etcd:3.4 is not in the cache"
check "offline build, cold cache: leaves no image" "$(ls "$work/out2" 2>/dev/null | grep -c raw)" '^0$'
start_registry basic "$pb" "  htpasswd: {realm: sprout-test, path: $work/htpasswd}"

# --- a corrupted blob is refused and nothing is cached (run last: it damages the registry)
layer=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(m["layers"][-1]["digest"][7:])' "$work/src/blobs/sha256/${bb_digest#sha256:}")
data="$work/basic-data/docker/registry/v2/blobs/sha256/${layer:0:2}/$layer/data"
[ -f "$data" ] || echo "FAIL: no registry blob at $data"
printf 'XXXX' | dd of="$data" bs=1 seek=100 conv=notrunc status=none
profile corrupt.yaml "$pb" creds.json sprout/busybox:1.35
out=$("$SPROUT" pull corrupt.yaml --cache-dir "$work/c8" --ca-bundle ca.crt 2>&1); rc=$?
echo "     corrupted blob: $out"
check "corrupted blob: refused with a clear error" "$rc:$out" "^1:.*blob sha256:$layer of 127.0.0.1:$pb/sprout/busybox is corrupt"
check "corrupted blob: not in the cache" "$(ls "$work/c8/oci/blobs/sha256/$layer" "$work/c8/oci/partial/"* 2>/dev/null | wc -l)" '^0$'

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
