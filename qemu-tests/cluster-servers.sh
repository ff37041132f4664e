# shellcheck shell=bash
# The servers the cluster harness runs on its bridge, inside the namespace (sourced by
# cluster-lib.sh): the PXE server, the apiservers forwarded to the host's loopback, an NFS
# share for backups and an HTTP server for builds. cluster_teardown stops them all.

# cluster_pxe_server: once per cluster, serves the PXE bundle on the bridge as a data
# center would: dnsmasq answers DHCP (a pool of 198.18.0.200-.250, for the firmware only)
# and names http://198.18.0.1:8080/boot.ipxe as the boot file; Python's HTTP server
# serves the bundle. Both run in the namespace and are stopped by cluster_teardown.
cluster_pxe_server() {
  [ -f "$CLUSTER_DIR/server-dhcp.pid" ] && return 0
  [ -f "$CLUSTER_PXE/boot.ipxe" ] || { echo "no PXE bundle at $CLUSTER_PXE (build with --format raw,pxe)" >&2; return 1; }
  command -v dnsmasq >/dev/null || { echo "PXE nodes need dnsmasq: apt-get install dnsmasq-base" >&2; return 1; }
  ip netns exec "$CLUSTER_NS" python3 -m http.server --bind "$CLUSTER_NET.1" --directory "$CLUSTER_PXE" 8080 \
    </dev/null >>"$CLUSTER_DIR/http.log" 2>&1 &
  echo $! > "$CLUSTER_DIR/server-http.pid"
  disown $! 2>/dev/null
  ip netns exec "$CLUSTER_NS" dnsmasq --keep-in-foreground --conf-file=/dev/null --user=root --port=0 \
    --interface=br0 --bind-interfaces --dhcp-range="$CLUSTER_NET.200,$CLUSTER_NET.250,255.255.255.0,10m" \
    --dhcp-leasefile="$CLUSTER_DIR/dnsmasq.leases" --dhcp-boot="http://$CLUSTER_NET.1:8080/boot.ipxe" \
    --log-dhcp --log-facility="$CLUSTER_DIR/dnsmasq.log" </dev/null >>"$CLUSTER_DIR/dnsmasq.log" 2>&1 &
  echo $! > "$CLUSTER_DIR/server-dhcp.pid"
  disown $! 2>/dev/null
  sleep 1
  kill -0 "$(cat "$CLUSTER_DIR/server-dhcp.pid")" 2>/dev/null || { echo "dnsmasq did not start; see $CLUSTER_DIR/dnsmasq.log" >&2; return 1; }
}

# cluster_api_forward [--inside] NODE...: once per cluster, puts the apiservers of
# control-plane nodes NODE... on a loopback (qemu-tests/api-forward.py): a forwarder
# listens on 127.0.0.1:6443 (or on a free port when 6443 is taken) on the host, outside
# the namespace, and sends each connection into the namespace to the first of the nodes'
# apiservers (198.18.0.(10+I):6443) that accepts one, moving on when that one dies.
# --inside puts a second one on the namespace's own loopback (127.0.0.1:16443 there), for
# programs that run in the namespace (the conformance suite). Nothing but a loopback and
# the namespace carries their traffic. Sets CLUSTER_API_PORT; stopped by
# cluster_teardown. Every apiserver's certificate names 127.0.0.1 (docs/control-plane.md),
# so a kubeconfig with server https://127.0.0.1:PORT verifies (cluster_kubeconfig_at).
cluster_api_forward() {
  local name=api port=6443 run=() backends=() i _
  if [ "${1:-}" = --inside ]; then
    name=api-inside port=16443 run=(ip netns exec "$CLUSTER_NS")
    shift
  fi
  if [ ! -f "$CLUSTER_DIR/server-$name.pid" ]; then
    for i in "$@"; do backends+=("$(node_ip "$i"):6443"); done
    rm -f "$CLUSTER_DIR/$name.port"
    "${run[@]}" python3 "$CLUSTER_LIB_DIR/api-forward.py" "$CLUSTER_NS" "$CLUSTER_DIR/$name.port" "${backends[@]}" \
      --port "$port" </dev/null >>"$CLUSTER_DIR/$name-forward.log" 2>&1 &
    echo $! > "$CLUSTER_DIR/server-$name.pid"
    disown $! 2>/dev/null
  fi
  for _ in $(seq 50); do
    CLUSTER_API_PORT=$(cat "$CLUSTER_DIR/$name.port" 2>/dev/null)
    if [ -n "$CLUSTER_API_PORT" ]; then
      # What kubectl kept of an earlier server at this port is not this cluster's
      # (cluster_forget_discovery, cluster-lib.sh).
      rm -rf "${HOME:-/root}/.kube/cache/discovery/127.0.0.1_$CLUSTER_API_PORT"
      return 0
    fi
    sleep 0.1
  done
  echo "the API forwarder did not start; see $CLUSTER_DIR/$name-forward.log" >&2
  return 1
}

# cluster_kubeconfig_at PORT OUT: writes the admin kubeconfig (cluster_kubectl's) to OUT,
# mode 0600, with its server https://127.0.0.1:PORT (a forwarder of cluster_api_forward).
cluster_kubeconfig_at() {
  sed "s|^\( *server: \).*\$|\1https://127.0.0.1:$1|" "$CLUSTER_DIR/admin.conf" > "$2.tmp" &&
    chmod 0600 "$2.tmp" && mv "$2.tmp" "$2"
}

# cluster_host_kubeconfig OUT: the admin kubeconfig on the host's forwarded loopback port
# (cluster_api_forward) at OUT, given to the user who ran the harness through sudo.
cluster_host_kubeconfig() {
  cluster_kubeconfig_at "$CLUSTER_API_PORT" "$1" || return 1
  [ -z "${SUDO_UID:-}" ] || chown "$SUDO_UID:${SUDO_GID:-$SUDO_UID}" "$1"
}

# cluster_nfs_server: once per cluster, serves a folder on the bridge as a site's file
# share would: Debian's nfs-ganesha (user space; NFSv4 over TCP only, so no rpcbind; VFS
# backend) bound to 198.18.0.1, exporting $CLUSTER_DIR/share as $CLUSTER_SHARE
# (nfs://198.18.0.1/backups). Stopped by cluster_teardown.
CLUSTER_SHARE=nfs://$CLUSTER_NET.1/backups
cluster_nfs_server() {
  local g=$CLUSTER_DIR/ganesha _
  [ -f "$CLUSTER_DIR/server-nfs.pid" ] && return 0
  command -v ganesha.nfsd >/dev/null && command -v nfs-ls >/dev/null ||
    { echo "the NFS share needs nfs-ganesha, nfs-ganesha-vfs and libnfs-utils: apt-get install them" >&2; return 1; }
  mkdir -p "$CLUSTER_DIR/share" "$g/recovery"
  printf '%s\n' \
    "NFS_CORE_PARAM { Protocols = 4; NFS_Port = 2049; Enable_NLM = false; Enable_RQUOTA = false; Bind_addr = $CLUSTER_NET.1; }" \
    "NFSV4 { Graceless = true; RecoveryRoot = $g/recovery; }" \
    "EXPORT { Export_Id = 1; Path = $CLUSTER_DIR/share; Pseudo = /backups; Access_Type = RW; Squash = No_Root_Squash;" \
    "         SecType = sys; Protocols = 4; Transports = TCP; FSAL { Name = VFS; } }" \
    "LOG { Default_Log_Level = EVENT; }" > "$g/ganesha.conf"
  ip netns exec "$CLUSTER_NS" ganesha.nfsd -F -L "$g/log" -f "$g/ganesha.conf" -p "$g/pid" -N NIV_EVENT \
    </dev/null >>"$g/out" 2>&1 &
  echo $! > "$CLUSTER_DIR/server-nfs.pid"
  disown $! 2>/dev/null
  for _ in $(seq 40); do
    cluster_share_ls >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  echo "nfs-ganesha did not serve $CLUSTER_SHARE within 20 s; see $g/log" >&2
  return 1
}

# cluster_share_ls: the names in the share, as a client on the bridge sees them (nfs-ls).
cluster_share_ls() {
  ip netns exec "$CLUSTER_NS" timeout 30 nfs-ls "$CLUSTER_SHARE?version=4" | awk '$NF != "." && $NF != ".." {print $NF}'
}

# cluster_build_server DIR [SUBDIR]: once per cluster, serves DIR (the output folder of
# `sprout build` with the raw format, or a folder holding such folders, one of them
# SUBDIR) over HTTP on the bridge at $CLUSTER_BUILDS_URL, as a site serves a build on
# its network for `sprout-firstboot update apply URL`: with scripts/serve-builds, which
# answers range requests, so a node fetches only its raw image's data extents. Its
# log, $CLUSTER_DIR/http-builds.log, has a line per request: METHOD PATH RANGE STATUS.
CLUSTER_BUILDS_URL=http://$CLUSTER_NET.1:8081/
cluster_build_server() {
  local dir=$1 sub=${2:+$2/} _
  [ -f "$CLUSTER_DIR/server-builds.pid" ] && return 0
  [ -f "$dir/${sub}manifest.json" ] || { echo "no build at $dir/$sub (manifest.json missing)" >&2; return 1; }
  ip netns exec "$CLUSTER_NS" "$(dirname "${BASH_SOURCE[0]}")/../scripts/serve-builds" "$dir" \
    --bind "$CLUSTER_NET.1" --port 8081 </dev/null >>"$CLUSTER_DIR/http-builds.log" 2>&1 &
  echo $! > "$CLUSTER_DIR/server-builds.pid"
  disown $! 2>/dev/null
  for _ in $(seq 50); do
    ip netns exec "$CLUSTER_NS" curl -sf -o /dev/null "${CLUSTER_BUILDS_URL}${sub}manifest.json" && return 0
    sleep 0.2
  done
  echo "the build server did not answer on $CLUSTER_BUILDS_URL; see $CLUSTER_DIR/http-builds.log" >&2
  return 1
}
