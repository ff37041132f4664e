#!/bin/bash
# Prints the folder of a node's host binaries from the 1.36 stack (docs/stack.md):
# sprout runs it for a profile's `kubelet: {recipe: ../images/stack}`.
# Usage: host.sh CACHE   (SPROUT_ARCH: the image's architecture)
#
# The folder, CACHE/stack/host/KEY (KEY: a digest of the set folders it is made from,
# which compile.sh keys by their inputs), holds:
#   kubelet, kube-proxy   what every kubelet recipe gives (sprout installs them itself)
#   versions              "COMPONENT VERSION" lines: kubernetes, etcd, containerd, runc,
#                         cni, crictl; sprout writes the kubelet's and containerd's
#                         configuration for these versions
#   root/                 files installed over the base at the same paths: kubectl,
#                         containerd and its runc shim, ctr, runc, crictl, etcdctl,
#                         etcdutl in /usr/bin, the CNI plugins in /usr/lib/cni
#   modules.json          every Go module in every binary (the sets' modules.json)
# The folder is made beside its final name and renamed into place once whole.
set -euo pipefail
cache=${1:?usage: host.sh CACHE}
here=$(cd "$(dirname "$0")" && pwd)
sets=(kubernetes etcd containerd runc cni crictl)
folders=$(bash "$here/compile.sh" "$cache" "${sets[@]}")
mapfile -t dirs <<<"$folders"
[ "${#dirs[@]}" -eq "${#sets[@]}" ] || {
  echo "stack: host: compile.sh gave ${#dirs[@]} folders for ${#sets[@]} sets (runc is skipped for a foreign architecture: its libseccomp is missing)" >&2
  exit 1
}
cache=$(cd "$cache" && pwd)
key=$(printf '%s\n' "${dirs[@]}" | cat - "$here/host.sh" | sha256sum | cut -c1-32)
out="$cache/stack/host/$key"
if [ -f "$out/.complete" ]; then
  echo "stack: host: cached: $out" >&2
  echo "$out"
  exit 0
fi
mkdir -p "$cache/stack/host"
work=$(mktemp -d "$cache/stack/host/.work.XXXXXX")
trap 'rm -rf "$work"' EXIT
declare -A dir
for i in "${!sets[@]}"; do dir[${sets[$i]}]=${dirs[$i]}; done
# modver SET MODULE: the version SET's go.mod pins for MODULE.
modver() {
  (cd "$here/$1" && GOFLAGS=-mod=mod GOWORK=off GOTOOLCHAIN=local GOMODCACHE="$cache/stack/gomod" GOPROXY=off \
    "${SPROUT_GO:-/usr/local/go/bin/go}" list -m -f '{{.Version}}' "$2")
}
{
  echo "kubernetes $(modver kubernetes k8s.io/kubernetes)"
  echo "etcd $(modver etcd go.etcd.io/etcd/server/v3)"
  echo "containerd $(modver containerd github.com/containerd/containerd/v2)"
  echo "runc $(modver runc github.com/opencontainers/runc)"
  echo "cni $(modver cni github.com/containernetworking/plugins)"
  echo "crictl $(modver crictl sigs.k8s.io/cri-tools)"
} >"$work/versions"
# Hard links where the cache is one file system (it is, normally), else copies.
put() {  # put SET BINARY DEST
  mkdir -p "$(dirname "$work/$3")"
  ln "${dir[$1]}/$2" "$work/$3" 2>/dev/null || cp "${dir[$1]}/$2" "$work/$3"
}
put kubernetes kubelet kubelet
put kubernetes kube-proxy kube-proxy
put kubernetes kubectl root/usr/bin/kubectl
for b in containerd containerd-shim-runc-v2 ctr; do put containerd "$b" "root/usr/bin/$b"; done
put runc runc root/usr/bin/runc
put crictl crictl root/usr/bin/crictl
put etcd etcdctl root/usr/bin/etcdctl
put etcd etcdutl root/usr/bin/etcdutl
for b in bridge host-local loopback portmap; do put cni "$b" "root/usr/lib/cni/$b"; done
for s in "${sets[@]}"; do cat "${dir[$s]}/modules.json"; done | jq -s '{sets: .}' >"$work/modules.json"
chmod 0755 "$work"
touch "$work/.complete"
rm -rf "$out" && mv "$work" "$out"
trap - EXIT
echo "stack: host: assembled $out" >&2
echo "$out"
