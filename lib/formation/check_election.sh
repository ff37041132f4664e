#!/usr/bin/env bash
# Checks lib/formation/election.pml with spin: the election model must have no
# assertion violation (3 nodes, up to T candidacies, exhaustive), and the amnesia
# variant (-DFORGET: a node loses its saved vote) must be caught, or the model
# proves nothing. Then the spare-node case: 4 nodes powered on with a quorum of 3 (a
# majority of M=4 or 5) must be safe, and the same 4 nodes with a quorum of 2 (a majority
# of only the expected 3, the old rule) must be caught founding twice.
# Usage: check_election.sh [T] [T_SPARE] (defaults 3 and 2; T=4 needs far more than 3 GB).
set -euo pipefail
# (grep -q reads here-strings: `echo "$out" | grep -q` under pipefail fails at random when
# grep exits before echo has written all of a long output, as it did in CI.)
here=$(cd "$(dirname "$0")" && pwd)
t=${1:-3}
t_spare=${2:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$here/election.pml" "$work/"
cd "$work"

run() {  # run <extra spin defines...>: prints pan's summary (T from $t)
  spin -DT="$t" "$@" -a election.pml >/dev/null
  gcc -O2 -DSAFETY -DCOLLAPSE -DMEMLIM=3000 -w -o pan pan.c
  ./pan -m100000 | grep -v '^Depth='
}

out=$(run)
echo "$out" | grep -E 'errors:|states, stored|elapsed time'
if ! grep -q 'errors: 0' <<<"$out"; then echo "FAIL: the election model violates safety" >&2; exit 1; fi
if grep -q 'Search not completed' <<<"$out"; then echo "FAIL: search not completed (memory limit)" >&2; exit 1; fi

bad=$(run -DFORGET)
if ! grep -q 'assertion violated' <<<"$bad"; then
  echo "FAIL: the amnesia variant was not caught; the model checks nothing" >&2
  exit 1
fi
echo "ok: election safe for 3 nodes and up to $t candidacies; amnesia variant caught"

t=$t_spare
out=$(run -DN=4 -DQ=3)
echo "spare node (4 powered on, quorum 3):"
echo "$out" | grep -E 'errors:|states, stored|elapsed time'
if ! grep -q 'errors: 0' <<<"$out"; then echo "FAIL: a spare node breaks the election under quorum 3" >&2; exit 1; fi
if grep -q 'Search not completed' <<<"$out"; then echo "FAIL: search not completed (memory limit)" >&2; exit 1; fi
bad=$(run -DN=4 -DQ=2)
if ! grep -q 'assertion violated' <<<"$bad"; then
  echo "FAIL: 4 nodes under a quorum of 2 were not caught founding twice; the spare model checks nothing" >&2
  exit 1
fi
echo "ok: one spare node is safe under a quorum of 3 (up to $t candidacies); quorum 2 (the old rule) caught"
