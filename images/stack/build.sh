#!/bin/bash
# Builds one image of the Kubernetes 1.36 stack (compiled from Go modules by compile.sh,
# docs/stack.md) into an OCI layout. Usage: build.sh LAYOUT-DIR
# sprout runs it for `source: recipe:../images/stack`; the component is the last path
# element of the image's name ($SPROUT_IMAGE_REF), and its tag must be the version the
# set's go.mod pins (the build says so otherwise):
#   localhost/sprout/kube-apiserver:v1.36.5   kube-controller-manager, kube-scheduler, kube-proxy
#   localhost/sprout/etcd:v3.6.16             etcd, with etcdctl and etcdutl beside it
#   localhost/sprout/coredns:v1.14.7          /coredns, as upstream's image
#   localhost/sprout/pause:3.10               our own pause (images/stack/pause)
# The binaries come from compile.sh, cached under $SPROUT_CACHE_DIR (sprout passes its
# --cache-dir; default /var/cache/sprout). They are static, so each image is the shared
# base layer (users, /tmp) and one layer of the component's binaries.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../lib/common.sh
. "$here/../lib/common.sh"
recipe_start localhost/sprout/kube-apiserver:v1.36.5 "$@"
name=${ref%@*}
tag=${name##*:}
name=${name##*/}
name=${name%%:*}
case "$name" in
  kube-apiserver | kube-controller-manager | kube-scheduler | kube-proxy) set=kubernetes module=k8s.io/kubernetes ;;
  etcd) set=etcd module=go.etcd.io/etcd/server/v3 ;;
  coredns) set=coredns module=github.com/coredns/coredns ;;
  pause) set=pause module="" ;;
  *)
    echo "images/stack: the image name '$ref' names no component; its last path element must be" \
      "kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy, etcd, coredns or pause" >&2
    exit 2
    ;;
esac
# The tag says the version: a tag that differs from the pinned module would name an
# image for what it does not hold.
if [ -n "$module" ]; then
  pinned=$(cd "$here/$set" && GOFLAGS=-mod=mod GOWORK=off GOTOOLCHAIN=local \
    GOMODCACHE="${SPROUT_CACHE_DIR:-/var/cache/sprout}/stack/gomod" GOPROXY=off \
    "${SPROUT_GO:-/usr/local/go/bin/go}" list -m -f '{{.Version}}' "$module" 2>/dev/null || true)
  if [ -n "$pinned" ] && [ "$tag" != "$pinned" ]; then
    echo "images/stack: the image '$ref' is tagged $tag, but images/stack/$set/go.mod pins $module $pinned;" \
      "name it ${ref%:*}:$pinned" >&2
    exit 2
  fi
fi
bin=$(SPROUT_ARCH=$image_arch bash "$here/compile.sh" "${SPROUT_CACHE_DIR:-/var/cache/sprout}" "$set")
base_layer "$work/base"
mkdir -p "$work/app"
case "$name" in
  pause)
    cp "$bin/pause" "$work/app/pause"
    entry='["/pause"]'
    ;;
  coredns)
    cp "$bin/coredns" "$work/app/coredns"
    entry='["/coredns"]'
    ;;
  etcd)
    mkdir -p "$work/app/usr/local/bin"
    cp "$bin/etcd" "$bin/etcdctl" "$bin/etcdutl" "$work/app/usr/local/bin/"
    entry='["/usr/local/bin/etcd"]'
    ;;
  *)
    mkdir -p "$work/app/usr/local/bin"
    cp "$bin/$name" "$work/app/usr/local/bin/$name"
    entry="[\"/usr/local/bin/$name\"]"
    ;;
esac
chmod -R a+rX,go-w "$work/app"
python3 "$here/../lib/mkimage.py" "$out" "$ref" "$entry" "$work/base" "$work/app"
