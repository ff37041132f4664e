#!/bin/bash
# The accelerator tells the truth (qemu-tests/lib.sh: choose_accel, accel_probe; the
# cluster harness's watchdog), checked with short QEMU runs of the nodes' firmware, OVMF,
# and no image:
#   - SPROUT_QEMU_ACCEL=tcg is software emulation, with no probe;
#   - SPROUT_QEMU_ACCEL=kvm is KVM when a guest boots under it, else an error within 60 s
#     naming the reason and the fix (SPROUT_QEMU_ACCEL=tcg); auto then falls back to
#     software emulation and says why;
#   - the probe sees a booting guest: OVMF reaches its boot manager in emulation;
#   - boot_vm with SPROUT_QEMU_ACCEL=kvm where KVM fails stops at once, naming the fix;
#   - the cluster harness (as root: network namespace): a node whose QEMU reports a KVM
#     error (where KVM fails here), or sits still, ends the run within seconds, naming
#     the node, QEMU's line and, under KVM, the fix.
set -u
name=accel_test
src=${SPROUT_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
for tool in qemu-system-x86_64 qemu-img; do
  command -v "$tool" >/dev/null || { echo "$name: skipped: $tool not found (apt-get install qemu-system-x86 qemu-utils)"; exit 0; }
done
[ -f /usr/share/OVMF/OVMF_CODE_4M.fd ] || [ -f /usr/share/OVMF/OVMF_CODE.fd ] ||
  { echo "$name: skipped: OVMF not found (apt-get install ovmf)"; exit 0; }
. "$src/qemu-tests/lib.sh"
work=$(mktemp -d /tmp/sprout-accel-test.XXXXXX)
trap 'rm -rf "$work"' EXIT

# 1. Forced software emulation: no QEMU at all.
out=$(SPROUT_QEMU_ACCEL=tcg "$src/qemu-tests/accel" 2>"$work/err")
check "SPROUT_QEMU_ACCEL=tcg chooses software emulation" "$out" '^tcg$'
check "... and says so" "$(cat "$work/err")" '^accel: software emulation \(TCG\), as asked by SPROUT_QEMU_ACCEL=tcg'

# 2. Forced KVM: KVM when a guest boots, else a clear error within 60 s.
t=$SECONDS
out=$(SPROUT_QEMU_ACCEL=kvm "$src/qemu-tests/accel" 2>"$work/err")
rc=$? took=$((SECONDS - t))
echo "     SPROUT_QEMU_ACCEL=kvm: status $rc after $took s: $(cat "$work/err")"
if [ "$rc" -eq 0 ]; then
  kvm_works=1
  check "SPROUT_QEMU_ACCEL=kvm where a guest boots under KVM chooses KVM" "$out" '^kvm$'
  check "... and says what the probe saw" "$(cat "$work/err")" '^accel: KVM: the firmware.s boot manager printed "BdsDxe" under KVM after'
else
  kvm_works=""
  check "SPROUT_QEMU_ACCEL=kvm where KVM fails is an error" "$rc" '^1$'
  check "... within 60 s" "$took" '^([0-9]|[1-5][0-9])$'
  check "... naming the reason and the fix" "$(cat "$work/err")" \
    '^accel: KVM was asked for by SPROUT_QEMU_ACCEL=kvm, but it does not work here: .+\. Fix: use software emulation, SPROUT_QEMU_ACCEL=tcg'
  reason=$(sed 's/^.*does not work here: //; s/\. Fix: .*$//' "$work/err")
  # 3. Auto: falls back, with the same reason.
  out=$(SPROUT_QEMU_ACCEL=auto "$src/qemu-tests/accel" 2>"$work/err")
  check "auto where KVM fails falls back to software emulation" "$out" '^tcg$'
  check "... and prints why" "$(cat "$work/err")" "^accel: software emulation \(TCG\), because KVM does not work here: "
  # The same reason, but for its time: the first probe may take 4 s, the next 0 s.
  check "... the probe's reason" "$(cat "$work/err")" \
    "$(printf '%s' "$reason" | sed 's/[][\.*^$(){}?+|/]/\\&/g; s/after [0-9][0-9]* s/after [0-9]+ s/g')\$"
fi

# 4. The probe sees a guest that boots: OVMF in emulation reaches its boot manager.
# Emulation on a loaded CI machine can take a while to get there; KVM would take a second.
SPROUT_ACCEL_PROBE_SECONDS=120 guest_probe tcg amd64
rc=$?
echo "     probe in emulation: $ACCEL_PROBE_WHY"
check "the probe sees OVMF reach its boot manager in software emulation" "$rc" '^0$'
check "... and says how long it took" "$ACCEL_PROBE_WHY" '^the firmware.s boot manager printed "BdsDxe" under software emulation after [0-9]+\.[0-9] s$'
SPROUT_ACCEL_PROBE_SECONDS=1 guest_probe tcg amd64 >/dev/null 2>&1
check "a guest that prints nothing in time fails the probe" "$?:$ACCEL_PROBE_WHY" '^1:.*printed nothing on the serial console under software emulation within 1 s$'

truncate -s 64M "$work/blank.raw"
if [ -z "$kvm_works" ] && [ -e /dev/kvm ] && [ -r /dev/kvm ] && [ -w /dev/kvm ]; then
  # 5. boot_vm, forced onto a KVM that fails, stops at once.
  t=$SECONDS
  cp "$OVMF_VARS" "$work/vars.fd"
  SPROUT_QEMU_ACCEL=kvm boot_vm "$work/blank.raw" "$work/vars.fd" "$work/boot.log" 600 2>"$work/err"
  rc=$?
  echo "     boot_vm: status $rc after $((SECONDS - t)) s: $(cat "$work/err")"
  check "boot_vm with SPROUT_QEMU_ACCEL=kvm where KVM fails stops" "$rc" '^1$'
  check "... within 60 s" "$((SECONDS - t))" '^([0-9]|[1-5][0-9])$'
  check "... naming the fix" "$(cat "$work/err")" 'SPROUT_QEMU_ACCEL=tcg'
fi

# The cluster harness needs root for its network namespace and tap devices.
if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null || ! command -v ssh-keygen >/dev/null; then
  echo "$name: the cluster watchdog checks skipped: they need root, ip and ssh-keygen"
else
  # harness ACCEL EXTRA [exits]: one node of cluster-lib.sh on the blank disk, under
  # ACCEL, its QEMU given EXTRA arguments (and a QEMU that ends made news, as
  # qemu-tests/cluster does); prints what the harness printed, and its status.
  harness() {
    bash -c '
      . "$1/qemu-tests/lib.sh"; . "$1/qemu-tests/cluster-lib.sh"
      trap "cluster_teardown" EXIT
      cluster_init "" "$2" || exit 3
      # The accelerator is set after cluster_init, which would probe it: this drives
      # the watchdog, not the probe.
      CLUSTER_ACCEL=$3; qemu_for amd64 "$3"; QEMU_CMD+=($4)
      [ -z "$5" ] || cluster_watchdog exits on
      CLUSTER_MEDIUM[1]=disk; node_config 1 control-plane 198.18.0.11; vm_start 1 || exit 3
      for _ in $(seq 60); do sleep 1; done
      echo "no verdict in 60 s"; exit 4' harness "$src" "$work/blank.raw" "$1" "${2:-}" "${3:-}" 2>&1
    echo "status $?"
  }
  if [ -z "$kvm_works" ] && [ -e /dev/kvm ]; then
    # 6. A node whose QEMU KVM stopped ends the run.
    t=$SECONDS
    out=$(harness kvm)
    took=$((SECONDS - t))
    echo "$out" | sed 's/^/     | /'
    check "a node that KVM stops ends the cluster run" "$out" 'status 1$'
    check "... within 60 s" "$took" '^([0-9]|[1-5][0-9])$'
    check "... naming the node, QEMU's line and the fix" "$out" \
      'cluster: stopped: node-1: KVM cannot run this guest; its (QEMU ended, and its |QEMU )log \(.*node-1\.log\) says: "[^"]*('"$QEMU_KVM_ERRORS"')[^"]*"; fix: run with SPROUT_QEMU_ACCEL=tcg'
  fi
  # 7. A node that sits still (QEMU started paused: no output, no CPU) ends the run.
  t=$SECONDS
  out=$(QEMU_STALL_SECONDS=6 harness tcg -S)
  took=$((SECONDS - t))
  echo "$out" | sed 's/^/     | /'
  check "a node that sits still ends the cluster run" "$out" 'status 1$'
  check "... after the stall time, not the run's timeout (60 s)" "$took" '^([0-9]|[1-5][0-9])$'
  check "... naming the node and the accelerator" "$out" \
    'cluster: stopped: node-1: its QEMU \(pid [0-9]+, software emulation \(TCG\)\) sat still for 6 s: no serial output, no CPU time'
  # 8. A node whose QEMU ends, where the harness says that is news, ends the run.
  t=$SECONDS
  out=$(harness tcg -no-such-option exits)
  took=$((SECONDS - t))
  echo "$out" | sed 's/^/     | /'
  check "a node whose QEMU ends ends the cluster run" "$out" 'status 1$'
  check "... within 60 s" "$took" '^([0-9]|[1-5][0-9])$'
  check "... with QEMU's last line" "$out" \
    'cluster: stopped: node-1: its QEMU \(software emulation \(TCG\)\) ended; QEMU said: ".*-no-such-option: invalid option"'
fi
echo "$name: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
