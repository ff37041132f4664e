#!/bin/bash
# Builds a small busybox image (the default profile's toolbox) from Debian's busybox-static
# package into an OCI layout.
# Its first layer is the same base layer as the etcd image's, so a layout with both
# stores it once (the deduplication test). Usage: build.sh LAYOUT-DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../lib/common.sh
. "$here/../lib/common.sh"
recipe_start localhost/sprout/busybox:1.35 "$@"
base_layer "$work/base"
pkg_program busybox-static /bin/busybox "$work/busybox"
# The applets a user debugging from inside an air-gapped cluster reaches for (the
# default profile preloads this image as its toolbox): shell, files, network, processes.
for applet in sh ash echo cat ls sleep true false mkdir rm cp mv wget httpd hostname seq ip ping nc \
  nslookup ps grep sed awk head tail env id date df du free mount uname vi timeout; do
  ln -s busybox "$work/busybox/bin/$applet"
done
# As upstream's busybox image: no Entrypoint and `sh` as Cmd, so `kubectl run -it --image=…
# t` gives a shell and `kubectl run … t -- nslookup NAME` runs nslookup (the arguments
# replace Cmd; with an Entrypoint of /bin/sh they became a script name for sh to open).
python3 "$here/../lib/mkimage.py" --cmd '["sh"]' "$out" "$ref" null "$work/base" "$work/busybox"
