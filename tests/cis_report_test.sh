#!/bin/bash
# docs/cis.md is what scripts/cis-report prints from the rendered control plane and
# kubelet files (tests/golden/, which the unit tests keep equal to what the code
# renders). A change to a flag that does not regenerate the page fails here.
set -u
name=cis_report_test
SRC=$(readlink -f "${SPROUT_SOURCE_DIR:-$(dirname "$0")/..}")
if ! /usr/bin/python3 -c 'import yaml' 2>/dev/null; then
  echo "$name: skipped: python3's yaml module is missing (scripts/install-deps installs python3-yaml)"
  exit 0
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if ! /usr/bin/python3 "$SRC/scripts/cis-report" "$SRC" >"$out"; then
  echo "FAIL: scripts/cis-report failed"
  exit 1
fi
if diff -u "$SRC/docs/cis.md" "$out"; then
  echo "ok: docs/cis.md equals the output of scripts/cis-report ($(grep -c '^| [0-9]' "$out") checks; $(grep -m1 '^\*\*' "$out"))"
  exit 0
fi
echo "FAIL: docs/cis.md differs from scripts/cis-report's output (above); run: scripts/cis-report >docs/cis.md"
exit 1
