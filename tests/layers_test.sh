#!/bin/bash
# The layer rule is enforced (scripts/check-layers, docs/architecture.md): the tree as it
# is passes; a copy of lib/ with lib/util including profile/, or lib/ including
# firstboot/, fails, naming the file, the line and the rule; a lib/ folder missing from
# the table fails too.
set -u
name=layers_test
SRC=$(readlink -f "${SPROUT_SOURCE_DIR:-$(dirname "$0")/..}")
. "$SRC/tests/lib/checks.sh"
tests_require python3 python3
WORK=$(mktemp -d /tmp/sprt-layers.XXXXXX)
finish() {
  rm -rf "$WORK"
  tests_end
}
trap finish EXIT

out=$(python3 "$SRC/scripts/check-layers" "$SRC" 2>&1) && ok "the tree keeps the layer rule" ||
  bad "the tree breaks the layer rule: $out"

fresh() {  # a copy of lib/, docs/architecture.md and the checker
  rm -rf "$WORK/t" && mkdir -p "$WORK/t/docs" "$WORK/t/scripts"
  cp -r "$SRC/lib" "$WORK/t/lib"
  cp "$SRC/docs/architecture.md" "$WORK/t/docs/"
  cp "$SRC/scripts/check-layers" "$WORK/t/scripts/"
}
fresh
sed -i '1i #include "profile/profile.h"' "$WORK/t/lib/util/text.cc"
out=$(python3 "$WORK/t/scripts/check-layers" "$WORK/t" 2>&1)
rc=$?
echo "     $out" | head -n 2
[ "$rc" -eq 1 ] && ok "lib/util including profile/ fails the check" || bad "lib/util including profile/: status $rc"
grep -q '^lib/util/text.cc:1: error: lib/util includes profile/: lib/util may use nothing of sprout (docs/architecture.md line [0-9]*)' <<<"$out" &&
  ok "... naming the file, the line and the rule" || bad "... the message: $out"

fresh
sed -i '1i #include "firstboot/run.h"' "$WORK/t/lib/kube/node_list.cc"
out=$(python3 "$WORK/t/scripts/check-layers" "$WORK/t" 2>&1)
grep -q '^lib/kube/node_list.cc:1: error: lib/kube includes firstboot/: lib/ never includes firstboot/' <<<"$out" &&
  ok "lib/ including firstboot/ fails the check" || bad "lib/ including firstboot/: $out"

fresh
mkdir "$WORK/t/lib/newfolder" && echo '#include "util/result.h"' >"$WORK/t/lib/newfolder/x.cc"
out=$(python3 "$WORK/t/scripts/check-layers" "$WORK/t" 2>&1)
grep -q 'lib/newfolder has no row in the layer table' <<<"$out" &&
  ok "a lib/ folder with no row in the table fails the check" || bad "a folder with no row: $out"
