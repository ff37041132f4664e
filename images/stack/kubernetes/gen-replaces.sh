#!/bin/bash
# Derives the replace list of images/stack/kubernetes/go.mod from the go.mod of the
# pinned k8s.io/kubernetes tag itself, so nobody writes it by hand.
#
# k8s.io/kubernetes requires each of its staging modules (k8s.io/api, k8s.io/client-go, …)
# at v0.0.0 and replaces them with ./staging/src/k8s.io/X. Go ignores the replace lines
# of a dependency, so a module that builds Kubernetes must pin every one of them itself:
# tag v1.MINOR.PATCH goes with staging modules at v0.MINOR.PATCH. The tag's godebug lines
# are copied too, so the binaries run with the defaults upstream's own builds use.
#
# Usage: gen-replaces.sh [--apply] [GO.MOD]
#   GO.MOD is images/stack/kubernetes/go.mod unless given. The version of
#   k8s.io/kubernetes comes from its require line; the tag's go.mod must be in the module
#   cache (GOMODCACHE; `go mod download k8s.io/kubernetes@VERSION` puts it there).
#   Without --apply it prints the derived lines, sorted, as
#     replace k8s.io/X v0.MINOR.PATCH
#     godebug KEY=VALUE
#   With --apply it writes them into GO.MOD with `go mod edit` (dropping any k8s.io
#   replace or godebug line that is no longer derived).
set -euo pipefail
go=${GO:-/usr/local/go/bin/go}
here=$(cd "$(dirname "$0")" && pwd)
apply=false
if [ "${1:-}" = --apply ]; then apply=true; shift; fi
gomod=${1:-$here/go.mod}
die() { echo "gen-replaces.sh: $*" >&2; exit 1; }
[ -f "$gomod" ] || die "no go.mod at $gomod"

version=$("$go" mod edit -json "$gomod" | jq -r '.Require[]? | select(.Path == "k8s.io/kubernetes") | .Version')
[ -n "$version" ] || die "$gomod requires no k8s.io/kubernetes; add 'require k8s.io/kubernetes v1.X.Y'"
case $version in
  v1.*.*) staging=v0.${version#v1.} ;;
  *) die "k8s.io/kubernetes $version in $gomod is not a v1.MINOR.PATCH tag" ;;
esac
modcache=${GOMODCACHE:-$("$go" env GOMODCACHE)}
upstream="$modcache/cache/download/k8s.io/kubernetes/@v/$version.mod"
[ -f "$upstream" ] || die "the tag's go.mod is not in the module cache ($upstream); run: GOMODCACHE=$modcache $go mod download k8s.io/kubernetes@$version"

# The tag's replace lines that point into ./staging, and its godebug lines (one-line
# and block forms), read with go mod edit rather than parsed by hand.
json=$("$go" mod edit -json "$upstream")
derived=$(
  jq -r --arg v "$staging" '.Replace[]? | select(.New.Path | startswith("./staging/")) | "replace \(.Old.Path) \($v)"' <<<"$json"
  jq -r '.GoDebug[]? | "godebug \(.Key)=\(.Value)"' <<<"$json"
)
derived=$(LC_ALL=C sort <<<"$derived")
n=$(grep -c '^replace ' <<<"$derived" || true)
[ "$n" -gt 0 ] || die "$upstream replaces no module with ./staging; is it k8s.io/kubernetes's go.mod?"

if ! $apply; then
  echo "$derived"
  exit 0
fi
# Drop what an earlier run wrote, then write the derived list.
args=()
while read -r old; do args+=("-dropreplace=$old"); done < <("$go" mod edit -json "$gomod" | jq -r '.Replace[]? | select(.Old.Path | startswith("k8s.io/")) | .Old.Path')
while read -r key; do args+=("-dropgodebug=$key"); done < <("$go" mod edit -json "$gomod" | jq -r '.GoDebug[]? | .Key')
while read -r kind a b; do
  case $kind in
    replace) args+=("-replace=$a=$a@$b") ;;
    godebug) args+=("-godebug=$a") ;;
  esac
done <<<"$derived"
"$go" mod edit "${args[@]}" "$gomod"
echo "gen-replaces.sh: wrote $n replace lines (staging $staging, from k8s.io/kubernetes $version) into $gomod" >&2
