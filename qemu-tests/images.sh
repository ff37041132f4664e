#!/bin/bash
# QEMU image test: build qemu-tests/images.yaml (the default profile's images from their
# recipes, busybox among them), boot it under UEFI with no network device at all (-nic none), and check
# that containerd lists every preloaded image with the digest the build recorded, runs a
# busybox and an etcd container, and that re-running the import skips what is present.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
. "$here/lib.sh"
SPROUT=${SPROUT:-$top/build/sprout}
export SPROUT_FIRSTBOOT=${SPROUT_FIRSTBOOT:-$(dirname "$SPROUT")/sprout-firstboot}
CACHE=${SPROUT_CACHE:-/var/cache/sprout}
work=$(mktemp -d /tmp/sprout-images.XXXXXX)
cleanup() { if [ "$failed" -gt 0 ] || [ -n "${KEEP_LOGS:-}" ]; then echo "logs kept in $work"; rm -f "$work"/out/*.raw; else rm -rf "$work"; fi; }
trap cleanup EXIT
value() { grep -a "SPROUT-IMAGES $1=" "$work/serial.log" | sed "s/^.*SPROUT-IMAGES $1=//" | tr -d '\r'; }
find_ovmf || exit 1
"$SPROUT" base "$top/profiles/default.yaml" --cache-dir "$CACHE" || exit 1
echo "== pull (recipes only: no registry, no network)"
"$SPROUT" pull "$here/images.yaml" --cache-dir "$CACHE" --offline || exit 1
echo "== build --offline"
"$SPROUT" build "$here/images.yaml" -o "$work/out" --cache-dir "$CACHE" --offline >"$work/build.log" 2>&1
check "build --offline" "$?" '^0$'
want=$(python3 -c 'import json,sys; print(" ".join(i["reference"]+" "+i["manifestDigest"] for i in json.load(open(sys.argv[1]))["images"]))' "$work/out/manifest.json")
echo "   manifest images: $want"
cp "$OVMF_VARS" "$work/vars.fd"
echo "== boot (no network device)"
boot_vm "$work/out/images.raw" "$work/vars.fd" "$work/serial.log" 600
check "guest powered off by itself" "$?" '^0$'
echo "   powered off after ${BOOT_TOTAL_SECONDS:-?} s"
check "report complete" "$(grep -ac 'SPROUT-IMAGES done' "$work/serial.log")" '^1$'
check "import unit succeeded" "$(value import)" '^active$'
check "no route at all" "$(value routes)" '^0$'
images=$(value image | tr '\n' ';')
nwant=$(($(wc -w <<<"$want") / 2))
for ref in $(tr ' ' '\n' <<<"$want" | grep '^localhost/'); do
  digest=$(tr ' ' '\n' <<<"$want" | grep -A1 -x "$ref" | tail -n 1)
  check "containerd lists $ref with the built digest" "$images" "$ref $digest"
done
check "containerd has exactly the $nwant preloaded images" "$(value image | wc -l)" "^$nwant\$"
check "busybox container runs" "$(value busybox)" 'hello-from-busybox'
check "etcd container runs" "$(value etcd)" 'etcd Version: 3\.4'
check "import at boot imported every one" "$(value journal)" "^$nwant\$"
check "re-import skips present images" "$(value reimport)" 'etcd:3.4 already present.*busybox:1.35 already present'
echo "images: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
