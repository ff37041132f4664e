#!/bin/bash
# Media, reproducibility, signing and atomic outputs, from a tiny fake base (no kernel
# that boots; qemu-tests/media.sh boots the real media):
# - raw, ISO, PXE and qcow2 from one build; two builds with a different cwd, TMPDIR,
#   umask and locale give the same sha256 for every output, another SOURCE_DATE_EPOCH not;
# - sprout keygen / build --sign / verify, and a flipped byte in any file fails, naming it;
# - sprout inspect reads raw, qcow2 and ISO alone;
# - a build killed with SIGKILL leaves the previous build intact, and the next build
#   removes the dead build's work directory.
set -uo pipefail
SPROUT=$(realpath "${SPROUT:?set SPROUT to the sprout binary}")
work=$(mktemp -d /tmp/sprout-media.XXXXXX)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0
check() {  # check NAME ACTUAL EXPECTED-REGEX
  if [[ "$2" =~ $3 ]]; then echo "ok   $1"; passed=$((passed + 1));
  else echo "FAIL $1: got '$2', want /$3/"; failed=$((failed + 1)); fi
}

base="$work/fakebase"
mkdir -p "$base/boot" "$base/usr/lib/systemd/boot/efi" "$base/etc" "$base/usr/share/big" "$work/p"
head -c 300000 /dev/urandom > "$base/boot/vmlinuz-6.1.0-99-amd64"
head -c 200001 /dev/urandom > "$base/boot/initrd.img-6.1.0-99-amd64"
head -c 50000 /dev/urandom > "$base/usr/lib/systemd/boot/efi/systemd-bootx64.efi"
echo 'ID=debian' > "$base/etc/os-release"
cat > "$work/p/tiny.yaml" <<YAML
name: tiny
base: ../fakebase
formats: [raw, iso, pxe, qcow2]
disk: {espSize: 40MiB, stateSize: 16MiB}
files:
  - {path: /etc/motd, content: hello}
YAML

build() {  # build OUTDIR [env...]: another cwd and TMPDIR per output directory, umask $UMASK
  local outdir=$1; shift
  local tag; tag=$(basename "$outdir")
  mkdir -p "$work/cwd-$tag" "$work/tmp-$tag"
  (cd "$work/cwd-$tag" && umask "${UMASK:-022}" &&
   env TMPDIR="$work/tmp-$tag" "$@" "$SPROUT" build "$work/p/tiny.yaml" -o "$outdir" ${SIGN:+--sign "$SIGN"} 2>&1)
}
sums() { (cd "$1" && find . -mindepth 1 -name '.*' -prune -o -type f -printf '%P\n' | LC_ALL=C sort | xargs sha256sum); }

# --- every medium, twice, bit for bit
out=$(build "$work/a" LC_ALL=C); rc=$?
check "build of raw, iso, pxe, qcow2 succeeds" "$rc" '^0$'
[ "$rc" -eq 0 ] || echo "$out"
check "all four media and the bundle's files are there" "$(cd "$work/a" && ls -A | tr '\n' ' '; ls pxe | tr '\n' ' ')" \
  '^manifest.json pxe sbom.spdx.json sha256sums tiny.iso tiny.qcow2 tiny.raw boot.ipxe initrd.img vmlinuz $'
check "manifest lists every output with size and sha256" \
  "$(python3 -c "import json,sys; m=json.load(open(sys.argv[1])); print(' '.join(o['file']+':'+str(o['size']>0)+':'+str(len(o['sha256'])) for o in m['outputs']))" "$work/a/manifest.json")" \
  '^tiny.raw:True:64 tiny.iso:True:64 pxe/boot.ipxe:True:64 pxe/initrd.img:True:64 pxe/vmlinuz:True:64 tiny.qcow2:True:64$'
check "sha256sums covers every file, pxe/* included" "$(cd "$work/a" && sha256sum -c sha256sums 2>&1 | grep -c ': OK$')" '^8$'
check "the ISO has a GPT with an EFI system partition" "$(sfdisk --json "$work/a/tiny.iso" | grep -ci '"type": *"C12A7328-F81F-11D2-BA4B-00A0C93EC93B"')" '^1$'
check "the ISO's El Torito catalog has a UEFI boot image" "$(xorriso -indev "$work/a/tiny.iso" -report_el_torito plain 2>/dev/null | grep -c 'El Torito boot img : *1 *UEFI')" '^1$'
check "boot.ipxe boots the bundle's kernel with a live command line" "$(cat "$work/a/pxe/boot.ipxe")" \
  '^#!ipxe.*kernel vmlinuz initrd=initrd.img .*sprout.live=initrd fstab=no.*initrd initrd.img.*boot'
check "the PXE initrd carries the root, its hash tree and hash as cpio entries" \
  "$(grep -a -o 'sprout/root\.squashfs\|sprout/root\.verity\|sprout/roothash' "$work/a/pxe/initrd.img" | sort -u | tr '\n' ' ')" \
  '^sprout/root.squashfs sprout/root.verity sprout/roothash $'
out=$(UMASK=077 build "$work/b" LC_ALL=C.UTF-8); rc=$?
check "second build (other cwd, TMPDIR, umask 077, LC_ALL=C.UTF-8) succeeds" "$rc" '^0$'
s1=$(sums "$work/a"); s2=$(sums "$work/b")
check "every output is bit-identical across the two builds ($(wc -l <<<"$s1") files)" "$([ "$s1" = "$s2" ] && echo same || diff <(echo "$s1") <(echo "$s2"))" '^same$'
out=$(build "$work/c" SOURCE_DATE_EPOCH=1800000000); rc=$?
check "third build with another SOURCE_DATE_EPOCH succeeds" "$rc" '^0$'
for f in tiny.raw tiny.iso pxe/initrd.img tiny.qcow2; do
  check "another SOURCE_DATE_EPOCH changes $f" "$(cmp -s "$work/a/$f" "$work/c/$f" && echo same || echo differs)" '^differs$'
done

# --- inspect reads the image alone
for f in tiny.raw tiny.qcow2 tiny.iso; do
  cp "$work/a/$f" "$work/alone.${f#*.}"
  j=$("$SPROUT" inspect "$work/alone.${f#*.}" --json 2>&1)
  check "inspect $f: root hash, profile, kernel, empty image list" \
    "$(python3 -c "import json,sys; j=json.load(sys.stdin); print(j['format'], len(j['rootHash']), j['profile']['name'], j['kernel'], j['images'], any(p['type']=='c12a7328-f81f-11d2-ba4b-00a0c93ec93b' for p in j['partitions']))" <<<"$j" 2>&1)" \
    "^${f#*.} 64 tiny 6.1.0-99-amd64 \[\] True\$"
  rm -f "$work/alone.${f#*.}"
done
root_hash=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['rootHash'])" "$work/a/manifest.json")
check "inspect text shows the manifest's root hash" "$("$SPROUT" inspect "$work/a/tiny.raw")" "root hash: +$root_hash"
check "inspect text shows the build's serial (its epoch) and the nodes it is for" "$("$SPROUT" inspect "$work/a/tiny.raw")" \
  "update: +serial 1700000000, for the nodes of profile tiny, role control-plane, cluster sprout"
out=$("$SPROUT" inspect "$work/p/tiny.yaml" 2>&1); rc=$?
check "inspect of a non-image fails and says why" "$rc:$out" '^1:.*tiny.yaml: .*is it a sprout image'

# --- keys, signatures, verification
out=$("$SPROUT" keygen -o "$work/site" 2>&1); rc=$?
check "keygen succeeds" "$rc" '^0$'
check "private key is mode 0600, public 0644" "$(stat -c %a "$work/site.key") $(stat -c %a "$work/site.pub")" '^600 644$'
check "the key is Ed25519 (openssl)" "$(openssl pkey -in "$work/site.key" -noout -text 2>&1 | head -1)" 'ED25519'
out=$("$SPROUT" keygen -o "$work/site" 2>&1); rc=$?
check "keygen never overwrites a key" "$rc:$out" '^1:.*site.key.*exists'
out=$(SIGN="$work/site.key" build "$work/s" LC_ALL=C); rc=$?
check "signed build succeeds" "$rc" '^0$'
check "the signature verifies with openssl too" \
  "$(openssl pkeyutl -verify -pubin -inkey "$work/site.pub" -rawin -in "$work/s/manifest.json" -sigfile "$work/s/manifest.json.sig" 2>&1)" \
  'Signature Verified Successfully'
out=$("$SPROUT" verify "$work/s" --key "$work/site.pub" 2>&1); rc=$?
check "verify passes on a fresh signed build" "$rc:$out" '^0:.*verified 9 files and the signature'
"$SPROUT" keygen -o "$work/other" >/dev/null
out=$("$SPROUT" verify "$work/s" --key "$work/other.pub" 2>&1); rc=$?
check "verify with another key fails" "$rc:$out" '^1:.*FAIL manifest.json.sig: the signature does not match'
flip() {  # flip FILE: invert the byte in the middle
  python3 - "$1" <<'PY'
import sys
p = sys.argv[1]
with open(p, 'r+b') as f:
    f.seek(0, 2); n = f.tell(); f.seek(n // 2); b = f.read(1); f.seek(n // 2); f.write(bytes([b[0] ^ 0xff]))
PY
}
for f in tiny.raw tiny.iso tiny.qcow2 pxe/boot.ipxe pxe/initrd.img pxe/vmlinuz sbom.spdx.json manifest.json manifest.json.sig sha256sums; do
  cp -a "$work/s/$f" "$work/saved"
  flip "$work/s/$f"
  out=$("$SPROUT" verify "$work/s" --key "$work/site.pub" 2>&1); rc=$?
  check "one flipped byte in $f fails verify, naming it" "$rc:$(grep -a '^FAIL' <<<"$out" | head -1)" "^1:FAIL ${f//./\\.}:"
  mv "$work/saved" "$work/s/$f"
done
out=$("$SPROUT" verify "$work/s" --key "$work/site.pub" 2>&1); rc=$?
check "restored files verify again" "$rc" '^0$'

# --- atomic outputs: SIGKILL mid-way leaves the previous build intact
head -c 150000000 /dev/urandom > "$base/usr/share/big/blob"  # makes the build slow enough to kill
echo "other" > "$work/p/motd2"
sed -i 's/content: hello/content: changed/' "$work/p/tiny.yaml"
before=$(sums "$work/s")
kill_at() {  # kill_at PATTERN: start a build into $work/s, SIGKILL it once its log matches
  local log="$work/kill.log"
  : > "$log"
  (cd "$work" && exec "$SPROUT" build "$work/p/tiny.yaml" -o "$work/s" -j 1 > "$log" 2>&1) &
  local pid=$! i=0
  while ! grep -q "$1" "$log" && [ "$i" -lt 600 ] && kill -0 "$pid" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
  sleep 0.3
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  sleep 2  # let orphaned helpers (tar2sqfs, xorriso) end
}
for stage in "pack squashfs" "write hybrid ISO" "convert to qcow2"; do
  kill_at "$stage"
  check "killed during '$stage': previous outputs unchanged" "$([ "$(sums "$work/s")" = "$before" ] && echo same)" '^same$'
  out=$("$SPROUT" verify "$work/s" --key "$work/site.pub" 2>&1); rc=$?
  check "killed during '$stage': previous build still verifies" "$rc" '^0$'
  check "killed during '$stage': nothing new but a hidden work directory" \
    "$(ls -A "$work/s" | grep -v '^\.sprout-build-' | tr '\n' ' ')" \
    '^manifest.json manifest.json.sig pxe sbom.spdx.json sha256sums tiny.iso tiny.qcow2 tiny.raw $'
done
check "the killed builds left work directories behind" "$(ls -A "$work/s" | grep -c '^\.sprout-build-')" '^[1-9]'
out=$("$SPROUT" build "$work/p/tiny.yaml" -o "$work/s" 2>&1); rc=$?
check "the next build succeeds" "$rc" '^0$'
check "the next build removed the dead builds' work directories" "$(ls -A "$work/s" | grep -c '^\.sprout-build-')" '^0$'
out=$("$SPROUT" verify "$work/s" 2>&1); rc=$?
check "the next build's outputs verify" "$rc" '^0$'

echo "media: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
