# shellcheck shell=bash
# The backup-and-restore steps the cluster tests share (sourced by cluster-lib.sh;
# docs/backup.md): a manual backup to the NFS share on the bridge, and the check that
# fresh nodes given the bundle restored it.

# cluster_backup_now OTHER...: node-2 writes a backup bundle to the share (the nodes were
# given backup-dir=$CLUSTER_SHARE at first boot; `backup now` needs no flags) and copies
# it to the other voting members OTHER... (node numbers). Checks the bundle's name, that
# an NFS client on the bridge sees it with the sha256 node-2 reported, and that each
# OTHER keeps a byte-identical copy. Sets BUNDLE (its name), BACKUP_SECONDS and BACKUP_BYTES.
cluster_backup_now() {
  local out copies="" i sum
  cluster_nfs_server || check "nfs-ganesha serves the share on the bridge" "not started" '^serving$'
  out=$(node_ssh 2 sprout-firstboot backup now 2>&1)
  echo "$out" | sed 's/^/     /'
  BUNDLE=$(echo "$out" | sed -n "s|^backup: good: $CLUSTER_SHARE/\([^/:]*\.sprout-backup\): .*|\1|p" | head -n 1)
  check "backup now on node-2 writes a good bundle to the share" "${BUNDLE:-none}" '^[a-z0-9-]+-[0-9]{8}T[0-9]{6}Z-manual-node-2\.sprout-backup$'
  BACKUP_SECONDS=$(echo "$out" | sed -n 's/^backup: good: .*, \([0-9.]*\) s$/\1/p' | head -n 1)
  BACKUP_BYTES=$(echo "$out" | sed -n 's/^backup: good: .*\.sprout-backup: \([0-9]*\) bytes.*/\1/p' | head -n 1)
  check "the share holds it, seen by an NFS client on the bridge" "$(cluster_share_ls | grep -cx "$BUNDLE")" '^1$'
  sum=$(sha256sum "$CLUSTER_DIR/share/$BUNDLE" | cut -d' ' -f1)
  check "the bundle on the share is the one node-2 wrote (sha256)" "$sum" \
    "^$(echo "$out" | sed -n 's/^backup: good: .*, sha256 \([0-9a-f]\{64\}\), .*/\1/p' | head -n 1)\$"
  check "its copies went to the other voting members" \
    "$(echo "$out" | sed -n 's/^backup: copies on the other control-plane nodes: //p')" \
    "^(node-[$(printf '%s' "$@")] kept it(; |\$)){$#}\$"
  for i in "$@"; do
    copies+="$(node_ssh "$i" sha256sum "/var/lib/sprout/backup-copies/$BUNDLE" | cut -d' ' -f1) "
  done
  check "${*/#/node-} each keep a byte-identical copy" "$(echo "$copies" | tr ' ' '\n' | grep -c "^$sum\$")" "^$#\$"
  check "backup list on node-1 reads the share and opens the bundle" \
    "$(node_ssh 1 sprout-firstboot backup list 2>&1 | grep -F "$BUNDLE" | grep -o ' good$')" '^ good$'
}

# cluster_lose_everything NODE...: pulls the power of NODE... and deletes their disks and
# firmware variables (a container node: its folder, /var in it); the harness forgets the etcd client certificate and the admin
# kubeconfig it fetched (the restored cluster's node-1 gives them again).
cluster_lose_everything() {
  local i
  for i in "$@"; do
    vm_kill "$i"
    rm -f "$CLUSTER_DIR/node-$i.qcow2" "$CLUSTER_DIR/node-$i.vars"
    [ "$CLUSTER_RUNTIME" != container ] || rm -rf "${CLUSTER_DIR:?}/node-$i"
  done
  rm -rf "$CLUSTER_DIR/pki" "$CLUSTER_DIR/admin.conf"
}

# cluster_restore_kinds BUNDLE: checks that on nodes 1-3, given BUNDLE as restore-from,
# each restored etcd from it as a founding member (its journal says so) or joined the
# restored cluster as a learner, and that a majority founded it. With the static list
# of three, a founding needs two: the founding members restore the bundle, and a third
# node that was not among them joins (docs/backup.md). No node may have started an empty
# etcd. (grep reads the whole journal: with grep -q, which stops at the match, ssh could
# die writing the rest, and under pipefail a founding node read as "neither".)
cluster_restore_kinds() {
  local bundle=$1 kinds i
  kinds=$(for i in 1 2 3; do
    if node_ssh "$i" journalctl -b -u sprout-firstboot --no-pager -o cat |
      grep "^sprout-firstboot: restored etcd from $CLUSTER_SHARE/$bundle as founding member" >/dev/null; then
      echo restored
    elif [ "$(node_phase "$i")" = "member (joined as learner)" ]; then
      echo learner
    else
      echo "neither:$(node_phase "$i")"
    fi
  done | tr '\n' ' ')
  check "each node restored etcd from the bundle as a founding member (journal) or joined the restored cluster as a learner" \
    "$kinds" '^((restored|learner) ){3}$'
  check "a majority of the three founded the cluster from the bundle" "$(grep -o restored <<<"$kinds" | wc -l)" '^[23]$'
}
