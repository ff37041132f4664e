#!/bin/bash
# Compiles the Kubernetes components (and kubectl, for tests and the cluster harness) from Debian's `kubernetes` source package and
# prints the folder holding them. Usage: compile.sh CACHE-DIR
#
# The binaries are cached under CACHE-DIR/kubernetes/bin/KEY, where KEY is the sha256
# of the source package's .dsc (which names the sha256 of every tarball in it) and of
# this recipe's `source`, `compile.sh`, `go-env.sh` and `patches/` (and of the target architecture
# when it is not amd64); a second build finds them and compiles
# nothing. The source itself is kept under CACHE-DIR/kubernetes/source/VERSION, so a
# rebuild after a cleaned bin folder needs no network either.
#
# Reproducible: -trimpath, an empty Go build ID, fixed version stamps and build date,
# CGO off (static binaries), GOPATH mode with the package's own vendor/ tree.
set -euo pipefail
cache=${1:?usage: compile.sh CACHE-DIR}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=source
. "$here/source"
# shellcheck source=go-env.sh
. "$here/go-env.sh"
components=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
mkdir -p "$cache/kubernetes"
cache=$(cd "$cache" && pwd)
log() { echo "kubernetes: $*" >&2; }
# Scratch folders (apt's lists, the unpacked tree) go when the script ends, however.
apt="" work=""
trap 'rm -rf ${apt:+"$apt"} ${work:+"$work"}' EXIT

# 1. The source package, fetched once with apt from a deb-src twin of the host's own
#    apt sources (no mirror is named here), then kept in the cache.
src="$cache/kubernetes/source/$version"
dsc="$src/${package}_${version#*:}.dsc"
if [ ! -f "$dsc" ]; then
  sources=${SPROUT_APT_SOURCES:-/etc/apt/sources.list.d/debian.sources}
  [ -f "$sources" ] || sources=/etc/apt/sources.list
  [ -f "$sources" ] || { log "no apt sources at $sources; set SPROUT_APT_SOURCES to a deb822 or one-line sources file"; exit 1; }
  apt=$(mktemp -d)
  mkdir -p "$apt/lists/partial" "$apt/etc"
  if grep -q '^Types:' "$sources"; then
    sed 's/^Types:.*/Types: deb-src/' "$sources" >"$apt/etc/src.sources"
    list_opt=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$apt/etc")
  else
    sed -n 's/^deb /deb-src /p' "$sources" >"$apt/etc/src.list"
    list_opt=(-o "Dir::Etc::SourceList=$apt/etc/src.list" -o "Dir::Etc::SourceParts=/dev/null")
  fi
  opts=("${list_opt[@]}" -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o "Debug::NoLocking=1")
  log "fetching the source package $package $version (apt, deb-src of $sources)"
  apt-get "${opts[@]}" update -q >&2 ||
    { log "apt-get update of the deb-src lists failed; is the Debian mirror in $sources reachable?"; exit 1; }
  tmp="$src.tmp.$$"
  rm -rf "$tmp" && mkdir -p "$tmp"
  (cd "$tmp" && apt-get "${opts[@]}" source --download-only -q "$package=$version" >&2) ||
    { log "apt-get source $package=$version failed; the recipe pins that version in $here/source"; exit 1; }
  mkdir -p "$(dirname "$src")"
  rm -rf "$src" && mv "$tmp" "$src"
fi

# The target architecture (Debian's name): SPROUT_ARCH (sprout sets it for the kubelet),
# else SPROUT_IMAGE_ARCH (for an image), else the build host's. A target other than
# amd64 adds its name to the key; for amd64 the key's inputs are as before this option.
goarch=${SPROUT_ARCH:-${SPROUT_IMAGE_ARCH:-$(dpkg --print-architecture)}}
case $goarch in
  amd64 | arm64) ;;
  *) log "no Kubernetes build for architecture '$goarch'; architectures: amd64, arm64"; exit 2 ;;
esac
key=$(kube_key "$dsc" "$here/source" "$here/compile.sh" "$here/go-env.sh" "$here"/patches/*.patch \
  <([ "$goarch" = amd64 ] || echo "$goarch"))
bin="$cache/kubernetes/bin/$key"
kube_cached kubernetes "$bin"

# 2. Unpack (dpkg-source checks every tarball's sha256 against the .dsc and applies
#    Debian's patches).
work=$(mktemp -d "$cache/kubernetes/work.XXXXXX")
log "unpacking $(basename "$dsc")"
kube_unpack "$work" "$dsc"

# 2a. sprout's one change to the tree: the kube-apiserver's two start-up hooks that write
#     the bootstrap RBAC roles and the system priority classes give up, and end the
#     process, when their first 30 s of attempts fail. On a loaded slow node (software
#     emulation, several control planes per core) the apiserver's own loopback requests
#     can miss that window (TLS handshake timeouts), and the restart repeats the slowest
#     part of a start, so the node never converges. They get 10 minutes; a hook that still
#     fails ends the process as before. docs/control-plane.md has the run that showed it.
for f in pkg/registry/rbac/rest/storage_rbac.go pkg/registry/scheduling/rest/storage_scheduling.go; do
  n=$(grep -c 'wait\.Poll(1\*time\.Second, 30\*time\.Second, ' "$work/tree/$f" || true)
  [ "$n" = 1 ] || { log "$f: expected one 30-second start-up poll to lengthen, found ${n:-0}; the source changed"; exit 1; }
  sed -i 's/wait\.Poll(1\*time\.Second, 30\*time\.Second, /wait.Poll(1*time.Second, 10*time.Minute, /' "$work/tree/$f"
done

# 2b. sprout's patches to the tree (go-env.sh).
kube_patch "$work/tree"

# 3. Compile in GOPATH mode (go-env.sh), as the package's debian/rules does.
kube_go_env "$work" "$goarch" "$cache"
ldflags=$(kube_ldflags)
out="$work/bin"
mkdir -p "$out" "$work/tools"
cd "$GOPATH/src/k8s.io/kubernetes"

# 4. The one generated file the source package lacks: pkg/generated/openapi (the
#    upstream Makefile makes it with openapi-gen before compiling). Its inputs are the
#    packages tagged +k8s:openapi-gen, found the way Makefile.generated_files does.
log "generating pkg/generated/openapi (openapi-gen)"
# The generator runs here, so it is built for the build host, whatever GOARCH is.
GOARCH=$(go env GOHOSTARCH) go build -trimpath -o "$work/tools/openapi-gen" ./vendor/k8s.io/kube-openapi/cmd/openapi-gen >&2
dirs=$(find -H . \( -path './_*' -o -path './.*' -o -path ./vendor \) -prune -o -type f -name '*.go' -print |
  sed 's|^\./staging/src|vendor|; s|^\./||; s|/[^/]*$||' | LC_ALL=C sort -u |
  grep -v -e '^vendor/k8s.io/code-generator/' -e '^vendor/k8s.io/sample-apiserver/' |
  while read -r d; do
    if find -H "$d" -maxdepth 1 -type f -name '*.go' -print0 | xargs -0 grep -l '^// *+k8s:' 2>/dev/null |
      xargs -r grep -l '+k8s:openapi-gen=' >/dev/null 2>&1; then
      echo "k8s.io/kubernetes/$d"
    fi
  done | paste -sd, -)
[ -n "$dirs" ] || { log "found no +k8s:openapi-gen packages; is $dsc a Kubernetes source?"; exit 1; }
# A -trimpath binary has no GOROOT of its own, and the generator parses the standard
# library (time.Duration) from source.
GOROOT=$(go env GOROOT) "$work/tools/openapi-gen" --logtostderr -i "$dirs" -p k8s.io/kubernetes/pkg/generated/openapi \
  -O zz_generated.openapi -h vendor/k8s.io/code-generator/hack/boilerplate.go.txt \
  -r "$work/openapi-violations.report" >&2
for c in "${components[@]}"; do
  start=$SECONDS
  log "compiling $c ($(go version | cut -d' ' -f3))"
  go build -trimpath -ldflags "$ldflags" -o "$out/$c" "./cmd/$c" >&2
  log "compiled $c in $((SECONDS - start)) s"
done
# 5. The pod sandbox ("pause") from the same tree: a static C program, no Go.
#    For arm64 Debian's cross compiler (gcc-aarch64-linux-gnu) builds it.
cc=gcc strip=strip
if [ "$goarch" != "$(dpkg --print-architecture)" ]; then
  cc=aarch64-linux-gnu-gcc strip=aarch64-linux-gnu-strip
  command -v "$cc" >/dev/null || { log "$cc is missing: apt-get install gcc-aarch64-linux-gnu"; exit 1; }
fi
"$cc" -Os -static -Wall -DVERSION="${kube_version}-sprout" -o "$out/pause" build/pause/linux/pause.c >&2
"$strip" --strip-all "$out/pause"
chmod 0755 "$out"/*
kube_publish kubernetes "$out" "$bin"
