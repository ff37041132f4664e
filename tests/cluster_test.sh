#!/bin/bash
# Black-box tests of the cluster parts of a profile: a Shoot with errors is reported with
# line and column; a Shoot, the static-pod templates and fetched files land in the root;
# a fetched file with a wrong sha256 fails the build clearly and caches nothing.
# The HTTP server is python3 on 127.0.0.1, started and stopped here.
set -uo pipefail
SPROUT=$(realpath "${SPROUT:?set SPROUT to the sprout binary}")
src=${SPROUT_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
work=$(mktemp -d /tmp/sprout-cluster.XXXXXX)
server=""
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
passed=0 failed=0
check() {  # check NAME ACTUAL EXPECTED-REGEX
  if [[ "$2" =~ $3 ]]; then echo "ok   $1"; passed=$((passed + 1));
  else echo "FAIL $1: got '$2', want /$3/"; failed=$((failed + 1)); fi
}

# --- a broken Shoot: every error, each with line and column
mkdir -p "$work/p" "$work/base"
cp "$src/tests/shoots/broken.yaml" "$work/p/shoot.yaml"
cat > "$work/p/bad.yaml" <<'YAML'
name: edge
base: ../base
shoot: shoot.yaml
YAML
out=$(cd "$work/p" && "$SPROUT" validate bad.yaml 2>&1); rc=$?
echo "$out" | sed 's/^/     | /' | head -12
check "broken Shoot: validate exits 1" "$rc" '^1$'
check "broken Shoot: version error at line 7, column 14" "$out" 'shoot\.yaml:7:14: error: spec\.kubernetes\.version .latest. is not a Kubernetes version'
check "broken Shoot: overlapping networks at line 10" "$out" 'shoot\.yaml:10:15: error: spec\.networking\.services 10\.244\.128\.0/17 overlaps'
check "broken Shoot: all seven errors in one run" "$(grep -c ': error: ' <<<"$out")" '^7$'

# --- a tiny fake base and a local HTTP server with one file to fetch
base="$work/fakebase"
mkdir -p "$base/boot" "$base/usr/lib/systemd/boot/efi" "$base/etc"
head -c 300000 /dev/urandom > "$base/boot/vmlinuz-6.1.0-99-amd64"
head -c 200001 /dev/urandom > "$base/boot/initrd.img-6.1.0-99-amd64"
head -c 50000 /dev/urandom > "$base/usr/lib/systemd/boot/efi/systemd-bootx64.efi"
echo 'ID=debian' > "$base/etc/os-release"
mkdir -p "$work/www"
printf '#!/bin/sh\necho fetched tool\n' > "$work/www/tool"
good=$(sha256sum "$work/www/tool" | cut -d' ' -f1)
wrong=$(printf '%064d' 0)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 -m http.server "$port" --bind 127.0.0.1 --directory "$work/www" >"$work/http.log" 2>&1 &
server=$!
for _ in $(seq 50); do curl -fs "http://127.0.0.1:$port/tool" >/dev/null && break; sleep 0.1; done
cp "$src/tests/shoots/three-node.yaml" "$work/p/three.yaml"
mkdir -p "$work/p/pods"
cat > "$work/p/pods/hello.yaml" <<'YAML'
apiVersion: v1
kind: Pod
metadata: {name: hello, namespace: kube-system}
spec:
  hostNetwork: true
  containers:
    - {name: hello, image: "{{image_etcd}}", command: [etcd, --version]}
YAML
# A tiny image named etcd in an OCI layout: the one the profile preloads.
mkdir -p "$work/layer/bin"
echo 'not really etcd' > "$work/layer/bin/etcd"
python3 "$src/images/lib/mkimage.py" "$work/p/layout" localhost/test/etcd:1 '["/bin/etcd"]' "$work/layer" >/dev/null
cat > "$work/p/good.yaml" <<YAML
name: plant
base: ../fakebase
disk: {espSize: 40MiB, stateSize: 16MiB}
shoot: three.yaml
staticPods: [pods]
images:
  - {ref: "localhost/test/etcd:1", source: "oci:layout"}
withoutStaticPods: [kube-apiserver, kube-controller-manager, kube-scheduler]
files:
  - {path: /usr/local/bin/tool, url: "http://127.0.0.1:$port/tool", sha256: $good, mode: 0755}
YAML
"$SPROUT" build "$work/p/good.yaml" -o "$work/out" --cache-dir "$work/cache" >"$work/build.log" 2>&1; rc=$?
check "Shoot profile with a fetched file builds" "$rc" '^0$'
[ "$rc" -eq 0 ] || tail -20 "$work/build.log"
root_list() {  # the root squashfs (partition 2) of a raw image, listed
  local img=$1 start size
  read -r start size < <(sfdisk --json "$img" | python3 -c 'import json,sys; p=json.load(sys.stdin)["partitiontable"]["partitions"][1]; print(p["start"], p["size"])')
  dd if="$img" of="$work/root.sqfs" bs=512 skip="$start" count="$size" status=none
}
if [ "$rc" -eq 0 ]; then
  root_list "$work/out/plant.raw"
  check "the fetched file is in the root with its content" "$(rdsquashfs -c /usr/local/bin/tool "$work/root.sqfs" 2>&1)" '^echo fetched tool$|fetched tool'
  check "cluster.json carries the Shoot" "$(rdsquashfs -c /usr/share/sprout/cluster.json "$work/root.sqfs" | tr -d ' \n')" '"name":"plant".*"minimum":3'
  list=$(rdsquashfs -l /usr/share/sprout/staticpods "$work/root.sqfs" 2>&1 | tr '\n' ' ')
  check "etcd's template and the profile's added pod are baked, the left-out ones are not" "$list" ' etcd\.yaml .* hello\.yaml $'
  check "the fetched file is cached by digest" "$(ls "$work/cache/files/sha256/")" "^$good\$"
fi

# --- air gap: a cluster image whose static pods run an image it does not preload fails
# to build, naming each pod, its image and both ways out
grep -v '^withoutStaticPods:\|^images:\|localhost/test/etcd' "$work/p/good.yaml" | sed 's/^name: plant/name: air/' > "$work/p/air.yaml"
out=$("$SPROUT" build "$work/p/air.yaml" -o "$work/out-air" --cache-dir "$work/cache" 2>&1); rc=$?
echo "$out" | head -3 | cut -c1-200 | sed 's/^/     | /'
check "air gap: the build fails" "$rc" '^1$'
check "air gap: names kube-apiserver's pod, its image and the opt-out" "$out" \
  "static pod kube-apiserver\.yaml .* runs the image of 'kube-apiserver', which the profile does not preload.*withoutStaticPods: \[kube-apiserver\]"
check "air gap: names the profile's own pod too" "$out" "static pod hello\.yaml \([^)]*pods/hello\.yaml\) runs the image of 'etcd'"
check "air gap: every such pod in one run" "$(grep -c 'which the profile does not preload' <<<"$out")" '^5$'
check "air gap: no image written" "$(ls "$work/out-air" 2>/dev/null | wc -l)" '^0$'
printf 'withoutStaticPods: [kube-proxy]\n' >> "$work/p/air.yaml"
out=$("$SPROUT" build "$work/p/air.yaml" -o "$work/out-air" --cache-dir "$work/cache" 2>&1)
check "air gap: leaving out a pod that is no template is an error naming the templates" "$out" \
  "withoutStaticPods names 'kube-proxy', which is no static-pod template; the templates are etcd, hello, kube-apiserver"

# --- the Shoot's Kubernetes version must be the preloaded components' version
python3 "$src/images/lib/mkimage.py" "$work/p/layout" localhost/test/kube-apiserver:v1.20.2 '["/bin/etcd"]' "$work/layer" >/dev/null
sed 's/^name: plant/name: versions/' "$work/p/good.yaml" |
  sed 's|^  - {ref: "localhost/test/etcd:1", source: "oci:layout"}|&\n  - {ref: "localhost/test/kube-apiserver:v1.20.2", source: "oci:layout"}|' > "$work/p/versions.yaml"
out=$("$SPROUT" build "$work/p/versions.yaml" -o "$work/out-ver" --cache-dir "$work/cache" 2>&1); rc=$?
echo "$out" | grep -i "says Kubernetes" | cut -c1-220 | sed 's/^/     | /'
check "version mismatch: the build fails naming both versions and the image's line" "$rc:$out" \
  "^1:.*versions\.yaml:8:5: the Shoot .*three\.yaml says Kubernetes 1\.31\.1 \(spec\.kubernetes\.version\), but the preloaded kube-apiserver is v1\.20\.2"

# --- a wrong sha256: a clear error naming the URL and both digests; nothing cached, nothing written
sed "s/$good/$wrong/" "$work/p/good.yaml" > "$work/p/wrong.yaml"
sed -i 's/^name: plant/name: wrong/' "$work/p/wrong.yaml"
out=$("$SPROUT" build "$work/p/wrong.yaml" -o "$work/out2" --cache-dir "$work/cache2" 2>&1); rc=$?
echo "$out" | grep -i sha256 | sed 's/^/     | /'
check "wrong sha256: build fails" "$rc" '^1$'
check "wrong sha256: message names the profile line, URL and both digests" "$out" "wrong\.yaml:10:5: http://127\.0\.0\.1:$port/tool: the download \([0-9]+ bytes\) has sha256 $good, but the profile expects $wrong"
check "wrong sha256: nothing cached" "$(find "$work/cache2" -type f 2>/dev/null | wc -l)" '^0$'
check "wrong sha256: no image written" "$(ls "$work/out2" 2>/dev/null | wc -l)" '^0$'

# --- a template that does not render fails the build, naming the template line
printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  containers:\n    - {name: x, image: "{{image_nothing}}"}\n' > "$work/p/pods/broken.yaml"
out=$("$SPROUT" build "$work/p/good.yaml" -o "$work/out3" --cache-dir "$work/cache" 2>&1); rc=$?
check "unrenderable template: build fails naming file and line" "$rc:$out" "^1:.*pods/broken\.yaml:6: unknown placeholder '\{\{image_nothing\}\}'"

echo "cluster_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
