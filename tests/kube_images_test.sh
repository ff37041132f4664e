#!/bin/bash
# The Kubernetes image recipe (images/kubernetes/build.sh): kube-apiserver,
# kube-controller-manager, kube-scheduler, kube-proxy and pause images from the binaries
# compile.sh made (cached), into one OCI layout. Checks: each image's entrypoint binary
# is byte for byte the compiled one; the base layer is stored once; a second build of an
# image gives the same manifest digest; a name that is no component is refused with
# the list of components.
set -u
name=kube_images_test
. "$(dirname "$0")/lib/checks.sh"
tests_require "golang-go and python3" go /usr/bin/python3 tar
tests_cache
BIN=$(bash "$SRC/images/kubernetes/compile.sh" "$CACHE" 2>"$CACHE/kubernetes-compile.log") || {
  echo "$name: FAIL: compiling Kubernetes failed; see $CACHE/kubernetes-compile.log"
  exit 1
}
WORK=$(mktemp -d /tmp/sprt-kimg.XXXXXX)
finish() {
  rm -rf "$WORK"
  tests_end
}
trap finish EXIT

build() {  # build LAYOUT REF
  SPROUT_IMAGE_REF=$2 SPROUT_CACHE_DIR=$CACHE bash "$SRC/images/kubernetes/build.sh" "$1" >>"$WORK/build.log" 2>&1
}
# digest_of LAYOUT REF: the manifest digest the layout's index names REF with.
digest_of() {
  /usr/bin/python3 -c '
import json, sys
for m in json.load(open(sys.argv[1] + "/index.json"))["manifests"]:
    if m["annotations"]["org.opencontainers.image.ref.name"] == sys.argv[2]: print(m["digest"])' "$1" "$2"
}
# entry_file LAYOUT REF: extracts the image's last layer and prints its entrypoint path.
entry_file() {
  /usr/bin/python3 - "$1" "$2" "$WORK/x" <<'EOF'
import json, os, sys, tarfile
layout, ref, out = sys.argv[1:]
blob = lambda d: os.path.join(layout, "blobs", "sha256", d.split(":")[1])
for m in json.load(open(layout + "/index.json"))["manifests"]:
    if m["annotations"]["org.opencontainers.image.ref.name"] == ref:
        man = json.load(open(blob(m["digest"])))
        cfg = json.load(open(blob(man["config"]["digest"])))
        entry = cfg["config"]["Entrypoint"][0]
        with tarfile.open(blob(man["layers"][-1]["digest"])) as t:
            t.extractall(out)
        print(os.path.join(out, entry.lstrip("/")))
EOF
}

L=$WORK/layout
for c in kube-apiserver kube-controller-manager kube-scheduler kube-proxy pause; do
  ref=localhost/sprout/$c:v1.20.2
  rm -rf "$WORK/x"
  if ! build "$L" "$ref"; then
    bad "build.sh failed for $ref"
    tail -n 5 "$WORK/build.log"
    continue
  fi
  file=$(entry_file "$L" "$ref")
  want=$(sha256sum "$BIN/$c" | cut -d' ' -f1)
  have=$(sha256sum "$file" 2>/dev/null | cut -d' ' -f1)
  [ -n "$have" ] && [ "$have" = "$want" ] && ok "$ref runs the compiled $c ($(digest_of "$L" "$ref"))" ||
    bad "$ref's entrypoint ${file#"$WORK"/x} is not the compiled $c"
done
# Five images, each two layers and a config and a manifest; the base layer is shared.
blobs=$(find "$L/blobs/sha256" -type f | wc -l)
[ "$blobs" -eq 16 ] && ok "one layout, the shared base layer stored once: $blobs blobs" ||
  bad "expected 16 blobs (5 manifests, 5 configs, 5 binary layers, 1 base layer), found $blobs"
build "$WORK/again" localhost/sprout/kube-scheduler:v1.20.2
a=$(digest_of "$L" localhost/sprout/kube-scheduler:v1.20.2)
b=$(digest_of "$WORK/again" localhost/sprout/kube-scheduler:v1.20.2)
[ -n "$a" ] && [ "$a" = "$b" ] && ok "a second build gives the same digest: $a" || bad "rebuilt digest $b differs from $a"
if SPROUT_IMAGE_REF=localhost/sprout/kube-dns:1 SPROUT_CACHE_DIR=$CACHE bash "$SRC/images/kubernetes/build.sh" \
  "$WORK/bad" 2>"$WORK/bad.err"; then
  bad "an image named kube-dns was built"
else
  grep -q "kube-apiserver, kube-controller-manager" "$WORK/bad.err" && ok "an unknown component is refused: $(cat "$WORK/bad.err")" ||
    bad "the refusal does not list the components: $(cat "$WORK/bad.err")"
fi
