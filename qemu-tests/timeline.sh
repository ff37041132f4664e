# shellcheck shell=bash
# Where a node's time to Ready goes (sourced after cluster-lib.sh; docs/qemu-cluster.md).
#
# node_phases I prints node I's first boot as one JSON object: its power-on (the harness's
# clock when QEMU started, node-I.started) and, from the node, when its kernel started
# (its clock less /proc/uptime), when the initrd and systemd took over and
# multi-user.target was reached (systemd's monotonic timestamps), when the preloaded
# images' import ran (sprout-images.service) and sprout-firstboot started, when the node
# became an etcd member (its journal), and, from the API, when its apiserver's mirror pod
# and the node turned Ready. The guest's clock comes from QEMU's RTC, the host's clock
# at power-on, to the second.
node_phases() {
  local i=$1 started phases api ready
  started=$(cat "$CLUSTER_DIR/node-$i.started" 2>/dev/null) || return 1
  # shellcheck disable=SC2016  # expanded on the node
  phases=$(node_ssh "$i" '
    mono() { systemctl show -P "$2" "$1" 2>/dev/null; }
    read -r up _ </proc/uptime
    printf "\"kernel\": %s, " "$(awk -v now="$(date +%s.%N)" -v up="$up" "BEGIN { printf \"%.3f\", now - up }")"
    printf "\"initrd\": %s, \"userspace\": %s, " "$(systemctl show -P InitRDTimestampMonotonic)" "$(systemctl show -P UserspaceTimestampMonotonic)"
    printf "\"multiuser\": %s, " "$(mono multi-user.target ActiveEnterTimestampMonotonic)"
    printf "\"import_start\": %s, \"import_end\": %s, " "$(mono sprout-images.service ExecMainStartTimestampMonotonic)" "$(mono sprout-images.service ExecMainExitTimestampMonotonic)"
    printf "\"firstboot\": %s, " "$(mono sprout-firstboot.service ExecMainStartTimestampMonotonic)"
    m=$(journalctl -b -o short-monotonic -u sprout-firstboot.service --no-pager |
      sed -n "s/^\[ *\([0-9.]*\)\] .*: member\( (joined as learner)\)\{0,1\}$/\1/p" | head -n 1)
    printf "\"member\": %s" "${m:-null}"
    ! systemd-detect-virt -cq || printf ", \"container\": true"') || return 1
  api=$(cluster_kubectl get pod -n kube-system "kube-apiserver-node-$i" \
    -o jsonpath='{.status.conditions[?(@.type=="Ready")].lastTransitionTime}' 2>/dev/null)
  ready=$(cluster_kubectl get node "node-$i" -o jsonpath='{.status.conditions[?(@.type=="Ready")].lastTransitionTime}' 2>/dev/null)
  printf '{"node": "node-%s", "poweron": %s, %s, "apiserver": "%s", "ready": "%s"}\n' "$i" "$started" "$phases" "$api" "$ready"
}

# cluster_timeline OUT NODES...: the phases of each of NODES (numbers) into OUT.jsonl,
# printed as a table, and drawn as OUT.svg (qemu-tests/timeline.py). BASELINE, if set,
# is a label=seconds list of plain boots drawn as reference lines.
cluster_timeline() {
  local out=$1 i
  shift
  : >"$out.jsonl"
  for i in "$@"; do node_phases "$i" >>"$out.jsonl" || echo "   timeline: node-$i did not answer" >&2; done
  python3 "$CLUSTER_LIB_DIR/timeline.py" "$out.jsonl" --svg "$out.svg" ${BASELINE:+--baseline "$BASELINE"} --title "${TIMELINE_TITLE:-}"
}

# plain_boots_together IMAGE N: N nodes of IMAGE, outside any cluster and with no
# network, powered on together, each to its login prompt (the same one-CPU machine as a
# cluster node); sets plain_together to the slowest one's seconds ("" when one did not
# get there): the baseline that three nodes forming a cluster are compared with.
plain_boots_together() {
  local image=$1 n=$2 i dir=$CLUSTER_DIR/plain-together slowest=0 s
  mkdir -p "$dir"
  for i in $(seq "$n"); do
    qemu-img create -q -f qcow2 -b "$image" -F raw "$dir/disk-$i.qcow2" && cp "$OVMF_VARS" "$dir/vars-$i" || return 1
    (QEMU_EXTRA="-smp 1" boot_vm "$dir/disk-$i.qcow2" "$dir/vars-$i" "$dir/serial-$i.log" 600 'login:'
      echo "${BOOT_LOGIN_SECONDS%.*}" >"$dir/seconds-$i") &
  done
  wait
  plain_together=""
  for i in $(seq "$n"); do
    s=$(cat "$dir/seconds-$i" 2>/dev/null)
    [[ "$s" =~ ^[0-9]+$ ]] || { rm -rf "$dir"; return 0; }
    [ "$s" -le "$slowest" ] || slowest=$s
  done
  plain_together=$slowest
  rm -rf "$dir"
}
