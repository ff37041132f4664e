#!/usr/bin/env bash
# Checks lib/formation/election.pml with spin: the election model must have no
# assertion violation (3 nodes, up to T candidacies, exhaustive), and the amnesia
# variant (-DFORGET: a node loses its saved vote) must be caught, or the model
# proves nothing. Usage: check_election.sh [T] (default 3; T=4 needs far more than 3 GB).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
t=${1:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$here/election.pml" "$work/"
cd "$work"

run() {  # run <extra spin defines...>: prints pan's summary
  spin "$@" -DT="$t" -a election.pml >/dev/null
  gcc -O2 -DSAFETY -DCOLLAPSE -DMEMLIM=3000 -w -o pan pan.c
  ./pan -m100000 | grep -v '^Depth='
}

out=$(run)
echo "$out" | grep -E 'errors:|states, stored|elapsed time'
if ! echo "$out" | grep -q 'errors: 0'; then echo "FAIL: the election model violates safety" >&2; exit 1; fi
if echo "$out" | grep -q 'Search not completed'; then echo "FAIL: search not completed (memory limit)" >&2; exit 1; fi

bad=$(run -DFORGET)
if ! echo "$bad" | grep -q 'assertion violated'; then
  echo "FAIL: the amnesia variant was not caught; the model checks nothing" >&2
  exit 1
fi
echo "ok: election safe for 3 nodes and up to $t candidacies; amnesia variant caught"
