#!/bin/bash
# QEMU test of the live media of one build of the smoke profile (the default profile
# plus a unit that reports on the serial console and powers off):
# 1. the hybrid ISO as a CD under UEFI (OVMF);
# 2. the same ISO as a disk (virtio) under UEFI, as when written to a USB stick;
# 3. the PXE bundle through QEMU's own network boot (SeaBIOS and the NIC's iPXE ROM,
#    user-mode networking with restrict=on): boot.ipxe, the kernel and the initrd (root
#    inside) come over HTTP from a server this test runs on 127.0.0.1, which the guest
#    reaches as 10.0.2.100 through a guestfwd relay.
# Each boot must reach multi-user.target on the verity root, with /var in memory.
# (qcow2 boots in smoke.sh.) IMAGE_DIR=DIR reuses a build's output directory (with
# smoke.iso and pxe/) instead of building; KEEP_LOGS=1 keeps the serial logs;
# PXE_TFTP=1 also boots the bundle over QEMU's TFTP server alone, to compare.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
. "$here/lib.sh"

SPROUT=${SPROUT:-$top/build/sprout}
CACHE=${SPROUT_CACHE:-/var/cache/sprout}
work=$(mktemp -d /tmp/sprout-media-qemu.XXXXXX)
server=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null
  if [ "$failed" -gt 0 ] || [ -n "${KEEP_LOGS:-}" ]; then
    rm -rf "$work/out"; echo "logs kept in $work"
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

find_ovmf || exit 1
dir=${IMAGE_DIR:-}
if [ -z "$dir" ]; then
  echo "== build the smoke profile as ISO and PXE bundle"
  "$SPROUT" base "$top/profiles/default.yaml" --cache-dir "$CACHE" || exit 1
  "$SPROUT" build "$here/smoke.yaml" -o "$work/out" --cache-dir "$CACHE" --format iso,pxe || exit 1
  dir="$work/out"
fi
iso="$dir/smoke.iso"
[ -f "$iso" ] && [ -f "$dir/pxe/boot.ipxe" ] || { echo "FAIL $dir lacks smoke.iso or pxe/boot.ipxe"; exit 1; }

# boot_media NAME TIMEOUT FIRMWARE QEMU-ARGS...: FIRMWARE is uefi or bios; the guest's
# serial console goes to $work/NAME.log. Returns 0 when the guest powered off by itself.
boot_media() {
  local name=$1 limit=$2 firmware=$3; shift 3
  local log="$work/$name.log" fw=()
  : > "$log"
  if [ "$firmware" = uefi ]; then
    cp "$OVMF_VARS" "$work/$name.vars"
    fw=(-drive "if=pflash,format=raw,unit=0,readonly=on,file=$OVMF_CODE" -drive "if=pflash,format=raw,unit=1,file=$work/$name.vars")
  fi
  # Software emulation unless SPROUT_QEMU_ACCEL asks for kvm or auto (lib.sh: choose_accel).
  choose_accel tcg amd64 || { echo "$name: $ACCEL_WHY" >&2; return 1; }
  qemu_for amd64 "$ACCEL" || return 1
  local start; start=$(date +%s.%N)
  "${QEMU_CMD[@]}" -m 2048 -smp 2 "${fw[@]}" \
    -display none -serial "file:$log" -monitor none -no-reboot "$@" &
  local pid=$! deadline=$(( $(date +%s) + limit ))
  BOOT_LOGIN_SECONDS=""
  while kill -0 "$pid" 2>/dev/null; do
    if [ -z "$BOOT_LOGIN_SECONDS" ] && grep -aq 'login:' "$log"; then
      BOOT_LOGIN_SECONDS=$(echo "$(date +%s.%N) - $start" | bc)
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then kill -9 "$pid"; wait "$pid" 2>/dev/null; return 124; fi
    sleep 0.5
  done
  wait "$pid"; local rc=$?
  BOOT_TOTAL_SECONDS=$(echo "$(date +%s.%N) - $start" | bc)
  return $rc
}

assert_live() {  # assert_live NAME: what every live boot must show
  local name=$1 log="$work/$1.log"
  echo "   $name: login prompt after ${BOOT_LOGIN_SECONDS:-never} s, powered off after ${BOOT_TOTAL_SECONDS:-?} s"
  echo "$name login=${BOOT_LOGIN_SECONDS:-never} total=${BOOT_TOTAL_SECONDS:-?}" >> "$work/figures"
  check "$name: reached multi-user.target" "$(smoke_value "$log" multi-user)" '^active$'
  check "$name: login prompt" "$(grep -ac 'login:' "$log")" '^[1-9]'
  check "$name: root is read-only squashfs" "$(smoke_value "$log" root)" '^squashfs +ro'
  check "$name: root is mounted from the verity device" "$(smoke_value "$log" root-source)" '^/dev/mapper/root$'
  check "$name: dmsetup table shows verity" "$(smoke_value "$log" root-table)" '^verity$'
  check "$name: /var is in memory (a live medium keeps nothing)" "$(smoke_value "$log" var)" '^tmpfs +tmpfs$'
  check "$name: /var was seeded from the factory copy" "$(smoke_value "$log" seeded)" '^yes$'
  check "$name: sprout-firstboot active" "$(smoke_value "$log" firstboot)" '^active$'
}

echo "== ISO as a CD (UEFI)"
boot_media iso-cd 480 uefi -cdrom "$iso" -nic none
check "iso-cd: guest powered off by itself" "$?" '^0$'
assert_live iso-cd
check "iso-cd: the initrd found the ISO on the CD drive" "$(grep -ao 'sprout: live medium /dev/[a-z0-9]*' "$work/iso-cd.log" | head -1)" 'medium /dev/sr0$'

echo "== ISO as a disk (UEFI, virtio; the file stays unchanged)"
boot_media iso-disk 480 uefi -drive "if=virtio,format=raw,snapshot=on,file=$iso" -nic none
check "iso-disk: guest powered off by itself" "$?" '^0$'
assert_live iso-disk
check "iso-disk: the initrd found the ISO on the disk" "$(grep -ao 'sprout: live medium /dev/[a-z0-9]*' "$work/iso-disk.log" | head -1)" 'medium /dev/vda$'

echo "== PXE (SeaBIOS, iPXE, HTTP on 127.0.0.1)"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 -m http.server --bind 127.0.0.1 --directory "$dir/pxe" "$port" > "$work/http.log" 2>&1 &
server=$!
# restrict=on keeps the guest off every network; guestfwd hands each of its connections
# to 10.0.2.100:80 to this relay, which connects to the server on 127.0.0.1.
cat > "$work/relay.py" <<'PY'
import os, socket, sys, threading
conn = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=300)
def upstream():
    while True:
        data = os.read(0, 65536)
        if not data:
            conn.shutdown(socket.SHUT_WR)
            return
        conn.sendall(data)
threading.Thread(target=upstream, daemon=True).start()
while True:
    data = conn.recv(65536)
    if not data:
        break
    view = memoryview(data)
    while view:
        view = view[os.write(1, view):]
PY
sleep 1
boot_media pxe 600 bios -boot n \
  -nic "user,model=virtio-net-pci,restrict=on,guestfwd=tcp:10.0.2.100:80-cmd:python3 $work/relay.py $port,bootfile=http://10.0.2.100/boot.ipxe"
check "pxe: guest powered off by itself" "$?" '^0$'
assert_live pxe
check "pxe: iPXE fetched the script, kernel and initrd over HTTP" \
  "$(grep -oE 'GET /(boot.ipxe|vmlinuz|initrd.img) HTTP/1.1" 200' "$work/http.log" | sort -u | wc -l)" '^3$'

if [ -n "${PXE_TFTP:-}" ]; then
  # The same bundle over QEMU's built-in TFTP server only (no HTTP): a measurement of
  # whether TFTP is fast enough for a ~240 MiB initrd.
  echo "== PXE over TFTP (SeaBIOS, iPXE, QEMU's TFTP server)"
  boot_media pxe-tftp 900 bios -boot n -nic "user,model=virtio-net-pci,restrict=on,tftp=$dir/pxe,bootfile=boot.ipxe"
  check "pxe-tftp: guest powered off by itself" "$?" '^0$'
  assert_live pxe-tftp
fi

echo "figures:"; cat "$work/figures"
echo "media: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
