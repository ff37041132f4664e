#!/bin/bash
# bench/state-encryption: what the encrypted state partition (docs/secure-boot.md, "The
# encrypted state partition") costs a node, measured on nodes: the smoke image booted
# twice in QEMU, once with a software TPM (swtpm), so that its first boot formats /var as
# LUKS2 (aes-xts-plain64, dm-crypt) and unlocks it with the TPM, and once with no TPM, so
# that /var stays plain ext4 (smoke.yaml: stateEncryption: tpm2, withoutTpm: plain). Both
# boots are first boots of a fresh copy of the same pristine image, with the same
# firmware (OVMF, Secure Boot off, a fresh copy of its variables), CPU and memory
# (qemu-tests/lib.sh boot_vm: 2 vCPUs, 2 GiB), no network at all (-nic none) and, as a
# second virtio disk (read-only), a small ext4 "bench disk" labelled SPROUT-BENCH that
# holds the host's etcd (Debian's etcd-server 3.4, which needs only libc: the node is
# Debian bookworm too), puts (puts.c here, built static) and a guest script. The smoke
# image's check (qemu-tests/smoke/check) runs that script once boot is done: a
# single-member etcd with --data-dir /var/lib/sprout-bench/etcd (on /var: the state
# partition, encrypted or not), on 127.0.0.1 only, takes 10 warm-up puts and then PUTS
# (1,000) sequential puts of 256-byte values under distinct keys over one kept-alive
# connection, each timed in the guest; every put returns after etcd's WAL fsync, the path
# dm-crypt adds to. Printed, from the serial logs: each side's /var (checked: the LUKS2
# side on /dev/mapper/sprout-state, the plain side on /dev/vda7), etcd's put p50, p99
# and mean, the time from QEMU's start to the first boot's login prompt, and the ratios
# LUKS2/plain; and the initrd's own time for encrypting (its console line "sprout:
# encrypted the state partition ... in N s").
# Why inside QEMU: the node's kernel, with its dm-crypt, is the one that matters, and
# this host's kernel has no device-mapper at all. QEMU here is software emulation (TCG)
# unless SPROUT_QEMU_ACCEL says otherwise: it inflates every absolute time (the CPU,
# AES included, is emulated), so the ratios are the figure, and absolute milliseconds
# say little about real hardware. Each side's first boot takes minutes under TCG; a
# round is one boot of each side, the order alternating by round (LUKS2 first in odd
# rounds) so that a drifting host load hits both alike. Run it on an otherwise idle host.
# Needs: qemu-system-x86, ovmf, swtpm, gcc with a static libc, e2fsprogs (mke2fs -d),
# squashfs-tools-ng, /usr/bin/etcd (etcd-server); no root.
# Usage: bench/state-encryption/run.sh IMAGE.raw [ROUNDS]
#   IMAGE.raw: the smoke image as qemu-tests/smoke.sh builds it (smoke.raw, pristine: not
#   personalized, never booted), with the bench hook in its check. ROUNDS: default 1.
#   From the environment: PUTS (1000), BOOT_LIMIT (seconds per boot, 1800), DISK_MIB (grow
#   each copy to this size first, as a node's larger disk; default: the image's size),
#   KEEP_LOGS=1 (keep the work folder and its serial logs), BENCH_DISK_ONLY=1 (make the
#   bench disk, then stop: a check of the host's side without the boots).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
IMAGE=${1:-} ROUNDS=${2:-${ROUNDS:-1}} PUTS=${PUTS:-1000} BOOT_LIMIT=${BOOT_LIMIT:-1800} DISK_MIB=${DISK_MIB:-}
PUTS_TIMEOUT=900  # seconds for etcd's start and all the puts, in the guest
usage="usage: bench/state-encryption/run.sh IMAGE.raw [ROUNDS]   (the smoke image, smoke.raw)"
[ -n "$IMAGE" ] && [ $# -le 2 ] || { echo "$usage" >&2; exit 2; }
[ -f "$IMAGE" ] || { echo "bench/state-encryption: no image at $IMAGE; $usage" >&2; exit 2; }
case $IMAGE in *.qcow2) echo "bench/state-encryption: $IMAGE: give the raw image (smoke.raw)" >&2; exit 2 ;; esac
if ! { [ "$ROUNDS" -ge 1 ] && [ "$ROUNDS" -le 20 ] && [ "$PUTS" -ge 100 ] && [ "$PUTS" -le 100000 ] &&
  [ "$BOOT_LIMIT" -ge 60 ] && { [ -z "$DISK_MIB" ] || [ "$DISK_MIB" -ge 1 ]; }; } 2>/dev/null; then
  echo "bench/state-encryption: ROUNDS must be 1..20, PUTS 100..100000, BOOT_LIMIT at least 60, DISK_MIB a size in MiB" >&2
  exit 2
fi
. "$top/qemu-tests/lib.sh"
for tp in qemu-system-x86_64:qemu-system-x86 swtpm:swtpm gcc:gcc mke2fs:e2fsprogs rdsquashfs:squashfs-tools-ng \
  sfdisk:fdisk bc:bc python3:python3 /usr/bin/etcd:etcd-server; do
  command -v "${tp%%:*}" >/dev/null || { echo "bench/state-encryption: ${tp%%:*} is missing: apt-get install ${tp#*:}" >&2; exit 1; }
done
find_ovmf  # OVMF_CODE, OVMF_VARS: plain OVMF, Secure Boot off, on both sides
arch=$(image_arch "$IMAGE")
[ "$arch" = amd64 ] && [ "$(host_arch)" = amd64 ] ||
  { echo "bench/state-encryption: the bench disk carries this host's etcd: an amd64 image on an amd64 host only (image: $arch)" >&2; exit 1; }
# etcd runs on the node from the bench disk: it must need nothing but the C library.
libs=$(ldd /usr/bin/etcd 2>&1 | awk '$1 !~ /^(linux-vdso|libc\.so|\/lib64\/ld-linux)/ { print $1 }' | tr '\n' ' ')
[ -z "$libs" ] || { echo "bench/state-encryption: /usr/bin/etcd needs more than libc ($libs); it would not run on the node" >&2; exit 1; }

W=$(mktemp -d /var/tmp/sprout-bench-state.XXXXXX)  # on disk, not tmpfs: the guests' fsyncs reach it
TPM_DIR='' ok=''
stop_tpm() {
  [ -n "$TPM_DIR" ] || return 0
  [ -s "$TPM_DIR/pid" ] && kill "$(cat "$TPM_DIR/pid")" 2>/dev/null
  TPM_DIR=''
}
cleanup() {
  set +e
  stop_tpm
  # boot_vm's QEMU is a job of this shell until it returns; an interrupt can leave it.
  for pid in $(jobs -p); do kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
  rm -f "$W"/*.raw "$W"/root.sqfs
  if [ -n "${KEEP_LOGS:-}" ] || [ -z "$ok" ]; then echo "logs kept in $W"; else rm -rf "$W"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() { echo "bench/state-encryption: $*" >&2; exit 1; }

# The image must run the bench's hook: its check must be this tree's (after the hook was
# added); an image built before would boot to its end and measure nothing.
range=$(partition_range "$IMAGE" 2) || fail "$IMAGE has no partition table that sfdisk reads"
read -r lo hi <<<"$range"
dd if="$IMAGE" of="$W/root.sqfs" bs=1M iflag=skip_bytes,count_bytes skip="$lo" count=$((hi - lo)) status=none
rdsquashfs -c /usr/lib/sprout-smoke/check "$W/root.sqfs" >"$W/check" 2>/dev/null || true
grep -q SPROUT-BENCH "$W/check" ||
  fail "$IMAGE is not a smoke image with the bench hook (/usr/lib/sprout-smoke/check has no SPROUT-BENCH): build it again with qemu-tests/smoke.sh (KEEP_LOGS=1 keeps smoke.raw)"
rm -f "$W/root.sqfs"

echo "== the bench disk: etcd $(/usr/bin/etcd --version | awk '/^etcd Version/ { print $3 }'), puts, the guest script"
mkdir -p "$W/disk"
gcc -O2 -static -Wall -Wextra -o "$W/disk/puts" "$here/puts.c"
cp /usr/bin/etcd "$W/disk/etcd"
# The guest script: run by qemu-tests/smoke/check from this disk (mounted read-only on
# /run/sprout-bench), its output on the serial console.
cat >"$W/disk/run.sh" <<'GUEST'
#!/bin/sh
# On the node: bench/state-encryption's etcd put timing, with etcd's data on /var.
d=$(dirname "$0")
data=/var/lib/sprout-bench/etcd log=/run/sprout-bench-etcd.log
rm -rf /var/lib/sprout-bench && mkdir -p /var/lib/sprout-bench
"$d/etcd" --name bench --data-dir "$data" \
  --listen-client-urls http://127.0.0.1:23790 --advertise-client-urls http://127.0.0.1:23790 \
  --listen-peer-urls http://127.0.0.1:23800 --initial-advertise-peer-urls http://127.0.0.1:23800 \
  --initial-cluster bench=http://127.0.0.1:23800 --initial-cluster-state new >"$log" 2>&1 &
pid=$!
# puts waits (bounded, and no longer than etcd runs) for etcd's /health before its first put.
res=$("$d/puts" 23790 @PUTS@ @TIMEOUT@ "$pid" 2>&1) || res="failed: $res; etcd's log: $(tail -n 3 "$log" | tr '\n' ' ')"
echo "SPROUT-BENCH etcd-put $res"
echo "SPROUT-BENCH var=$(findmnt -no FSTYPE,SOURCE /var)"
echo "SPROUT-BENCH data-on=$(findmnt -no SOURCE -T /var/lib/sprout-bench)"
echo "SPROUT-BENCH dm-crypt=$(dmsetup table sprout-state 2>/dev/null | awk '{ o = $4; for (i = 10; i <= NF; i++) o = o " " $i; print o }')"
echo "SPROUT-BENCH xts-aes-driver=$(awk '/^name/ { n = $3 } /^driver/ && n == "xts(aes)" { print $3; exit }' /proc/crypto)"
kill "$pid" 2>/dev/null
i=0; while kill -0 "$pid" 2>/dev/null && [ "$i" -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
rm -rf /var/lib/sprout-bench
GUEST
sed -i "s/@PUTS@/$PUTS/; s/@TIMEOUT@/$PUTS_TIMEOUT/" "$W/disk/run.sh"
chmod 0755 "$W/disk/run.sh"
mke2fs -q -t ext4 -L SPROUT-BENCH -d "$W/disk" "$W/bench.img" 64M >/dev/null
echo "   $W/bench.img: $(du -sh "$W/disk" | cut -f1) in a 64 MiB ext4, label SPROUT-BENCH"
[ -z "${BENCH_DISK_ONLY:-}" ] || { ok=1; echo "BENCH_DISK_ONLY: stopping before the boots"; exit 0; }

# bench_value LOG KEY: the value of the last "SPROUT-BENCH KEY=value" line.
bench_value() { grep -a "SPROUT-BENCH $2=" "$1" | tail -n 1 | sed "s/^.*SPROUT-BENCH $2=//" | tr -d '\r'; }
# put_value LOG KEY: KEY's value in the "SPROUT-BENCH etcd-put ..." line (p50_ms, p99_ms, mean_ms, n).
put_value() { grep -a 'SPROUT-BENCH etcd-put ' "$1" | tail -n 1 | tr -d '\r' | tr ' ' '\n' | sed -n "s/^$2=//p"; }

# boot_side SIDE ROUND: the first boot of a fresh copy of IMAGE as SIDE (luks2: a new
# software TPM beside it; plain: none), until the smoke check's report ends.
declare -A P50 P99 MEAN LOGIN ENCRYPT
boot_side() {
  local side=$1 r=$2 log="$W/r$2-$1.log" tpm='' rc=0 var want
  cp --sparse=always "$IMAGE" "$W/node.raw"
  [ -z "$DISK_MIB" ] || truncate -s "${DISK_MIB}M" "$W/node.raw"
  cp "$OVMF_VARS" "$W/vars.fd"
  if [ "$side" = luks2 ]; then
    TPM_DIR="$W/tpm-r$r"
    mkdir -p "$TPM_DIR"
    swtpm socket --tpm2 --tpmstate "dir=$TPM_DIR" --ctrl "type=unixio,path=$TPM_DIR/sock" \
      --pid "file=$TPM_DIR/pid" --log "file=$TPM_DIR/log" --daemon || fail "swtpm did not start"
    for _ in $(seq 50); do [ -S "$TPM_DIR/sock" ] && break; sleep 0.1; done
    [ -S "$TPM_DIR/sock" ] || fail "swtpm made no socket in 5 s"
    tpm="-chardev socket,id=chrtpm,path=$TPM_DIR/sock -tpmdev emulator,id=tpm0,chardev=chrtpm -device tpm-tis,tpmdev=tpm0"
  fi
  echo "== round $r, $side: first boot ($(nproc) host CPUs, load $(cut -d' ' -f1-3 /proc/loadavg))"
  QEMU_EXTRA="$tpm -drive if=virtio,format=raw,readonly=on,file=$W/bench.img" \
    boot_vm "$W/node.raw" "$W/vars.fd" "$log" "$BOOT_LIMIT" 'SPROUT-SMOKE done' || rc=$?
  stop_tpm
  rm -f "$W/node.raw"
  [ "$rc" -eq 125 ] || fail "round $r, $side: the boot did not reach 'SPROUT-SMOKE done' (boot_vm status $rc; 124: $BOOT_LIMIT s passed); last console lines:
$(grep -av '^\s*$' "$log" | tail -n 8 | tr -d '\r')"
  var=$(bench_value "$log" var)
  [ -n "$var" ] || fail "round $r, $side: no SPROUT-BENCH line on the console: the check did not find the bench disk (is /dev/disk/by-label/SPROUT-BENCH there?)"
  want=$([ "$side" = luks2 ] && echo /dev/mapper/sprout-state || echo /dev/vda7)
  [[ "$var" =~ ^ext4\ +${want}$ ]] ||
    fail "round $r, $side: /var is '$var', not ext4 on $want: the sides do not measure what they should$([ "$side" = luks2 ] && echo " (does the image ask for disk.stateEncryption: tpm2?)")"
  [ -n "$(put_value "$log" p50_ms)" ] ||
    fail "round $r, $side: etcd's puts: $(grep -a 'SPROUT-BENCH etcd-put' "$log" | tail -n 1 | tr -d '\r')"
  P50[$side.$r]=$(put_value "$log" p50_ms) P99[$side.$r]=$(put_value "$log" p99_ms) MEAN[$side.$r]=$(put_value "$log" mean_ms)
  LOGIN[$side.$r]=$(printf '%.1f' "${BOOT_LOGIN_SECONDS:-0}")
  [ -n "${BOOT_LOGIN_SECONDS:-}" ] || fail "round $r, $side: no login prompt on the console"
  ENCRYPT[$side.$r]=$(grep -ao 'sprout: encrypted the state partition [^ ]* in [0-9.]* s' "$log" | head -n 1 | awk '{ print $(NF - 1) }' || true)
  if [ "$side" = luks2 ]; then
    [ -n "${ENCRYPT[$side.$r]}" ] || fail "round $r, luks2: no 'sprout: encrypted the state partition' line on the console"
  else
    grep -aq 'sprout: encrypted the state partition' "$log" && fail "round $r, plain: the initrd encrypted the state (there was no TPM)"
    ENCRYPT[$side.$r]=-
  fi
  printf '   /var %s; %s puts: p50 %s ms, p99 %s ms, mean %s ms; login prompt after %s s; report after %.0f s\n' \
    "$(tr -s ' ' <<<"$var")" "$(put_value "$log" n)" "${P50[$side.$r]}" "${P99[$side.$r]}" "${MEAN[$side.$r]}" \
    "${LOGIN[$side.$r]}" "${BOOT_TOTAL_SECONDS:-0}"
  [ "$side" = plain ] || printf '   dm-crypt %s, xts(aes) by %s; the initrd encrypted the state in %s s\n' \
    "$(bench_value "$log" dm-crypt)" "$(bench_value "$log" xts-aes-driver)" "${ENCRYPT[$side.$r]}"
}

t0=$SECONDS
choose_accel tcg amd64 >/dev/null 2>&1 || true
echo "== $ROUNDS round(s) of two first boots of $(basename "$IMAGE") ($(( $(stat -c %s "$IMAGE") >> 20 )) MiB${DISK_MIB:+, grown to $DISK_MIB MiB}); ${ACCEL_WHY:-QEMU}"
for r in $(seq "$ROUNDS"); do
  if [ $((r % 2)) -eq 1 ]; then boot_side luks2 "$r"; boot_side plain "$r"; else boot_side plain "$r"; boot_side luks2 "$r"; fi
done
ok=1
echo "   ($((SECONDS - t0)) s for the boots)"

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 > 0) printf "%.2f", a / b; else print "-" }'; }
declare -A M
for side in luks2 plain; do
  for k in P50 P99 MEAN LOGIN; do
    declare -n arr=$k
    vals=''; for r in $(seq "$ROUNDS"); do vals+="${arr[$side.$r]} "; done
    M[$k.$side]=$(median <<<"$vals")
    unset -n arr
  done
done
enc=''; for r in $(seq "$ROUNDS"); do enc+="${ENCRYPT[luks2.$r]} "; done
echo
printf 'etcd on the node'\''s /var: %s puts after 10 warm-up; first boot: QEMU start to the login prompt\n' "$PUTS"
[ "$ROUNDS" -eq 1 ] || echo "(each figure: the median over $ROUNDS rounds)"
printf '%-7s %-32s %9s %9s %9s %10s\n' side /var "p50 ms" "p99 ms" "mean ms" "login s"
printf '%-7s %-32s %9s %9s %9s %10s\n' LUKS2 "ext4 on /dev/mapper/sprout-state" "${M[P50.luks2]}" "${M[P99.luks2]}" "${M[MEAN.luks2]}" "${M[LOGIN.luks2]}"
printf '%-7s %-32s %9s %9s %9s %10s\n' plain "ext4 on /dev/vda7" "${M[P50.plain]}" "${M[P99.plain]}" "${M[MEAN.plain]}" "${M[LOGIN.plain]}"
printf '%-7s %-32s %9s %9s %9s %10s\n' ratio LUKS2/plain "$(ratio "${M[P50.luks2]}" "${M[P50.plain]}")" \
  "$(ratio "${M[P99.luks2]}" "${M[P99.plain]}")" "$(ratio "${M[MEAN.luks2]}" "${M[MEAN.plain]}")" \
  "$(ratio "${M[LOGIN.luks2]}" "${M[LOGIN.plain]}")"
echo "the initrd's encryption at first boot (LUKS2 format, TPM seal, recovery key, unlock, mke2fs): $(median <<<"$enc") s"
echo "(software emulation inflates every absolute time; the ratios are the figure)"
