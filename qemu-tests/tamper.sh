#!/bin/bash
# QEMU tamper test: flip one byte of a built image's root partition (and, separately,
# of its verity hash partition) and boot it. The node must refuse to run on the changed
# root: no login prompt, no sprout-firstboot, and the reason on the console.
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

for target in "root:2:1000" "verity:3:4200"; do
  IFS=: read -r what part offset <<<"$target"
  echo "== tampered $what partition"
  cp --sparse=always "$image" "$work/$what.raw"
  flip "$work/$what.raw" "$part" "$offset"
  cp "$OVMF_VARS" "$work/vars-$what.fd"
  log="$work/serial-$what.log"
  boot_vm "$work/$what.raw" "$work/vars-$what.fd" "$log" 300 'Kernel panic|refusing to boot|login:'
  rc=$?
  check "$what: boot stopped (panic or initrd refusal, status $rc)" \
    "$(grep -aoE 'Kernel panic - not syncing: [^\r]*|refusing to boot' "$log" | head -n 1)" '.+'
  check "$what: no login prompt" "$(grep -ac 'login:' "$log")" '^0$'
  check "$what: sprout-firstboot never started" "$(grep -ac 'sprout-firstboot' "$log")" '^0$'
  reason=$(grep -aoE 'verity[^\r]*(corrupt|mismatch|does not match)[^\r]*|does not match its verity root hash' "$log" | head -n 1)
  check "$what: the console names verity as the reason" "$reason" '.+'
done
echo "tamper: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
