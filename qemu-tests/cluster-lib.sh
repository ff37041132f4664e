# Cluster harness (sourced): boots N nodes of one image in QEMU on a private network and
# talks to them. Used by qemu-tests/cluster (for people) and the cluster scenarios (CI).
#
# The network is a network namespace with a bridge and no uplink: the nodes reach each
# other and the harness (198.18.0.1), nothing else, so no registry is reachable.
# Node I (1-based) is 198.18.0.(10+I)/24. Each node boots from its own copy-on-write
# qcow2 over the image, gets its settings through QEMU's fw_cfg (the same key=value text
# as the config area: docs/personalization.md), and is reached over SSH with a key the
# harness makes. Everything started here is stopped by cluster_teardown.
#
# A node boots from one of the build's media, CLUSTER_MEDIUM[I] (set before vm_start I):
#   disk  a copy-on-write qcow2 over the image, under UEFI (the default);
#   raw   its own sparse copy of the raw image, booted as a raw disk under UEFI;
#   iso   the hybrid ISO beside the image (NAME.iso) as a CD under UEFI; /var in memory;
#   isodisk  the same ISO as a virtio disk under UEFI (as when written to a USB stick);
#         QEMU keeps the node's writes in a snapshot, so the file stays unchanged;
#   pxe   network boot under SeaBIOS: the NIC's iPXE ROM asks DHCP on the bridge and
#         fetches pxe/boot.ipxe, the kernel and the initrd (root inside) over HTTP from
#         the harness (cluster_pxe_server); /var in memory.
# Whatever the medium, the node's settings come through fw_cfg and it gets its static
# address; the DHCP lease is only for the firmware.

CLUSTER_NET=198.18.0
CLUSTER_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CLUSTER_MEM=${CLUSTER_MEM:-2048}  # the control plane and containerd's images (in memory on an ISO node)
CLUSTER_SMP=${CLUSTER_SMP:-1}  # virtual CPUs a node; CLUSTER_SMP_I sets node I's alone
# What the nodes run on: tcg (software emulation; the default), auto (KVM when a guest
# boots under it, else software emulation, saying why) or kvm (KVM, or an error naming the
# fix); SPROUT_QEMU_ACCEL overrides it (choose_accel in lib.sh). cluster_init settles it
# to kvm or tcg and says which, and why, in CLUSTER_ACCEL_WHY.
CLUSTER_ACCEL=${CLUSTER_ACCEL:-tcg}
CLUSTER_PXE_MEM=${CLUSTER_PXE_MEM:-2560}  # the root sits in memory on a PXE node
# A disk node's disk is this much larger than the image, as a real node's disk is: the
# state partition grows into it at first boot (docs/design.md). Empty: the image's size.
CLUSTER_DISK_GROW=${CLUSTER_DISK_GROW:-}
declare -a CLUSTER_MEDIUM
# How the nodes run: qemu (virtual machines, the default) or container (systemd
# containers from the image's root file system: container-lib.sh, docs/container-nodes.md).
CLUSTER_RUNTIME=${CLUSTER_RUNTIME:-qemu}

# cluster_plain_boot IMAGE: scenario 0, one node of IMAGE booted alone to its login
# prompt, outside the cluster; sets plain to its seconds (the baseline of the ratios).
cluster_plain_boot() {
  mkdir -p "$CLUSTER_DIR/plain"
  qemu-img create -q -f qcow2 -b "$1" -F raw "$CLUSTER_DIR/plain/disk.qcow2"
  cp "$OVMF_VARS" "$CLUSTER_DIR/plain/vars"
  QEMU_EXTRA="-smp 1" boot_vm "$CLUSTER_DIR/plain/disk.qcow2" "$CLUSTER_DIR/plain/vars" "$CLUSTER_DIR/plain/serial.log" 300 'login:'
  plain=${BOOT_LOGIN_SECONDS%.*}
  check "one node boots to its login prompt" "${plain:-none}" '^[0-9]+$'
  rm -rf "$CLUSTER_DIR/plain"
}

# cluster_init DIR IMAGE: prepares DIR (secret, SSH key, OVMF vars; a new directory in
# /tmp when DIR is "") and the network. Teardown removes DIR unless it keeps the logs.
cluster_init() {
  CLUSTER_DIR=${1:-$(mktemp -d /tmp/sprout-cluster.XXXXXX)} CLUSTER_IMAGE=$(realpath "$2")
  CLUSTER_ISO=${CLUSTER_IMAGE%.*}.iso CLUSTER_PXE=$(dirname "$CLUSTER_IMAGE")/pxe
  CLUSTER_NS=sprout-cluster-$$
  CLUSTER_NODES=()
  mkdir -p "$CLUSTER_DIR"
  # An arm64 image's nodes run under qemu-system-aarch64 with AAVMF (qemu_for, lib.sh).
  CLUSTER_ARCH=$(image_arch "$CLUSTER_IMAGE")
  if [ "$CLUSTER_RUNTIME" = container ]; then
    container_init || return 1
  else
  find_firmware "$CLUSTER_ARCH" || return 1
  if ! choose_accel "$CLUSTER_ACCEL" "$CLUSTER_ARCH" "$CLUSTER_IMAGE"; then echo "cluster: $ACCEL_WHY" >&2; return 1; fi
  CLUSTER_ACCEL=$ACCEL CLUSTER_ACCEL_WHY=$ACCEL_WHY
  qemu_for "$CLUSTER_ARCH" "$CLUSTER_ACCEL" || return 1
  fi
  # The folder holds the cluster secret, the SSH key and (later) admin credentials: the
  # harness's user alone reads it, and the secret is made with no moment of wider mode.
  chmod 0700 "$CLUSTER_DIR" || return 1
  [ -f "$CLUSTER_DIR/cluster.secret" ] || (umask 077 && head -c 32 /dev/urandom > "$CLUSTER_DIR/cluster.secret")
  chmod 0600 "$CLUSTER_DIR/cluster.secret" || return 1
  [ -f "$CLUSTER_DIR/id" ] || ssh-keygen -q -t ed25519 -N '' -C sprout-cluster -f "$CLUSTER_DIR/id" || return 1
  cluster_forget_discovery
  ip netns add "$CLUSTER_NS" || return 1
  ip -n "$CLUSTER_NS" link set lo up
  ip -n "$CLUSTER_NS" link add br0 type bridge
  ip -n "$CLUSTER_NS" addr add "$CLUSTER_NET.1/24" dev br0
  ip -n "$CLUSTER_NS" link set br0 up
  trap cluster_watchdog_fired USR1
  # Containers have no QEMU to watch: the harness's own loop notices one that ends.
  [ "$CLUSTER_RUNTIME" = container ] || cluster_watchdog start
}

# cluster_forget_discovery removes what kubectl remembers of an earlier cluster at this
# one's addresses. kubectl keeps each server's API discovery in ~/.kube/cache/discovery,
# by HOST_PORT, for up to 6 hours, and believes it: after a 1.20 cluster at 198.18.0.12,
# a 1.36 kubectl asking a 1.36 cluster there for endpointslices looked for them in
# discovery.k8s.io/v1beta1 (gone since 1.25) and got NotFound (CI's 1.36 lane runs right
# after the 1.20 one, on the same addresses). The harness made these addresses, so it
# forgets what is kept for them, and cluster_api_forward does the same for its port on
# the host's loopback once chosen: e2e.test's kubectl and a user's kubectl read that
# folder. The harness's own kubectl (cluster_kubectl) keeps its cache in the cluster's
# folder besides.
cluster_forget_discovery() {
  local cache=${HOME:-/root}/.kube/cache
  rm -rf "$cache/discovery/${CLUSTER_NET}."*_6443
}

# cluster_watchdog start|stop: while running, reads every running node's QEMU every 2 s:
# a KVM error in its log (node-I.log, since its last start) or a QEMU that sits still
# (no serial output and no CPU time for QEMU_STALL_SECONDS), or one that ended with a
# KVM error, is a verdict, written to
# DIR/watchdog.verdict with the node, QEMU's line and the fix; the harness gets SIGUSR1
# and ends the run with it (cluster_watchdog_fired). A QEMU that ended is a verdict only
# after `cluster_watchdog exits on` (scenarios that reboot or kill nodes leave it off, or
# turn it off with `cluster_watchdog exits off`). cluster_init starts it; teardown stops it.
cluster_watchdog() {
  local what=$1
  if [ "$what" = exits ]; then
    if [ "$2" = on ]; then touch "$CLUSTER_DIR/watchdog.exits"; else rm -f "$CLUSTER_DIR/watchdog.exits"; fi
    return 0
  fi
  if [ "$what" = stop ]; then
    [ -f "$CLUSTER_DIR/watchdog.pid" ] && kill "$(cat "$CLUSTER_DIR/watchdog.pid")" 2>/dev/null
    rm -f "$CLUSTER_DIR/watchdog.pid"
    return 0
  fi
  [ -f "$CLUSTER_DIR/watchdog.pid" ] && return 0
  local harness=$$
  (
    declare -A seen=() since=()
    while :; do
      for f in "$CLUSTER_DIR"/node-*.pid; do
        [ -f "$f" ] || continue
        i=${f##*/node-} i=${i%.pid}
        pid=$(cat "$f" 2>/dev/null) || continue
        verdict=""
        line=$(qemu_kvm_error "$CLUSTER_DIR/node-$i.log")
        if ! kill -0 "$pid" 2>/dev/null && [ -n "$line" ] && [ -f "$f" ]; then
          # Ended with a KVM error (an assertion of QEMU's KVM code aborts it at once):
          # news even while ends are expected, since a node stopped on purpose has none.
          verdict="node-$i: KVM cannot run this guest; its QEMU ended, and its log ($CLUSTER_DIR/node-$i.log) says: \"$line\"; fix: run with SPROUT_QEMU_ACCEL=tcg (software emulation)"
        elif ! kill -0 "$pid" 2>/dev/null; then
          [ -f "$CLUSTER_DIR/watchdog.exits" ] && [ -f "$f" ] || continue
          verdict="node-$i: its QEMU ($(cluster_accel_name)) ended; $(node_stopped_why "$i"); see $CLUSTER_DIR/node-$i.log and node-$i.serial"
          [ -z "$line" ] || verdict+="; fix: run with SPROUT_QEMU_ACCEL=tcg (software emulation)"
        elif [ -n "$line" ]; then
          verdict="node-$i: KVM cannot run this guest; its QEMU log ($CLUSTER_DIR/node-$i.log) says: \"$line\"; fix: run with SPROUT_QEMU_ACCEL=tcg (software emulation)"
        elif now=$(qemu_progress "$pid" "$CLUSTER_DIR/node-$i.serial"); then
          if [ "${seen[$i]:-}" != "$pid $now" ]; then
            seen[$i]="$pid $now" since[$i]=$SECONDS
          elif [ $((SECONDS - since[$i])) -ge "$QEMU_STALL_SECONDS" ]; then
            verdict="node-$i: its QEMU (pid $pid, $(cluster_accel_name)) sat still for $QEMU_STALL_SECONDS s: no serial output, no CPU time; last console line: \"$(grep -av '^\s*$' "$CLUSTER_DIR/node-$i.serial" | tail -n 1 | tr -d '\r' | cut -c1-160)\"; last line of its QEMU log: \"$(grep -av '^\s*$' "$CLUSTER_DIR/node-$i.log" | tail -n 1)\""
            [ "$CLUSTER_ACCEL" != kvm ] || verdict+="; fix: run with SPROUT_QEMU_ACCEL=tcg (software emulation)"
          fi
        fi
        [ -n "$verdict" ] || continue
        echo "$verdict" > "$CLUSTER_DIR/watchdog.verdict"
        kill -USR1 "$harness" 2>/dev/null
        exit 0
      done
      sleep 2
    done
  ) </dev/null >/dev/null 2>&1 &
  echo $! > "$CLUSTER_DIR/watchdog.pid"
  disown $! 2>/dev/null
}

# cluster_watchdog_fired: SIGUSR1 from the watchdog: prints its verdict and ends the run
# as failed (the EXIT trap tears down, keeping the logs).
cluster_watchdog_fired() {
  echo >&2
  echo "cluster: stopped: $(cat "$CLUSTER_DIR/watchdog.verdict" 2>/dev/null)" >&2
  failed=$((${failed:-0} + 1)) status=1
  exit 1
}

# cluster_accel_name prints the accelerator the nodes run on, in words.
cluster_accel_name() {
  if [ "$CLUSTER_RUNTIME" = container ]; then echo "container nodes (native)"
  elif [ "$CLUSTER_ACCEL" = kvm ]; then echo KVM; else echo "software emulation (TCG)"; fi
}

# node_stopped_why I: one line on why node I's QEMU ended: the last lines of its QEMU log
# and of its console.
node_stopped_why() {
  local q c
  q=$(awk '/^=== boot/ { q = "" } !/^=== boot/ && NF { q = $0 } END { print q }' "$CLUSTER_DIR/node-$1.log" 2>/dev/null)
  c=$(grep -av '^\s*$' "$CLUSTER_DIR/node-$1.serial" 2>/dev/null | tail -n 1 | tr -d '\r' | cut -c1-160)
  echo "QEMU said: \"${q:-nothing}\"; last console line: \"${c:-none}\""
}

# node_ip I prints node I's address.
node_ip() { echo "$CLUSTER_NET.$((10 + $1))"; }

# worker_secret prints the worker secret of the cluster secret (what `sprout
# worker-secret` prints): hex HMAC-SHA256(cluster secret, "sprout worker secret v1").
worker_secret() {
  printf 'sprout worker secret v1' |
    openssl mac -digest SHA256 -macopt "hexkey:$(od -An -tx1 -v "$CLUSTER_DIR/cluster.secret" | tr -d ' \n')" HMAC |
    tr 'A-F' 'a-f'
}

# shellcheck source=tests/lib/ca-cert-hash.sh
. "$CLUSTER_LIB_DIR/../tests/lib/ca-cert-hash.sh"

# node_config I ROLE PEERS...: writes node I's settings for fw_cfg. A worker gets the
# worker secret only, never the cluster secret, and the pin of the cluster CA the founder
# derives from the secret (computed apart from sprout: a pin that does not match the CA
# fails the worker's join), as `sprout personalize --role worker` does.
# A control-plane node also gets the lines of CLUSTER_CP_CONFIG (key=value, e.g. its
# backup-dir).
CLUSTER_CP_CONFIG=()
node_config() {
  local i=$1 role=$2; shift 2
  local peers
  peers=$(IFS=,; echo "$*")
  {
    echo "hostname=node-$i"
    echo "role=$role"
    echo "address=$(node_ip "$i")/24"
    echo "peers=$peers"
    if [ "$role" = worker ]; then
      echo "worker-secret=$(worker_secret)"
      echo "ca-cert-hash=$(ca_cert_hash_of_secret "$CLUSTER_DIR/cluster.secret")"
    else
      echo "cluster-secret=$(base64 -w0 < "$CLUSTER_DIR/cluster.secret")"
    fi
    echo "ssh-authorized-key=$(cat "$CLUSTER_DIR/id.pub")"
    [ "$role" = worker ] || [ "${#CLUSTER_CP_CONFIG[@]}" -eq 0 ] || printf '%s\n' "${CLUSTER_CP_CONFIG[@]}"
  } > "$CLUSTER_DIR/node-$i.conf"
}

# vm_start I: boots node I from CLUSTER_MEDIUM[I] (its disk is made on first start and
# kept across restarts).
vm_start() {
  [ "$CLUSTER_RUNTIME" != container ] || { container_start "$1"; return; }
  local i=$1 dir=$CLUSTER_DIR
  local medium=${CLUSTER_MEDIUM[$i]:-disk} tap=tap$i mem=$CLUSTER_MEM
  local boot=() firmware=(-drive "if=pflash,format=raw,unit=0,readonly=on,file=$FW_CODE"
    -drive "if=pflash,format=raw,unit=1,file=$dir/node-$i.vars")
  if [ "$CLUSTER_ARCH" != amd64 ] && [ "$medium" != disk ] && [ "$medium" != raw ]; then
    echo "node-$i: an $CLUSTER_ARCH node boots from disk or raw only (docs/arm64.md)" >&2
    return 1
  fi
  case $medium in
    disk)
      local disk=$dir/node-$i.qcow2 fmt=raw
      case $CLUSTER_IMAGE in *.qcow2) fmt=qcow2 ;; esac
      if [ ! -f "$disk" ]; then
        qemu-img create -q -f qcow2 -b "$CLUSTER_IMAGE" -F "$fmt" "$disk" || return 1
        [ -z "$CLUSTER_DISK_GROW" ] || qemu-img resize -q "$disk" "+$CLUSTER_DISK_GROW" || return 1
      fi
      boot=(-drive "if=virtio,format=qcow2,cache=unsafe,file=$disk") ;;
    raw)
      local disk=$dir/node-$i.raw
      if [ ! -f "$disk" ]; then
        case $CLUSTER_IMAGE in
          *.qcow2) qemu-img convert -O raw "$CLUSTER_IMAGE" "$disk.tmp" ;;
          *) cp --sparse=always "$CLUSTER_IMAGE" "$disk.tmp" ;;
        esac && mv "$disk.tmp" "$disk" || return 1
      fi
      boot=(-drive "if=virtio,format=raw,cache=unsafe,file=$disk") ;;
    iso)
      [ -f "$CLUSTER_ISO" ] || { echo "node-$i: no ISO at $CLUSTER_ISO (build with --format raw,iso)" >&2; return 1; }
      boot=(-cdrom "$CLUSTER_ISO") ;;
    isodisk)
      [ -f "$CLUSTER_ISO" ] || { echo "node-$i: no ISO at $CLUSTER_ISO (build with --format raw,iso)" >&2; return 1; }
      boot=(-drive "if=virtio,format=raw,snapshot=on,file=$CLUSTER_ISO") ;;
    pxe)
      cluster_pxe_server || return 1
      boot=(-boot n) firmware=() mem=$CLUSTER_PXE_MEM ;;
    *) echo "node-$i: unknown medium '$medium' (disk, raw, iso, isodisk or pxe)" >&2; return 1 ;;
  esac
  # UEFI nodes keep their own firmware variables across restarts; PXE nodes use SeaBIOS.
  [ "${#firmware[@]}" -eq 0 ] || [ -f "$dir/node-$i.vars" ] || cp "$FW_VARS" "$dir/node-$i.vars"
  node_ssh_close "$i"
  ip -n "$CLUSTER_NS" link del "$tap" 2>/dev/null
  ip -n "$CLUSTER_NS" tuntap add dev "$tap" mode tap || return 1
  ip -n "$CLUSTER_NS" link set "$tap" master br0 up
  echo "=== boot $(date +%T) from $medium" >> "$dir/node-$i.log"
  # CLUSTER_TPM=1: each node has its own software TPM 2.0 (swtpm), whose state lives in
  # DIR/tpm-I across the node's restarts, as a machine's TPM does (docs/secure-boot.md).
  local tpm=()
  if [ -n "${CLUSTER_TPM:-}" ]; then
    [ -f "$dir/tpm-$i/pid" ] && kill "$(cat "$dir/tpm-$i/pid")" 2>/dev/null && sleep 0.5
    mkdir -p "$dir/tpm-$i" && rm -f "$dir/tpm-$i/sock"
    swtpm socket --tpm2 --tpmstate "dir=$dir/tpm-$i" --ctrl "type=unixio,path=$dir/tpm-$i/sock" \
      --pid "file=$dir/tpm-$i/pid" --log "file=$dir/tpm-$i/log" --daemon || return 1
    local w=0
    while [ ! -S "$dir/tpm-$i/sock" ] && [ "$w" -lt 50 ]; do sleep 0.1; w=$((w + 1)); done
    tpm=(-chardev "socket,id=chrtpm,path=$dir/tpm-$i/sock" -tpmdev emulator,id=tpm0,chardev=chrtpm
      -device tpm-tis,tpmdev=tpm0)
  fi
  local smp_of=CLUSTER_SMP_$i
  date +%s.%N >"$dir/node-$i.started"  # power-on, for the timeline (qemu-tests/timeline.sh)
  ip netns exec "$CLUSTER_NS" "${QEMU_CMD[@]}" -m "$mem" -smp "${!smp_of:-$CLUSTER_SMP}" \
    "${firmware[@]}" "${boot[@]}" "${tpm[@]}" \
    -netdev "tap,id=n0,ifname=$tap,script=no,downscript=no" \
    -device "virtio-net-pci,netdev=n0,mac=52:54:00:18:00:$(printf %02x $((10 + i)))" \
    -fw_cfg "name=opt/sprout/config,file=$dir/node-$i.conf" \
    -display none -serial "file:$dir/node-$i.serial" -monitor none -no-reboot \
    </dev/null >>"$dir/node-$i.log" 2>&1 &
  echo $! > "$dir/node-$i.pid"
  disown $! 2>/dev/null  # its end is not news: teardown kills it
  CLUSTER_NODES[$i]=1
}

# vm_kill I: pulls node I's power (SIGKILL to QEMU, no shutdown).
vm_kill() {
  [ "$CLUSTER_RUNTIME" != container ] || { container_kill "$1"; return; }
  local pidfile=$CLUSTER_DIR/node-$1.pid
  node_ssh_close "$1"
  [ -f "$pidfile" ] || return 0
  kill -9 "$(cat "$pidfile")" 2>/dev/null
  while kill -0 "$(cat "$pidfile")" 2>/dev/null; do sleep 0.1; done
  rm -f "$pidfile"
}

# vm_running I: is node I's QEMU alive?
vm_running() {
  [ "$CLUSTER_RUNTIME" != container ] || { container_running "$1"; return; }
  [ -f "$CLUSTER_DIR/node-$1.pid" ] && kill -0 "$(cat "$CLUSTER_DIR/node-$1.pid")" 2>/dev/null
}

# node_ssh I COMMAND...: runs a command on node I as root (10 s connect timeout). One
# SSH connection per node is kept open and shared by the commands (OpenSSH's connection
# multiplexing): a new login costs an emulated node a key exchange and a PAM session,
# about a second of its CPU, and the waits below ask every few seconds. A dead connection
# is noticed within 20 s (keep-alives); vm_kill and vm_start close it at once.
node_ssh() {
  local i=$1; shift
  ip netns exec "$CLUSTER_NS" ssh -i "$CLUSTER_DIR/id" -o BatchMode=yes -o StrictHostKeyChecking=no \
    -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o ConnectTimeout=10 \
    -o ControlMaster=auto -o "ControlPath=$CLUSTER_DIR/ssh-$i" -o ControlPersist=120 \
    -o ServerAliveInterval=5 -o ServerAliveCountMax=4 "root@$(node_ip "$i")" "$@"
}

# node_ssh_close I: ends node I's shared SSH connection, if there is one.
node_ssh_close() {
  [ -S "$CLUSTER_DIR/ssh-$1" ] || return 0
  ip netns exec "$CLUSTER_NS" ssh -o "ControlPath=$CLUSTER_DIR/ssh-$1" -O exit "root@$(node_ip "$1")" >/dev/null 2>&1
  rm -f "$CLUSTER_DIR/ssh-$1"
}

# node_phase I prints node I's formation phase ("" if it cannot be asked yet).
node_phase() {
  node_ssh "$1" sprout-firstboot status --json 2>/dev/null |
    python3 -c 'import json,sys; print(json.load(sys.stdin).get("phase",""))' 2>/dev/null
}

# wait_until SECONDS DESCRIPTION COMMAND...: polls COMMAND until it succeeds, every 3 s
# for the first minute and every 10 s after that (each poll costs the emulated nodes it
# asks CPU they are short of); sets WAITED to how long it took, or fails after SECONDS.
wait_until() {
  local limit=$1 what=$2; shift 2
  local start=$SECONDS cut=""
  WAITED=""
  # A run with a hard end (SPROUT_HARD_END, a Unix time; run-tests sets it 3 minutes past
  # SPROUT_DEADLINE, inside CI's 90) waits no later than that: a scenario slower than its
  # budget then fails on its wait, saying why, and the run has time left to print its
  # summary, where CI's own timer would cut it off with nothing said.
  if [ -n "${SPROUT_HARD_END:-}" ]; then
    local left=$((SPROUT_HARD_END - $(date +%s)))
    [ "$left" -ge "$limit" ] || { limit=$((left > 0 ? left : 0)) cut=" (cut short: the run's hard end, SPROUT_HARD_END, has come)"; }
  fi
  while ! "$@" >/dev/null 2>&1; do
    if [ $((SECONDS - start)) -ge "$limit" ]; then
      echo "timed out after ${limit} s waiting for: $what$cut" >&2
      return 1
    fi
    sleep $((SECONDS - start < 60 ? 3 : 10))
  done
  WAITED=$((SECONDS - start))
}

# is_member PHASE: a voting member: founding, or promoted ("member (joined as learner)")?
is_member() {
  case $1 in
    "founding member" | member | "member "*) return 0 ;;
    *) return 1 ;;
  esac
}

# expect_members N LIMIT T0 WHAT: waits up to LIMIT s for nodes 1..N to be voting
# members and checks WHAT with the seconds since T0; on timeout, shows the end of each
# node's console and fails.
expect_members() {
  local n=$1 limit=$2 t0=$3 what=$4 i
  if wait_until "$limit" "$n nodes in phase member" all_members "$n"; then
    check "$what (seconds from power-on)" "$((SECONDS - t0))" '^[0-9]+$'
    return 0
  fi
  check "$what" "timeout" '^[0-9]+$'
  for i in $(seq "$n"); do echo "--- node-$i (${CLUSTER_MEDIUM[$i]:-disk})"; tail -n 25 "$CLUSTER_DIR/node-$i.serial"; done
  return 1
}

# all_members N: are nodes 1..N all voting members?
all_members() {
  local i
  for i in $(seq "$1"); do is_member "$(node_phase "$i")" || return 1; done
}

# node_timeline I prints, on node I's own clock (seconds since its kernel started, this
# boot), when it reached multi-user.target and when its formation status first became
# "member": "up=71.2 member=95.0" ("-" for what has not happened).
node_timeline() {
  # A container shares the host's monotonic clock: its times count from its systemd's start.
  node_ssh "$1" 'up=$(systemctl show -P ActiveEnterTimestampMonotonic multi-user.target) base=0
    ! systemd-detect-virt -cq || base=$(systemctl show -P UserspaceTimestampMonotonic)
    m=$(journalctl -b -o short-monotonic -u sprout-firstboot.service --no-pager |
      sed -n "s/^\[ *\([0-9.]*\)\] .*: member\( (joined as learner)\)\{0,1\}$/\1/p" | head -n 1)
    awk -v u="${up:-0}" -v m="${m:--}" -v b="${base:-0}" "BEGIN { printf \"up=%s member=%s\\n\", (u > 0 ? sprintf(\"%.1f\", (u - b) / 1e6) : \"-\"), (m == \"-\" ? m : sprintf(\"%.1f\", m - b / 1e6)) }"'
}

# cluster_etcdctl I ARGS...: etcdctl against node I over mTLS, run by the harness in the
# network namespace with the client certificate node 1 made (fetched once over SSH).
cluster_etcdctl() {
  local i=$1; shift
  local pki=$CLUSTER_DIR/pki
  if [ ! -f "$pki/client.key" ]; then
    mkdir -p "$pki"
    node_ssh 1 cat /etc/kubernetes/pki/etcd/ca.crt > "$pki/ca.crt" &&
      node_ssh 1 cat /etc/kubernetes/pki/etcd/healthcheck-client.crt > "$pki/client.crt" &&
      node_ssh 1 cat /etc/kubernetes/pki/etcd/healthcheck-client.key > "$pki/client.key.tmp" &&
      mv "$pki/client.key.tmp" "$pki/client.key" || return 1
  fi
  ip netns exec "$CLUSTER_NS" env ETCDCTL_API=3 etcdctl --endpoints "https://$(node_ip "$i"):2379" \
    --cacert "$pki/ca.crt" --cert "$pki/client.crt" --key "$pki/client.key" --command-timeout=10s "$@"
}

# member_summary I prints etcd's member list as seen by node I, one "name:peerURLs:voter"
# or "...:learner" per member, sorted, on one line.
member_summary() {
  cluster_etcdctl "$1" member list -w json | python3 -c '
import json,sys
m=json.load(sys.stdin)["members"]
print(" ".join(sorted("%s:%s:%s" % (x.get("name",""), ",".join(x["peerURLs"]), "learner" if x.get("isLearner") else "voter") for x in m)))'
}

# expect_healthy WHAT: waits up to 600 s for etcd to report every member healthy (asked
# through node 1) and checks WHAT with the seconds it took.
expect_healthy() {
  wait_until 600 "etcd healthy on every member" cluster_etcdctl 1 endpoint health --cluster
  check "$1 (seconds)" "${WAITED:-timeout}" '^[0-9]+$'
}

# expect_member_list I WHAT REGEX: prints etcd's member list as node I sees it and
# checks it against REGEX (see member_summary).
expect_member_list() {
  local summary
  summary=$(member_summary "$1")
  echo "     member list: $summary"
  check "$2" "$summary" "$3"
}

# cluster_id I prints the cluster ID node I's etcd reports, in hex.
cluster_id() {
  cluster_etcdctl "$1" endpoint status -w json |
    python3 -c 'import json,sys; print("%x" % json.load(sys.stdin)[0]["Status"]["header"]["cluster_id"])'
}

# cluster_kubectl ARGS...: kubectl 1.20 (compiled by the kubernetes recipe, cached) as
# the cluster's admin, in the network namespace, with the admin.conf node 1 made
# (fetched once over SSH; it names node 1's apiserver, KUBE_SERVER overrides that).
cluster_kubectl() {
  local conf=$CLUSTER_DIR/admin.conf
  cluster_find_kubectl
  if [ ! -s "$conf" ]; then
    node_ssh 1 cat /etc/kubernetes/admin.conf > "$conf.tmp" && mv "$conf.tmp" "$conf" || return 1
  fi
  ip netns exec "$CLUSTER_NS" "$CLUSTER_KUBECTL" --kubeconfig "$conf" --request-timeout=20s \
    --cache-dir "$CLUSTER_DIR/kubectl-cache" ${KUBE_SERVER:+--server "$KUBE_SERVER"} "$@"
}

# cluster_find_kubectl sets CLUSTER_KUBECTL to kubectl 1.20, compiled by the kubernetes
# recipe (a warm cache answers at once).
cluster_find_kubectl() {
  [ -z "${CLUSTER_KUBECTL:-}" ] || return 0
  CLUSTER_KUBECTL=$(bash "$CLUSTER_LIB_DIR/../images/kubernetes/compile.sh" "${SPROUT_CACHE:-/var/cache/sprout}" 2>/dev/null)/kubectl
}

# nodes_ready N: true when the cluster lists N nodes and every one is Ready.
nodes_ready() {
  local want=$1 got
  got=$(cluster_kubectl get nodes --no-headers 2>/dev/null | awk '$2 == "Ready" {n++} END {print n+0}')
  [ "$got" -eq "$want" ] && [ "$(cluster_kubectl get nodes --no-headers 2>/dev/null | wc -l)" -eq "$want" ]
}

# mirror_pods_running NODES...: true when etcd, kube-apiserver, kube-controller-manager
# and kube-scheduler run on each node (their mirror pods are Running).
mirror_pods_running() {
  local listed n c
  listed=$(cluster_kubectl get pods -n kube-system --no-headers 2>/dev/null | awk '$3 == "Running" {print $1}')
  for n in "$@"; do
    for c in etcd kube-apiserver kube-controller-manager kube-scheduler; do
      grep -qx "$c-$n" <<<"$listed" || return 1
    done
  done
}

# readyz I prints what node I's apiserver answers on /readyz.
readyz() { KUBE_SERVER="https://$(node_ip "$1"):6443" cluster_kubectl get --raw /readyz 2>&1; }

# cluster_teardown [keep]: stops every VM and removes the network; keeps logs if asked.
cluster_teardown() {
  local keep=${1:-}
  local f
  cluster_watchdog stop
  for f in "$CLUSTER_DIR"/ssh-*; do [ -S "$f" ] && node_ssh_close "${f##*/ssh-}"; done
  cluster_health_sampler stop
  [ "$CLUSTER_RUNTIME" != container ] || container_teardown
  for f in "$CLUSTER_DIR"/node-*.pid "$CLUSTER_DIR"/server-*.pid "$CLUSTER_DIR"/tpm-*/pid; do
    [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null
  done
  sleep 0.5
  rm -f "$CLUSTER_DIR"/node-*.pid "$CLUSTER_DIR"/server-*.pid
  [ -n "${CLUSTER_NS:-}" ] && ip netns del "$CLUSTER_NS" 2>/dev/null
  if [ -n "$keep" ]; then
    rm -f "$CLUSTER_DIR"/*.qcow2 "$CLUSTER_DIR"/*.raw "$CLUSTER_DIR"/*.vars
    echo "cluster logs kept in $CLUSTER_DIR (serial consoles: node-*.serial)"
  else
    rm -rf "$CLUSTER_DIR"
  fi
}

# cluster_test_traps: for tests: on exit the cluster is torn down, and its logs kept when
# a check failed (or KEEP_LOGS is set); Ctrl-C exits through the same path.
cluster_test_traps() {
  trap 'cluster_teardown $([ "$failed" -gt 0 ] || [ -n "${KEEP_LOGS:-}" ] && echo keep)' EXIT
  trap 'exit 130' INT TERM
}

# The servers on the bridge, rolling updates, and backups: files of their own, part of this harness.
. "$CLUSTER_LIB_DIR/cluster-servers.sh"
. "$CLUSTER_LIB_DIR/cluster-update.sh"
. "$CLUSTER_LIB_DIR/cluster-backup.sh"
. "$CLUSTER_LIB_DIR/container-lib.sh"
