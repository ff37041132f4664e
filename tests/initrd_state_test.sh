#!/bin/bash
# The initrd's state-partition step (images/initrd/local-bottom: check_state,
# mount_state) on real ext4 images with the real e2fsck and resize2fs; only mount and
# the console are stand-ins (a function that records the options, a log file):
#   1. a file system smaller than its partition is grown at the next boot with no
#      marker left by the step that grew the partition (a power cut between the two);
#   2. errors that e2fsck -p refuses to fix are repaired with e2fsck -fy, loudly;
#   3. a file system that cannot be repaired is mounted read-only, never read-write,
#      and the console says why and what to do;
#   4. on a node with encrypted state, the config area's settings (the cluster secret)
#      move into the state and the area is wiped, on a real loop device; an area
#      already wiped moves nothing;
#   5. device_of (images/initrd/functions) finds PARTLABEL=NAME only on the disk that
#      holds the verity root, on a sysfs tree laid out as the kernel does it.
set -u
name=initrd_state_test
for tool in mke2fs e2fsck resize2fs debugfs dumpe2fs; do
  if ! command -v "$tool" >/dev/null; then
    echo "$name: skipped: '$tool' not found (Debian's e2fsprogs)"
    exit 0
  fi
done
src=${SPROUT_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
work=$(mktemp -d /tmp/sprout-initrd-state.XXXXXX)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0
ok() { echo "ok: $*"; passed=$((passed + 1)); }
bad() { echo "FAIL: $*"; failed=$((failed + 1)); }

export SPROUT_KMSG=$work/kmsg
log_failure_msg() { echo "failure: $*"; }
log_warning_msg() { echo "warning: $*"; }
mount() { echo "$*" >>"$work/mounts"; }  # records "-t ext4 -o OPTIONS DEV DIR"
SPROUT_INITRD_TEST=1
# shellcheck source=images/initrd/local-bottom
. "$src/images/initrd/local-bottom"

blocks() { dumpe2fs -h "$1" 2>/dev/null | sed -n 's/^Block count: *//p'; }

# 5. PARTLABEL=NAME on the root's disk: two disks with the same partition names (a node
#    with a second sprout disk plugged in); the state is found on the root's disk only.
# shellcheck source=images/initrd/functions
. "$src/images/initrd/functions"
sys=$work/sys
mkpart() {  # DISK PART NAME
  mkdir -p "$sys/devices/$1/$2" && : >"$sys/devices/$1/$2/partition"
  printf 'MAJOR=254\nDEVNAME=%s\nDEVTYPE=partition\nPARTN=1\nPARTNAME=%s\n' "$2" "$3" >"$sys/devices/$1/$2/uevent"
  mkdir -p "$sys/class/block" && ln -s "../../devices/$1/$2" "$sys/class/block/$2"
}
mkpart vda vda2 sprout-root-a && mkpart vda vda7 sprout-state && mkpart vda vda6 sprout-config
mkpart sdb sdb7 sprout-state && mkpart sdb sdb2 sprout-root-a
printf 'ro sprout.verity.data=PARTUUID=data-uuid sprout.state=PARTLABEL=sprout-state\n' >"$work/cmdline"
resolve_device() { case "$1" in PARTUUID=data-uuid) echo /dev/vda2 ;; /dev/*) echo "$1" ;; *) return 1 ;; esac; }
found=$(SPROUT_CMDLINE=$work/cmdline SPROUT_SYS_BLOCK=$sys/class/block device_of PARTLABEL=sprout-state)
found_config=$(SPROUT_CMDLINE=$work/cmdline SPROUT_SYS_BLOCK=$sys/class/block device_of PARTLABEL=sprout-config)
missing=$(SPROUT_CMDLINE=$work/cmdline SPROUT_SYS_BLOCK=$sys/class/block device_of PARTLABEL=sprout-esp) && missing="found $missing"
if [ "$found" = /dev/vda7 ] && [ "$found_config" = /dev/vda6 ] && [ -z "$missing" ]; then
  ok "PARTLABEL= is looked up on the root's disk: state $found, config $found_config (not /dev/sdb7); a name it lacks is not found"
else
  bad "device_of: state '$found', config '$found_config', a missing name gave '$missing'"
fi
printf 'ro sprout.verity.data=PARTUUID=data-uuid\n' >"$work/cmdline"
if [ "$(SPROUT_CMDLINE=$work/cmdline device_of PARTUUID=data-uuid)" = /dev/vda2 ]; then
  ok "any other spec (PARTUUID=, as older images wrote) goes to resolve_device"
else
  bad "device_of PARTUUID= did not go to resolve_device"
fi
unset -f resolve_device

# 1. Grown partition, file system not yet grown, and no /run marker: grown now.
img=$work/state.img
truncate -s 64M "$img" && mke2fs -q -t ext4 -b 4096 "$img" && truncate -s 128M "$img"
: >"$work/mounts"
mount_state "$img" "$work/var" 2>"$work/console" >/dev/null
if [ "$(blocks "$img")" = 32768 ] && grep -q ' rw,noatime ' "$work/mounts"; then
  ok "a file system left smaller than its partition is grown at the next boot (8192 -> $(blocks "$img") blocks), mounted rw"
else
  bad "not grown or not mounted rw: $(blocks "$img") blocks, mounts: $(cat "$work/mounts")"
fi
: >"$SPROUT_KMSG"
mount_state "$img" "$work/var" 2>/dev/null >/dev/null
if [ "$(blocks "$img")" = 32768 ] && ! grep -q grew "$SPROUT_KMSG"; then
  ok "the next boot grows nothing more (resize2fs has nothing to do)"
else
  bad "the next boot grew again: $(blocks "$img") blocks; $(cat "$SPROUT_KMSG")"
fi

# 2. The root directory's inode cleared: e2fsck -p stops ("UNEXPECTED INCONSISTENCY"),
#    e2fsck -fy repairs it; the console says so; mounted rw.
truncate -s 64M "$work/b.img" && mke2fs -q -t ext4 "$work/b.img"
debugfs -w -R "clri <2>" "$work/b.img" >/dev/null 2>&1
debugfs -w -R "ssv state 2" "$work/b.img" >/dev/null 2>&1  # marked as having errors, so e2fsck -p checks it
: >"$work/mounts"; : >"$SPROUT_KMSG"
mount_state "$work/b.img" "$work/var" 2>"$work/console" >/dev/null
if grep -q 'e2fsck -p found errors' "$work/console" && grep -q 'repairing' "$SPROUT_KMSG" &&
  e2fsck -fn "$work/b.img" >/dev/null 2>&1 && grep -q ' rw,noatime ' "$work/mounts"; then
  ok "errors e2fsck -p will not fix are repaired with e2fsck -fy and reported: $(grep -m1 'e2fsck -p' "$work/console")"
else
  bad "repair case: console: $(cat "$work/console"); mounts: $(cat "$work/mounts")"
fi

# 3. No superblock at all (every copy overwritten): read-only, loudly, with the fix.
truncate -s 64M "$work/c.img" && mke2fs -q -t ext4 "$work/c.img"
dd if=/dev/zero of="$work/c.img" bs=1M count=64 conv=notrunc status=none
: >"$work/mounts"; : >"$SPROUT_KMSG"
mount_state "$work/c.img" "$work/var" 2>"$work/console" >/dev/null
if grep -q ' ro,noatime ' "$work/mounts" && ! grep -q ' rw,' "$work/mounts" &&
  grep -q "mounting the state partition .* read-only.*e2fsck -f" "$SPROUT_KMSG"; then
  ok "an unrepairable file system is mounted read-only, never rw: $(grep -m1 'read-only' "$SPROUT_KMSG")"
else
  bad "unrepairable case: mounts: $(cat "$work/mounts"); kmsg: $(cat "$SPROUT_KMSG")"
fi

# 4. keep_config_area on a real block device (a loop device; needs root).
if [ "$(id -u)" -ne 0 ] || ! command -v losetup >/dev/null; then
  echo "$name: check 4 skipped: it attaches a loop device, which needs root and losetup"
else
  resolve_device() { echo "$1"; }
  truncate -s 1M "$work/area.img"
  printf 'role=control-plane\ncluster-secret=c2VjcmV0LXNlY3JldC1zZWNyZXQ=\n' |
    dd of="$work/area.img" conv=notrunc status=none
  if ! loop=$(losetup --find --show "$work/area.img" 2>&1); then
    echo "$name: check 4 skipped: no loop device here ($loop)"
    echo "$name: $passed passed, $failed failed"
    [ "$failed" -eq 0 ]
    exit
  fi
  : >"$SPROUT_KMSG"
  keep_config_area "$loop" "$work/state/lib/sprout" 2>/dev/null
  kept=$work/state/lib/sprout/config-area
  if grep -qx 'cluster-secret=c2VjcmV0LXNlY3JldC1zZWNyZXQ=' "$kept" 2>/dev/null &&
    [ "$(stat -c %a "$kept")" = 600 ] && [ "$(tr -d '\000' <"$loop" | wc -c)" = 0 ] &&
    grep -q 'wiped the area' "$SPROUT_KMSG"; then
    ok "the config area's settings move into the state (mode 600) and the area is all zeros: $(grep -m1 wiped "$SPROUT_KMSG")"
  else
    bad "config area move: kept: $(cat "$kept" 2>&1); area bytes left: $(tr -d '\000' <"$loop" | wc -c); kmsg: $(cat "$SPROUT_KMSG")"
  fi
  : >"$SPROUT_KMSG"
  keep_config_area "$loop" "$work/state/lib/sprout" 2>/dev/null
  if grep -q cluster-secret "$kept" && [ ! -s "$SPROUT_KMSG" ]; then
    ok "a wiped area moves nothing: the kept settings stay"
  else
    bad "a second move changed the kept settings: $(cat "$kept" 2>&1); kmsg: $(cat "$SPROUT_KMSG")"
  fi
  losetup -d "$loop"
fi

echo "$name: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
