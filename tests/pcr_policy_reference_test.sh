#!/bin/bash
# sprout's signed PCR policy (lib/efi/pcr_policy, docs/secure-boot.md) against systemd
# 252's own: `systemd-measure calculate` for the PCR 11 of a UKI `sprout uki --key`
# made, and `systemd-measure sign`, which insists on a TPM for its signature, with swtpm
# as that TPM (on loopback, stopped at the end), for the whole .pcrsig: pcrs, pkfp, pol
# and sig. Skips, saying why, without systemd-measure, swtpm or tpm2-tss's libraries.
set -uo pipefail
name=pcr_policy_reference_test
SPROUT=$(realpath "${SPROUT:?set SPROUT to the sprout binary}")
measure=/lib/systemd/systemd-measure
stub=/usr/lib/systemd/boot/efi/linuxx64.efi.stub
for f in "$measure" "$stub"; do
  [ -e "$f" ] || { echo "$name: skipped: $f is missing (Debian's systemd 252 and systemd-boot-efi)"; exit 0; }
done
for tool in objcopy jq openssl; do
  command -v "$tool" >/dev/null || { echo "$name: skipped: $tool not found"; exit 0; }
done
work=$(mktemp -d /tmp/sprout-pcr-ref.XXXXXX)
swtpm_pid=""
cleanup() {
  [ -n "$swtpm_pid" ] && kill "$swtpm_pid" 2>/dev/null && wait "$swtpm_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
passed=0 failed=0
check() {  # check NAME ACTUAL EXPECTED-REGEX
  if [[ "$2" =~ $3 ]]; then echo "ok   $1"; passed=$((passed + 1));
  else echo "FAIL $1: got '$2', want /$3/"; failed=$((failed + 1)); fi
}
equal() {  # equal NAME ACTUAL EXPECTED: check that ACTUAL is EXPECTED, byte for byte
  if [ "$2" == "$3" ]; then echo "ok   $1"; passed=$((passed + 1));
  else echo "FAIL $1: got '$2', want '$3'"; failed=$((failed + 1)); fi
}
section() {  # section UKI NAME: the section's bytes, as objcopy reads them
  objcopy -O binary --only-section="$2" "$1" "$work/section" && cat "$work/section"
}

# The UKI: a tiny "kernel" and os-release (the stub does not look at them here), a
# command line, signed with a fresh Secure Boot key.
printf 'hello\n' >"$work/linux"
printf 'os\n' >"$work/osrel"
printf '%s' 'console=ttyS0 ro' >"$work/cmdline"
"$SPROUT" keygen --secure-boot -o "$work/sb" >/dev/null || { echo "FAIL sprout keygen"; exit 1; }
openssl pkey -in "$work/sb.key" -pubout -out "$work/pub.pem" 2>/dev/null
out=$("$SPROUT" uki --stub "$stub" --kernel "$work/linux" --os-release "$work/osrel" --cmdline "$(cat "$work/cmdline")" \
  --key "$work/sb.key" --cert "$work/sb.crt" -o "$work/uki.efi" 2>&1); rc=$?
check "sprout uki --key: exit 0, a PCR policy line" "$rc:$out" '^0:.*pcr policy: PCR 11 [0-9a-f]{64}, signed by the same key'
check ".pcrpkey is openssl's SPKI PEM of the key" "$(cmp <(section "$work/uki.efi" .pcrpkey) "$work/pub.pem" && echo same)" '^same$'
inspect=$("$SPROUT" inspect --json "$work/uki.efi"); rc=$?
check "sprout inspect: the policy verifies, exit 0" "$rc:$(jq -c '[.pcrPolicy.policyMatches, .pcrPolicy.signatureVerifies]' <<<"$inspect")" '^0:\[true,true\]$'
pcr11=$(jq -r .pcrPolicy.pcr11 <<<"$inspect")
pkfp=$(jq -r .pcrPolicy.keyFingerprint <<<"$inspect")
echo "     sprout: PCR 11 $pcr11, pkfp $pkfp"

args=(--linux="$work/linux" --osrel="$work/osrel" --cmdline="$work/cmdline" --pcrpkey="$work/pub.pem" --bank=sha256 --phase=)
calc=$("$measure" calculate "${args[@]}" --json=short 2>&1); rc=$?
check "systemd-measure calculate's PCR 11 is sprout's" "$rc:$(jq -r '.sha256[0].hash' <<<"$calc" 2>&1)" "^0:$pcr11\$"
check "pkfp is sha256 of the PKCS#1 RSAPublicKey DER" \
  "$(openssl rsa -pubin -in "$work/pub.pem" -RSAPublicKey_out -outform DER 2>/dev/null | sha256sum | cut -d' ' -f1)" "^$pkfp\$"

# The signature, with swtpm as the TPM systemd-measure sign asks for.
skip=""
command -v swtpm >/dev/null || skip="swtpm not found (scripts/install-deps installs swtpm)"
libs=$(ldconfig -p)  # read whole: grep -q on the pipe would end ldconfig with SIGPIPE, which pipefail reports
for lib in libtss2-esys.so.0 libtss2-rc.so.0 libtss2-mu.so.0 libtss2-tcti-swtpm.so.0; do
  [ -z "$skip" ] && [[ "$libs" != *"$lib "* ]] &&
    skip="$lib not found (scripts/install-deps installs libtss2-esys-3.0.2-0 libtss2-rc0 libtss2-mu0 libtss2-tcti-swtpm0)"
done
if [ -n "$skip" ]; then
  echo "$name: systemd-measure sign skipped: $skip"
else
  mkdir "$work/tpm"
  for attempt in 1 2 3 4 5; do
    port=$((20000 + (RANDOM % 20000) * 2))
    swtpm socket --tpm2 --tpmstate dir="$work/tpm" --server type=tcp,port=$port,bindaddr=127.0.0.1 \
      --ctrl type=tcp,port=$((port + 1)),bindaddr=127.0.0.1 --flags not-need-init,startup-clear \
      >"$work/swtpm.log" 2>&1 &
    swtpm_pid=$!
    for _ in $(seq 50); do
      (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break
      kill -0 "$swtpm_pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -0 "$swtpm_pid" 2>/dev/null && break
    wait "$swtpm_pid" 2>/dev/null
    swtpm_pid=""
  done
  [ -n "$swtpm_pid" ] || { echo "FAIL swtpm did not start: $(cat "$work/swtpm.log")"; exit 1; }
  ref=$("$measure" sign --tpm2-device=swtpm:host=127.0.0.1,port=$port "${args[@]}" \
    --private-key="$work/sb.key" --public-key="$work/pub.pem" --json=short 2>&1); rc=$?
  kill "$swtpm_pid" 2>/dev/null && wait "$swtpm_pid" 2>/dev/null
  swtpm_pid=""
  ours=$(section "$work/uki.efi" .pcrsig)
  echo "     systemd-measure sign: $ref"
  for field in pcrs pkfp pol sig; do
    equal "systemd-measure sign's $field is sprout's .pcrsig's" "$rc:$(jq -c ".sha256[0].$field" <<<"$ours" 2>&1)" \
      "0:$(jq -c ".sha256[0].$field" <<<"$ref" 2>&1)"
  done
  equal "sprout's .pcrsig is systemd-measure sign's JSON, byte for byte" "$ours" "$ref"
fi

echo "$name: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
