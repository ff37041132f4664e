#!/bin/bash
# Builds the etcd container image from Debian's etcd-server package into an OCI layout.
# Usage: build.sh LAYOUT-DIR   (sprout runs it for `source: recipe:../images/etcd`;
# the image is named $SPROUT_IMAGE_REF, default localhost/sprout/etcd:3.4)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../lib/common.sh
. "$here/../lib/common.sh"
recipe_start localhost/sprout/etcd:3.4 "$@"
base_layer "$work/base"
pkg_program etcd-server /usr/bin/etcd "$work/etcd" /usr/local/bin/etcd
python3 "$here/../lib/mkimage.py" "$out" "$ref" '["/usr/local/bin/etcd"]' "$work/base" "$work/etcd"
