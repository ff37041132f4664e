#!/bin/bash
# Compiles the upstream Kubernetes end-to-end suite (e2e.test, with its [Conformance]
# tests) and the ginkgo runner from the same Debian `kubernetes` source package as the
# components, and prints the folder holding them. Usage: compile.sh CACHE-DIR
#
# The folder is CACHE-DIR/kubernetes/e2e/KEY, where KEY is the sha256 of the source
# package's .dsc, this recipe, images/kubernetes/source and go-env.sh, the components' patches to
# the tree (images/kubernetes/patches, applied here too) and the suite's own
# (images/conformance/patches): the same inputs give
# the same folder, and a second run compiles nothing. The source package comes from
# images/kubernetes/compile.sh's cache (that recipe fetches it once), and the Go build
# cache is shared with it, so the packages the components already compiled are reused.
#
# The folder holds e2e.test, ginkgo, conformance.yaml (the tree's list of the 311
# [Conformance] tests of this release, for comparing a run against) and SHA256SUMS.
# Reproducible like the components: -trimpath, no build ID, the release's version stamps.
set -euo pipefail
cache=${1:?usage: compile.sh CACHE-DIR}
here=$(cd "$(dirname "$0")" && pwd)
kube=$here/../kubernetes
# shellcheck source=../kubernetes/source
. "$kube/source"
# shellcheck source=../kubernetes/go-env.sh
. "$kube/go-env.sh"
log() { echo "conformance: $*" >&2; }
mkdir -p "$cache/kubernetes"
cache=$(cd "$cache" && pwd)
work=""
trap 'rm -rf ${work:+"$work"}' EXIT

# 1. The source package: fetched (once) by the components' recipe, which also fills the
#    Go build cache with the packages the suite shares with them.
bash "$kube/compile.sh" "$cache" >/dev/null
dsc=$(kube_dsc "$cache")
out="$cache/kubernetes/e2e/$(kube_key "$dsc" "$kube/source" "$kube/go-env.sh" "$here/compile.sh" "$kube"/patches/*.patch \
  "$here"/patches/*.patch)"
kube_cached conformance "$out"

# 2. Unpack (dpkg-source checks the tarballs against the .dsc).
work=$(mktemp -d "$cache/kubernetes/work.XXXXXX")
log "unpacking $(basename "$dsc")"
kube_unpack "$work" "$dsc"
# The components' patches to the tree apply here too (a test client walks maps with the
# same json-iterator; images/kubernetes/patches says why each).
kube_patch "$work/tree"
# Then the suite's own (images/conformance/patches: a wait that emulation outlasts made
# scalable, inert unless asked for; each patch says why).
for p in "$here"/patches/*.patch; do
  log "applying $(basename "$p")"
  patch -d "$work/tree" -p1 --forward --quiet <"$p" >&2 || { log "$p does not apply; the source changed"; exit 1; }
done
kube_go_env "$work" amd64 "$cache"
cd "$GOPATH/src/k8s.io/kubernetes"

# 3. The one generated file the suite needs and the source lacks: the manifests, fixtures
#    and test-image sources the tests read at run time, embedded as Go (the tree's
#    hack/generate-bindata.sh does the same with the vendored go-bindata).
log "embedding the test manifests and fixtures (go-bindata)"
mkdir -p "$work/tools"
GOBIN="$work/tools" go install ./vendor/github.com/go-bindata/go-bindata/go-bindata >&2
"$work/tools/go-bindata" -nometadata -o test/e2e/generated/bindata.go -pkg generated \
  -ignore .jpg -ignore .png -ignore .md -ignore 'BUILD(\.bazel)?' \
  test/conformance/testdata/... test/e2e/testing-manifests/... test/e2e_node/testing-manifests/... \
  test/images/... test/fixtures/... >&2
gofmt -s -w test/e2e/generated/bindata.go

# 4. Compile. (The tree's `providerless` build tag would leave the cloud SDKs out, but in
#    1.20 the suite's own Azure provider lacks the tag, so the suite does not build with it.)
ldflags=$(kube_ldflags)
mkdir -p "$work/bin"
start=$SECONDS
log "compiling e2e.test ($(go version | cut -d' ' -f3))"
go test -c -trimpath -ldflags "$ldflags" -o "$work/bin/e2e.test" ./test/e2e >&2
log "compiled e2e.test in $((SECONDS - start)) s"
start=$SECONDS
log "compiling ginkgo"
go build -trimpath -ldflags "-s -w -buildid=" -o "$work/bin/ginkgo" ./vendor/github.com/onsi/ginkgo/ginkgo >&2
log "compiled ginkgo in $((SECONDS - start)) s"
cp test/conformance/testdata/conformance.yaml "$work/bin/"
chmod 0755 "$work/bin/e2e.test" "$work/bin/ginkgo"
kube_publish conformance "$work/bin" "$out"
