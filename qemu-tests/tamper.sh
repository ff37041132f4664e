#!/bin/bash
# QEMU tamper test: flip one byte of a built image's root partition (and, separately,
# of its verity hash partition, in a hash block and in its header) and boot it. The node must refuse to run on the changed
# root: no login prompt, no sprout-firstboot, the reason on the console, and no root
# shell: the node reboots (panic=10 on its command line; QEMU runs with -no-reboot, so
# it exits) instead of leaving an "(initramfs)" prompt on the console.
# Usage: tamper.sh IMAGE.raw
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
image=${1:?usage: tamper.sh IMAGE.raw}
if [ ! -f "$image" ]; then echo "tamper: no image at $image (the smoke test makes it with KEEP_IMAGE)" >&2; exit 1; fi
work=$(mktemp -d /tmp/sprout-tamper.XXXXXX)
trap '[ "$failed" -gt 0 ] && echo "logs kept in $work" && rm -f "$work"/*.raw || rm -rf "$work"' EXIT
find_ovmf || exit 1

# flip IMAGE PARTITION-NUMBER OFFSET: invert one byte at OFFSET inside that partition.
flip() {
  local start byte
  start=$(sfdisk --json "$1" | python3 -c "import json,sys; print(json.load(sys.stdin)['partitiontable']['partitions'][$2-1]['start'])")
  local at=$((start * 512 + $3))
  byte=$(dd if="$1" bs=1 skip="$at" count=1 status=none | od -An -tu1 | tr -d ' ')
  printf "$(printf '\\%03o' $((byte ^ 0xff)))" | dd of="$1" bs=1 seek="$at" count=1 conv=notrunc status=none
  echo "   flipped byte $at (partition $2 + $3): $byte -> $((byte ^ 0xff))"
}

# root: a data block (verity's kernel check panics on read); verity: a hash block (the
# same); verity-superblock: the hash partition's header, so the initrd's veritysetup
# refuses to open it (initramfs-tools' panic path, which would open a root shell
# without panic= on the command line).
for target in "root:2:1000" "verity:3:4200" "verity-superblock:3:0"; do
  IFS=: read -r what part offset <<<"$target"
  echo "== tampered $what partition"
  cp --sparse=always "$image" "$work/$what.raw"
  flip "$work/$what.raw" "$part" "$offset"
  cp "$OVMF_VARS" "$work/vars-$what.fd"
  log="$work/serial-$what.log"
  # Runs until the node reboots itself (QEMU exits: status 0), or a login prompt or a
  # root shell shows (status 125), or 300 s pass (124).
  boot_vm "$work/$what.raw" "$work/vars-$what.fd" "$log" 300 '\(initramfs\)|login:'
  rc=$?
  check "$what: boot stopped (panic or initrd refusal, status $rc)" \
    "$(grep -aoE 'Kernel panic - not syncing: [^[:cntrl:]]*|refusing to boot' "$log" | head -n 1)" '.+'
  check "$what: no login prompt" "$(grep -ac 'login:' "$log")" '^0$'
  check "$what: no root shell on the console" "$(grep -ac '(initramfs)' "$log")" '^0$'
  check "$what: the node rebooted by itself (QEMU exited)" \
    "$rc $(grep -aoE 'Rebooting automatically due to panic= boot argument|Rebooting in [0-9]+ seconds' "$log" | head -n 1)" \
    '^0 Rebooting'
  check "$what: sprout-firstboot never started" "$(grep -ac 'sprout-firstboot' "$log")" '^0$'
  reason=$(grep -aoE 'verity[^[:cntrl:]]*(corrupt|mismatch|does not match)[^[:cntrl:]]*|does not match its verity root hash|not a valid VERITY device' "$log" | head -n 1)
  check "$what: the console names verity as the reason" "$reason" '.+'
done
echo "tamper: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
