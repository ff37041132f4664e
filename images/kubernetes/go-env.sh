# shellcheck shell=bash
# The Go build over Debian's `kubernetes` source tree, shared by the recipes that compile
# from it: images/kubernetes/compile.sh (the components), images/conformance/compile.sh
# (e2e.test and ginkgo) and images/conformance/test-images.sh (agnhost and the other Go
# test images). Sourced, after images/kubernetes/source; each of those recipes puts this
# file into its cache key, so a change here rebuilds all three.

# kube_unpack WORK DSC: unpacks the source package into WORK/tree. dpkg-source checks every
# tarball's sha256 against the .dsc and applies Debian's own patches.
kube_unpack() {
  local out
  out=$( (cd "$1" && dpkg-source -x "$2" tree) 2>&1) || {
    tail -n 20 <<<"$out" >&2
    echo "dpkg-source -x $2 failed (above); delete $(dirname "$2") to have images/kubernetes/compile.sh fetch it again" >&2
    return 1
  }
}

# kube_patch TREE: applies sprout's patches to the tree (images/kubernetes/patches/*.patch,
# in name order; each says why). A patch that no longer applies stops the build: the
# source changed under it.
kube_patch() {
  local p
  for p in "$(dirname "${BASH_SOURCE[0]}")"/patches/*.patch; do
    echo "applying $(basename "$p")" >&2
    patch -d "$1" -p1 --forward --quiet <"$p" >&2 ||
      { echo "$p does not apply to the tree in $1; the source changed" >&2; return 1; }
  done
}

# kube_go_env WORK GOARCH CACHE: GOPATH mode over WORK/tree with the package's own vendor/
# tree, as the package's debian/rules builds; CGO off (static binaries); the Go build cache
# in CACHE/kubernetes/gocache, shared by the three recipes, so a package one compiled is
# reused by the others.
kube_go_env() {
  mkdir -p "$1/gopath/src/k8s.io"
  ln -s "$1/tree" "$1/gopath/src/k8s.io/kubernetes"
  export GOPATH="$1/gopath" GO111MODULE=off CGO_ENABLED=0 GOFLAGS="" GOCACHE="$3/kubernetes/gocache"
  export GOOS=linux GOARCH=$2
}

# kube_ldflags: prints the linker flags of every binary built from the tree: no symbols, an
# empty build ID, and the release's version stamps in both version packages, as the
# tree's hack/lib/version.sh stamps them. The servers' /version answers from client-go's,
# which otherwise says v0.0.0-master+<commit> (and the conformance suite then skips the
# tests gated on the server's version).
kube_ldflags() {
  local release=${kube_version#v} major minor flags="-s -w -buildid=" v
  major=${release%%.*}
  minor=${release#*.}
  minor=${minor%%.*}
  for v in k8s.io/kubernetes/vendor/k8s.io/component-base/version k8s.io/kubernetes/vendor/k8s.io/client-go/pkg/version; do
    flags+=" -X $v.gitVersion=$kube_version -X $v.gitCommit=$kube_commit -X $v.gitTreeState=clean"
    flags+=" -X $v.buildDate=$build_date -X $v.gitMajor=$major -X $v.gitMinor=$minor"
  done
  echo "$flags"
}

# kube_dsc CACHE: prints the source package's .dsc, which images/kubernetes/compile.sh
# fetched into CACHE once; fails, naming the path, when it is not there.
kube_dsc() {
  local dsc="$1/kubernetes/source/$version/${package}_${version#*:}.dsc"
  [ -f "$dsc" ] || { echo "the components' recipe left no source package at $dsc" >&2; return 1; }
  echo "$dsc"
}

# kube_key DSC FILE...: prints a recipe's cache key: the sha256 of the .dsc's own sha256
# (the .dsc names the sha256 of every tarball) followed by the FILEs' contents, 32 digits.
kube_key() {
  local dsc=$1
  shift
  (sha256sum "$dsc" | cut -d' ' -f1; cat "$@") | sha256sum | cut -c1-32
}

# kube_cached WHO DIR: when DIR holds a finished build (its .complete marker), says so on
# stderr as "WHO: cached: DIR", prints DIR, and the recipe ends there.
kube_cached() {
  [ -f "$2/.complete" ] || return 0
  echo "$1: cached: $2" >&2
  echo "$2"
  exit 0
}

# kube_publish WHO BUILT DIR: the finished build folder BUILT gets its SHA256SUMS and
# .complete marker and is renamed into place as DIR (so DIR is only ever whole); says so on
# stderr as "WHO: compiled into DIR" and prints DIR.
kube_publish() {
  (cd "$2" && sha256sum -- * >SHA256SUMS)
  touch "$2/.complete"
  mkdir -p "$(dirname "$3")"
  rm -rf "$3" && mv "$2" "$3"
  echo "$1: compiled into $3" >&2
  echo "$3"
}
