# Sourced by the formation tests: network namespaces on one bridge with no uplink,
# sprout-firstboot started in them, etcdctl over mTLS. Addresses come from
# 198.18.0.0/15 only. The caller sets, before sourcing:
#   NP      name prefix (at most 6 characters: "sprt-k" -> sprt-k1, sprt-kv1, sprt-kbr)
#   SUBNET  first three octets ("198.18.4"); node i gets SUBNET.1i
#   WORK    scratch directory; node i keeps its state, etcd, PKI and log in $WORK/n<i>
#   FIRSTBOOT, SECRET (file), CLUSTER (cluster name)
NB_PIDS=()          # sprout-firstboot PID of node i at index i

# nb_preflight NAME [TOOL...]: exits 0 with the reason when the test cannot run here
# (not root; ip, etcd, etcdctl or a named tool missing), exits 1 when SPROUT_FIRSTBOOT
# is not the binary; else sets FIRSTBOOT and exports ETCDCTL_API=3.
nb_preflight() {
  local name=$1 tool
  shift
  if [ "$(id -u)" -ne 0 ]; then
    echo "$name: skipped: needs root to create network namespaces"
    exit 0
  fi
  for tool in ip etcd etcdctl "$@"; do
    if ! command -v "$tool" >/dev/null; then
      echo "$name: skipped: '$tool' not found (scripts/install-deps installs iproute2, etcd-server, etcd-client)"
      exit 0
    fi
  done
  if [ ! -x "${SPROUT_FIRSTBOOT:-}" ]; then
    echo "$name: set SPROUT_FIRSTBOOT to the sprout-firstboot binary (got '${SPROUT_FIRSTBOOT:-}')"
    exit 1
  fi
  FIRSTBOOT=$(readlink -f "$SPROUT_FIRSTBOOT")
  export ETCDCTL_API=3
}
NB_MAX=${NB_MAX:-6}  # namespaces cleaned up (1..NB_MAX)

nb_addr() { echo "$SUBNET.1$1"; }
nb_peers() { local i s=""; for i in $(seq 1 "$1"); do s+="$(nb_addr "$i"),"; done; echo "${s%,}"; }

# nb_setup i: namespace NPi with eth0 at SUBNET.1i on the bridge (created on demand).
nb_setup() {
  local i=$1 ns=$NP$1
  if ! ip link show "${NP}br" >/dev/null 2>&1; then
    ip link add "${NP}br" type bridge mcast_snooping 0
    ip link set "${NP}br" up
  fi
  ip netns add "$ns"
  ip link add "${NP}v$i" type veth peer name "${NP}p$i"
  ip link set "${NP}p$i" netns "$ns"
  ip link set "${NP}v$i" master "${NP}br" up
  ip -n "$ns" link set lo up
  ip -n "$ns" link set "${NP}p$i" name eth0
  ip -n "$ns" addr add "$(nb_addr "$i")/24" dev eth0
  ip -n "$ns" link set eth0 up
  mkdir -p "$WORK/n$i"
}

# nb_cut i / nb_heal i: take node i's bridge port down or up (a partition of node i).
nb_cut() { ip link set "${NP}v$1" down; }
nb_heal() { ip link set "${NP}v$1" up; }

# nb_start i expected peers-count [extra flags]: start sprout-firstboot for node i,
# without --apply-system, so the node config stays off this host.
nb_start() {
  local i=$1 expected=$2 count=$3
  shift 3
  ip netns exec "$NP$i" "$FIRSTBOOT" run --state-dir "$WORK/n$i/state" --name "node$i" --listen "$(nb_addr "$i")" \
    --peers "$(nb_peers "$count")" --expected "$expected" --secret-file "$SECRET" --cluster-name "$CLUSTER" \
    --etcd-data-dir "$WORK/n$i/etcd" --pki-dir "$WORK/n$i/pki" "$@" >>"$WORK/n$i/firstboot.log" 2>&1 &
  NB_PIDS[$i]=$!
}

# nb_kill i [signal]: stop node i's sprout-firstboot (its etcd gets SIGTERM with it).
nb_kill() {
  local pid=${NB_PIDS[$1]:-}
  [ -n "$pid" ] || return 0
  kill "-${2:-TERM}" "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  NB_PIDS[$1]=""
  local p
  for _ in $(seq 1 50); do  # until nothing of ours runs in the namespace any more
    p=$(ip netns pids "$NP$1" 2>/dev/null)
    [ -z "$p" ] && return 0
    sleep 0.1
  done
  for p in $(ip netns pids "$NP$1" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
}

# nb_ctl via-node endpoints-csv etcdctl-args...: etcdctl over mTLS from node via-node's
# namespace with its healthcheck client certificate.
nb_ctl() {
  local via=$1 endpoints=$2 pki=$WORK/n$1/pki
  shift 2
  ip netns exec "$NP$via" etcdctl --dial-timeout=1s --command-timeout=2s --endpoints="$endpoints" \
    --cacert "$pki/etcd/ca.crt" --cert "$pki/etcd/healthcheck-client.crt" --key "$pki/etcd/healthcheck-client.key" "$@"
}

# nb_endpoints i...: the client URLs of the given nodes.
nb_endpoints() { local i s=""; for i in "$@"; do s+="https://$(nb_addr "$i"):2379,"; done; echo "${s%,}"; }

# nb_wait_voting via count seconds node...: until count started voting members are
# listed and the given nodes' endpoints are all healthy.
nb_wait_voting() {
  local via=$1 count=$2 deadline=$(($(date +%s) + $3))
  shift 3
  local eps; eps=$(nb_endpoints "$@")
  while [ "$(date +%s)" -lt "$deadline" ]; do
    if [ "$(nb_ctl "$via" "$eps" member list 2>/dev/null | grep -c ', started, .*, false$')" -eq "$count" ] &&
      [ "$(nb_ctl "$via" "$eps" endpoint health 2>&1 | grep -c 'is healthy')" -eq $# ]; then
      return 0
    fi
    sleep 0.2
  done
  return 1
}

# nb_status_field i field: one string field of node i's `status --json`.
nb_status_field() {
  "$FIRSTBOOT" status --json --state-dir "$WORK/n$1/state" | tr -d '\n' | grep -o "\"$2\": *\"[^\"]*\"" | sed 's/.*: *"//; s/"$//'
}

# nb_status_wait i field: like nb_status_field, but waits up to 5 s for a value: the
# daemon writes state.json at most once a second, so right after etcd reports a member
# its file may still be the one from before.
nb_status_wait() {
  local v="" n
  for n in $(seq 1 25); do
    v=$(nb_status_field "$1" "$2")
    [ -n "$v" ] && break
    sleep 0.2
  done
  echo "$v"
}

# nb_teardown: stop everything in our namespaces, remove them and the bridge.
nb_teardown() {
  local i p
  for i in $(seq 1 "$NB_MAX"); do
    [ -n "${NB_PIDS[$i]:-}" ] && kill -TERM "${NB_PIDS[$i]}" 2>/dev/null
  done
  sleep 1
  for i in $(seq 1 "$NB_MAX"); do
    for p in $(ip netns pids "$NP$i" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
  done
  wait 2>/dev/null
  for i in $(seq 1 "$NB_MAX"); do ip netns del "$NP$i" 2>/dev/null; ip link del "${NP}v$i" 2>/dev/null; done
  ip link del "${NP}br" 2>/dev/null
}
