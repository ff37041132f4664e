#!/bin/bash
# Builds a small busybox image from Debian's busybox-static package into an OCI layout.
# Its first layer is the same base layer as the etcd image's, so a layout with both
# stores it once (the deduplication test). Usage: build.sh LAYOUT-DIR
set -euo pipefail
out=${1:?usage: build.sh LAYOUT-DIR}
ref=${SPROUT_IMAGE_REF:-localhost/sprout/busybox:1.35}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
umask 022
. "$here/../lib/common.sh"
base_layer "$work/base"
bb=$(pkg_root busybox-static)
mkdir -p "$work/busybox/bin"
cp "$bb/bin/busybox" "$work/busybox/bin/busybox"
chmod 0755 "$work/busybox/bin/busybox"
for applet in sh echo cat ls sleep true; do ln -s busybox "$work/busybox/bin/$applet"; done
python3 "$here/../lib/mkimage.py" "$out" "$ref" '["/bin/sh"]' "$work/base" "$work/busybox"
