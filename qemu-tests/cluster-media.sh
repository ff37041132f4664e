#!/bin/bash
# Cluster scenario 4 (issue #7): one cluster from every medium of one build. Three
# control-plane nodes are powered on together on a network with no uplink:
#   node-1 boots its own copy of the raw disk image under UEFI (OVMF),
#   node-2 boots the hybrid ISO as a CD under UEFI,
#   node-3 boots over the network under SeaBIOS: iPXE gets DHCP from dnsmasq on the
#          bridge and fetches pxe/boot.ipxe, the kernel and the initrd over HTTP.
# They form one etcd cluster with no human step: three voting members with the right
# peer URLs, and a key written through the ISO node reads back through the PXE node.
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

echo "cluster-media: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
