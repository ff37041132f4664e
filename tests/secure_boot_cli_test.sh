#!/bin/bash
# Black-box tests of sprout's Secure Boot commands (docs/secure-boot.md): keygen
# --secure-boot, uki, sign-efi and inspect on EFI files, with systemd's real stub and
# boot loader (systemd-boot-efi) and sbsigntool's sbverify as the reference checker.
# Booting the results under Secure Boot firmware is qemu-tests/secure-boot.sh.
set -uo pipefail
SPROUT=$(realpath "${SPROUT:?set SPROUT to the sprout binary}")
work=$(mktemp -d /tmp/sprout-sb-cli.XXXXXX)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0
check() {  # check NAME ACTUAL EXPECTED-REGEX
  if [[ "$2" =~ $3 ]]; then echo "ok   $1"; passed=$((passed + 1));
  else echo "FAIL $1: got '$2', want /$3/"; failed=$((failed + 1)); fi
}
stub=/usr/lib/systemd/boot/efi/linuxx64.efi.stub
sdboot=/usr/lib/systemd/boot/efi/systemd-bootx64.efi
for f in "$stub" "$sdboot" /usr/bin/sbverify; do
  [ -e "$f" ] || { echo "secure_boot_cli_test: $f is missing: scripts/install-deps installs systemd-boot-efi and sbsigntool"; exit 1; }
done

# --- keygen --secure-boot
out=$("$SPROUT" keygen --secure-boot -o "$work/sb" --name "site test key" 2>&1); rc=$?
check "keygen --secure-boot exits 0" "$rc" '^0$'
check "keygen --secure-boot: the key is private" "$(stat -c %a "$work/sb.key")" '^600$'
check "keygen --secure-boot: the certificate names the key" "$(openssl x509 -in "$work/sb.crt" -noout -subject 2>&1)" 'CN ?= ?site test key'
check "keygen --secure-boot: RSA 2048" "$(openssl pkey -in "$work/sb.key" -noout -text 2>&1 | head -n 1)" '2048 bit'
out=$("$SPROUT" keygen --secure-boot -o "$work/sb" 2>&1); rc=$?
check "keygen --secure-boot never replaces a key" "$rc:$out" '^1:.*sb\.key.*File exists; remove it or choose another prefix'

# --- uki: what it needs
out=$("$SPROUT" uki -o "$work/x.efi" --kernel /dev/null --cmdline x 2>&1); rc=$?
check "uki without --stub: exit 2, names the flag" "$rc:$out" '^2:.*uki needs --stub'
out=$("$SPROUT" uki --stub "$stub" --kernel "$stub" --cmdline x --key "$work/sb.key" -o "$work/x.efi" 2>&1); rc=$?
check "uki --key without --cert: exit 1, says both" "$rc:$out" '^1:.*--key and --cert go together'
printf 'not a PE file' >"$work/bogus.stub"
out=$("$SPROUT" uki --stub "$work/bogus.stub" --kernel "$stub" --cmdline x -o "$work/x.efi" 2>&1); rc=$?
check "uki with a stub that is not an EFI program: names it" "$rc:$out" '^1:.*the EFI stub is not a PE32\+ EFI image'
check "a refused uki writes nothing" "$(ls "$work" | grep -c 'x\.efi')" '^0$'

# --- uki: an unsigned and a signed one. The "kernel" is systemd-boot: any EFI program
# will do for the sections; booting is the QEMU test's.
printf 'PRETTY_NAME="sprout test"\n' >"$work/os-release"
head -c 100000 /dev/urandom >"$work/initrd"
mk() { "$SPROUT" uki --stub "$stub" --kernel "$sdboot" --initrd "$work/initrd" --cmdline "console=ttyS0 ro" --os-release "$work/os-release" "$@"; }
out=$(mk -o "$work/unsigned.efi" 2>&1); rc=$?
check "uki unsigned: exit 0 and says firmware will refuse it" "$rc:$out" '^0:.*not signed: Secure Boot firmware will refuse it'
out=$("$SPROUT" inspect "$work/unsigned.efi" 2>&1); rc=$?
check "inspect an unsigned UKI: its sections" "$out" 'sections: .* \.osrel .* \.cmdline .* \.linux .* \.initrd'
check "inspect an unsigned UKI: command line and os-release" "$out" 'cmdline: +console=ttyS0 ro.*os-release: sprout test'
check "inspect an unsigned UKI: no signature, exit 0" "$rc:$out" '^0:.*signature: +none'
check "inspect an unsigned UKI: no PCR policy" "$out" 'pcr policy: none \(no \.pcrsig'
mk --key "$work/sb.key" --cert "$work/sb.crt" -o "$work/signed.efi" >/dev/null 2>&1
mk --key "$work/sb.key" --cert "$work/sb.crt" -o "$work/signed2.efi" >/dev/null 2>&1
check "one UKI signed twice with one key: the same bytes" "$(cmp "$work/signed.efi" "$work/signed2.efi" 2>&1 && echo identical)" '^identical$'
out=$("$SPROUT" inspect "$work/signed.efi" 2>&1); rc=$?
check "inspect a signed UKI: the signer and a matching digest" "$rc:$out" '^0:.*signed by: +CN=site test key.*digest: +the signed Authenticode digest is this file'"'"'s'
check "inspect a signed UKI: the PCR policy is this file's and verifies" "$out" \
  "pcr policy: PCR 11 [0-9a-f]{64}, key sha256 [0-9a-f]{64}: signed for this file's PCR 11, and the signature verifies with \.pcrpkey"
check "inspect a signed UKI: .pcrpkey and .pcrsig follow the other sections" "$out" 'sections: .* \.initrd \([^)]*\) \.pcrpkey \([^)]*\) \.pcrsig '
out=$("$SPROUT" inspect --json "$work/signed.efi" 2>&1)
check "inspect --json: signed, the certificate's sha256" "$out" '"signed": true.*"certificateSha256": "[0-9a-f]{64}".*"digestMatches": true'
out=$(sbverify --cert "$work/sb.crt" "$work/signed.efi" 2>&1); rc=$?
check "sbverify accepts sprout's UKI signature" "$rc:$out" '^0:.*Signature verification OK'
"$SPROUT" keygen --secure-boot -o "$work/other" >/dev/null 2>&1
out=$(sbverify --cert "$work/other.crt" "$work/signed.efi" 2>&1); rc=$?
check "sbverify refuses it with another certificate" "$rc" '^1$'

# --- sign-efi and a changed file
out=$("$SPROUT" sign-efi "$sdboot" --key "$work/sb.key" --cert "$work/sb.crt" -o "$work/sd.efi" 2>&1); rc=$?
check "sign-efi signs systemd-boot" "$rc:$out" '^0:.*sd\.efi: .*systemd-bootx64\.efi signed by CN=site test key'
check "sbverify accepts the signed systemd-boot" "$(sbverify --cert "$work/sb.crt" "$work/sd.efi" 2>&1)" 'Signature verification OK'
out=$("$SPROUT" sign-efi "$work/sd.efi" --key "$work/sb.key" --cert "$work/sb.crt" -o "$work/sd2.efi" 2>&1); rc=$?
check "sign-efi refuses a signed image" "$rc:$out" '^1:.*sd\.efi is signed already; sign the unsigned image'
out=$("$SPROUT" sign-efi "$sdboot" --key "$work/other.key" --cert "$work/sb.crt" -o "$work/sd3.efi" 2>&1); rc=$?
check "sign-efi refuses a key that is not the certificate's" "$rc:$out" '^1:.*the key does not match the certificate \(CN=site test key\)'
check "a refused sign-efi writes nothing" "$(ls "$work" | grep -c 'sd[23]\.efi')" '^0$'
check "sign-efi without --key: exit 2" "$("$SPROUT" sign-efi "$sdboot" -o "$work/sd4.efi" >/dev/null 2>&1; echo $?)" '^2$'
cp "$work/signed.efi" "$work/changed.efi"
at=$(grep -abo 'console=ttyS0 ro' "$work/changed.efi" | head -n 1 | cut -d: -f1)
printf 'R' | dd of="$work/changed.efi" bs=1 seek=$((at + 14)) count=1 conv=notrunc status=none
out=$("$SPROUT" inspect "$work/changed.efi" 2>&1); rc=$?
check "inspect a UKI changed after signing: exit 1, says so" "$rc:$out" '^1:.*DOES NOT MATCH this file'
check "inspect a UKI changed after signing: its PCR policy is not the file's" "$out" \
  'pcr policy: PCR 11 [0-9a-f]{64}, key sha256 [0-9a-f]{64}: DOES NOT MATCH this file: the signed policy [0-9a-f]{64} is not'
check "sbverify agrees" "$(sbverify --cert "$work/sb.crt" "$work/changed.efi" >/dev/null 2>&1; echo $?)" '^1$'

# --- sprout build --secure-boot-key: a tiny base with systemd's real stub and systemd-boot
# (its "kernel" is random bytes: nothing here boots it; qemu-tests/secure-boot.sh boots a
# real signed image under Secure Boot firmware).
base=$work/fakebase
mkdir -p "$base/boot" "$base/usr/lib/systemd/boot/efi" "$base/usr/lib" "$work/p"
head -c 300000 /dev/urandom >"$base/boot/vmlinuz-6.1.0-99-amd64"
head -c 200001 /dev/urandom >"$base/boot/initrd.img-6.1.0-99-amd64"
cp "$sdboot" "$stub" "$base/usr/lib/systemd/boot/efi/"
printf 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\n' >"$base/usr/lib/os-release"
printf 'name: tiny\nbase: ../fakebase\nformats: [raw, iso, qcow2]\ndisk: {espSize: 40MiB, stateSize: 16MiB}\n' >"$work/p/tiny.yaml"
sbuild() {  # sbuild OUTDIR [flags...]
  local out=$1; shift
  SOURCE_DATE_EPOCH=1700000000 "$SPROUT" build "$work/p/tiny.yaml" -o "$out" "$@" 2>&1
}
out=$(sbuild "$work/b1" --secure-boot-key "$work/sb.key" --secure-boot-cert "$work/sb.crt"); rc=$?
check "build --secure-boot-key exits 0" "$rc" '^0$'
[ "$rc" = 0 ] || echo "$out" | tail -n 5
esp() {  # esp IMAGE PATH OUT: copies a file off the image's ESP (partition 1)
  local lo
  lo=$(sfdisk -J "$1" | python3 -c 'import json,sys; t=json.load(sys.stdin)["partitiontable"]; print(t["partitions"][0]["start"]*t.get("sectorsize",512))')
  MTOOLS_SKIP_CHECK=1 mcopy -n -i "$1@@$lo" "::$2" "$3" 2>/dev/null
}
esp "$work/b1/tiny.raw" sprout/sprout.efi "$work/b1.uki"
esp "$work/b1/tiny.raw" EFI/BOOT/BOOTX64.EFI "$work/b1.boot"
esp "$work/b1/tiny.raw" loader/entries/sprout-1-a.conf "$work/b1.entry"
check "the ESP holds a signed UKI that sbverify accepts" "$(sbverify --cert "$work/sb.crt" "$work/b1.uki" 2>&1)" 'Signature verification OK'
check "the ESP's systemd-boot is signed too" "$(sbverify --cert "$work/sb.crt" "$work/b1.boot" 2>&1)" 'Signature verification OK'
check "the ESP has no kernel or initrd outside the UKI" \
  "$(esp "$work/b1/tiny.raw" sprout/vmlinuz "$work/b1.k" && echo present || echo absent)" '^absent$'
hash=$("$SPROUT" inspect --json "$work/b1/tiny.raw" | python3 -c 'import json,sys; print(json.load(sys.stdin)["rootHash"])' 2>/dev/null)
uki=$("$SPROUT" inspect "$work/b1.uki" 2>&1)
check "the UKI's embedded command line has the image's root hash" "$uki" "cmdline: .*sprout\.roothash=${hash:-none}"
check "the UKI carries the base's os-release" "$uki" 'os-release: Debian GNU/Linux 12 \(bookworm\)'
check "the UKI carries a PCR policy signed with the Secure Boot key" "$uki" \
  "pcr policy: PCR 11 [0-9a-f]{64}, key sha256 $(openssl pkey -in "$work/sb.key" -pubout 2>/dev/null | openssl rsa -pubin -RSAPublicKey_out -outform DER 2>/dev/null | sha256sum | cut -c1-64): signed for this file's PCR 11"
insp=$("$SPROUT" inspect "$work/b1/tiny.raw" 2>&1)
check "inspect IMAGE names the UKI's signer" "$insp" 'sprout/sprout\.efi: signed by CN ?= ?site test key \(certificate sha256 [0-9a-f]{16}'
check "inspect IMAGE names systemd-boot's signer" "$insp" 'EFI/BOOT/BOOTX64\.EFI: signed by CN ?= ?site test key'
check "inspect --json IMAGE: the UKI's signature matches it" \
  "$("$SPROUT" inspect --json "$work/b1/tiny.raw" | python3 -c 'import json,sys; u=json.load(sys.stdin)["secureBoot"]["uki"]; print(u["signed"], u["digestMatches"])' 2>&1)" '^True True$'
check "the loader entry starts the UKI" "$(cat "$work/b1.entry")" 'efi /sprout/sprout\.efi'
iso_lo=$(python3 -c 'import sys' && sfdisk -J "$work/b1/tiny.iso" 2>/dev/null | python3 -c 'import json,sys; t=json.load(sys.stdin)["partitiontable"]; print([p for p in t["partitions"] if p["type"].upper()=="C12A7328-F81F-11D2-BA4B-00A0C93EC93B"][0]["start"]*512)' 2>/dev/null)
if [ -n "$iso_lo" ]; then
  MTOOLS_SKIP_CHECK=1 mcopy -n -i "$work/b1/tiny.iso@@$iso_lo" ::sprout/sprout.efi "$work/iso.uki" 2>/dev/null
  check "the ISO's ESP holds a signed UKI of the live command line" \
    "$(sbverify --cert "$work/sb.crt" "$work/iso.uki" >/dev/null 2>&1 && "$SPROUT" inspect "$work/iso.uki" | grep '^cmdline:')" 'sprout\.live=iso'
else
  check "the ISO has an ESP partition" "none found by sfdisk" '^an ESP$'
fi
out=$(sbuild "$work/b2" --secure-boot-key "$work/sb.key" --secure-boot-cert "$work/sb.crt"); rc=$?
check "two signed builds with one key are bit-identical (raw, ISO, qcow2)" \
  "$rc $(cd "$work/b1" && sha256sum tiny.raw tiny.iso tiny.qcow2 | sha256sum | cut -c1-16) $(cd "$work/b2" && sha256sum tiny.raw tiny.iso tiny.qcow2 | sha256sum | cut -c1-16)" \
  '^0 ([0-9a-f]{16}) \1$'
out=$(sbuild "$work/b3" --secure-boot-key "$work/sb.key"); rc=$?
check "build --secure-boot-key without --secure-boot-cert: says both" "$rc:$out" '^1:.*--secure-boot-key and --secure-boot-cert go together'
out=$(sbuild "$work/b3" --secure-boot-key "$work/snake.key" --secure-boot-cert "$work/sb.crt"); rc=$?
check "build with a missing key names the flag and file" "$rc:$out" '^1:.*--secure-boot-key .*snake\.key'
"$SPROUT" keygen --secure-boot -o "$work/other2" >/dev/null 2>&1
out=$(sbuild "$work/b3" --secure-boot-key "$work/other2.key" --secure-boot-cert "$work/sb.crt"); rc=$?
check "build with a key that is not the certificate's fails before building" "$rc:$out" '^1:.*the key does not match the certificate \(CN=site test key\)'
out=$(sbuild "$work/b3" --secure-boot-key "$work/sb.key" --secure-boot-cert "$work/sb.crt" --format raw,pxe); rc=$?
check "build --secure-boot-key refuses the PXE bundle, with the reason" "$rc:$out" '^1:.*pxe format.*nothing signs'
check "a refused build leaves no output" "$(ls "$work/b3" 2>/dev/null | grep -c 'tiny\.')" '^0$'

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
