#!/bin/bash
# Fast checks of the stack's Go module recipes (images/stack); needs no network.
#   1. Every set's go.mod has its go.sum beside it (the pinned supply chain is whole).
#   2. The k8s.io replace lines and godebug lines of images/stack/kubernetes/go.mod are
#      exactly what images/stack/kubernetes/gen-replaces.sh derives from the pinned tag's
#      own go.mod in the module cache. Skipped, saying why, when that go.mod is not in
#      the cache (STACK_GOMODCACHE, default /var/cache/sprout/stack/gomod).
# Usage: tests/stack_recipe_test.sh   (exit 0: passed or skipped; 1: failed)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
stack="$root/images/stack"
go=${SPROUT_GO:-/usr/local/go/bin/go}
export GOMODCACHE=${STACK_GOMODCACHE:-/var/cache/sprout/stack/gomod}
# Nothing here may reach the network.
export GOPROXY=off GOTOOLCHAIN=local GOFLAGS=-mod=mod
failed=0
fail() { echo "FAIL: $*"; failed=1; }

# 1. go.sum beside every go.mod.
n=0
while read -r mod; do
  n=$((n + 1))
  [ -f "$(dirname "$mod")/go.sum" ] || fail "${mod#"$root"/} has no go.sum beside it; run '$go mod tidy' in $(dirname "$mod") and commit go.sum"
done < <(find "$stack" -name go.mod | LC_ALL=C sort)
[ "$n" -gt 0 ] || fail "no go.mod under images/stack"
echo "checked $n go.mod files for their go.sum"

# 2. The replace list is the derived one.
kmod="$stack/kubernetes/go.mod"
version=$("$go" mod edit -json "$kmod" | jq -r '.Require[]? | select(.Path == "k8s.io/kubernetes") | .Version')
[ -n "$version" ] || fail "$kmod requires no k8s.io/kubernetes"
upstream="$GOMODCACHE/cache/download/k8s.io/kubernetes/@v/$version.mod"
if [ -n "$version" ] && [ ! -f "$upstream" ]; then
  echo "SKIP: the replace-list check needs k8s.io/kubernetes $version's go.mod in the module cache ($upstream is missing; images/stack/compile.sh CACHE-DIR kubernetes fetches it)"
elif [ -n "$version" ]; then
  want=$("$stack/kubernetes/gen-replaces.sh" "$kmod")
  json=$("$go" mod edit -json "$kmod")
  have=$(
    jq -r '.Replace[]? | select(.Old.Path | startswith("k8s.io/")) |
      if .Old.Path == .New.Path and (.Old.Version // "") == "" then "replace \(.Old.Path) \(.New.Version)"
      else "odd \(.Old.Path)\(if .Old.Version then "@" + .Old.Version else "" end) => \(.New.Path) \(.New.Version // "")" end' <<<"$json"
    jq -r '.GoDebug[]? | "godebug \(.Key)=\(.Value)"' <<<"$json"
  )
  have=$(LC_ALL=C sort <<<"$have")
  if [ "$have" = "$want" ]; then
    echo "the $(grep -c '^replace ' <<<"$want") staging replaces and the godebug lines of $version match gen-replaces.sh"
  else
    fail "images/stack/kubernetes/go.mod's k8s.io replaces or godebug lines differ from what gen-replaces.sh derives (< go.mod, > derived); run images/stack/kubernetes/gen-replaces.sh --apply"
    diff <(echo "$have") <(echo "$want") || true
  fi
fi

[ "$failed" = 0 ] && echo "PASS" || exit 1
