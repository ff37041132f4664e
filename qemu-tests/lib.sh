# Shared helpers of the QEMU tests (sourced). Everything a test starts, it stops.

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
  if tr -d ' \n' <<<"$head" | grep -q 45b021b9f01dc341af444c6f280d3fae; then echo arm64; else echo amd64; fi
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
qemu_for() {
  case $1 in
    arm64) QEMU_CMD=(qemu-system-aarch64 -machine "virt,accel=$2" -cpu "$([ "$2" = kvm ] && echo host || echo cortex-a72)") ;;
    *) QEMU_CMD=(qemu-system-x86_64 -machine "q35,accel=$2" -cpu "$([ "$2" = kvm ] && echo host || echo max)") ;;
  esac
  command -v "${QEMU_CMD[0]}" >/dev/null || { echo "${QEMU_CMD[0]} not found: apt-get install $([ "$1" = arm64 ] && echo qemu-system-arm || echo qemu-system-x86)" >&2; return 1; }
}

# boot_vm DISK VARS LOG TIMEOUT [STOP-REGEX]: boots DISK under UEFI with no network at
# all, serial to LOG, until the guest powers off or TIMEOUT seconds pass (then it is
# killed: status 124), or the log matches STOP-REGEX (killed: status 125). An arm64
# image boots under qemu-system-aarch64 and AAVMF; VARS must then be a copy of AAVMF's.
# Sets BOOT_LOGIN_SECONDS to when "login:" first appeared, and BOOT_TOTAL_SECONDS.
boot_vm() {
  local disk=$1 vars=$2 log=$3 limit=$4 stop=${5:-}
  # KVM may exist but not work here (nested virtualization), so TCG unless asked.
  local accel=${SPROUT_QEMU_ACCEL:-tcg} arch
  arch=$(image_arch "$disk")
  find_firmware "$arch" || return 1
  qemu_for "$arch" "$accel" || return 1
  : > "$log"
  local start=$(date +%s.%N)
  "${QEMU_CMD[@]}" -m 2048 -smp 2 \
    -drive "if=pflash,format=raw,unit=0,readonly=on,file=$FW_CODE" \
    -drive "if=pflash,format=raw,unit=1,file=$vars" \
    -drive "if=virtio,format=$(case $disk in *.qcow2) echo qcow2 ;; *) echo raw ;; esac),file=$disk" \
    -display none -serial "file:$log" -monitor none -nic none -no-reboot ${QEMU_EXTRA:-} &
  local pid=$!
  BOOT_LOGIN_SECONDS=""
  local deadline=$(( $(date +%s) + limit ))
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
    if [ "$(date +%s)" -ge "$deadline" ]; then
      kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
      return 124
    fi
    sleep 0.5
  done
  wait "$pid"
  local rc=$?
  BOOT_TOTAL_SECONDS=$(echo "$(date +%s.%N) - $start" | bc)
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
