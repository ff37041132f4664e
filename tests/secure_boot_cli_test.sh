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
mk --key "$work/sb.key" --cert "$work/sb.crt" -o "$work/signed.efi" >/dev/null 2>&1
mk --key "$work/sb.key" --cert "$work/sb.crt" -o "$work/signed2.efi" >/dev/null 2>&1
check "one UKI signed twice with one key: the same bytes" "$(cmp "$work/signed.efi" "$work/signed2.efi" 2>&1 && echo identical)" '^identical$'
out=$("$SPROUT" inspect "$work/signed.efi" 2>&1); rc=$?
check "inspect a signed UKI: the signer and a matching digest" "$rc:$out" '^0:.*signed by: +CN=site test key.*digest: +the signed Authenticode digest is this file'"'"'s'
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
check "sbverify agrees" "$(sbverify --cert "$work/sb.crt" "$work/changed.efi" >/dev/null 2>&1; echo $?)" '^1$'

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
