#!/bin/bash
# The reproducibility matrix (issue 19; docs/media.md, "Reproducible from anywhere"):
# a build's bytes depend on its inputs only. A reference build of tests/repro/profile.yaml
# (a base recipe, an overlay, a file, a recipe image and a Shoot; raw and PXE) is
# repeated with one thing changed at a time, and every output must stay bit-identical:
# the working directory, the checkout's absolute path (a second clone), the profile
# path spelled relative, absolute and through a symlink, the umask, the locale, TZ,
# TMPDIR, the user, the host name and the compressor's thread count. Then a changed
# input (SOURCE_DATE_EPOCH, one overlay file) must change the outputs, and no output
# (nor the root inside the image) may name the checkout's or the test's folders.
# Prints one "factor: identical|differs" line per build. Needs root for the user and
# host-name factors; without root those two are skipped with the reason.
set -uo pipefail
SPROUT=$(realpath "${SPROUT:?set SPROUT to the sprout binary}")
src=$(realpath "${SPROUT_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}")
started=$(date +%s)
work=$(mktemp -d /tmp/sprout-repro.XXXXXX)
chmod 755 "$work"  # the unprivileged user's build reads the profile link and writes below
trap 'rm -rf "$work"' EXIT
failed=0
fail() { echo "FAIL $*"; failed=$((failed + 1)); }

profile=tests/repro/profile.yaml
cache="$work/cache"
if ! out=$(cd "$work" && "$SPROUT" base "$src/$profile" --cache-dir "$cache" 2>&1); then
  echo "$out"
  fail "the fake base recipe does not build"
  exit 1
fi

# build NAME: one build with the reference settings; the caller's variables change one:
# CWD, PROFILE (as passed), DATA (SPROUT_DATA_DIR), UMASK, LOCALE, ZONE, TMP, JOBS,
# CACHE, EXTRA (more VAR=VALUE), WRAP (a command the build runs under), SIGN (--sign KEY)
# and SERIAL (--serial N).
build() {
  local name=$1 out="$work/out-$1"
  local cwd=${CWD:-$work/cwd-ref} tmp=${TMP:-$work/tmp-ref}
  mkdir -p "$cwd" "$tmp" "$out"
  [ -n "${OWNER:-}" ] && chown "$OWNER" "$tmp" "$out"
  # shellcheck disable=SC2086  # WRAP and EXTRA are word lists
  (cd "$cwd" && umask "${UMASK:-022}" &&
    exec ${WRAP:-} env LC_ALL="${LOCALE:-C.UTF-8}" TZ="${ZONE:-UTC}" TMPDIR="$tmp" SPROUT_DATA_DIR="${DATA:-$src}" \
      ${EXTRA:-} "$SPROUT" build "${PROFILE:-$src/$profile}" -o "$out" --cache-dir "${CACHE:-$cache}" \
      -j "${JOBS:-2}" ${SIGN:+--sign "$SIGN"} ${SERIAL:+--serial "$SERIAL"}) >"$work/log-$name" 2>&1 ||
    { fail "build '$name' failed:"; tail -15 "$work/log-$name"; }
}
sums() { (cd "$1" && find . -mindepth 1 -name '.*' -prune -o -type f -printf '%P\n' | LC_ALL=C sort | xargs sha256sum); }
# compare FACTOR NAME WANT [BASE]: prints "FACTOR: identical|differs" (NAME's output
# against BASE's, default the reference build's) and checks it is WANT.
compare() {
  local got=identical diff
  diff=$(diff <(sums "$work/out-${4:-ref}") <(sums "$work/out-$2") | sed -n 's/^> [0-9a-f]*  /  changed: /p')
  [ -n "$diff" ] && got=differs
  echo "$1: $got"
  if [ "$got" != "$3" ]; then
    fail "$1: want $3"
    [ -n "$diff" ] && echo "$diff"
  fi
}

build ref
echo "reference: $(sums "$work/out-ref" | wc -l) files ($(cd "$work/out-ref" && ls | tr '\n' ' '))"

CWD=$src build cwd
compare "working directory (the checkout's root instead of $work/cwd-ref)" cwd identical

# A second checkout at another absolute path, one level deeper: a clone of the commit,
# or, when the tree has changes not yet committed, a copy of its files (what a clone of
# them would hold).
clone="$work/elsewhere/deeper/sprout"
mkdir -p "$(dirname "$clone")"
if [ -z "$(git -C "$src" status --porcelain 2>/dev/null)" ] && git clone -q "$src" "$clone" 2>/dev/null; then
  how="git clone"
else
  mkdir -p "$clone"
  (cd "$src" && git ls-files -z -c -o --exclude-standard | tar --null --ignore-failed-read -T - -cf - 2>/dev/null) |
    tar -C "$clone" -xf -
  how="copy of the tree's files (uncommitted changes)"
fi
DATA=$clone PROFILE=$clone/$profile build clone
compare "checkout's absolute path ($how at $clone)" clone identical

PROFILE=$(realpath --relative-to="$work/cwd-ref" "$src/$profile") build relative
compare "profile path relative ($(realpath --relative-to="$work/cwd-ref" "$src/$profile"))" relative identical
# (Relative from the profile's own folder, "cd tests/repro && sprout build profile.yaml",
# is the working-directory and relative factors together; cut to keep the run short.)
mkdir -p "$work/links"
ln -s "$src/$profile" "$work/links/my-profile.yaml"
PROFILE=$work/links/my-profile.yaml build symlink
compare "profile path through a symlink ($work/links/my-profile.yaml)" symlink identical

UMASK=077 build umask
compare "umask (077 instead of 022)" umask identical
LOCALE=C build locale
compare "locale (C instead of C.UTF-8)" locale identical
ZONE=Pacific/Kiritimati build tz
compare "TZ (Pacific/Kiritimati, UTC+14, instead of UTC)" tz identical
TMP=$work/a/much/deeper/tmp build tmpdir
compare "TMPDIR ($work/a/much/deeper/tmp)" tmpdir identical

if [ "$(id -u)" -ne 0 ]; then
  echo "user: skipped (the test runs as $(id -un), not root, so it cannot build as another user)"
  echo "host name: skipped (changing it in a new UTS namespace needs root)"
else
  # The unprivileged user gets its own copy of the cache (the base in it is readable,
  # and the image cache is written to).
  cp -a "$cache" "$work/cache-nobody" && chown -R nobody "$work/cache-nobody"
  OWNER=nobody CACHE=$work/cache-nobody TMP=$work/tmp-nobody \
    WRAP="setpriv --reuid=nobody --regid=nogroup --clear-groups" build user
  compare "user (nobody instead of root)" user identical
  printf '#!/bin/sh\nhostname sprout-repro-elsewhere && exec "$@"\n' >"$work/other-host.sh"
  chmod 755 "$work/other-host.sh"
  WRAP="unshare --uts $work/other-host.sh" build hostname
  compare "host name (sprout-repro-elsewhere instead of $(hostname))" hostname identical
fi
JOBS=1 build jobs
compare "-j 1 instead of -j 2" jobs identical

# A signed build carries the key's public half in its root (the nodes' update trust
# root): two signed with one key are identical; signed and unsigned differ.
"$SPROUT" keygen -o "$work/update-key" >/dev/null || fail "sprout keygen failed"
SIGN=$work/update-key.key build signed
SIGN=$work/update-key.key TMP=$work/tmp-signed2 build signed2
compare "signed twice with one key" signed2 identical signed
compare "changed input: signed (--sign) instead of unsigned" signed differs

EXTRA=SOURCE_DATE_EPOCH=1800000000 build epoch
compare "changed input: SOURCE_DATE_EPOCH=1800000000" epoch differs

# The build's serial (docs/updates.md) is an input: by default its epoch; --serial N is
# recorded, and two builds with one serial are identical.
SERIAL=1700000001 build serial
SERIAL=1700000001 TMP=$work/tmp-serial2 build serial2
compare "--serial twice with one serial" serial2 identical serial
compare "changed input: --serial 1700000001" serial differs
serials=$(python3 -c 'import json,sys; print(*(json.load(open(f))["update"]["serial"] for f in sys.argv[1:]))' \
  "$work/out-ref/manifest.json" "$work/out-epoch/manifest.json" "$work/out-serial/manifest.json")
echo "serials of ref, epoch and serial: $serials"
[ "$serials" = "1700000000 1800000000 1700000001" ] || fail "serials: want the epoch by default, else --serial's"
echo 'greeting=changed' >>"$clone/tests/repro/overlay/etc/sprout/repro.conf"
DATA=$clone PROFILE=$clone/$profile build overlay
compare "changed input: one overlay file" overlay differs

# No output names where the checkout, its clone or the test's folders (the cwd, TMPDIR,
# cache, output) sit: neither the files as written nor the root file system inside the
# raw image, unpacked.
raw="$work/out-ref/repro.raw"
read -r start size < <(sfdisk --json "$raw" | python3 -c \
  'import json,sys; p=json.load(sys.stdin)["partitiontable"]["partitions"][1]; print(p["start"], p["size"])')
dd if="$raw" of="$work/root.squashfs" bs=512 skip="$start" count="$size" status=none
sqfs2tar "$work/root.squashfs" >"$work/root.tar" 2>/dev/null || fail "cannot unpack the root of $raw"
for path in "$src" "$clone" "$work"; do
  hits=$(grep -rlaF "$path" "$work"/out-* "$work/root.tar" 2>/dev/null | sed "s|^$work/||")
  echo "grep -r '$path' in the outputs and the unpacked root: ${hits:-nothing}"
  [ -z "$hits" ] || fail "an output names $path"
done

echo "run time: $(($(date +%s) - started)) s"
if [ "$failed" -gt 0 ]; then
  echo "$failed failed"
  exit 1
fi
echo "all passed"
