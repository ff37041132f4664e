# Sourced by the backup tests after tests/formation/netns.sh, once ok, bad, KEYS,
# INTERVAL and the bflags array (the sink's flags) are set.

# keycount I ENDPOINTS: the number of keys under /backup/ (etcd's count, one key returned).
keycount() { nb_ctl "$1" "$2" get /backup/ --prefix --limit 1 -w json | grep -o '"count":[0-9]*' | cut -d: -f2; }

# form_and_write: form_cluster, then write_keys.
form_and_write() {
  form_cluster
  write_keys
}

# form_cluster: three nodes form with scheduled backups (exits the test if they do not
# within 60 s); sets formed (seconds) and eps (the client endpoints).
form_cluster() {
  local t0
  t0=$(date +%s.%N)
  for i in 1 2 3; do nb_start "$i" 3 3 "${bflags[@]}" --backup-interval "$INTERVAL"; done
  if nb_wait_voting 1 3 60 1 2 3; then
    formed=$(echo "$(date +%s.%N) - $t0" | bc)
    printf 'formed: 3 voting members after %.2f s\n' "$formed"
    ok "three nodes formed a cluster"
  else
    bad "three nodes did not form a cluster within 60 s"
    exit 1
  fi
  eps=$(nb_endpoints 1 2 3)
}

# write_keys: KEYS keys and /backup/marker are written through node 1 in transactions
# of 128.
write_keys() {
  local tw b k count
  tw=$(date +%s.%N)
  for b in $(seq 0 128 $((KEYS - 1))); do
    for k in $(seq "$b" $((b + 127))); do
      [ "$k" -lt "$KEYS" ] && printf 'put /backup/k%05d value-%05d\n' "$k" "$k"
    done | { printf '\n'; cat; printf '\n\n'; } | nb_ctl 1 "$eps" txn >/dev/null || bad "a write transaction failed"
  done
  nb_ctl 1 "$eps" put /backup/marker "written before the backup" >/dev/null
  count=$(keycount 1 "$eps")
  printf 'wrote %s keys in %.2f s\n' "$count" "$(echo "$(date +%s.%N) - $tw" | bc)"
  [ "$count" = $((KEYS + 1)) ] && ok "$count keys written" || bad "expected $((KEYS + 1)) keys, etcd counts '$count'"
}

# check_restored_founders: after nodes 1-3 were started with --restore-from, every
# member of the founding set restored from the bundle, and any other node joined the
# restored cluster as a member. The founding set is a majority and whoever else
# answered within formation's grace (docs/formation.md): on a loaded host a node may
# miss it and join afterwards, as any late node does.
check_restored_founders() {
  local founders restore_ok i
  founders=$(grep -ho 'restored etcd from .* as founding member of [^ ]* ([^)]*)' "$WORK"/n[123]/firstboot.log | head -1 |
    sed 's/.*(\(.*\))$/\1/' | tr ',' '\n' | cut -d= -f1 | sort | tr '\n' ' ')
  restore_ok=1
  for i in 1 2 3; do
    if [[ " $founders" == *" node$i "* ]]; then
      grep -q 'restored etcd from' "$WORK/n$i/firstboot.log" || { echo "node$i is a founder but did not restore"; restore_ok=0; }
    elif grep -q 'restored etcd from' "$WORK/n$i/firstboot.log" ||
      ! grep -q 'received control-plane credentials' "$WORK/n$i/firstboot.log"; then
      echo "node$i is not a founder, and did not join the restored cluster as a member"; restore_ok=0
    else
      echo "node$i was not in the founding set; it joined the restored cluster"
    fi
  done
  echo "founding set of the restore: $founders"
  [ "$restore_ok" = 1 ] && [ "$(echo "$founders" | wc -w)" -ge 2 ] &&
    ok "every founding member (a majority or more) restored from the bundle; any other node joined" ||
    bad "not every founding member restored from the bundle, or a node neither restored nor joined"
}
