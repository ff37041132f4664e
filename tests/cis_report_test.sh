#!/bin/bash
# `sprout cis PROFILE` judges the files sprout renders for a profile (docs/cis.md):
#  - docs/cis.md and docs/cis-1.36.md are its report for profiles/default.yaml and
#    profiles/kubernetes-1.36.yaml, so a change to a flag that does not regenerate them
#    fails here;
#  - a profile whose kubelet.config opens the read-only port and anonymous access gets
#    those checks as fails, naming the file and the setting;
#  - a profile with errors gets them all, and no report.
set -u
name=cis_report_test
SRC=$(readlink -f "${SPROUT_SOURCE_DIR:-$(dirname "$0")/..}")
SPROUT=${SPROUT:-$SRC/build/sprout}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
ok() { echo "ok: $*"; }
bad() {
  echo "FAIL: $*"
  failed=1
}
# The report names the templates relative to the working folder: run it in the checkout.
cd "$SRC" || exit 1

for pair in "default.yaml cis.md" "kubernetes-1.36.yaml cis-1.36.md"; do
  read -r profile doc <<<"$pair"
  if ! "$SPROUT" cis "profiles/$profile" >"$work/$doc" 2>"$work/err"; then
    bad "sprout cis profiles/$profile failed: $(cat "$work/err")"
  elif diff -u "docs/$doc" "$work/$doc"; then
    ok "docs/$doc equals sprout cis profiles/$profile ($(grep -c '^| [0-9]' "$work/$doc") checks; $(grep -m1 '^\*\*' "$work/$doc"))"
  else
    bad "docs/$doc differs from the report (above); run: build/sprout cis profiles/$profile >docs/$doc"
  fi
done

# Each nominal pass says why.
if grep '^| [0-9]' "$work/cis.md" | grep -F 'pass (*nominal*)' | grep -vqF 'nominally only: '; then
  bad "a nominal pass without its reason: $(grep -F 'pass (*nominal*)' "$work/cis.md" | grep -vF 'nominally only: ')"
else
  ok "$(grep -cF 'pass (*nominal*)' "$work/cis.md") nominal passes, each saying why ($(grep -F 'pass (*nominal*)' "$work/cis.md" | cut -d' ' -f2 | paste -sd' '))"
fi

# A profile that weakens the kubelet through kubelet.config.
cat >"$work/weak.yaml" <<EOF
extends: $SRC/profiles/default.yaml
name: weak
kubelet:
  recipe: $SRC/images/kubernetes
  config:
    readOnlyPort: 10255
    authentication:
      anonymous:
        enabled: true
EOF
if ! "$SPROUT" cis "$work/weak.yaml" >"$work/weak.md" 2>"$work/err"; then
  bad "sprout cis on the weakened profile failed: $(cat "$work/err")"
else
  for want in \
    '| 4.2.4 | the read-only port is 0 | **fail** | `readOnlyPort: 10255` (/usr/lib/sprout/kubelet/config.yaml, from the profile'"'"'s `kubelet.config`) |' \
    '| 4.2.1 | anonymous authentication is off | **fail** | `authentication.anonymous.enabled: true` (/usr/lib/sprout/kubelet/config.yaml, from the profile'"'"'s `kubelet.config`) |'; do
    if grep -qxF -- "$want" "$work/weak.md"; then
      ok "weakened profile: $want"
    else
      bad "weakened profile: no line '$want'; the 4.2 lines: $(grep '^| 4\.2\.[1-4] ' "$work/weak.md")"
    fi
  done
  grep -qF 'from the profile' "$work/cis.md" && bad "the default profile's report says a field came from the profile's kubelet.config"
fi

# A profile with errors: every error of the profile, exit 1, no report.
printf 'name: bad\nrole: boss\nformats: [floppy]\n' >"$work/bad.yaml"
"$SPROUT" cis "$work/bad.yaml" >"$work/bad.out" 2>"$work/bad.err"
rc=$?
if [ "$rc" -eq 1 ] && [ ! -s "$work/bad.out" ] && grep -qF "bad.yaml:2:7: error: 'role' must be" "$work/bad.err" &&
  grep -qF "bad.yaml:3:11: error: unknown format 'floppy'" "$work/bad.err"; then
  ok "a profile with two errors: exit 1, both errors with their lines, no report"
else
  bad "a profile with errors: exit $rc, stdout $(wc -c <"$work/bad.out") bytes, stderr: $(cat "$work/bad.err")"
fi

[ "$failed" -eq 0 ] || exit 1
echo "$name: all passed"
