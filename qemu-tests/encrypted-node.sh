#!/bin/bash
# A Kubernetes control-plane node on an encrypted state (issue 37, by hand): one node of
# IMAGE (a build of qemu-tests/encrypted.yaml) with a software TPM forms a one-member
# cluster and runs Kubernetes on /var as LUKS2; a Secret and a ConfigMap are written
# with known values; then the power is cut and the node's disk is read on the host:
# neither value may be on it. The control: on the running node, the ConfigMap's value
# is in etcd's files in plain text (etcd stores ConfigMaps unencrypted), so the grep of
# the disk can find a value when it is there. Then the node boots again and unlocks.
# IMAGE is the default profile's (it asks for encrypted state, issue 54 item 4) or a build
# of qemu-tests/encrypted.yaml. The disk is also searched for the CA and service-account
# keys and the cluster secret.
# Usage: qemu-tests/encrypted-node.sh IMAGE   (needs root; KEEP_LOGS=1 keeps logs)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export CLUSTER_SMP=${CLUSTER_SMP:-2} CLUSTER_TPM=1
. "$here/lib.sh"
. "$here/cluster-lib.sh"
image=$(realpath "${1:?usage: encrypted-node.sh IMAGE (sprout build qemu-tests/encrypted.yaml)}")
command -v swtpm >/dev/null || { echo "encrypted-node: swtpm is missing: apt-get install swtpm swtpm-tools" >&2; exit 1; }
cluster_test_traps

cluster_init "" "$image" || exit 1
node_config 1 control-plane "$(node_ip 1)"
t0=$SECONDS
vm_start 1
serial=$CLUSTER_DIR/node-1.serial
if ! wait_until 900 "node-1 a voting member" all_members 1; then
  check "node-1 forms a one-member cluster" "timeout" '^member$'
  tail -n 30 "$serial"
  exit 1
fi
check "node-1 forms a one-member cluster on its first boot (seconds from power-on)" "$((SECONDS - t0))" '^[0-9]+$'
check "its first boot encrypted the state partition" \
  "$(grep -ao 'encrypted the state partition [^ ]* in [0-9.]* s' "$serial" | head -n 1)" '^encrypted the state partition'
check "/var (etcd's data, the keys) is ext4 on the unlocked LUKS2 device" "$(node_ssh 1 findmnt -no FSTYPE,SOURCE /var)" \
  '^ext4 +/dev/mapper/sprout-state$'
check "sprout-firstboot status says so" "$(node_ssh 1 /usr/lib/sprout/sprout-firstboot status | grep '^state: ')" '^state: encrypted'
wait_until 1800 "the node Ready" nodes_ready 1
dump=$(node_ssh 1 cryptsetup luksDump /dev/disk/by-partlabel/sprout-state)
echo "$dump" | grep -E '^(Version|Label):|systemd-|tpm2-hash-pcrs|^Keyslots:|^  [0-9]+: luks2' | sed 's/^/   luksDump on node-1: /'
check "cryptsetup luksDump on the node: LUKS2 with a TPM2 token" \
  "$(echo "$dump" | sed -n 's/^Version:[[:space:]]*//p'):$(echo "$dump" | grep -c 'systemd-tpm2')" '^2:1$'
check "Kubernetes: the node turns Ready (seconds from power-on)" "$([ -n "${WAITED:-}" ] && echo $((SECONDS - t0)) || echo timeout)" '^[0-9]+$'

secret=sprout-secret-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
plain=sprout-configmap-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
check "a Secret is written" "$(cluster_kubectl create secret generic enc-check --from-literal=value="$secret" 2>&1)" 'created'
check "a ConfigMap is written" "$(cluster_kubectl create configmap enc-check --from-literal=value="$plain" 2>&1)" 'created'
check "the API reads the Secret back" "$(cluster_kubectl get secret enc-check -o jsonpath='{.data.value}' | base64 -d)" "^$secret\$"
# The control: etcd's files on the node hold the ConfigMap's value in plain text (the
# Secret's is encrypted by the apiserver, aescbc, with a key that also lives in /var).
check "(control) on the node, etcd's files hold the ConfigMap's value in plain text" \
  "$(node_ssh 1 "sync; grep -rlaF '$plain' /var/lib/sprout/etcd | head -n 1")" '^/var/lib/sprout/etcd/'
# The keys a thief wants (issue 54 item 4): a line of the Kubernetes CA's private key, of
# etcd's CA key and of the service-account key, as the node holds them on /var, and the
# cluster secret as the config area held it before the first boot moved it into /var.
keys=$(node_ssh 1 'for f in /etc/kubernetes/pki/ca.key /etc/kubernetes/pki/etcd/ca.key /etc/kubernetes/pki/sa.key; do sed -n 2p "$f"; done')
check "(control) the node holds three private keys" "$(wc -l <<<"$keys")" '^3$'
cluster_secret=$(base64 -w0 < "$CLUSTER_DIR/cluster.secret")
node_ssh 1 sync
sleep 5
vm_kill 1
disk=$CLUSTER_DIR/node-1.qcow2
check "the powered-off disk, read on the host: neither the Secret's nor the ConfigMap's value" \
  "$(grep -c -aF "$secret" "$disk"):$(grep -c -aF "$plain" "$disk")" '^0:0$'
check "the powered-off disk, read on the host: no line of the CA and service-account keys, nor the cluster secret" \
  "$(while read -r k; do grep -c -aF "$k" "$disk"; done <<<"$keys" | tr '\n' ':')$(grep -c -aF "$cluster_secret" "$disk")" '^0:0:0:0$'

t1=$SECONDS
vm_start 1
if wait_until 900 "node-1 a member again" all_members 1; then
  check "after the power cut the node unlocks with the TPM and is a member again (seconds)" "$((SECONDS - t1))" '^[0-9]+$'
  check "the second boot unlocked the state with the TPM" "$(grep -ac 'unlocked the encrypted state partition' "$serial")" '^[1-9]'
else
  check "after the power cut the node is a member again" "timeout" '^member$'
fi
wait_until 900 "the API answers" nodes_ready 1
check "the Secret is still there" "$(cluster_kubectl get secret enc-check -o jsonpath='{.data.value}' 2>&1 | base64 -d 2>&1)" "^$secret\$"
# The power cut counted against the TPM's dictionary-attack limit; the boot after it reset
# the counter (docs/secure-boot.md, "Power cuts and the TPM's lockout").
reset=$(node_ssh 1 "journalctl -b -u sprout-firstboot -o cat --no-pager | grep 'TPM: ' | tail -n 1")
echo "   $reset"
check "the boot after the power cut reset the TPM's lockout counter" "$reset" 'TPM: lockout counter [1-9][0-9]* of [0-9]+, .*; reset, now lockout counter 0 of'
check "sprout-firstboot status: the TPM's counter" "$(node_ssh 1 /usr/lib/sprout/sprout-firstboot status | grep '^tpm: ')" '^tpm: lockout counter 0 of'
echo "encrypted-node: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
