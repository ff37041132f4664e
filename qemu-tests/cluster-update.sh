# shellcheck shell=bash
# Rolling A/B updates across the cluster, and the health sampler that watches etcd while
# they run (sourced by cluster-lib.sh; docs/updates.md).

# node_update_state I HASH prints where node I stands with the build whose root hash is
# HASH: "committed" (booted and blessed), "trial" (booted, not committed yet), "old"
# (booted another root), or nothing when it cannot be asked.
node_update_state() {
  node_ssh "$1" sprout-firstboot update status 2>/dev/null | awk -v h="${2:0:12}" '
    /^booted: / { if (index($0, "root hash " h "...") == 0) s = "old"; else if ($0 ~ /\(committed\)$/) s = "committed"; else s = "trial" }
    END { if (s != "") print s }'
}

# vm_restart_if_ended I: QEMU runs with -no-reboot, so a guest's reboot ends it; as the
# machine's own reset would, this starts node I again on the same disk and firmware
# variables (their boot counters included) when its QEMU has ended.
vm_restart_if_ended() { vm_running "$1" || vm_start "$1"; }

# node_on_root I HASH STATE...: (restarting node I if its QEMU ended) is node I's
# node_update_state for HASH one of STATE...?
node_on_root() {
  local i=$1 hash=$2 now; shift 2
  vm_restart_if_ended "$i"
  now=$(node_update_state "$i" "$hash")
  [[ " $* " == *" $now "* ]] && [ -n "$now" ]
}

# cluster_served_copy SRC DEST: SRC (a file or a folder) into the folder DEST for the
# build server, as hard links, or as a sparse copy where DEST is on another file system.
# Not as a symbolic link: scripts/serve-builds follows none (it serves only a build's
# own files).
cluster_served_copy() {
  cp -al "$1" "$2" 2>/dev/null || cp -a --sparse=always "$1" "$2"
}
# cluster_refusal_copies BUILD DIR: under DIR, the two copies of BUILD (a signed build's
# output folder) that a node of an image signed with BUILD's key must refuse: DIR/unsigned
# (every file but manifest.json.sig) and DIR/wrong (signed with a key made here). Hard
# links where DIR is on BUILD's file system (cluster_served_copy), for the large files.
cluster_refusal_copies() {
  local build=$1 dir=$2 f
  mkdir -p "$dir/unsigned" "$dir/wrong" || return 1
  for f in "$build"/*; do
    [ "$(basename "$f")" = manifest.json.sig ] && continue
    cluster_served_copy "$f" "$dir/unsigned/" && cluster_served_copy "$f" "$dir/wrong/" || return 1
  done
  openssl genpkey -algorithm ed25519 -out "$CLUSTER_DIR/other-update.key" 2>/dev/null &&
    openssl pkeyutl -sign -rawin -inkey "$CLUSTER_DIR/other-update.key" -in "$build/manifest.json" \
      -out "$dir/wrong/manifest.json.sig"
}
# cluster_refuses I URL WANT: node I, asked to apply the build at URL, refuses it with
# a message matching the regex WANT (its last lines go to stderr; nothing is written: the
# signature is checked before the image is downloaded). For the builds a node of a
# signed image must refuse: unsigned, or signed with another key.
cluster_refuses() {
  local i=$1 url=$2 want=$3 out rc
  out=$(node_ssh "$i" sprout-firstboot update apply "$url" 2>&1)
  rc=$?
  echo "$out" | tail -n 2 | sed "s/^/     node-$i: /" >&2
  [ "$rc" -ne 0 ] && [[ "$out" =~ $want ]]
}

# node_apply I URL: node I runs `sprout-firstboot update apply URL` in a transient unit of
# its own (sprout-roll-apply), as a detached session would, and the harness polls it:
# the apply must not hang on the harness's SSH connection. On a loaded emulated node the
# download and the slot's write starve sshd for longer than the keep-alives allow (CI,
# 30 Nov: the connection died 50 s into the write, status 255, and took the apply with it).
# The unit's CPU weight is 1000, ten times its neighbours' in system.slice: a
# control-plane node gives system.slice a weight of 25 against the pods' 39
# (overlays/control-plane, system.slice.d), and at the default 100 the apply shared that
# quarter with the kubelet, containerd and sprout-firstboot, taking 13 % of a loaded
# emulated node's CPU. At 1000 it takes most of system.slice's part, while the pods keep
# theirs: measured on three Ready control-plane nodes (30 Nov 2026, docs/updates.md),
# node-2 401 s at 100, 187 s at 1000; node-3 256 s at 1000, 443 s at 100 after it.
# Returns the apply's exit status (255 when it cannot be told); APPLY_OUT gets its output.
node_apply() {
  local i=$1 url=$2 unit=sprout-roll-apply result status
  APPLY_OUT=""
  node_ssh "$i" "systemctl stop $unit; systemctl reset-failed $unit" >/dev/null 2>&1
  if ! node_ssh "$i" systemd-run --unit=$unit --no-block --quiet -p Type=oneshot -p RemainAfterExit=yes -p CPUWeight=1000 \
    sprout-firstboot update apply "$url" 2>&1; then
    echo "rolling update: node-$i could not start the apply (systemd-run)" >&2
    return 255
  fi
  # oneshot with RemainAfterExit: "activating" while it runs, then "active" or "failed".
  wait_until 1800 "node-$i's apply to end" eval \
    '[[ "$(node_ssh "$i" systemctl show -p ActiveState --value $unit)" =~ ^(active|failed)$ ]]'
  APPLY_OUT=$(node_ssh "$i" journalctl -u $unit -o cat --no-pager 2>&1)
  result=$(node_ssh "$i" systemctl show -p Result --value $unit 2>/dev/null)
  status=$(node_ssh "$i" systemctl show -p ExecMainStatus --value $unit 2>/dev/null)
  node_ssh "$i" "systemctl stop $unit; systemctl reset-failed $unit" >/dev/null 2>&1
  [ "$result" = success ] && [ "$status" = 0 ] && return 0
  [[ "$status" =~ ^[0-9]+$ ]] && [ "$status" != 0 ] && return "$status"
  echo "rolling update: node-$i's apply did not end as it should (Result '${result:-?}', status '${status:-?}')" >&2
  return 255
}

# cluster_rolling_update URL NODE...: updates the control-plane nodes NODE... to the
# build served at URL, one at a time (docs/updates.md "Rolling update of a cluster").
# Before each node, etcd must report every member healthy; the node applies the build
# (`sprout-firstboot update apply URL`) and reboots; the next node waits until this one
# has booted the new root, passed its health gate and committed it, and its etcd
# endpoint is healthy again. Stops at the first failure (a refused apply, a node that
# falls back to its old slot, or a timeout). One line per node; ROLL_FIGURES gets
# "node-I apply=S down=S committed=S" per node (seconds: the apply; from the reboot
# until the node's etcd endpoint was healthy again; until the commit).
cluster_rolling_update() {
  local url=$1 want i out rc t state; shift
  ROLL_FIGURES=()
  want=$(ip netns exec "$CLUSTER_NS" curl -sf "${url%/}/manifest.json" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["rootHash"])' 2>/dev/null)
  [ -n "$want" ] || { echo "rolling update: no build at ${url%/}/manifest.json" >&2; return 1; }
  for i in "$@"; do
    if ! cluster_etcdctl "$i" endpoint health --cluster >/dev/null 2>&1; then
      echo "rolling update: etcd does not report every member healthy; not taking node-$i down (stopped)" >&2
      return 1
    fi
    if [ "$(node_update_state "$i" "$want")" = committed ]; then
      echo "   node-$i: already runs root ${want:0:12}..., committed"
      continue
    fi
    t=$SECONDS
    node_apply "$i" "$url"
    rc=$?
    out=$APPLY_OUT
    local apply=$((SECONDS - t))
    if [ "$rc" -ne 0 ]; then
      echo "$out" | tail -n 5 | sed 's/^/     /' >&2
      echo "rolling update: apply failed on node-$i (status $rc); stopped" >&2
      return 1
    fi
    echo "   node-$i: applied in $apply s: $(echo "$out" | grep -o 'loader entry [^ ]* written' | head -n 1); rebooting"
    # Where the apply's time went, by its own steps (update: [  12.3 s] ...).
    echo "$out" | grep '^update: \[' | sed "s/^/     node-$i: /"
    node_ssh "$i" systemctl reboot >/dev/null 2>&1
    node_ssh_close "$i"
    t=$SECONDS
    # The node is back on the new root (its old etcd endpoint may answer for a moment
    # after the reboot command: what counts is the new boot).
    if ! wait_until 1500 "node-$i booted root ${want:0:12}..." node_on_root "$i" "$want" trial committed; then
      echo "rolling update: node-$i did not come back on the new root (now: $(node_update_state "$i" "$want")); stopped" >&2
      return 1
    fi
    if ! wait_until 900 "node-$i's etcd endpoint healthy" eval 'vm_restart_if_ended "$i"; cluster_etcdctl "$i" endpoint health'; then
      echo "rolling update: node-$i's etcd did not become healthy; stopped" >&2
      return 1
    fi
    local down=$((SECONDS - t))
    # "old" again after the trial: the new slot failed its tries and the node fell back.
    wait_until 900 "node-$i committed root ${want:0:12}..." node_on_root "$i" "$want" committed old
    state=$(node_update_state "$i" "$want")
    if [ "$state" != committed ]; then
      echo "rolling update: node-$i did not commit the new root (now: ${state:-unreachable}$([ "$state" = old ] && echo ": it fell back to its old slot")); stopped" >&2
      node_ssh "$i" sprout-firstboot update status 2>&1 | sed 's/^/     /' >&2
      return 1
    fi
    ROLL_FIGURES+=("node-$i apply=$apply down=$down committed=$((SECONDS - t))")
    echo "   node-$i: ${ROLL_FIGURES[-1]}"
  done
}

# cluster_health_sampler start|stop NODE...: while running, samples etcd every 5 s plus the time a sample takes
# (at most 720 samples): the health of each NODE's endpoint and a write through all of
# them (the client picks a live one), one line per sample in $CLUSTER_DIR/health-samples:
#   HH:MM:SS node-1=healthy node-2=down node-3=healthy write=ok
# A member counts as down, and a write as failed, only when a second try with a longer
# bound (10 s, 15 s) fails too: a loaded emulated node can take a few seconds to answer
# (CI, 30 Nov: one sample of 87 during a slot's write), while a lost quorum fails every
# try for as long as it lasts.
cluster_health_sampler() {
  local what=$1; shift
  if [ "$what" = stop ]; then
    [ -f "$CLUSTER_DIR/sampler.pid" ] && kill "$(cat "$CLUSTER_DIR/sampler.pid")" 2>/dev/null
    rm -f "$CLUSTER_DIR/sampler.pid"
    return 0
  fi
  local pki=$CLUSTER_DIR/pki i
  cluster_etcdctl "$1" endpoint health >/dev/null 2>&1  # fetches the client certificate
  : > "$CLUSTER_DIR/health-samples"
  (
    # try TIMEOUT ENDPOINTS ARGS...: one etcdctl call, its command bounded by TIMEOUT.
    try() {
      local t=$1 eps=$2; shift 2
      ip netns exec "$CLUSTER_NS" env ETCDCTL_API=3 etcdctl --endpoints "$eps" --cacert "$pki/ca.crt" \
        --cert "$pki/client.crt" --key "$pki/client.key" --dial-timeout=2s --command-timeout="$t" "$@" >/dev/null 2>&1
    }
    for n in $(seq 720); do
      line="$(date +%T)"
      eps=""
      for i in "$@"; do
        ep=https://$(node_ip "$i"):2379
        if try 3s "$ep" endpoint health || try 10s "$ep" endpoint health; then
          line+=" node-$i=healthy"
        else
          line+=" node-$i=down"
        fi
        eps+="${eps:+,}$ep"
      done
      if try 5s "$eps" put /sprout/rolling-update/sample "$n" || try 15s "$eps" put /sprout/rolling-update/sample "$n"; then
        line+=" write=ok"
      else
        line+=" write=failed"
      fi
      echo "$line" >> "$CLUSTER_DIR/health-samples"
      sleep 5
    done
  ) </dev/null >/dev/null 2>&1 &
  echo $! > "$CLUSTER_DIR/sampler.pid"
  disown $! 2>/dev/null
}

# cluster_update_scenario BUILD-B NODE...: the rolling-update scenario shared by the
# cluster tests, on control-plane nodes 1-3 of an image signed with BUILD-B's key (a
# `sprout build --sign` output folder). Serves B on the bridge with the two copies a node
# must refuse, checks that node-1 refuses both, then updates NODE... one at a time
# (cluster_rolling_update) while etcd is sampled on nodes 1-3, and checks that quorum
# held, that each NODE went down and now runs B, committed. Sets ROLLED (seconds) and
# ROLL_SUMMARY (the run's figures in words).
cluster_update_scenario() {
  local build=$1 hash_b served roll_rc samples one_down i raw_b; shift
  hash_b=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["rootHash"])' "$build/manifest.json")
  served=$CLUSTER_DIR/builds
  mkdir -p "$served"
  rm -rf "$served/b"
  cluster_served_copy "$build" "$served/b" || check "B is copied for the build server" "not copied" '^copied$'
  cluster_refusal_copies "$build" "$served"
  cluster_build_server "$served" b || check "the build server answers on the bridge" "not started" '^serving$'
  check "node-1 of the signed image refuses B unsigned" \
    "$(cluster_refuses 1 "${CLUSTER_BUILDS_URL}unsigned/" 'is not signed \(no manifest\.json\.sig\) and this node trusts only builds signed by /etc/sprout/update\.pub' && echo refused)" '^refused$'
  check "node-1 of the signed image refuses B signed with another key" \
    "$(cluster_refuses 1 "${CLUSTER_BUILDS_URL}wrong/" 'the signature does not match .*this node trusts only builds signed by /etc/sprout/update\.pub' && echo refused)" '^refused$'
  cluster_health_sampler start 1 2 3
  local t=$SECONDS
  cluster_rolling_update "${CLUSTER_BUILDS_URL}b/" "$@"
  roll_rc=$?
  ROLLED=$((SECONDS - t))
  sleep 6  # one more sample with all three back
  cluster_health_sampler stop
  check "the rolling update took ${*/#/node-} to build B, one at a time (seconds)" "$roll_rc $ROLLED" '^0 [0-9]+$'
  echo "     etcd sampled every 5-8 s during the update (endpoint health of each node, and a write):"
  sed 's/^/       /' "$CLUSTER_DIR/health-samples"
  samples=$(wc -l < "$CLUSTER_DIR/health-samples")
  check "every sample during the update wrote to etcd (quorum kept)" \
    "$(grep -c ' write=ok$' "$CLUSTER_DIR/health-samples") of $samples" "^$samples of $samples\$"
  check "no sample found more than one member down" "$(grep -c '=down.*=down' "$CLUSTER_DIR/health-samples")" '^0$'
  one_down=$(grep -c '=down' "$CLUSTER_DIR/health-samples")
  check "each updated node was down in some sample (the update did reboot it)" \
    "$(for i in "$@"; do grep -q "node-$i=down" "$CLUSTER_DIR/health-samples" && echo "node-$i"; done | tr '\n' ' ')" \
    "^$(printf 'node-%s ' "$@")\$"
  for i in "$@"; do
    check "node-$i runs build B's root, committed, and shows B's file" \
      "$(node_update_state "$i" "$hash_b") $(node_ssh "$i" cat /etc/sprout-update-build)" '^committed B$'
  done
  # The build server's log: B's raw image went out only in range requests, its data
  # extents (manifest.json's dataExtents), never whole.
  raw_b=$(python3 -c 'import json,sys; print([o["file"] for o in json.load(open(sys.argv[1]))["outputs"] if o["file"].endswith(".raw")][0])' "$build/manifest.json")
  check "the nodes fetched B's raw image in range requests of its data extents, never whole" \
    "$(grep -c "^GET /b/$raw_b bytes=[0-9]*-[0-9]* 206\$" "$CLUSTER_DIR/http-builds.log") ranges, $(grep -c "^GET /b/$raw_b - " "$CLUSTER_DIR/http-builds.log") whole" \
    '^[1-9][0-9]* ranges, 0 whole$'
  node_ssh "${!#}" sprout-firstboot update status 2>&1 | sed "s/^/     node-${!#}: /"
  ROLL_SUMMARY="rolling update ${ROLLED} s for $# node(s) (${ROLL_FIGURES[*]}); samples with one member down: $one_down of $samples (one every 5 s plus the time it takes, up to 8 s apart)"
}
