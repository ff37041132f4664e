#!/bin/bash
# Cluster scenario 4 (issue #7): one cluster from every medium of one build. Three
# control-plane nodes are powered on together on a network with no uplink:
#   node-1 boots its own copy of the raw disk image under UEFI (OVMF),
#   node-2 boots the hybrid ISO as a CD under UEFI,
#   node-3 boots over the network under SeaBIOS: iPXE gets DHCP from dnsmasq on the
#          bridge and fetches pxe/boot.ipxe, the kernel and the initrd over HTTP.
# They form one etcd cluster with no human step: three voting members with the right
# peer URLs, and a key written through the ISO node reads back through the PXE node.
# Then node-4 boots the same ISO as a virtio disk under UEFI (as when it is written to a
# USB stick) and joins as a fourth control-plane node: a learner, promoted. Each live
# node shows its root read-only squashfs on the verity device and /var in memory, seeded
# from the image. (qemu-tests/media.sh boots the smoke profile's ISO and PXE bundle
# alone, by hand; this run carries its checks in CI, sharing the cluster's boots.)
# Usage: qemu-tests/cluster-media.sh IMAGE.raw   (IMAGE.iso and pxe/ must sit beside it:
#   sprout build ... --format raw,iso,pxe; needs root; KEEP_LOGS=1 keeps the logs)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
. "$here/cluster-lib.sh"
image=$(realpath "${1:?usage: cluster-media.sh IMAGE.raw}")
cluster_test_traps
find_ovmf || exit 1

cluster_init "" "$image" || exit 1
[ -f "$CLUSTER_ISO" ] && [ -f "$CLUSTER_PXE/boot.ipxe" ] ||
  { echo "FAIL $image needs $CLUSTER_ISO and $CLUSTER_PXE/ beside it (build with --format raw,iso,pxe)"; failed=1; exit 1; }
CLUSTER_MEDIUM=([1]=raw [2]=iso [3]=pxe)
peers=("$(node_ip 1)" "$(node_ip 2)" "$(node_ip 3)")
t0=$SECONDS
for i in 1 2 3; do
  node_config "$i" control-plane "${peers[@]}"
  vm_start "$i" || { failed=1; exit 1; }
done
expect_members 3 1200 "$t0" "raw, ISO and PXE nodes all reach phase member" || exit 1

# Each node really came from its medium: the kernel command line names the live medium
# (none for a disk), /var is the disk's state partition or memory, and the initrd logged
# where it found the ISO.
medium_of() {
  node_ssh "$1" 'grep -o "sprout.live=[a-z]*" /proc/cmdline || echo disk; findmnt -n -o FSTYPE,SOURCE /var' | tr -s ' \n' ' '
}
check "node-1 booted the raw disk (/var on its state partition)" "$(medium_of 1)" '^disk ext4 /dev/vda7 $'
check "node-2 booted the ISO (/var in memory)" "$(medium_of 2)" '^sprout\.live=iso tmpfs tmpfs $'
check "node-2's initrd found the ISO on the CD drive" \
  "$(grep -ao 'sprout: live medium /dev/[a-z0-9]*' "$CLUSTER_DIR/node-2.serial" | head -1)" 'medium /dev/sr0$'
check "node-3 booted over PXE (root in the initrd, /var in memory)" "$(medium_of 3)" '^sprout\.live=initrd tmpfs tmpfs $'
check "the PXE node's firmware got a DHCP lease on the bridge" \
  "$(grep -c 'DHCPACK(br0) 198\.18\.0\.2[0-9][0-9] 52:54:00:18:00:0d' "$CLUSTER_DIR/dnsmasq.log")" '^[1-9]'
check "iPXE fetched the script, kernel and initrd over HTTP" \
  "$(grep -oE 'GET /(boot.ipxe|vmlinuz|initrd.img) HTTP/1.[01]" 200' "$CLUSTER_DIR/http.log" | sort -u | wc -l)" '^3$'
check "node-3 runs on its static address, not the firmware's lease" \
  "$(node_ssh 3 ip -4 -o addr show scope global | awk '{print $4}' | tr '\n' ' ')" '^198\.18\.0\.13/24 $'

# What every live boot must show: the verity root, and /var in memory seeded from the
# image's factory copy of it.
live_root() {
  node_ssh "$1" 'findmnt -n -o FSTYPE,OPTIONS,SOURCE / | sed "s/,.* / /"; dmsetup table root | cut -d" " -f3;
    test -e /var/.sprout-seeded && test -s /var/lib/dpkg/status && echo seeded' | tr -s ' \n' ' '
}
for i in 2 3; do
  check "node-$i (${CLUSTER_MEDIUM[$i]}): root read-only squashfs on the verity device, /var seeded from the image" \
    "$(live_root "$i")" '^squashfs ro /dev/mapper/root verity seeded $'
done

expect_healthy "etcd healthy on all three nodes after they became members"
expect_member_list 3 "etcd has three voting members, one per medium, with their peer URLs" \
  '^node-1:https://198\.18\.0\.11:2380:voter node-2:https://198\.18\.0\.12:2380:voter node-3:https://198\.18\.0\.13:2380:voter$'
value="written-through-the-iso-node-$RANDOM"
cluster_etcdctl 2 put /sprout/test/media "$value" >/dev/null
got=$(cluster_etcdctl 3 get /sprout/test/media --print-value-only)
echo "     node-3 (PXE) reads /sprout/test/media = $got"
check "a key written through the ISO node reads back through the PXE node" \
  "$([ "$got" = "$value" ] && echo same || echo "'$got' != '$value'")" '^same$'
got=$(cluster_etcdctl 1 get /sprout/test/media --print-value-only)
check "and through the raw-disk node" "$([ "$got" = "$value" ] && echo same || echo "'$got' != '$value'")" '^same$'

echo "== the ISO as a disk: a fourth control-plane node joins"
CLUSTER_MEDIUM[4]=isodisk
node_config 4 control-plane "${peers[@]}"
t4=$SECONDS
vm_start 4 || { failed=1; exit 1; }
if wait_until 900 "node-4 a voting member" eval 'is_member "$(node_phase 4)"'; then
  check "node-4 (the ISO as a disk) joined and was promoted (seconds from power-on)" "$((SECONDS - t4))" '^[0-9]+$'
else
  check "node-4 (the ISO as a disk) joined and was promoted" "timeout" '^[0-9]+$'
  tail -n 25 "$CLUSTER_DIR/node-4.serial"
fi
check "node-4 booted the ISO as a disk (/var in memory)" "$(medium_of 4)" '^sprout\.live=iso tmpfs tmpfs $'
check "node-4's initrd found the ISO on the virtio disk" \
  "$(grep -ao 'sprout: live medium /dev/[a-z0-9]*' "$CLUSTER_DIR/node-4.serial" | head -1)" 'medium /dev/vda$'
check "node-4 (isodisk): root read-only squashfs on the verity device, /var seeded from the image" \
  "$(live_root 4)" '^squashfs ro /dev/mapper/root verity seeded $'
expect_member_list 4 "four voting members: raw, ISO as a CD, PXE, ISO as a disk" \
  '^node-1:https://198\.18\.0\.11:2380:voter node-2:https://198\.18\.0\.12:2380:voter node-3:https://198\.18\.0\.13:2380:voter node-4:https://198\.18\.0\.14:2380:voter$'
got=$(cluster_etcdctl 4 get /sprout/test/media --print-value-only)
check "the key reads back through the ISO-disk node" "$([ "$got" = "$value" ] && echo same || echo "'$got' != '$value'")" '^same$'

echo "cluster-media: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
