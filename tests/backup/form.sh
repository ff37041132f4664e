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
