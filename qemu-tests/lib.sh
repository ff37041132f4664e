# Shared helpers of the QEMU tests (sourced). Everything a test starts, it stops.

. "$(dirname "${BASH_SOURCE[0]}")/budget.sh"

# check NAME ACTUAL EXPECTED-REGEX: one assertion; counts into passed/failed.
passed=0 failed=0
check() {
  if [[ "$2" =~ $3 ]]; then echo "ok   $1: $2"; passed=$((passed + 1))
  else echo "FAIL $1: got '$2', want /$3/"; failed=$((failed + 1)); fi
}

# find_ovmf sets OVMF_CODE and OVMF_VARS to Debian's UEFI firmware files.
find_ovmf() {
  for pair in "/usr/share/OVMF/OVMF_CODE_4M.fd /usr/share/OVMF/OVMF_VARS_4M.fd" \
              "/usr/share/OVMF/OVMF_CODE.fd /usr/share/OVMF/OVMF_VARS.fd"; do
    set -- $pair
    if [ -f "$1" ] && [ -f "$2" ]; then OVMF_CODE=$1; OVMF_VARS=$2; return 0; fi
  done
  echo "OVMF not found: apt-get install ovmf" >&2
  return 1
}

# image_arch IMAGE prints the architecture of a sprout disk image (raw or qcow2), amd64
# or arm64, from the DPS type of its root partition in the GPT's partition entries.
image_arch() {
  local head tmp
  case $1 in
    *.qcow2)
      tmp=$(mktemp /tmp/sprout-gpt.XXXXXX)
      rm -f "$tmp"  # qemu-img dd makes its output file
      qemu-img dd -f qcow2 -O raw bs=512 count=34 if="$1" of="$tmp" 2>/dev/null
      head=$(od -An -tx1 -v "$tmp" 2>/dev/null)
      rm -f "$tmp" ;;
    *) head=$(head -c 17408 "$1" | od -An -tx1 -v) ;;
  esac
  # b921b045-1df0-41c3-af44-4c6f280d3fae (Root Partition, 64-bit ARM) as stored on disk.
  if tr -d ' \n' <<<"$head" | grep 45b021b9f01dc341af444c6f280d3fae >/dev/null; then echo arm64; else echo amd64; fi
}

# find_firmware ARCH sets FW_CODE and FW_VARS to Debian's UEFI firmware for ARCH: OVMF
# for amd64, AAVMF (qemu-efi-aarch64) for arm64.
find_firmware() {
  case $1 in
    arm64)
      FW_CODE=/usr/share/AAVMF/AAVMF_CODE.fd FW_VARS=/usr/share/AAVMF/AAVMF_VARS.fd
      [ -f "$FW_CODE" ] && [ -f "$FW_VARS" ] && return 0
      echo "AAVMF not found: apt-get install qemu-efi-aarch64" >&2
      return 1 ;;
    *) find_ovmf || return 1; FW_CODE=$OVMF_CODE FW_VARS=$OVMF_VARS ;;
  esac
}

# qemu_for ARCH ACCEL sets QEMU_CMD to the QEMU that boots an ARCH sprout image: q35 for
# amd64; for arm64 the virt machine (its serial port is a PL011, ttyAMA0) with a
# Cortex-A72, whose emulation skips the pointer-authentication cost of -cpu max.
# In emulation an amd64 guest gets QEMU's "max" CPU without AVX and AVX2
# (SPROUT_QEMU_CPU overrides it): QEMU's translator runs AVX code slowly, and with AVX2
# offered, Go's SHA-256 and inflate (containerd importing images, etcd, the apiserver's
# TLS) take their AVX2 paths. Measured under qemu-x86_64: Go's SHA-256 8 MB/s with
# "max", 33-66 MB/s without AVX; its gunzip 3.6 against 11-14 MB/s; OpenSSL's SHA-256
# 22 against 45 MB/s (docs/qemu-cluster.md).
qemu_for() {
  case $1 in
    arm64) QEMU_CMD=(qemu-system-aarch64 -machine "virt,accel=$2" -cpu "$([ "$2" = kvm ] && echo host || echo cortex-a72)") ;;
    *) QEMU_CMD=(qemu-system-x86_64 -machine "q35,accel=$2" -cpu "$([ "$2" = kvm ] && echo host || echo "${SPROUT_QEMU_CPU:-max,-avx,-avx2}")") ;;
  esac
  command -v "${QEMU_CMD[0]}" >/dev/null || { echo "${QEMU_CMD[0]} not found: apt-get install $([ "$1" = arm64 ] && echo qemu-system-arm || echo qemu-system-x86)" >&2; return 1; }
}

# host_arch prints this machine's architecture as sprout names it: amd64 or arm64.
host_arch() {
  case $(uname -m) in
    x86_64) echo amd64 ;;
    aarch64 | arm64) echo arm64 ;;
    *) uname -m ;;
  esac
}

# The accelerator: KVM runs a guest on the host's CPU, TCG (QEMU's software emulation)
# anywhere, far slower. /dev/kvm can exist, open, and start a paused QEMU, and still fail
# to run a guest (nested virtualization that runs SeaBIOS but not OVMF: "KVM internal
# error. Suberror: 1", "emulation failure"), so only a guest that boots tells. Every
# QEMU that sprout starts (qemu-tests/cluster, boot_vm, ./quickstart, `sprout boot
# --kvm` through qemu-tests/accel) settles its accelerator with choose_accel below.

# QEMU_KVM_ERRORS: what QEMU writes to its stderr when KVM cannot run the guest: the
# errors it reports, and the assertions of its KVM code that end it (seen on a nested
# host: "../target/i386/kvm/kvm.c:3183: kvm_buf_set_msrs: Assertion ... failed.").
QEMU_KVM_ERRORS='KVM internal error|emulation failure|KVM: entry failed|kvm run failed|Could not access KVM kernel module|failed to initialize kvm|KVM not supported|kvm_init_vcpu failed|kvm.*Assertion .* failed'

# accel_probe ARCH [IMAGE]: does KVM run a guest of ARCH here? guest_probe under KVM,
# after the checks that need no guest (the host's arch, /dev/kvm).
accel_probe() {
  local arch=$1
  ACCEL_PROBE_WHY=""
  if [ "$arch" != "$(host_arch)" ]; then
    ACCEL_PROBE_WHY="an $arch guest cannot run under KVM on this $(host_arch) host"; return 1
  fi
  if [ ! -e /dev/kvm ]; then
    ACCEL_PROBE_WHY="there is no /dev/kvm (no KVM module loaded, or no virtualization in this CPU)"; return 1
  fi
  if [ ! -r /dev/kvm ] || [ ! -w /dev/kvm ]; then
    ACCEL_PROBE_WHY="/dev/kvm is not readable and writable for $(id -un) (run as root, or join the group kvm)"; return 1
  fi
  guest_probe kvm "$@"
}

# guest_probe ACCEL ARCH [IMAGE]: boots the firmware the nodes use (find_firmware) under
# ACCEL for at most SPROUT_ACCEL_PROBE_SECONDS (default 30): with IMAGE (every write
# discarded) until its kernel prints "Linux version" on the serial console; without one,
# until the firmware's boot manager prints "BdsDxe". Fails at once when QEMU reports a
# KVM error or ends. Sets ACCEL_PROBE_WHY to what it saw: on success how long the guest
# took, on failure the reason with QEMU's own line.
guest_probe() {
  local accel=$1 arch=$2 image=${3:-} limit=${SPROUT_ACCEL_PROBE_SECONDS:-30}
  local dir pid marker what start now line fmt disk=() under
  under=$([ "$accel" = kvm ] && echo KVM || echo "software emulation")
  ACCEL_PROBE_WHY=""
  find_firmware "$arch" 2>/dev/null || { ACCEL_PROBE_WHY="no UEFI firmware for $arch to probe with"; return 1; }
  qemu_for "$arch" "$accel" 2>/dev/null || { ACCEL_PROBE_WHY="${QEMU_CMD[0]} is not installed"; return 1; }
  dir=$(mktemp -d /tmp/sprout-accel.XXXXXX)
  cp "$FW_VARS" "$dir/vars"
  marker=BdsDxe what="the firmware's boot manager"
  if [ -n "$image" ]; then
    case $image in *.qcow2) fmt=qcow2 ;; *) fmt=raw ;; esac
    disk=(-drive "if=virtio,format=$fmt,readonly=on,snapshot=on,file=$image")
    marker='Linux version' what="the image's kernel"
  fi
  : > "$dir/serial"
  start=$(date +%s%N)
  "${QEMU_CMD[@]}" -m 512 -smp 1 -nodefaults -display none -monitor none -nic none -no-reboot \
    -drive "if=pflash,format=raw,unit=0,readonly=on,file=$FW_CODE" \
    -drive "if=pflash,format=raw,unit=1,file=$dir/vars" "${disk[@]}" \
    -serial "file:$dir/serial" </dev/null >"$dir/qemu" 2>&1 &
  pid=$!
  # Not a job of this shell: a QEMU that aborts (SIGABRT, as KVM's assertions do) would
  # have bash print "line N: PID Aborted ..." into the caller's messages. Its line in
  # $dir/qemu is what the probe reports.
  disown "$pid"
  local rc=1
  while :; do
    now=$(( ($(date +%s%N) - start) / 1000000 ))
    if grep -aq "$marker" "$dir/serial"; then
      ACCEL_PROBE_WHY="$what printed \"$marker\" under $under after $((now / 1000)).$(( now % 1000 / 100 )) s"
      rc=0; break
    fi
    line=$(grep -m 1 -aE "$QEMU_KVM_ERRORS" "$dir/qemu")
    if [ -n "$line" ]; then
      ACCEL_PROBE_WHY="QEMU stopped the guest under $under after $((now / 1000)) s: \"$line\""
      grep -aq BdsDxe "$dir/serial" || ACCEL_PROBE_WHY+=" (the firmware, $(basename "$FW_CODE"), did not reach its boot manager)"
      break
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      ACCEL_PROBE_WHY="QEMU ended under $under after $((now / 1000)) s: \"$(grep -av '^$' "$dir/qemu" | tail -n 1)\""; break
    fi
    if [ "$now" -ge $((limit * 1000)) ]; then
      ACCEL_PROBE_WHY="$what printed nothing on the serial console under $under within $limit s"
      if [ -n "$image" ] && grep -aq BdsDxe "$dir/serial"; then
        ACCEL_PROBE_WHY+=" (the firmware reached its boot manager; the kernel did not start)"
      fi
      break
    fi
    sleep 0.2
  done
  kill -9 "$pid" 2>/dev/null
  local n
  for n in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  rm -rf "$dir"
  return $rc
}

# choose_accel WANT ARCH [IMAGE]: settles the accelerator for guests of ARCH (booting
# IMAGE, when given, for the probe). SPROUT_QEMU_ACCEL, when set, overrides WANT:
#   tcg   software emulation; no probe;
#   auto  KVM when accel_probe passes, else software emulation, saying why;
#   kvm   KVM, when accel_probe passes; else an error that names the fix.
# Sets ACCEL (kvm or tcg) and ACCEL_WHY (one line naming the accelerator in use and why,
# or the error). A verdict is kept for the rest of the process, per ARCH and WANT.
declare -gA ACCEL_SETTLED=()
choose_accel() {
  local want=${SPROUT_QEMU_ACCEL:-$1} arch=$2 image=${3:-} by=""
  [ -z "${SPROUT_QEMU_ACCEL:-}" ] || by=" by SPROUT_QEMU_ACCEL=$SPROUT_QEMU_ACCEL"
  case $want in
    tcg | kvm | auto) ;;
    *) ACCEL="" ACCEL_WHY="SPROUT_QEMU_ACCEL='$want' is not an accelerator; use kvm, tcg or auto"; return 2 ;;
  esac
  local memo="$arch $want"
  if [ -n "${ACCEL_SETTLED[$memo]:-}" ]; then
    ACCEL=${ACCEL_SETTLED[$memo]%% *} ACCEL_WHY=${ACCEL_SETTLED[$memo]#* }
    [ "$ACCEL" != - ] && return 0
    ACCEL=""
    return 1
  fi
  local rc=0
  if [ "$want" = tcg ]; then
    ACCEL=tcg ACCEL_WHY="software emulation (TCG), as asked$by (SPROUT_QEMU_ACCEL=auto tries KVM)"
  elif accel_probe "$arch" "$image"; then
    ACCEL=kvm ACCEL_WHY="KVM: $ACCEL_PROBE_WHY"
  elif [ "$want" = auto ]; then
    ACCEL=tcg ACCEL_WHY="software emulation (TCG), because KVM does not work here: $ACCEL_PROBE_WHY"
  else
    ACCEL=- ACCEL_WHY="KVM was asked for$by, but it does not work here: $ACCEL_PROBE_WHY. Fix: use software emulation, SPROUT_QEMU_ACCEL=tcg (or SPROUT_QEMU_ACCEL=auto to fall back by itself)"
    rc=1
  fi
  ACCEL_SETTLED[$memo]="$ACCEL $ACCEL_WHY"
  [ "$rc" -eq 0 ] || ACCEL=""
  return $rc
}

# qemu_kvm_error LOG prints the first line of QEMU's stderr LOG, after its last "=== boot"
# line (the harness marks each start of a node so), that says KVM failed; nothing if none.
qemu_kvm_error() {
  awk -v re="$QEMU_KVM_ERRORS" '/^=== boot/ { l = "" } l == "" && $0 ~ re { l = $0 } END { if (l != "") print l }' "$1" 2>/dev/null
}

# qemu_progress PID SERIAL prints "CPU-TICKS SERIAL-BYTES" of a running QEMU: the CPU
# time it used (all its threads) and the size of its serial log. A QEMU whose guest runs
# changes it; one that KVM stopped (it stays alive, paused) or that hangs does not.
qemu_progress() {
  local ticks
  ticks=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | awk '{ print $12 + $13 }') || return 1
  [ -n "$ticks" ] || return 1
  echo "$ticks $(stat -c %s "$2" 2>/dev/null || echo 0)"
}

# QEMU_STALL_SECONDS: a QEMU that neither writes to its serial console nor uses any CPU
# for this long is stuck (a running guest, even an idle one, uses some CPU every second).
QEMU_STALL_SECONDS=${QEMU_STALL_SECONDS:-30}

# boot_vm DISK VARS LOG TIMEOUT [STOP-REGEX]: boots DISK under UEFI with no network at
# all, serial to LOG, until the guest powers off or TIMEOUT seconds pass (then it is
# killed: status 124), or the log matches STOP-REGEX (killed: status 125). An arm64
# image boots under qemu-system-aarch64 and AAVMF; VARS must then be a copy of AAVMF's.
# The accelerator is software emulation unless SPROUT_QEMU_ACCEL asks for kvm or auto
# (choose_accel). A guest that KVM stops, or that sits still (QEMU_STALL_SECONDS), is
# killed at once with a message naming QEMU's line and the fix (status 1). QEMU's own
# messages go to LOG.qemu, and are shown when it fails.
# Sets BOOT_LOGIN_SECONDS to when "login:" first appeared, and BOOT_TOTAL_SECONDS.
boot_vm() {
  local disk=$1 vars=$2 log=$3 limit=$4 stop=${5:-}
  local arch
  arch=$(image_arch "$disk")
  find_firmware "$arch" || return 1
  if ! choose_accel tcg "$arch" "$disk"; then echo "boot_vm: $ACCEL_WHY" >&2; return 1; fi
  [ "$ACCEL" = tcg ] && [ -z "${SPROUT_QEMU_ACCEL:-}" ] || echo "boot_vm: $ACCEL_WHY" >&2
  qemu_for "$arch" "$ACCEL" || return 1
  : > "$log"
  : > "$log.qemu"
  local start=$(date +%s.%N)
  "${QEMU_CMD[@]}" -m 2048 -smp 2 \
    -drive "if=pflash,format=raw,unit=0,readonly=on,file=$FW_CODE" \
    -drive "if=pflash,format=raw,unit=1,file=$vars" \
    -drive "if=virtio,format=$(case $disk in *.qcow2) echo qcow2 ;; *) echo raw ;; esac),file=$disk" \
    -display none -serial "file:$log" -monitor none -nic none -no-reboot ${QEMU_EXTRA:-} 2>"$log.qemu" &
  local pid=$!
  BOOT_LOGIN_SECONDS=""
  local deadline=$(( $(date +%s) + limit )) seen="" seen_at=$SECONDS now kvm
  while kill -0 "$pid" 2>/dev/null; do
    if [ -z "$BOOT_LOGIN_SECONDS" ] && grep -aq 'login:' "$log"; then
      BOOT_LOGIN_SECONDS=$(echo "$(date +%s.%N) - $start" | bc)
    fi
    if [ -n "$stop" ] && grep -aqE "$stop" "$log"; then
      sleep 1  # let the last lines reach the log
      kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
      BOOT_TOTAL_SECONDS=$(echo "$(date +%s.%N) - $start" | bc)
      return 125
    fi
    kvm=$(qemu_kvm_error "$log.qemu")
    now=$(qemu_progress "$pid" "$log")
    [ "$now" = "$seen" ] || { seen=$now seen_at=$SECONDS; }
    if [ -n "$kvm" ] || [ $((SECONDS - seen_at)) -ge "$QEMU_STALL_SECONDS" ]; then
      kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
      if [ -n "$kvm" ]; then
        echo "boot_vm: QEMU stopped the guest ($disk) under KVM: \"$kvm\"; fix: SPROUT_QEMU_ACCEL=tcg (software emulation); QEMU's messages: $log.qemu" >&2
      else
        echo "boot_vm: the guest ($disk, $([ "$ACCEL" = kvm ] && echo KVM || echo "software emulation")) sat still for $QEMU_STALL_SECONDS s: no serial output, no CPU time; last console line: \"$(grep -av '^\s*$' "$log" | tail -n 1 | tr -d '\r' | cut -c1-160)\"$([ "$ACCEL" = kvm ] && echo "; fix: SPROUT_QEMU_ACCEL=tcg")" >&2
      fi
      BOOT_TOTAL_SECONDS=$(echo "$(date +%s.%N) - $start" | bc)
      return 1
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
      return 124
    fi
    sleep 0.5
  done
  wait "$pid"
  local rc=$?
  BOOT_TOTAL_SECONDS=$(echo "$(date +%s.%N) - $start" | bc)
  [ "$rc" -eq 0 ] || [ ! -s "$log.qemu" ] || sed 's/^/qemu: /' "$log.qemu" >&2
  return $rc
}

# smoke_value LOG KEY prints the value of the last "SPROUT-SMOKE KEY=value" line.
smoke_value() {
  grep -a "SPROUT-SMOKE $2=" "$1" | tail -n 1 | sed "s/^.*SPROUT-SMOKE $2=//" | tr -d '\r'
}

# partition_range IMAGE N prints the byte offset and end of partition N (1-based).
partition_range() {
  sfdisk --json "$1" | python3 -c "import json,sys; p=json.load(sys.stdin)['partitiontable']['partitions'][$2-1]; print(p['start']*512, (p['start']+p['size'])*512)"
}

# root_tar IMAGE writes the root partition's file system to stdout as a tar stream.
root_tar() {
  local lo hi
  read -r lo hi < <(partition_range "$1" 2)
  local tmp
  tmp=$(mktemp /tmp/sprout-root.XXXXXX)
  dd if="$1" of="$tmp" bs=1M iflag=skip_bytes,count_bytes skip="$lo" count=$((hi - lo)) status=none
  sqfs2tar "$tmp"
  rm -f "$tmp"
}
