#!/bin/bash
# Compiles the Kubernetes 1.36 stack from Go modules and prints, one line per set, the
# folder holding that set's binaries. Usage: compile.sh CACHE-DIR [SET...]
#
# A set is a folder beside this script with its own Go module (go.mod and go.sum: the
# pinned supply chain) and a `recipe` naming its binaries and their version stamps:
#   kubernetes etcd containerd runc cni crictl coredns pause   (all of them by default)
#
# Each set's binaries are cached under CACHE-DIR/stack/bin/SET/KEY, where KEY is the
# sha256 of the set's go.mod, go.sum, recipe and own *.go files, of this script, of the
# Go toolchain's version and of the target architecture; a second run finds them and
# compiles nothing. A folder is published by renaming it into place once whole (its
# .complete marker), so a stopped build leaves nothing that looks finished.
#
# The Go module cache is CACHE-DIR/stack/gomod and the build cache CACHE-DIR/stack/gocache.
# SPROUT_OFFLINE=1 sets GOPROXY=off (and GOFLAGS=-mod=mod): a warm module cache then
# rebuilds everything with the module proxy unreachable. Otherwise the go command uses
# the GOPROXY of the environment.
#
# The target: GOOS=linux, GOARCH from SPROUT_ARCH, else SPROUT_IMAGE_ARCH, else the build
# host (amd64 or arm64). runc (cgo, libseccomp) is built for the host's architecture only.
#
# Reproducible: -trimpath, an empty build ID, -buildvcs=false, fixed version stamps, the
# toolchain named here (GOTOOLCHAIN=local), CGO off except for runc (static PIE). Beside
# the binaries: SHA256SUMS and modules.json (every Go module in every binary, with its
# version and hash, from `go version -m -json`: the SBOM's input).
set -euo pipefail
cache=${1:?usage: compile.sh CACHE-DIR [SET...]}
shift
here=$(cd "$(dirname "$0")" && pwd)
all_sets=(kubernetes etcd containerd runc cni crictl coredns pause)
[ $# -gt 0 ] || set -- "${all_sets[@]}"
log() { echo "stack: $*" >&2; }
die() { log "$*"; exit 1; }

# Debian's golang-go (1.19) may be first on PATH; the stack needs Go 1.26.
go=${SPROUT_GO:-/usr/local/go/bin/go}
[ -x "$go" ] || die "no Go toolchain at $go; install Go 1.26 at /usr/local/go or set SPROUT_GO"
command -v jq >/dev/null || die "jq is missing (modules.json is written with it): apt-get install jq"

goarch=${SPROUT_ARCH:-${SPROUT_IMAGE_ARCH:-$(dpkg --print-architecture)}}
case $goarch in
  amd64 | arm64) ;;
  *) die "no stack build for architecture '$goarch'; architectures: amd64, arm64" ;;
esac
hostarch=$(dpkg --print-architecture)

mkdir -p "$cache/stack"
cache=$(cd "$cache" && pwd)
export GOMODCACHE="$cache/stack/gomod" GOCACHE="$cache/stack/gocache"
export GOTOOLCHAIN=local GOOS=linux GOARCH=$goarch GOFLAGS="" GOWORK=off
if [ "${SPROUT_OFFLINE:-0}" = 1 ]; then
  export GOPROXY=off GOFLAGS=-mod=mod
  log "offline: GOPROXY=off, modules only from $GOMODCACHE"
fi
goversion=$("$go" env GOVERSION)

work=""
trap 'rm -rf ${work:+"$work"}' EXIT

# modver MODULE / modtime MODULE: the version the set's go.mod selects for MODULE, and
# the time its module .info records (UTC, RFC 3339). For the recipes' version stamps.
modver() { "$go" list -m -f '{{.Version}}' "$1"; }
modtime() { "$go" list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' "$1"; }

build_set() {
  local set=$1 dir="$here/$1" binaries=() cgo=0 tags="" buildmode="" key bin b name pkg start flags
  [ -f "$dir/recipe" ] || die "no set '$set': $dir/recipe is missing (sets: ${all_sets[*]})"
  [ -f "$dir/go.mod" ] || die "$dir/go.mod is missing"
  [ -f "$dir/go.sum" ] || die "$dir/go.sum is missing; run '$go mod tidy' in $dir and commit it"
  # shellcheck source=/dev/null
  . "$dir/recipe"
  if [ "$cgo" = 1 ] && [ "$goarch" != "$hostarch" ]; then
    log "$set: skipped for $goarch: it needs cgo and libseccomp for $goarch, and this host has only $hostarch's (libseccomp-dev:$goarch is not installed)"
    return 0
  fi
  key=$( (cd "$dir" && cat go.mod go.sum recipe $(find . -maxdepth 1 -name '*.go' | LC_ALL=C sort)
    cat "$here/compile.sh"; echo "$goversion $goarch") | sha256sum | cut -c1-32)
  bin="$cache/stack/bin/$set/$key"
  if [ -f "$bin/.complete" ]; then
    log "$set: cached: $bin"
    echo "$bin"
    return 0
  fi
  mkdir -p "$cache/stack/bin/$set"
  work=$(mktemp -d "$cache/stack/bin/$set/.work.XXXXXX")
  cd "$dir"
  flags="-s -w -buildid= $(recipe_ldflags | tr '\n' ' ')"
  local opts=(-trimpath -buildvcs=false -ldflags "$flags")
  [ -z "$tags" ] || opts+=(-tags "$tags")
  [ -z "$buildmode" ] || opts+=("-buildmode=$buildmode")
  for b in "${binaries[@]}"; do
    name=${b%%:*} pkg=${b#*:}
    start=$SECONDS
    log "$set: compiling $name ($goversion, $goarch)"
    CGO_ENABLED=$cgo "$go" build "${opts[@]}" -o "$work/$name" "$pkg" >&2 ||
      die "$set: go build of $pkg failed (above); the set's module is $dir/go.mod"
    log "$set: compiled $name in $((SECONDS - start)) s"
  done
  # The SBOM's input: for each binary, the Go and every module linked in, with its
  # version and go.sum hash, as the binary itself records them.
  for b in "${binaries[@]}"; do
    name=${b%%:*}
    "$go" version -m -json "$work/$name" | jq --arg name "$name" \
      '{binary: $name, go: .GoVersion, package: .Path, main: .Main, modules: [.Deps[]? | {path: .Path, version: .Version, sum: .Sum, replace: .Replace}]}'
  done | jq -s --arg set "$set" --arg arch "$goarch" '{set: $set, goarch: $arch, binaries: .}' >"$work/modules.json"
  chmod 0755 "$work" "$work"/*
  chmod 0644 "$work/modules.json"
  (cd "$work" && sha256sum -- * >SHA256SUMS)
  touch "$work/.complete"
  rm -rf "$bin" && mv "$work" "$bin"
  work=""
  log "$set: compiled into $bin"
  echo "$bin"
}

for set in "$@"; do
  build_set "$set"
done
