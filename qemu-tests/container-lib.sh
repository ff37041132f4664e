# Container runtime of the cluster harness (sourced by cluster-lib.sh): node I runs as a
# systemd container (systemd-nspawn) booted from the image's own root file system, the
# squashfs in its root partition, the same bytes QEMU's nodes boot, natively (no
# emulation). qemu-tests/cluster --runtime container chooses it; docs/container-nodes.md
# says what it proves and what it does not.
#
# What the initrd does on a real node, the harness does for a container:
#   - the root: IMAGE's root partition mounted once (squashfs through a loop device at the
#     partition's offset, read-only) at DIR/root, shared by every node read-only; with no
#     loop device (SPROUT_CONTAINER_ROOT=unpack, or none free) it is unpacked once into
#     DIR/root with rdsquashfs instead;
#   - /var: DIR/node-I/var, the node's own folder, seeded on its first start from the
#     image's factory copy (/usr/share/factory/var) as the initrd seeds a new state
#     partition; it survives a power loss and a restart;
#   - /etc/machine-id and /etc/hostname: bound from /var/lib/sprout as the initrd binds
#     them;
#   - the settings: DIR/node-I.conf (the same key=value text QEMU gives through fw_cfg)
#     bound read-only at the very path the node reads fw_cfg from,
#     /sys/firmware/qemu_fw_cfg/by_name/opt/sprout/config/raw (over a small tmpfs on
#     /sys/firmware), so the image reads it unchanged, as "fw_cfg";
#   - the network: one veth, its host side (vb-node-I) on the harness's bridge in the
#     cluster's network namespace, its node side host0 inside the container. sprout's own
#     network unit matches the machine's network cards only (Kind=!*: a pod's veth has a
#     kind and keeps its own address), and a veth has a kind, so the harness gives host0
#     the node's address with a unit of its own, bound over /etc/systemd/network.
# Every nspawn setting and why: docs/container-nodes.md ("The nspawn settings").

CONTAINER_CGROUP_NAME=${CONTAINER_CGROUP_NAME:-}

# container_init: checks the host, and mounts (or unpacks) the image's root at DIR/root.
container_init() {
  local tool
  for tool in systemd-nspawn losetup; do
    command -v "$tool" >/dev/null || { echo "cluster: --runtime container needs $tool; install it: scripts/install-deps (systemd-container, util-linux)" >&2; return 1; }
  done
  if [ "$CLUSTER_ARCH" != "$(host_arch)" ]; then
    echo "cluster: $CLUSTER_IMAGE is an $CLUSTER_ARCH image and this host is $(host_arch): a container runs on the host's CPU; use --runtime qemu" >&2
    return 1
  fi
  CLUSTER_ACCEL=container
  CLUSTER_ACCEL_WHY="containers (systemd-nspawn) on this host's CPU, natively: no emulation"
  CONTAINER_CGROUP_NAME=sprout-cluster-$$
  container_root || return 1
}

# container_root: DIR/root holds IMAGE's root file system, read-only, once per run.
container_root() {
  local root=$CLUSTER_DIR/root lo hi t=$SECONDS
  mountpoint -q "$root" && return 0
  [ -x "$root/usr/lib/systemd/systemd" ] && return 0
  read -r lo hi < <(container_root_range "$CLUSTER_IMAGE") || return 1
  mkdir -p "$root"
  if [ "${SPROUT_CONTAINER_ROOT:-mount}" = mount ] &&
    mount -t squashfs -o "ro,loop,offset=$lo,sizelimit=$((hi - lo))" "$CLUSTER_IMAGE" "$root" 2>"$CLUSTER_DIR/root-mount.err"; then
    CONTAINER_ROOT_HOW="mounted read-only (squashfs on a loop device at byte $lo of $(basename "$CLUSTER_IMAGE"))"
  else
    [ "${SPROUT_CONTAINER_ROOT:-mount}" = mount ] && echo "cluster: cannot mount the root partition of $CLUSTER_IMAGE through a loop device ($(cat "$CLUSTER_DIR/root-mount.err")); unpacking it instead" >&2
    command -v rdsquashfs >/dev/null || { echo "cluster: to unpack the root, install squashfs-tools-ng (rdsquashfs)" >&2; return 1; }
    local part=$CLUSTER_DIR/root.squashfs
    dd if="$CLUSTER_IMAGE" of="$part" bs=1M iflag=skip_bytes,count_bytes skip="$lo" count=$((hi - lo)) status=none &&
      rdsquashfs -q -u / -p "$root" -C -X -O "$part" || { echo "cluster: cannot unpack the root partition of $CLUSTER_IMAGE into $root" >&2; rm -f "$part"; return 1; }
    rm -f "$part"
    CONTAINER_ROOT_HOW="unpacked into $root with rdsquashfs"
  fi
  if [ ! -x "$root/usr/lib/systemd/systemd" ]; then
    echo "cluster: the root partition of $CLUSTER_IMAGE holds no systemd (/usr/lib/systemd/systemd); is it a sprout image?" >&2
    return 1
  fi
  echo "cluster: the nodes' root: $CONTAINER_ROOT_HOW in $((SECONDS - t)) s, shared read-only"
}

# container_root_range IMAGE prints the byte offset and end of IMAGE's root partition:
# the partition of the Discoverable Partitions root type (x86-64 or arm64), else the
# second partition, as QEMU's smoke test reads it (root_tar, lib.sh).
container_root_range() {
  sfdisk --json "$1" 2>/dev/null | python3 -c '
import json, sys
roots = {"4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709", "B921B045-1DF0-41C3-AF44-4C6F280D3FAE"}
p = json.load(sys.stdin)["partitiontable"]["partitions"]
r = [x for x in p if x["type"].upper() in roots] or p[1:2]
print(r[0]["start"] * 512, (r[0]["start"] + r[0]["size"]) * 512)' ||
    { echo "cluster: cannot read the partition table of $1 (sfdisk --json); is it a raw sprout image?" >&2; return 1; }
}

# container_cgroups I: the node's own cgroup in every cgroup hierarchy of the host, below
# the harness's own ("" when the hierarchy is not writable), one path a line.
container_cgroups() {
  local h rel
  for h in /sys/fs/cgroup/*/; do
    h=${h%/}
    [ -w "$h" ] || continue
    case ${h##*/} in
      unified) rel=$(sed -n 's/^0:://p' /proc/self/cgroup) ;;
      systemd) rel=$(sed -n 's/^[0-9]*:name=systemd://p' /proc/self/cgroup) ;;
      *) rel=$(awk -F: -v c="${h##*/}" '{ n = split($2, a, ","); for (i = 1; i <= n; i++) if (a[i] == c) print $3 }' /proc/self/cgroup | head -n 1) ;;
    esac
    echo "$h${rel%/}/$CONTAINER_CGROUP_NAME/node-$1"
  done
}

# container_network_unit I writes node I's network unit for host0 (its veth).
container_network_unit() {
  local i=$1 d=$CLUSTER_DIR/node-$1/network
  mkdir -p "$d"
  cat > "$d/09-sprout-container.network" <<EOF
# Written by qemu-tests/container-lib.sh: a container node's veth has a kind, which
# sprout's own unit (10-sprout-static.network, Kind=!*) leaves alone on purpose.
[Match]
Name=host0

[Network]
Address=$(node_ip "$i")/24
MulticastDNS=no
LinkLocalAddressing=no
LLMNR=no

[Link]
Multicast=yes
EOF
}

# container_start I: boots node I as a container (its /var is made on first start and
# kept across restarts).
container_start() {
  local i=$1 dir=$CLUSTER_DIR root=$CLUSTER_DIR/root
  local var=$dir/node-$i/var
  node_ssh_close "$i"
  container_running "$i" && container_kill "$i"
  mkdir -p "$var"
  if [ ! -e "$var/.sprout-seeded" ]; then
    cp -a "$root/usr/share/factory/var/." "$var/" 2>/dev/null
    : > "$var/.sprout-seeded"
  fi
  mkdir -p "$var/lib/sprout"
  [ -s "$var/lib/sprout/machine-id" ] || tr -d '-' < /proc/sys/kernel/random/uuid > "$var/lib/sprout/machine-id"
  local binds=(--bind="$var:/var" --bind="$var/lib/sprout/machine-id:/etc/machine-id")
  if [ "$(cat "$root/etc/hostname" 2>/dev/null)" = localhost ]; then
    [ -s "$var/lib/sprout/hostname" ] || echo "sprout-$(cut -c1-8 "$var/lib/sprout/machine-id")" > "$var/lib/sprout/hostname"
    binds+=(--bind="$var/lib/sprout/hostname:/etc/hostname")
  fi
  container_network_unit "$i"
  binds+=(--bind-ro="$dir/node-$i/network:/etc/systemd/network")
  binds+=(--tmpfs=/sys/firmware:mode=0755 --bind-ro="$dir/node-$i.conf:/sys/firmware/qemu_fw_cfg/by_name/opt/sprout/config/raw")
  # The A/B update's health gate judges the slot the node booted, named on the kernel
  # command line (sprout.roothash=); a container has the host's command line and no slot,
  # so the gate would fail and reboot the node (FailureAction=reboot): masked here (bound
  # to /dev/null) with its commit. The slots stay QEMU's to prove.
  local u
  for u in sprout-update-gate sprout-update-bless; do
    [ -f "$root/usr/lib/systemd/system/$u.service" ] && binds+=(--bind-ro="/dev/null:/usr/lib/systemd/system/$u.service")
  done
  local cg g ctl
  cg=$(container_cgroups "$i")
  # nspawn mounts the v1 controllers read-only in a container (only its name=systemd
  # hierarchy is writable), so crun and runc could not make a cgroup for a pod ("crun:
  # creating cgroup directory /sys/fs/cgroup/pids/container: No such file or
  # directory"); each controller's hierarchy is the node's own cgroup there, bound
  # writable (with the cgroup namespace it is the container's root, so /proc/self/cgroup
  # agrees). Not enough alone: nspawn mounts its read-only controllers after the custom
  # binds, on top of them, and crun still failed ...
  while read -r g; do
    case $g in /sys/fs/cgroup/systemd/* | /sys/fs/cgroup/unified/* | "") continue ;; esac
    g=${g#/sys/fs/cgroup/} ctl=${g%%/*}
    binds+=(--bind="/sys/fs/cgroup/$g:/sys/fs/cgroup/$ctl")
  done <<<"$cg"
  # ... so a unit of the harness's, in /run/systemd/system (a folder bound there), remounts
  # every controller writable in the container before anything else starts.
  local units=$dir/node-$i/units
  mkdir -p "$units/sysinit.target.wants"
  cat > "$units/sprout-container-cgroups.service" <<'UNIT'
[Unit]
Description=container node: the cgroup controllers writable (qemu-tests/container-lib.sh)
DefaultDependencies=no
Before=sysinit.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -c 'for d in /sys/fs/cgroup/*/; do mount -o remount,rw,bind "$d"; done'
UNIT
  ln -sf ../sprout-container-cgroups.service "$units/sysinit.target.wants/"
  binds+=(--bind-ro="$units:/run/systemd/system")
  echo "=== boot $(date +%T) as a container" >> "$dir/node-$i.log"
  date +%s.%N >"$dir/node-$i.started"  # power-on, for the timeline (qemu-tests/timeline.sh)
  # The settings and their reasons: docs/container-nodes.md ("The nspawn settings").
  # nsenter --net, not `ip netns exec`: that one mounts a new /sys, without the host's
  # cgroup hierarchies, which nspawn needs ("Failed to determine whether the unified
  # cgroups hierarchy is used: No medium found").
  env \
    SYSTEMD_NSPAWN_API_VFS_WRITABLE=1 SYSTEMD_NSPAWN_USE_CGNS="${SYSTEMD_NSPAWN_USE_CGNS:-1}" \
    SYSTEMD_SECCOMP="${SYSTEMD_SECCOMP:-0}" ${SYSTEMD_NSPAWN_UNIFIED_HIERARCHY:+SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=$SYSTEMD_NSPAWN_UNIFIED_HIERARCHY} \
    CONTAINER_CG="$cg" bash -c '
      while read -r g; do
        [ -n "$g" ] || continue
        mkdir -p "$g" || { echo "cluster: cannot make the cgroup $g" >&2; continue; }
        # A new cpuset cgroup has no CPUs or memory nodes until given its parent'"'"'s, and
        # mkdir -p made two levels (the harness'"'"'s and the node'"'"'s): each is filled from
        # the top down, or the node stays in the root cpuset, outside its cgroup
        # namespace, and runc in it cannot place a pod ("can'"'"'t get final child'"'"'s PID").
        if [ -f "$g/cpuset.cpus" ]; then
          for d in "${g%/*}" "$g"; do
            for f in cpuset.cpus cpuset.mems; do
              [ -z "$(cat "$d/$f")" ] && cat "${d%/*}/$f" > "$d/$f"
            done
          done
        fi
        echo $$ > "$g/cgroup.procs" || echo "cluster: cannot enter the cgroup $g" >&2
      done <<<"$CONTAINER_CG"
      exec "$@"' nspawn \
    nsenter --net="/run/netns/$CLUSTER_NS" systemd-nspawn --quiet --boot --register=no --keep-unit --machine="node-$i" \
      --directory="$root" --read-only --network-bridge=br0 \
      --capability=all --resolv-conf=off --timezone=off --link-journal=no --console=read-only \
      --bind=/dev/kmsg --property=DeviceAllow="/dev/kmsg rw" \
      "${binds[@]}" ${CONTAINER_NSPAWN_EXTRA:-} \
    </dev/null >>"$dir/node-$i.serial" 2>&1 &
  echo $! > "$dir/node-$i.pid"
  disown $! 2>/dev/null  # its end is not news: teardown kills it
  CLUSTER_NODES[$i]=1
}

# container_init_pid I prints the PID (on the host) of node I's systemd, its PID 1.
container_init_pid() {
  local pid c
  pid=$(cat "$CLUSTER_DIR/node-$1.pid" 2>/dev/null) || return 1
  # nspawn's payload is a child of nspawn's own process (bash and nsenter exec it).
  for c in $(pgrep -P "$pid"); do
    grep -qE '^NSpid:\s+[0-9]+\s+1$' "/proc/$c/status" 2>/dev/null && { echo "$c"; return 0; }
  done
  return 1
}

# container_kill I...: pulls the power of every node named, at once: SIGKILL to each
# one's PID 1 (which ends every process of its PID namespace with it) and to its nspawn,
# no shutdown; then waits until they are gone.
container_kill() {
  local i pids=() p n
  for i in "$@"; do
    node_ssh_close "$i"
    p=$(container_init_pid "$i") && pids+=("$p")
    [ -f "$CLUSTER_DIR/node-$i.pid" ] && pids+=("$(cat "$CLUSTER_DIR/node-$i.pid")")
  done
  [ "${#pids[@]}" -eq 0 ] || kill -9 "${pids[@]}" 2>/dev/null
  for i in "$@"; do
    n=0
    while container_running "$i" && [ "$n" -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
    container_running "$i" && echo "cluster: node-$i's container did not end within 10 s of SIGKILL" >&2
    rm -f "$CLUSTER_DIR/node-$i.pid"
    container_cgroup_clean "$i"
    # The kernel frees a dead network namespace, and the veth with it, a moment later; an
    # nspawn started before then stops with "Failed to add new veth interfaces
    # (vb-node-I:host0): File exists". Waited for (bounded), then deleted.
    n=0
    while ip -n "$CLUSTER_NS" link show "vb-node-$i" >/dev/null 2>&1 && [ "$n" -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
    ip -n "$CLUSTER_NS" link del "vb-node-$i" 2>/dev/null
  done
}

# container_running I: is node I's container alive?
container_running() { [ -f "$CLUSTER_DIR/node-$1.pid" ] && kill -0 "$(cat "$CLUSTER_DIR/node-$1.pid")" 2>/dev/null; }

# container_cgroup_clean I: removes node I's cgroups, deepest first, once empty.
container_cgroup_clean() {
  local g n
  while read -r g; do
    n=0
    # The killed processes leave their cgroups a moment after nspawn has ended.
    while [ -n "$g" ] && [ -d "$g" ] && [ "$n" -lt 50 ]; do
      find "$g" -depth -type d -exec rmdir {} + 2>/dev/null
      [ -d "$g" ] && sleep 0.1
      n=$((n + 1))
    done
  done < <(container_cgroups "$1")
}

# container_teardown: ends every node's container, then unmounts the root and removes
# the cgroups (the network namespace goes with cluster_teardown).
container_teardown() {
  local f i all=()
  for f in "$CLUSTER_DIR"/node-*.pid; do
    [ -f "$f" ] || continue
    i=${f##*/node-} i=${i%.pid}
    all+=("$i")
  done
  [ "${#all[@]}" -eq 0 ] || container_kill "${all[@]}"
  local g
  for i in $(seq 9); do container_cgroup_clean "$i"; done
  for g in /sys/fs/cgroup/*/; do
    find "$g" -maxdepth 4 -type d -name "$CONTAINER_CGROUP_NAME" -exec rmdir {} + 2>/dev/null
  done
  if mountpoint -q "$CLUSTER_DIR/root"; then
    umount "$CLUSTER_DIR/root" 2>/dev/null || umount -l "$CLUSTER_DIR/root"
  fi
}

# container_switch_root IMAGE: the nodes' root becomes IMAGE's (every node must be
# stopped): as an A/B update leaves a node running build B, with its /var kept. The slot
# writes, the reboot into the other slot and the commit stay QEMU's to prove.
container_switch_root() {
  if mountpoint -q "$CLUSTER_DIR/root"; then
    umount "$CLUSTER_DIR/root" 2>/dev/null || umount -l "$CLUSTER_DIR/root" || return 1
  else
    rm -rf "$CLUSTER_DIR/root"
  fi
  CLUSTER_IMAGE=$(realpath "$1")
  container_root
}
