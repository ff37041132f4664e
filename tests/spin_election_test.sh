#!/bin/bash
# The exhaustive model check of the founder election (lib/formation/election.pml) with
# spin: 3 nodes, every interleaving, must report "errors: 0", and the amnesia variant
# must be caught (check_election.sh fails otherwise). Prints states explored.
set -u
name=spin_election_test
for tool in spin gcc; do
  if ! command -v "$tool" >/dev/null; then
    echo "$name: skipped: '$tool' not found (scripts/install-deps installs spin and gcc)"
    exit 0
  fi
done
src=${SPROUT_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
start=$(date +%s)
if nice -n 10 bash "$src/lib/formation/check_election.sh" 3; then
  echo "$name: passed in $(($(date +%s) - start)) s"
else
  echo "$name: FAILED"
  exit 1
fi
