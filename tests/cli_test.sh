#!/bin/bash
# Black-box tests of the sprout binary: validation messages, and a full build from a
# tiny fake base (no kernel that boots; the QEMU test covers booting) checked with
# sgdisk and for bit-identical rebuilds.
set -uo pipefail
SPROUT=$(realpath "${SPROUT:?set SPROUT to the sprout binary}")
src=${SPROUT_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
work=$(mktemp -d /tmp/sprout-cli.XXXXXX)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0
check() {  # check NAME ACTUAL EXPECTED-REGEX
  if [[ "$2" =~ $3 ]]; then echo "ok   $1"; passed=$((passed + 1));
  else echo "FAIL $1: got '$2', want /$3/"; failed=$((failed + 1)); fi
}

# --- validate
out=$("$SPROUT" validate "$src/profiles/default.yaml" 2>&1); rc=$?
check "validate default profile exits 0" "$rc" '^0$'
check "validate default profile says ok" "$out" 'ok \(name default, role control-plane\)'

mkdir -p "$work/p"
cat > "$work/p/bad.yaml" <<'YAML'
name: edge
base: ../base
formts: [raw]
role: master
disk:
  espSize: lots
YAML
mkdir -p "$work/base"
out=$(cd "$work/p" && "$SPROUT" validate bad.yaml 2>&1); rc=$?
check "three mistakes: exit 1" "$rc" '^1$'
check "three mistakes: three errors" "$(grep -c ': error: ' <<<"$out")" '^3$'
check "three mistakes: each with file:line:col" "$(grep -cE '^bad\.yaml:[0-9]+:[0-9]+: error: ' <<<"$out")" '^3$'
check "three mistakes: did you mean" "$out" "did you mean 'formats'\?"
check "three mistakes: summary line" "$out" 'bad\.yaml: 3 errors'

out=$("$SPROUT" frobnicate 2>&1); rc=$?
check "unknown command exits 2 with a pointer to help" "$rc:$out" "^2:.*unknown command 'frobnicate'.*sprout help"
out=$("$SPROUT" build "$src/profiles/default.yaml" 2>&1); rc=$?
check "build without -o explains" "$rc:$out" '^2:.*-o DIR'
out=$("$SPROUT" help); check "help teaches the first commands" "$out" 'sprout build profiles/default.yaml -o out/'

# --- build from a tiny fake base
base="$work/fakebase"
mkdir -p "$base/boot" "$base/usr/lib/systemd/boot/efi" "$base/etc" "$base/var/lib/demo" "$base/usr/bin"
head -c 300000 /dev/urandom > "$base/boot/vmlinuz-6.1.0-99-amd64"
head -c 200001 /dev/urandom > "$base/boot/initrd.img-6.1.0-99-amd64"
head -c 50000 /dev/urandom > "$base/usr/lib/systemd/boot/efi/systemd-bootx64.efi"
echo 'ID=debian' > "$base/etc/os-release"
echo 'state' > "$base/var/lib/demo/file"
ln -s ../lib "$base/usr/bin/lib-link"
cat > "$work/p/tiny.yaml" <<YAML
name: tiny
base: ../fakebase
disk: {espSize: 40MiB, stateSize: 16MiB}
files:
  - {path: /etc/motd, content: hello}
YAML

build() {  # build OUTDIR [env...]: builds tiny.yaml with a different cwd, TMPDIR and umask
  local outdir=$1; shift
  mkdir -p "$work/cwd-$(basename "$outdir")" "$work/tmp-$(basename "$outdir")"
  (cd "$work/cwd-$(basename "$outdir")" && umask "${UMASK:-022}" &&
   env TMPDIR="$work/tmp-$(basename "$outdir")" "$@" "$SPROUT" build "$work/p/tiny.yaml" -o "$outdir" 2>&1)
}
out=$(build "$work/out1" LC_ALL=C); rc=$?
check "tiny build succeeds" "$rc" '^0$'
[ "$rc" -eq 0 ] || echo "$out"
check "tiny build reports step times" "$out" 'total +[0-9.]+ s'
check "no work directory left behind" "$(ls -A "$work/out1" | tr '\n' ' ')" '^build.json tiny.raw $'
out=$(UMASK=077 build "$work/out2" LC_ALL=C.UTF-8); rc=$?
check "second tiny build succeeds" "$rc" '^0$'
s1=$(sha256sum < "$work/out1/tiny.raw" || echo missing-1); s2=$(sha256sum < "$work/out2/tiny.raw" || echo missing-2)
check "rebuild is bit-identical (other cwd, TMPDIR, umask, locale)" "$s2" "^${s1}\$"
out=$(build "$work/out3" SOURCE_DATE_EPOCH=1800000000); rc=$?
s3=$(sha256sum < "$work/out3/tiny.raw" || echo missing-3)
check "a different SOURCE_DATE_EPOCH gives different bytes" "$([ "$s3" != "$s1" ] && echo differs)" '^differs$'

v=$(sgdisk -v "$work/out1/tiny.raw" 2>&1)
check "sgdisk -v finds no problems" "$v" 'No problems found'
types=$(sfdisk --json "$work/out1/tiny.raw" | grep -o '"type": *"[^"]*"' | tr 'a-f' 'A-F' | tr '\n' ' ')
check "partition types are DPS GUIDs (ESP, root x86-64, var)" "$types" \
  'C12A7328-F81F-11D2-BA4B-00A0C93EC93B.*4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709.*4D21B016-B534-45C2-A9FB-5C16E091FD2D'

# A failing build leaves nothing behind and names the fix.
cat > "$work/p/small-esp.yaml" <<YAML
extends: tiny.yaml
disk: {espSize: 32MiB}
files:
  - {path: /etc/big, source: big.bin}
YAML
head -c 1000 /dev/zero > "$work/p/big.bin"
head -c 30000000 /dev/urandom > "$base/boot/initrd.img-6.1.0-99-amd64"
out=$("$SPROUT" build "$work/p/small-esp.yaml" -o "$work/out4" 2>&1); rc=$?
check "an ESP too small fails with the fix" "$rc:$out" '^1:.*raise disk.espSize'
check "a failed build leaves no files" "$(ls -A "$work/out4" 2>/dev/null | wc -l)" '^0$'

echo "cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
