#!/bin/bash
# arm64 test (issue 17), run by hand: builds qemu-tests/arm64.yaml for arm64 twice
# (raw and qcow2) and checks the two builds are bit-identical, shows `sprout inspect`'s
# arm64 partition types, boots the image under qemu-system-aarch64 -M virt with AAVMF
# to multi-user.target on its verity root, and boots a copy with one flipped root byte,
# which must not come up. With AMD64_TWIN=1 (the default) it also builds and boots the
# same profile for amd64 in the same run and prints the arm64/amd64 ratios of build and
# boot time. Software emulation throughout; one VM at a time.
# Usage: qemu-tests/arm64.sh   (as root the first time: the arm64 base needs mmdebstrap)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
. "$here/lib.sh"

SPROUT=${SPROUT:-$top/build/sprout}
CACHE=${SPROUT_CACHE:-/var/cache/sprout}
AMD64_TWIN=${AMD64_TWIN:-1}
ARM64_TWICE=${ARM64_TWICE:-1}  # 0: build once (CI: the bit-identical check of every other build is repro_test's)
# arm64 in emulation on 2 cores is several times slower than amd64 (docs/arm64.md).
BOOT_TIMEOUT=${BOOT_TIMEOUT:-1200}
work=$(mktemp -d /tmp/sprout-arm64.XXXXXX)
cleanup() {
  if [ "$failed" -gt 0 ] || [ -n "${KEEP_LOGS:-}" ]; then
    echo "logs kept in $work"
    rm -rf "$work"/a "$work"/b "$work"/amd64 "$work"/*.raw "$work"/*.qcow2 "$work"/*.fd 2>/dev/null
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The arm64 base runs its package scripts under qemu-user through binfmt_misc; in a
# container without systemd nobody mounted it (sprout registers the handler itself).
if [ ! -f /proc/sys/fs/binfmt_misc/status ] && [ "$(id -u)" -eq 0 ]; then
  mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc || echo "arm64: cannot mount binfmt_misc" >&2
fi
find_firmware arm64 || exit 1
qemu_for arm64 tcg || exit 1
if [ -z "${SPROUT_FIRSTBOOT_ARM64:-}" ]; then
  # Always: ninja rebuilds only what changed, and a stale arm64 program would be tested.
  echo "== cross-build sprout-firstboot for arm64"
  "$top/scripts/cross-firstboot" arm64 "$(dirname "$SPROUT")" >/dev/null || exit 1
fi

# timed_build ARCH DIR: builds the test profile for ARCH into DIR; sets BUILD_SECONDS.
timed_build() {
  local start=$(date +%s.%N)
  "$SPROUT" build "$here/arm64.yaml" --arch "$1" -o "$2" --cache-dir "$CACHE" > "$work/build-$1-$(basename "$2").log" 2>&1
  local rc=$?
  BUILD_SECONDS=$(echo "$(date +%s.%N) - $start" | bc)
  tail -n 20 "$work/build-$1-$(basename "$2").log"
  return $rc
}

# report LOG: the guest's SPROUT-SMOKE lines, for the record.
report() { grep -a 'SPROUT-SMOKE' "$1" | tr -d '\r'; }

echo "== arm64 base (cached in $CACHE)"
"$SPROUT" base "$here/arm64.yaml" --arch arm64 --cache-dir "$CACHE" || exit 1
if [ "$AMD64_TWIN" = 1 ]; then
  echo "== amd64 base (cached in $CACHE)"
  "$SPROUT" base "$here/arm64.yaml" --arch amd64 --cache-dir "$CACHE" || exit 1
  # The twin's container image is built once before the timed build, as the arm64 one is below.
  "$SPROUT" pull "$here/arm64.yaml" --arch amd64 --cache-dir "$CACHE" || exit 1
fi

if [ "$ARM64_TWICE" = 1 ]; then
  echo "== build for arm64, twice"
else
  echo "== build for arm64, once (ARM64_TWICE=0: the second build and the bit-identical check are skipped)"
fi
timed_build arm64 "$work/a"
check "arm64 build 1" "$?" '^0$'
arm64_build_1=$BUILD_SECONDS
arm64_build=$BUILD_SECONDS
if [ "$ARM64_TWICE" = 1 ]; then
  timed_build arm64 "$work/b"
  check "arm64 build 2" "$?" '^0$'
  arm64_build=$BUILD_SECONDS
  for f in arm64.raw arm64.qcow2; do
    a=$(sha256sum < "$work/a/$f" | cut -c1-64) b=$(sha256sum < "$work/b/$f" | cut -c1-64)
    echo "   sha256 $f: build 1 $a, build 2 $b"
    check "arm64 builds are bit-identical: $f" "$([ -n "$a" ] && [ "$a" = "$b" ] && echo same)" '^same$'
  done
fi
inspect=$("$SPROUT" inspect "$work/a/arm64.raw")
echo "$inspect"
check "inspect: root partition type is the DPS arm64 root" \
  "$(grep -a 'sprout-root-a ' <<<"$inspect" | grep -o 'type [0-9a-f-]* (root arm64)')" \
  '^type b921b045-1df0-41c3-af44-4c6f280d3fae \(root arm64\)$'
check "inspect: verity partition type is the DPS arm64 root verity" \
  "$(grep -a 'sprout-root-a-verity' <<<"$inspect" | grep -o 'type [0-9a-f-]* (root-verity arm64)')" \
  '^type df3300ce-d69f-4c92-978c-9bfb0f38d820 \(root-verity arm64\)$'
check "inspect: the A/B update slots are found on the arm64 root type" "$(grep -a '^slots:' <<<"$inspect")" \
  '^slots: +a = partition 2 \(sprout-root-a\) +b = partition 4 \(_empty\)$'
check "inspect: the kernel is Debian's arm64 kernel" "$(grep -a '^kernel:' <<<"$inspect")" 'arm64$'
check "the ESP boots systemd-bootaa64 as BOOTAA64.EFI" \
  "$(python3 - "$work/a/arm64.raw" <<'EOF'
import json, subprocess, sys
t = json.loads(subprocess.check_output(["sfdisk", "--json", sys.argv[1]]))["partitiontable"]["partitions"][0]
print(subprocess.check_output(["mdir", "-b", "-i", sys.argv[1] + "@@" + str(t["start"] * 512), "::/EFI/BOOT"],
                              env={"MTOOLS_SKIP_CHECK": "1", "PATH": "/usr/bin:/bin"}).decode().strip())
EOF
)" 'BOOTAA64\.EFI$'

echo "== boot the arm64 image under qemu-system-aarch64 -M virt (AAVMF)"
cp "$FW_VARS" "$work/vars.fd"
image_mib=$(( $(stat -c %s "$work/a/arm64.raw") / 1048576 ))
qemu-img create -q -f qcow2 -b "$work/a/arm64.qcow2" -F qcow2 "$work/disk.qcow2" "$((2 * image_mib))M"
boot_vm "$work/disk.qcow2" "$work/vars.fd" "$work/serial-arm64.log" "$BOOT_TIMEOUT"
rc=$?
arm64_boot=${BOOT_TOTAL_SECONDS:-0}
echo "   login prompt after ${BOOT_LOGIN_SECONDS:-never} s, powered off after ${BOOT_TOTAL_SECONDS:-?} s"
report "$work/serial-arm64.log"
log="$work/serial-arm64.log"
check "arm64 boot: guest powered off by itself" "$rc" '^0$'
check "arm64 boot: the guest is aarch64" "$(smoke_value "$log" machine)" '^aarch64$'
check "arm64 boot: reached multi-user.target" "$(smoke_value "$log" multi-user)" '^active$'
check "arm64 boot: root is read-only squashfs" "$(smoke_value "$log" root)" '^squashfs +ro'
check "arm64 boot: root is mounted from the verity device" "$(smoke_value "$log" root-source)" '^/dev/mapper/root$'
check "arm64 boot: dmsetup table shows verity" "$(smoke_value "$log" root-table)" '^verity$'
check "arm64 boot: writing the root is refused" "$(smoke_value "$log" root-write)" '^refused$'
check "arm64 boot: /var is ext4 on the state partition" "$(smoke_value "$log" var)" '^ext4 +/dev/vda7'
check "arm64 boot: sprout-firstboot (arm64 build) active" "$(smoke_value "$log" firstboot)" '^active$'
grep -a 'Reached target.*Multi-User' "$log" | tr -d '\r' | head -n 1

echo "== boot an arm64 copy with one flipped root byte: it must refuse"
cp --sparse=always "$work/a/arm64.raw" "$work/tampered.raw"
read -r lo hi < <(partition_range "$work/tampered.raw" 2)
at=$((lo + 1000))
byte=$(dd if="$work/tampered.raw" bs=1 skip="$at" count=1 status=none | od -An -tu1 | tr -d ' ')
printf "$(printf '\\%03o' $((byte ^ 0xff)))" | dd of="$work/tampered.raw" bs=1 seek="$at" count=1 conv=notrunc status=none
cp "$FW_VARS" "$work/vars-tampered.fd"
boot_vm "$work/tampered.raw" "$work/vars-tampered.fd" "$work/serial-tampered.log" "$BOOT_TIMEOUT" '\(initramfs\)|login:'
rc=$?
log="$work/serial-tampered.log"
grep -aE 'verity|Kernel panic|Rebooting' "$log" | tr -d '\r' | head -n 5
check "tampered arm64 root: boot stopped (status $rc)" \
  "$(grep -aoE 'Kernel panic - not syncing: [^\r]*|refusing to boot' "$log" | head -n 1)" '.+'
check "tampered arm64 root: no login prompt" "$(grep -ac 'login:' "$log")" '^0$'
check "tampered arm64 root: no root shell on the console" "$(grep -ac '(initramfs)' "$log")" '^0$'
check "tampered arm64 root: the node rebooted by itself (QEMU exited)" "$rc" '^0$'

if [ "$AMD64_TWIN" = 1 ]; then
  echo "== the amd64 twin: same profile, --arch amd64, same run"
  timed_build amd64 "$work/amd64"
  check "amd64 build" "$?" '^0$'
  amd64_build=$BUILD_SECONDS
  find_firmware amd64 || exit 1
  cp "$FW_VARS" "$work/vars-amd64.fd"
  qemu-img create -q -f qcow2 -b "$work/amd64/arm64.qcow2" -F qcow2 "$work/disk-amd64.qcow2" "$((2 * image_mib))M"
  boot_vm "$work/disk-amd64.qcow2" "$work/vars-amd64.fd" "$work/serial-amd64.log" 600
  rc=$?
  amd64_boot=${BOOT_TOTAL_SECONDS:-0}
  check "amd64 twin boot: reached multi-user.target" "$(smoke_value "$work/serial-amd64.log" multi-user)" '^active$'
  echo "figures (same run, software emulation, 2 host cores):"
  printf '  build (warm cache): arm64 %.1f s (first %.1f s), amd64 %.1f s, ratio %.2f\n' \
    "$arm64_build" "$arm64_build_1" "$amd64_build" "$(echo "$arm64_build / $amd64_build" | bc -l)"
  printf '  boot to power-off:  arm64 %.1f s, amd64 %.1f s, ratio %.2f\n' \
    "$arm64_boot" "$amd64_boot" "$(echo "$arm64_boot / $amd64_boot" | bc -l)"
fi
echo "arm64: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
