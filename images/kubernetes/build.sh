#!/bin/bash
# Builds one Kubernetes component image from Debian's `kubernetes` source package into
# an OCI layout. Usage: build.sh LAYOUT-DIR
# sprout runs it for `source: recipe:../images/kubernetes`; the component is the last
# path element of the image's name ($SPROUT_IMAGE_REF), one of kube-apiserver,
# kube-controller-manager, kube-scheduler, kube-proxy or pause:
#   localhost/sprout/kube-apiserver:v1.20.2
# The binaries come from compile.sh, cached under $SPROUT_CACHE_DIR (sprout passes its
# --cache-dir; default /var/cache/sprout). The kubelet is not an image: it runs on
# the host, and the build puts it into the root (docs/control-plane.md).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../lib/common.sh
. "$here/../lib/common.sh"
recipe_start localhost/sprout/kube-apiserver:v1.20.2 "$@"
name=${ref%@*}
name=${name##*/}
name=${name%%:*}
case "$name" in
  kube-apiserver | kube-controller-manager | kube-scheduler | kube-proxy | pause) ;;
  *)
    echo "images/kubernetes: the image name '$ref' names no component; its last path element must be" \
      "kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy or pause" >&2
    exit 2
    ;;
esac
bin=$(bash "$here/compile.sh" "${SPROUT_CACHE_DIR:-/var/cache/sprout}")
base_layer "$work/base"
if [ "$name" = pause ]; then
  mkdir -p "$work/app"
  cp "$bin/pause" "$work/app/pause"
  entry='["/pause"]'
else
  mkdir -p "$work/app/usr/local/bin"
  cp "$bin/$name" "$work/app/usr/local/bin/$name"
  entry="[\"/usr/local/bin/$name\"]"
fi
chmod -R a+rX,go-w "$work/app"
python3 "$here/../lib/mkimage.py" "$out" "$ref" "$entry" "$work/base" "$work/app"
