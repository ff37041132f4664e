#!/bin/bash
# QEMU Secure Boot test (docs/secure-boot.md): unified kernel images made by `sprout uki`
# from an image's kernel, systemd's EFI stub and a small initrd, booted by Debian's OVMF
# with Secure Boot on (OVMF_CODE_4M.secboot.fd, whose OVMF_VARS_4M.snakeoil.fd enrolls
# Debian's snakeoil test certificate in db):
#   1. a UKI signed by sprout with the snakeoil key boots, with Secure Boot on in the
#      kernel's view, and runs with exactly its embedded command line;
#   2. the same UKI unsigned is refused by the firmware;
#   3. the signed UKI with one byte of its command line changed is refused;
#   4. a UKI signed with another key (not in db) is refused;
#   5. systemd-boot, signed by sprout, starts the signed UKI from a loader entry whose
#      options try to add to the command line: the stub ignores them.
#   6. the whole signed image (smoke.sh builds it with --secure-boot-key), its loader
#      entry edited to add a word, boots to login with Secure Boot on and the UKI's own
#      command line;
#   7. with a software TPM (swtpm) beside it, that first boot encrypts the state
#      partition (LUKS2, a TPM2 token sealed to PCRs 7+11, a recovery key printed once)
#      and moves the config area's cluster secret into it; a power cut, then the node
#      comes back unlocked with no human step; the disk with another TPM, or with Secure
#      Boot off and the entry's edited command line in force, does not unlock; on the
#      host the disk holds neither the cluster secret nor a value the node wrote to /var,
#      and the printed recovery key opens it.
# The initrd's /init prints "SPROUT-UKI booted", /proc/cmdline and the kernel's Secure
# Boot line, then powers off. A refusal is OVMF's "Access Denied" on the console and no
# such line.
# Usage: secure-boot.sh IMAGE.raw   (the kernel comes from the image's ESP; needs root
# for nothing; SPROUT is the sprout binary, default build/sprout)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
image=${1:?usage: secure-boot.sh IMAGE.raw}
sprout=$(realpath "${SPROUT:-$here/../build/sprout}")
code=/usr/share/OVMF/OVMF_CODE_4M.secboot.fd
vars=/usr/share/OVMF/OVMF_VARS_4M.snakeoil.fd
key=/usr/share/ovmf/PkKek-1-snakeoil.key
cert=/usr/share/ovmf/PkKek-1-snakeoil.pem
stub=/usr/lib/systemd/boot/efi/linuxx64.efi.stub
sdboot=/usr/lib/systemd/boot/efi/systemd-bootx64.efi
for f in "$code" "$vars" "$key" "$cert"; do
  [ -f "$f" ] || { echo "secure-boot: $f is missing: apt-get install ovmf" >&2; exit 1; }
done
for f in "$stub" "$sdboot"; do
  [ -f "$f" ] || { echo "secure-boot: $f is missing: apt-get install systemd-boot-efi" >&2; exit 1; }
done
[ -x /bin/busybox ] || { echo "secure-boot: /bin/busybox is missing: apt-get install busybox-static" >&2; exit 1; }
[ -f "$image" ] || { echo "secure-boot: no image at $image (the smoke test makes it with KEEP_IMAGE)" >&2; exit 1; }
work=$(mktemp -d /tmp/sprout-secure-boot.XXXXXX)
trap '[ "$failed" -gt 0 ] && echo "logs kept in $work" || rm -rf "$work"' EXIT
# Debian ships the snakeoil key encrypted, with the passphrase "snakeoil" (ovmf's
# README.Debian); sprout signs with plain PEM keys.
openssl pkey -in "$key" -passin pass:snakeoil -out "$work/snakeoil.key" || exit 1
key=$work/snakeoil.key

echo "== the parts: the image's kernel, systemd's stub ($(dpkg-query -W -f '${Version}' systemd-boot-efi 2>/dev/null)), a busybox initrd"
read -r esp_lo _ < <(partition_range "$image" 1)
export MTOOLS_SKIP_CHECK=1
if ! mcopy -n -i "$image@@$esp_lo" ::sprout/vmlinuz "$work/vmlinuz" 2>/dev/null; then
  # A Secure Boot build (the smoke image is one) has the kernel only inside its signed
  # UKI: take the .linux section's bytes.
  mcopy -n -i "$image@@$esp_lo" ::sprout/sprout.efi "$work/image.efi" ||
    { echo "secure-boot: neither sprout/vmlinuz nor sprout/sprout.efi on $image's ESP" >&2; exit 1; }
  python3 - "$work/image.efi" "$work/vmlinuz" <<'EOF' || exit 1
import struct, sys
pe = open(sys.argv[1], "rb").read()
o = struct.unpack_from("<I", pe, 0x3C)[0]
n, opt = struct.unpack_from("<H", pe, o + 6)[0], struct.unpack_from("<H", pe, o + 20)[0]
for i in range(n):
    s = o + 24 + opt + 40 * i
    if pe[s:s + 8].rstrip(b"\0") == b".linux":
        vsize, _, rsize, rptr = struct.unpack_from("<IIII", pe, s + 8)
        open(sys.argv[2], "wb").write(pe[rptr:rptr + min(vsize, rsize)])
        sys.exit(0)
sys.exit("no .linux section in " + sys.argv[1])
EOF
fi
mkdir -p "$work/initrd/bin" "$work/initrd/proc" "$work/initrd/sys"
cp /bin/busybox "$work/initrd/bin/busybox"
cat >"$work/initrd/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sys /sys
echo "SPROUT-UKI booted"
echo "SPROUT-UKI cmdline: $(/bin/busybox cat /proc/cmdline)"
echo "SPROUT-UKI secureboot: $(/bin/busybox dmesg | /bin/busybox grep -o 'Secure boot [a-z]*' | /bin/busybox head -n 1)"
/bin/busybox poweroff -f
EOF
chmod 0755 "$work/initrd/init"
# A newc cpio of the folder (no cpio program needed).
python3 - "$work/initrd" "$work/initrd.cpio" <<'EOF'
import os, sys
root, out = sys.argv[1], sys.argv[2]
def entry(name, mode, data=b"", ino=[1]):
    ino[0] += 1
    hdr = "070701" + "".join("%08x" % v for v in (ino[0], mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name) + 1, 0))
    b = hdr.encode() + name.encode() + b"\0"
    b += b"\0" * (-len(b) % 4) + data
    return b + b"\0" * (-len(b) % 4)
blob = b""
for d, dirs, files in sorted(os.walk(root)):
    rel = os.path.relpath(d, root)
    if rel != ".":
        blob += entry(rel, 0o040755)
    for f in sorted(files):
        p = os.path.join(d, f)
        blob += entry(os.path.normpath(os.path.join(rel, f)), 0o100755, open(p, "rb").read())
blob += entry("TRAILER!!!", 0)
open(out, "wb").write(blob)
EOF
embedded="console=ttyS0 panic=-1 sprout.uki=embedded"
uki() { "$sprout" uki --stub "$stub" --kernel "$work/vmlinuz" --initrd "$work/initrd.cpio" --cmdline "$embedded" --os-release /etc/os-release "$@"; }
uki -o "$work/unsigned.efi" >/dev/null || exit 1
uki --key "$key" --cert "$cert" -o "$work/signed.efi" || exit 1
uki --key "$key" --cert "$cert" -o "$work/signed-again.efi" >/dev/null || exit 1
check "one UKI signed twice with one key: the same bytes" "$(cmp -s "$work/signed.efi" "$work/signed-again.efi" && echo identical || echo differ)" '^identical$'
"$sprout" inspect "$work/signed.efi" | sed 's/^/   /'
"$sprout" keygen --secure-boot -o "$work/other" --name "not in db" >/dev/null || exit 1
uki --key "$work/other.key" --cert "$work/other.crt" -o "$work/other.efi" >/dev/null || exit 1
# The signed UKI with "embedded" in its command line changed to "Embedded".
cp "$work/signed.efi" "$work/tampered.efi"
at=$(grep -abo 'sprout.uki=embedded' "$work/tampered.efi" | head -n 1 | cut -d: -f1)
printf 'E' | dd of="$work/tampered.efi" bs=1 seek=$((at + 11)) count=1 conv=notrunc status=none
check "the tampered copy's signature no longer matches (sprout inspect exits 1)" "$("$sprout" inspect "$work/tampered.efi" >/dev/null 2>&1; echo $?)" '^1$'

# esp NAME BOOTX64 [UKI]: a FAT ESP image with BOOTX64 as the removable-media loader and,
# with UKI, a loader entry that starts it with added options.
esp() {
  local img=$work/$1.esp
  rm -f "$img"
  mkfs.vfat -C -n ESP "$img" 65536 >/dev/null || return 1
  export MTOOLS_SKIP_CHECK=1
  mmd -i "$img" ::EFI ::EFI/BOOT || return 1
  mcopy -i "$img" "$2" ::EFI/BOOT/BOOTX64.EFI || return 1
  if [ -n "${3:-}" ]; then
    mmd -i "$img" ::EFI/Linux ::loader ::loader/entries || return 1
    mcopy -i "$img" "$3" ::EFI/Linux/sprout.efi || return 1
    printf 'timeout 0\ndefault sprout.conf\n' >"$work/loader.conf"
    printf 'title sprout\nefi /EFI/Linux/sprout.efi\noptions console=ttyS0 sprout.injected=1\n' >"$work/entry.conf"
    mcopy -i "$img" "$work/loader.conf" ::loader/loader.conf || return 1
    mcopy -i "$img" "$work/entry.conf" ::loader/entries/sprout.conf || return 1
  fi
}

# boot NAME [CODE VARS]: boot the disk NAME.esp (BOOT_DISK names another) with Secure Boot
# on (or with the firmware CODE and VARS given) until the initrd powers off, the console
# shows BOOT_STOP (default: the firmware denying the image), or BOOT_LIMIT seconds (240)
# pass; the console is NAME.log.
boot() {
  local log=$work/$1.log code=${2:-$code}
  cp "${3:-$vars}" "$work/$1.vars"
  : >"$log"
  qemu-system-x86_64 -machine "q35,smm=on,accel=tcg" -cpu "${SPROUT_QEMU_CPU:-max,-avx,-avx2}" -m 2048 -smp 2 \
    -global driver=cfi.pflash01,property=secure,value=on \
    -drive "if=pflash,format=raw,unit=0,readonly=on,file=$code" \
    -drive "if=pflash,format=raw,unit=1,file=$work/$1.vars" \
    -drive "if=virtio,format=raw,file=${BOOT_DISK:-$work/$1.esp}" \
    ${BOOT_EXTRA:+-drive "if=virtio,format=raw,readonly=on,file=$BOOT_EXTRA"} \
    -display none -serial "file:$log" -monitor none -nic none -no-reboot ${BOOT_TPM:+$(tpm_args "$BOOT_TPM")} \
    2>"$log.qemu" &
  local pid=$! t0=$SECONDS
  while kill -0 "$pid" 2>/dev/null && [ $((SECONDS - t0)) -lt "${BOOT_LIMIT:-240}" ]; do
    grep -aqE "${BOOT_STOP:-Access Denied}" "$log" && break
    sleep 0.5
  done
  # Then the VM is killed: a power cut, with no TPM2_Shutdown, which the TPM counts
  # against its dictionary-attack limit (swtpm's: 3) on a boot that unsealed the state.
  # Every boot of checks 7 and 8 on TPM A ends so, more than the limit in a row: they
  # unlock only because sprout-firstboot resets the counter at each boot.
  sleep 1
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  BOOT_SECONDS=$((SECONDS - t0))
  [ -n "${BOOT_TPM:-}" ] && tpm_stop "$BOOT_TPM"
  return 0
}

# tpm_args DIR: starts a software TPM 2.0 (swtpm) keeping its state in DIR (a new DIR is
# a new TPM: another machine) and prints QEMU's arguments for it as a TIS device.
tpm_args() {
  mkdir -p "$1"
  swtpm socket --tpm2 --tpmstate "dir=$1" --ctrl "type=unixio,path=$1/sock" --pid "file=$1/pid" \
    --log "file=$1/log" --daemon || return 1
  local i=0
  while [ ! -S "$1/sock" ] && [ "$i" -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
  echo "-chardev socket,id=chrtpm,path=$1/sock -tpmdev emulator,id=tpm0,chardev=chrtpm -device tpm-tis,tpmdev=tpm0"
}
tpm_stop() { [ -f "$1/pid" ] && kill "$(cat "$1/pid")" 2>/dev/null; rm -f "$1/pid" "$1/sock"; }

line() { grep -a "SPROUT-UKI $2" "$work/$1.log" | head -n 1 | tr -d '\r' | sed "s/^.*SPROUT-UKI $2//"; }
denied() { grep -aq 'Access Denied' "$work/$1.log" && ! grep -aq 'SPROUT-UKI booted' "$work/$1.log" && echo refused || echo "not refused"; }

echo "== 1. the signed UKI"
esp signed "$work/signed.efi" || exit 1
boot signed
echo "   $BOOT_SECONDS s"
check "1. the signed UKI boots under Secure Boot" "$(grep -ac 'SPROUT-UKI booted' "$work/signed.log")" '^1$'
check "1. the kernel says Secure Boot is on" "$(line signed 'secureboot: ')" '^Secure boot enabled$'
check "1. the command line is the embedded one" "$(line signed 'cmdline: ')" "^$embedded\$"

for bad in unsigned tampered other; do
  echo "== the $bad UKI"
  esp "$bad" "$work/$bad.efi" || exit 1
  boot "$bad"
  echo "   $BOOT_SECONDS s: $(grep -a 'Access Denied' "$work/$bad.log" | head -n 1 | tr -d '\r')"
  case $bad in
    unsigned) n=2 what="the unsigned UKI is refused" ;;
    tampered) n=3 what="the UKI with one byte of its command line changed is refused" ;;
    other) n=4 what="a UKI signed by a key not in db is refused" ;;
  esac
  check "$n. $what" "$(denied "$bad")" '^refused$'
done

# state_header IMAGE OUT: copies the first 16 MiB of IMAGE's state partition (7), where
# LUKS2 keeps its header and key slots, to OUT: enough for luksDump and a passphrase
# test, with no loop device.
state_header() {
  local lo hi
  read -r lo hi < <(partition_range "$1" 7)
  dd if="$1" of="$2" bs=1M iflag=skip_bytes,count_bytes skip="$lo" count=$((16 << 20)) status=none
}

# count_bytes DISK SECRET: prints B:R, how often SECRET's base64 (B) and its first 16
# raw bytes (R) occur in DISK, read as bytes.
count_bytes() {
  python3 - "$1" "$2" <<'PY'
import base64, mmap, sys
secret = open(sys.argv[2], "rb").read()
if len(secret) < 16:
    sys.exit(f"count_bytes: {sys.argv[2]} holds {len(secret)} bytes, fewer than 16")
with open(sys.argv[1], "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
    def count(needle):
        n, at = 0, m.find(needle)
        while at >= 0:
            n, at = n + 1, m.find(needle, at + 1)
        return n
    print(f"{count(base64.b64encode(secret))}:{count(secret[:16])}")
PY
}

# check_encrypted_state: check 7, on the disk check 6 booted with TPM A.
check_encrypted_state() {
  local log=$work/image.log disk=$work/image.raw dump recovery secret64
  echo "== 7. the state partition, encrypted to the TPM at that first boot"
  grep -a 'sprout: encrypt\|sprout: moved\|sprout: unlocked' "$log" | tr -d '\r' | sed 's/^/   /'
  check "7. first boot: the state partition was encrypted" "$(grep -ao 'encrypted the state partition [^ ]* in [0-9.]* s' "$log" | head -n 1)" \
    '^encrypted the state partition /dev/vda7 in [0-9.]+ s$'
  recovery=$(grep -ao 'sprout: recovery key: [a-z-]*' "$log" | head -n 1 | sed 's/.*: //')
  check "7. first boot: a recovery key was printed on the console" "$recovery" '^[a-z]{8}(-[a-z]{8}){7}$'
  check "7. first boot: /var is ext4 on the unlocked LUKS device" "$(smoke_value "$log" var)" '^ext4 +/dev/mapper/sprout-state$'
  check "7. first boot: sprout-firstboot status says so" "$(smoke_value "$log" state-status)" '^state: encrypted \(LUKS2'
  check "7. first boot: cryptsetup luksDump on the node: LUKS2, a TPM2 token, PCR 7 and the signed PCR 11 policy" \
    "$(smoke_value "$log" luks-dump)" '^Version: 2;.*systemd-tpm2.*tpm2-hash-pcrs: 7;.*tpm2-pubkey-pcrs: 11;'
  check "7. first boot: sprout-firstboot status reads the TPM's lockout counter (a fresh TPM: 0)" \
    "$(smoke_value "$log" tpm-status)" '^tpm: lockout counter 0 of [1-9][0-9]*, '
  check "7. first boot: the config area's settings were moved into the encrypted state" \
    "$(grep -ac 'moved the config area' "$log")" '^[1-9]'
  check "7. first boot: sprout-firstboot still has the cluster secret" "$(smoke_value "$log" config)" 'cluster-secret set by'
  check "7. first boot: the node wrote /var (the value looked for on the disk below)" "$(smoke_value "$log" boot)" '^1$'
  # systemd's stub leaves StubPcrKernelImage (the PCR it measured the UKI's sections into)
  # in an EFI variable: PCR 11 holds this UKI, so the seal is bound to it.
  check "7. first boot: the stub measured the UKI into PCR 11" "$(smoke_value "$log" stub-pcr)" '^11$'
  # The PCR 11 the UKI's signed policy is for (sprout inspect predicts it from the UKI's
  # sections) is what the stub measured: the node, read after boot, holds that value
  # extended by the two phases systemd-pcrphase measures once the root runs ("sysinit",
  # "ready"), which is also why the running node itself cannot unseal the key again.
  local predicted phases
  predicted=$("$sprout" inspect "$work/image.efi" | sed -n 's/^pcr policy: PCR 11 \([0-9a-f]*\),.*/\1/p')
  phases=$(python3 -c 'import hashlib, sys
H = lambda b: hashlib.sha256(b).digest()
p = bytes.fromhex(sys.argv[1])
for word in ("sysinit", "ready"):
    p = H(p + H(word.encode()))
print(p.hex().upper())' "$predicted" 2>/dev/null)
  echo "   PCR 11: predicted for the UKI $predicted; with sysinit and ready $phases; read on the node $(smoke_value "$log" pcr11)"
  check "7. first boot: PCR 11 is the UKI's signed value, then systemd's two boot phases" \
    "$(smoke_value "$log" pcr11)" "^${phases:-none}\$"
  # The power cut: the VM was killed when the report was out, with no shutdown.
  state_header "$disk" "$work/state-header" || { check "7. the state partition's header copies" "failed" '^ok$'; return; }
  dump=$(cryptsetup luksDump "$work/state-header" 2>&1)
  echo "$dump" | grep -E '^(Version|Label):|systemd-|tpm2-hash-pcrs|tpm2-pubkey-pcrs|tpm2-pcr-bank|^Keyslots:|^  [0-9]+: luks2|Keyslot:' |
    sed 's/^/   luksDump: /'
  check "7. cryptsetup luksDump: LUKS2" "$(echo "$dump" | sed -n 's/^Version:[[:space:]]*//p')" '^2$'
  # PCR 7 literally (Secure Boot on, the same keys); PCR 11 through the signed policy whose
  # public key the UKI carries, so that another UKI of the same signer unlocks (check 8).
  check "7. cryptsetup luksDump: a TPM2 token bound to PCR 7, and to PCR 11 through the UKI's signed policy" \
    "$(echo "$dump" | grep -c 'systemd-tpm2'):$(echo "$dump" | sed -n 's/^[[:space:]]*tpm2-hash-pcrs:[[:space:]]*//p' | head -n 1):$(echo "$dump" | sed -n 's/^[[:space:]]*tpm2-pubkey-pcrs:[[:space:]]*//p' | head -n 1)" '^1:7:11$'
  check "7. cryptsetup luksDump: two key slots (the TPM's and the recovery key), the set-up key gone" \
    "$(echo "$dump" | grep -cE '^  [0-9]+: luks2')" '^2$'
  check "7. the printed recovery key opens the state on the host" \
    "$(printf '%s' "$recovery" | cryptsetup open --test-passphrase --key-file - "$work/state-header" >/dev/null 2>&1 && echo opens || echo refused)" '^opens$'
  check "7. (control) a wrong recovery key does not" \
    "$(printf '%s' "${recovery%?}x" | cryptsetup open --test-passphrase --key-file - "$work/state-header" >/dev/null 2>&1 && echo opens || echo refused)" '^refused$'
  # The secret is random bytes: grep -F would split it at any newline byte into short
  # patterns (and the shell drops NULs), so the exact bytes are counted in Python.
  check "7. the powered-off disk, read on the host: no cluster secret (base64 or raw)" \
    "$(count_bytes "$disk" "$work/secret")" '^0:0$'
  check "7. the powered-off disk, read on the host: no plaintext of the value the node wrote to /var" \
    "$(grep -c -a -F 'written-in-boot-1' "$disk")" '^0$'

  echo "== 7. after the power cut, the same machine (TPM, Secure Boot) boots again with no human step"
  BOOT_TPM=$work/tpm-a BOOT_DISK=$disk BOOT_LIMIT=600 BOOT_STOP='SPROUT-SMOKE done|Access Denied|Kernel panic|Rebooting' boot again
  echo "   $BOOT_SECONDS s"
  check "7. second boot: the TPM unlocked the state" "$(grep -ac 'unlocked the encrypted state partition' "$work/again.log")" '^[1-9]'
  echo "   $(smoke_value "$work/again.log" tpm-reset)"
  check "7. second boot: the TPM counted the power cut, and sprout-firstboot reset its lockout counter" \
    "$(smoke_value "$work/again.log" tpm-reset)" '^(sprout-firstboot: )?TPM: lockout counter [1-9][0-9]* of [1-9][0-9]*, .*; reset, now lockout counter 0 of'
  check "7. second boot: nothing was encrypted again" "$(grep -ac 'encrypting the state partition' "$work/again.log")" '^0$'
  check "7. second boot: /var kept the first boot's file" "$(smoke_value "$work/again.log" prev-marker)" '^written-in-boot-1$'
  check "7. second boot: the cluster secret, from the kept settings" "$(smoke_value "$work/again.log" config)" 'cluster-secret set by'

  echo "== 7. the disk in another machine (a new TPM)"
  BOOT_TPM=$work/tpm-b BOOT_DISK=$disk BOOT_LIMIT=300 BOOT_STOP='login:|Rebooting|Kernel panic|Access Denied' boot other-tpm
  echo "   $BOOT_SECONDS s: $(grep -a 'did not release' "$work/other-tpm.log" | head -n 1 | tr -d '\r' | cut -c1-150)"
  check "7. another TPM does not unlock the state, and the node stops" \
    "$(grep -ac 'did not release the key' "$work/other-tpm.log"):$(grep -ac 'login:' "$work/other-tpm.log")" '^[1-9][0-9]*:0$'

  echo "== 7. the same machine with Secure Boot off, so the loader entry's edited command line is used"
  BOOT_TPM=$work/tpm-a BOOT_DISK=$disk BOOT_LIMIT=300 BOOT_STOP='login:|Rebooting|Kernel panic' \
    boot sb-off /usr/share/OVMF/OVMF_CODE_4M.fd /usr/share/OVMF/OVMF_VARS_4M.fd
  echo "   $BOOT_SECONDS s"
  check "7. Secure Boot off: the edited command line is in force" \
    "$(grep -a 'Command line:' "$work/sb-off.log" | head -n 1 | grep -c 'sprout.injected=1')" '^1$'
  check "7. Secure Boot off: the TPM does not unlock the state, and the node stops" \
    "$(grep -ac 'did not release the key' "$work/sb-off.log"):$(grep -ac 'login:' "$work/sb-off.log")" '^[1-9][0-9]*:0$'
}

# check_update_unlocks: check 8, on check 7's disk and machine (TPM A, Secure Boot on): an
# A/B update to another build signed with the same key, then the rollback from it, and
# both unlock the state with the TPM, through the signed PCR 11 policy each UKI carries.
# The update build (UPDATE_BUILD, a second build of the smoke profile with a later epoch,
# which smoke.sh makes with KEEP_UPDATE) reaches the node on a second disk; the smoke
# check installs it with `sprout-firstboot update apply --tries 1`.
check_update_unlocks() {
  local build=${UPDATE_BUILD:-} disk=$work/image.raw old new raw marker entries
  echo "== 8. an A/B update to another build by the same signer, and the rollback, unlock the state"
  if [ -z "$build" ] || [ ! -f "$build/manifest.json" ]; then
    echo "== 8. SKIPPED: no update build given (UPDATE_BUILD=DIR: a second build of the smoke profile, made by smoke.sh with KEEP_UPDATE=DIR)"
    return
  fi
  old=$(grep -a 'Command line:' "$work/image.log" | head -n 1 | grep -o 'sprout.roothash=[0-9a-f]*' | cut -d= -f2)
  new=$(sed -n 's/.*"rootHash": *"\([0-9a-f]*\)".*/\1/p' "$build/manifest.json" | head -n 1)
  raw=$(sed -n 's/.*"file": *"\([^"]*\.raw\)".*/\1/p' "$build/manifest.json" | head -n 1)
  mkdir -p "$work/update/build"
  cp "$build/manifest.json" "$build/sha256sums" "$work/update/build/" &&
    cp --sparse=always "$build/$raw" "$work/update/build/" || { check "8. the update build is readable" "no" '^yes$'; return; }
  truncate -s 4G "$work/update.img"
  mkfs.ext4 -q -F -L SPROUT-UPDATE -d "$work/update" "$work/update.img" || { check "8. the update disk is made" "no" '^yes$'; return; }
  rm -rf "$work/update"

  BOOT_TPM=$work/tpm-a BOOT_DISK=$disk BOOT_EXTRA=$work/update.img BOOT_LIMIT=1200 \
    BOOT_STOP='SPROUT-SMOKE done|Access Denied|Kernel panic|Rebooting' boot update-apply
  echo "   $BOOT_SECONDS s"
  grep -a 'SPROUT-SMOKE update-apply:' "$work/update-apply.log" | tr -d '\r' | sed 's/^.*update-apply: /   apply: /' | tail -n 12
  # Before this boot on TPM A: the first boot and the second, both cut, and the boot with
  # Secure Boot off, which the TPM refused and which panicked: a third unclean one. The
  # counter's reset at the second boot is why this boot still unlocks.
  echo "   $(smoke_value "$work/update-apply.log" tpm-reset)"
  check "8. after three unclean shutdowns in a row, the state still unlocks and the counter is reset again" \
    "$(grep -ac 'unlocked the encrypted state partition' "$work/update-apply.log"):$(smoke_value "$work/update-apply.log" tpm-reset)" \
    '^[1-9][0-9]*:(sprout-firstboot: )?TPM: lockout counter [1-9][0-9]* of [1-9][0-9]*, .*; reset, now lockout counter 0 of'
  check "8. the node installed the update into its other slot" \
    "$(grep -a 'SPROUT-SMOKE update-apply: exit=' "$work/update-apply.log" | tr -d '\r' | sed 's/.*exit=//')" '^0$'
  marker=written-in-boot-$(smoke_value "$work/update-apply.log" boot)
  read -r esp_node _ < <(partition_range "$disk" 1)
  entries=$(mdir -b -i "$disk@@$esp_node" ::loader/entries 2>/dev/null | sed 's|.*/||' | sort | tr '\n' ' ')
  check "8. the ESP has the new slot's signed UKI and a loader entry with one try" \
    "$(mdir -b -i "$disk@@$esp_node" ::sprout/b 2>/dev/null | grep -c 'sprout.efi$'):$entries" '^1:sprout-1-a\.conf sprout-2-b\+1\.conf $'

  echo "== 8. the update's first boot (slot b, on trial; powered off before its health gate commits it)"
  BOOT_TPM=$work/tpm-a BOOT_DISK=$disk BOOT_LIMIT=600 BOOT_STOP='SPROUT-SMOKE done|Access Denied|Kernel panic|Rebooting' \
    boot update-boot
  echo "   $BOOT_SECONDS s: $(grep -a 'unlocked the encrypted\|did not release' "$work/update-boot.log" | head -n 1 | tr -d '\r')"
  check "8. the update boots the new build's UKI" \
    "$(grep -a 'Command line:' "$work/update-boot.log" | head -n 1 | grep -o 'sprout.roothash=[0-9a-f]*' | cut -d= -f2)" "^$new\$"
  check "8. the new UKI unlocked the state with the TPM, and nothing was encrypted again" \
    "$(grep -ac 'unlocked the encrypted state partition' "$work/update-boot.log"):$(grep -ac 'encrypting the state' "$work/update-boot.log")" '^[1-9][0-9]*:0$'
  check "8. slot b's /var is the same encrypted state, with the previous boot's file" \
    "$(smoke_value "$work/update-boot.log" var) $(smoke_value "$work/update-boot.log" prev-marker)" "^ext4 +/dev/mapper/sprout-state $marker\$"
  marker=written-in-boot-$(smoke_value "$work/update-boot.log" boot)

  echo "== 8. the rollback: the trial was never committed and its one try is spent, so the old slot boots"
  BOOT_TPM=$work/tpm-a BOOT_DISK=$disk BOOT_LIMIT=600 BOOT_STOP='SPROUT-SMOKE done|Access Denied|Kernel panic|Rebooting' \
    boot rollback
  echo "   $BOOT_SECONDS s"
  check "8. the rollback boots the old build's UKI" \
    "$(grep -a 'Command line:' "$work/rollback.log" | head -n 1 | grep -o 'sprout.roothash=[0-9a-f]*' | cut -d= -f2)" "^$old\$"
  check "8. the old UKI unlocked the state with the TPM" "$(grep -ac 'unlocked the encrypted state partition' "$work/rollback.log")" '^[1-9]'
  check "8. /var is the same encrypted state, with the update boot's file" \
    "$(smoke_value "$work/rollback.log" var) $(smoke_value "$work/rollback.log" prev-marker)" "^ext4 +/dev/mapper/sprout-state $marker\$"
}

echo "== 5. signed systemd-boot starts the signed UKI from an entry that adds options"
"$sprout" sign-efi --key "$key" --cert "$cert" -o "$work/systemd-bootx64.efi" "$sdboot" || exit 1
esp loader "$work/systemd-bootx64.efi" "$work/signed.efi" || exit 1
boot loader
echo "   $BOOT_SECONDS s"
check "5. the UKI booted from the loader entry" "$(grep -ac 'SPROUT-UKI booted' "$work/loader.log")" '^1$'
check "5. the entry's options did not reach the kernel" "$(line loader 'cmdline: ')" "^$embedded\$"
# The control: the same disk without Secure Boot, where the stub does take the entry's
# options instead of its own, so check 5 can fail.
cp "$work/loader.esp" "$work/loader-plain.esp"
boot loader-plain /usr/share/OVMF/OVMF_CODE_4M.fd /usr/share/OVMF/OVMF_VARS_4M.fd
echo "   without Secure Boot: $BOOT_SECONDS s"
check "5. (control) without Secure Boot the entry's options do replace it" "$(line loader-plain 'cmdline: ')" 'sprout\.injected=1'

# 6. The whole image, as `sprout build --secure-boot-key` made it (smoke.sh signs the smoke
# image with the snakeoil key), boots under Secure Boot to a login prompt on its verity
# root, from a copy whose loader entry was edited to add a word: the kernel must not see it.
if [ -n "$(mdir -b -i "$image@@$esp_lo" ::sprout/sprout.efi 2>/dev/null)" ]; then
  echo "== 6. the signed image itself, its loader entry edited"
  cp --sparse=always "$image" "$work/image.raw"
  # A disk larger than the image, as a node's is: the first boot grows the state partition
  # before it encrypts it, and check 8's update has room in /var for its download.
  truncate -s +3G "$work/image.raw"
  mcopy -n -i "$work/image.raw@@$esp_lo" ::loader/entries/sprout-1-a.conf "$work/image-entry.conf" || exit 1
  sed -i 's/^options .*/& sprout.injected=1/' "$work/image-entry.conf"
  mcopy -o -i "$work/image.raw@@$esp_lo" "$work/image-entry.conf" ::loader/entries/sprout-1-a.conf || exit 1
  # A cluster secret in the config area, to look for on the disk afterwards.
  head -c 32 /dev/urandom >"$work/secret"
  "$sprout" personalize "$work/image.raw" --cluster-secret "$work/secret" --hostname sb-node --role control-plane \
    >/dev/null || exit 1
  # Encrypted state needs a TPM: when the image asks for it (smoke.yaml does), this first
  # boot has one, and the smoke check's report is awaited (it has written /var by then);
  # killing the VM there is the power cut of check 7.
  encrypted=no
  grep -aq 'sprout.state.encryption=tpm2' "$work/image-entry.conf" && encrypted=yes
  if [ "$encrypted" = yes ]; then
    command -v swtpm >/dev/null || { echo "secure-boot: swtpm is missing: apt-get install swtpm swtpm-tools" >&2; exit 1; }
    BOOT_TPM=$work/tpm-a BOOT_DISK=$work/image.raw BOOT_LIMIT=600 BOOT_STOP='SPROUT-SMOKE done|Access Denied|Kernel panic|Rebooting' boot image
  else
    # To a login prompt on the console (about 60-120 s in emulation), or a refusal.
    BOOT_DISK=$work/image.raw BOOT_LIMIT=600 BOOT_STOP='login:|Access Denied' boot image
  fi
  log=$work/image.log
  echo "   $BOOT_SECONDS s"
  kcmd=$(grep -a 'Command line:' "$log" | head -n 1 | tr -d '\r')
  check "6. the signed image boots under Secure Boot to a login prompt" "$(grep -ac 'login:' "$log")" '^[1-9]'
  check "6. the kernel says Secure Boot is on" "$(grep -ao 'Secure boot enabled' "$log" | head -n 1)" '^Secure boot enabled$'
  check "6. the kernel's command line is the UKI's: the root hash, not the entry's added word" \
    "$(echo "$kcmd" | grep -c 'sprout.injected'):$(echo "$kcmd" | grep -o 'sprout.roothash=[0-9a-f]*' | cut -c1-28)" \
    '^0:sprout\.roothash=[0-9a-f]{12}$'
  check "6. the root is opened through dm-verity" "$(grep -ac 'device-mapper: verity: sha256' "$log")" '^[1-9]'
  if [ "$encrypted" = yes ]; then
    check_encrypted_state
    check_update_unlocks
  else
    echo "== 7. SKIPPED: $image does not ask for encrypted state (disk.stateEncryption: tpm2, as smoke.yaml does)"
  fi
else
  echo "== 6. SKIPPED: $image has no signed UKI (build it with --secure-boot-key, as smoke.sh does)"
fi

echo "secure-boot: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
