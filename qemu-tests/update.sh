#!/bin/bash
# QEMU A/B update test (issue 16, docs/updates.md), one node, one VM at a time:
# 1. build A and B (qemu-tests/update-a.yaml, update-b.yaml: they differ in
#    /etc/sprout-update-build), and "bad": B with one byte of its root changed and its
#    manifest and sums made to match, so the checks pass and verity refuses it at boot;
# 2. boot A; update to B (slot b) from a second disk holding the builds, and cut the
#    power while apply copies B's root into slot b (apply frozen 32 MiB after its private
#    copy of B's image, QEMU killed): A boots
#    again; the retried update boots B, which becomes healthy and is committed;
# 3. update back to A (slot a), a downgrade (A's serial is below B's: --allow-downgrade); A is
#    committed;
# 4. update to "bad" (slot b): its three tries fail, and the node falls back to A by itself;
# 5. update to C (update-c.yaml: sprout-firstboot masked, a 60 s health gate): it boots
#    but never becomes healthy, the gate reboots it three times, and A boots again.
# Every boot is one QEMU run (-no-reboot): a reboot ends it and the next run boots the
# same disk with the same firmware variables. The node's settings come through fw_cfg;
# its only NIC sits on a QEMU hub with nothing else on it (198.18.14.11 is never on any
# host network). Usage: update.sh   (as root; env SPROUT, SPROUT_CACHE, KEEP_LOGS, and
# UPDATE_UNHEALTHY=0 to leave out step 5, which takes about 8 minutes in emulation)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
. "$here/lib.sh"

SPROUT=${SPROUT:-$top/build/sprout}
export SPROUT_FIRSTBOOT=${SPROUT_FIRSTBOOT:-$(dirname "$SPROUT")/sprout-firstboot}
CACHE=${SPROUT_CACHE:-/var/cache/sprout}
work=$(mktemp -d /tmp/sprout-update.XXXXXX)
cleanup() {
  if [ "$failed" -gt 0 ] || [ -n "${KEEP_LOGS:-}" ]; then
    echo "logs kept in $work"
    rm -rf "$work/a" "$work/b" "$work/c" "$work/bad" "$work/builds" "$work"/*.img "$work"/*.raw 2>/dev/null
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
find_ovmf || exit 1
if [ "$(id -u)" -ne 0 ]; then echo "update: needs root (the builds disk is made with mke2fs -d as root)" >&2; exit 1; fi

echo "== build A, B and C"
unhealthy=${UPDATE_UNHEALTHY:-1}
builds="a b"
[ "$unhealthy" = 1 ] && builds="a b c"
# All signed with one key: A carries it as the node's update trust root.
"$SPROUT" keygen -o "$work/key" >/dev/null || { check "make the signing key" failed '^ok$'; exit 1; }
for x in $builds; do
  t0=$(date +%s)
  nice -n 10 "$SPROUT" build "$here/update-$x.yaml" -o "$work/$x" --cache-dir "$CACHE" --format raw \
    --sign "$work/key.key" > "$work/build-$x.log" 2>&1
  rc=$?
  check "build $x ($(( $(date +%s) - t0 )) s)" "$rc" '^0$'
  [ "$rc" -eq 0 ] || { tail -n 20 "$work/build-$x.log"; exit 1; }
done
raw_a=$work/a/update-a.raw

echo "== the bad build: B with one byte of its root flipped, sums made to match"
cp -a --sparse=always "$work/b" "$work/bad"
read -r lo _ < <(partition_range "$work/bad/update-b.raw" 2)
at=$((lo + 1000))
byte=$(dd if="$work/bad/update-b.raw" bs=1 skip="$at" count=1 status=none | od -An -tu1 | tr -d ' ')
printf "$(printf '\\%03o' $((byte ^ 0xff)))" | dd of="$work/bad/update-b.raw" bs=1 seek="$at" count=1 conv=notrunc status=none
python3 - "$work/bad" <<'PY'
import hashlib, json, os, sys
d = sys.argv[1]
def digest(p):
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
m = json.load(open(os.path.join(d, "manifest.json")))
for o in m["outputs"]:
    if o["file"].endswith(".raw"):
        o["sha256"] = digest(os.path.join(d, o["file"]))
text = json.dumps(m, indent=2) + "\n"
open(os.path.join(d, "manifest.json"), "w").write(text)
lines = []
for line in open(os.path.join(d, "sha256sums")):
    h, name = line.rstrip("\n").split("  ", 1)
    if name == "manifest.json" or name.endswith(".raw"):
        h = digest(os.path.join(d, name))
    lines.append(h + "  " + name + "\n")
open(os.path.join(d, "sha256sums"), "w").write("".join(lines))
PY
# Signed again with the same key, as a build server that was broken into would.
openssl pkeyutl -sign -rawin -inkey "$work/key.key" -in "$work/bad/manifest.json" -out "$work/bad/manifest.json.sig"
echo "   flipped byte $at (root partition + 1000)"

echo "== the builds disk (ext4, attached read-only as /dev/vdb)"
mkdir -p "$work/builds"
for x in $builds bad; do cp -al "$work/$x" "$work/builds/$x"; done
size_mib=$(( $(du -sm --apparent-size "$work/builds" | cut -f1) * 5 / 4 + 64 ))
mke2fs -q -t ext4 -d "$work/builds" "$work/builds.img" "${size_mib}M" || { check "make the builds disk" failed '^ok$'; exit 1; }

echo "== the node: a copy of A, settings through fw_cfg"
cp --sparse=always "$raw_a" "$work/node.raw"
# 1 GiB more disk, as on real hardware: the state partition grows into it at first boot
# and holds the copy of the build that apply takes before it writes (docs/updates.md).
truncate -s +1G "$work/node.raw"
cp "$OVMF_VARS" "$work/vars.fd"
{
  echo "hostname=update-node"
  echo "role=control-plane"
  echo "address=198.18.14.11/24"
  echo "peers=198.18.14.11"
  echo "cluster-secret=$(head -c 32 /dev/urandom | base64 -w0)"
} > "$work/node.conf"

boot=0
# one_boot NAME [STOP]: boots the node once (QEMU ends at power-off or reboot, or is
# killed once the console shows the regex STOP: a power cut) and prints what it did.
one_boot() {
  local name=$1 stop=${2:-}
  boot=$((boot + 1))
  local log="$work/serial-$boot.log" report="$work/report-$boot.log"
  : > "$report"
  export QEMU_EXTRA="-fw_cfg name=opt/sprout/config,file=$work/node.conf -fw_cfg name=opt/sprout-update/step,file=$work/step -drive if=virtio,format=raw,readonly=on,file=$work/builds.img -netdev hubport,id=n0,hubid=7 -device virtio-net-pci,netdev=n0 -device virtio-serial-pci -chardev file,id=report,path=$report -device virtserialport,chardev=report,name=sprout.report"
  boot_vm "$work/node.raw" "$work/vars.fd" "$log" 1500 "$stop"
  BOOT_RC=$?
  local root
  root=$(grep -aoE 'sprout\.roothash=[0-9a-f]{12}' "$log" | head -n 1 | sed 's/sprout.roothash=//')
  echo "   boot $boot: QEMU status $BOOT_RC after ${BOOT_TOTAL_SECONDS:-?} s, login after ${BOOT_LOGIN_SECONDS:-never} s, root hash ${root:-?}...; $(grep -ahoE 'SPROUT-UPDATE (boot|reached|fallback|apply-rc|cut)[^[:cntrl:]]*' "$report" "$log" | tr '\n' ';')"
  grep -aE 'Kernel panic - not syncing[^[:cntrl:]]*|refusing to boot|verity: [^[:cntrl:]]*(corrupt|mismatch)' "$log" | head -n 2 | sed 's/^/     console: /'
  echo "BOOT $boot $name login=${BOOT_LOGIN_SECONDS:-never} total=${BOOT_TOTAL_SECONDS:-?} root=${root:-?}" >> "$work/figures"
}

# phase NAME WANT DIR MAX [FLAGS]: boots until the node reports it reached WANT or fell
# back, at most MAX boots; its apply is given FLAGS. Sets PHASE_FIRST and PHASE_LAST (the boot numbers).
phase() {
  local name=$1 want=$2 dir=$3 max=$4 flags=${5:-} n
  printf 'want=%s\ndir=%s\nflags=%s\n' "$want" "$dir" "$flags" > "$work/step"
  echo "== $name"
  PHASE_FIRST=$((boot + 1))
  for ((n = 0; n < max; n++)); do
    one_boot "$name"
    if grep -aqE 'SPROUT-UPDATE (reached|fallback)' "$work/report-$boot.log" "$work/serial-$boot.log"; then break; fi
  done
  PHASE_LAST=$boot
}

# value BOOT REGEX: the first match of REGEX in boot BOOT's report port, else its
# console (without CR).
value() { grep -ahoE "$2" "$work/report-$1.log" "$work/serial-$1.log" | head -n 1 | tr -d '\r'; }
hash_a=$(python3 -c "import json;print(json.load(open('$work/a/manifest.json'))['rootHash'])")
hash_b=$(python3 -c "import json;print(json.load(open('$work/b/manifest.json'))['rootHash'])")

echo "== power cut while apply writes slot b"
printf 'want=B\ndir=b\ncut=1\n' > "$work/step"
one_boot "power cut" 'SPROUT-UPDATE cut-(now|missed)'
check "cut: the power was cut while apply copied B's root into slot b" \
  "$BOOT_RC $(value "$boot" 'SPROUT-UPDATE cut-(now wchar=[0-9]+|missed)')" '^125 SPROUT-UPDATE cut-now wchar=[0-9]+$'

phase "A -> B (slot b), the retry after the power cut" B b 4
first=$PHASE_FIRST last=$PHASE_LAST
check "after the cut: the node boots A" "$(value "$first" 'SPROUT-UPDATE boot build=[AB]')" 'build=A$'
check "after the cut: A is the committed, booted entry" "$(value "$first" 'SPROUT-UPDATE status booted: [^[:cntrl:]]*')" \
  'entry sprout-1-a\.conf \(committed\)'
check "A->B: apply succeeded" "$(value "$first" 'SPROUT-UPDATE apply-rc=[0-9]+ seconds=[0-9]+')" 'apply-rc=0 '
check "A->B: apply wrote slot b" "$(value "$first" 'SPROUT-UPDATE apply update: .*writing slot [ab][^[:cntrl:]]*')" 'writing slot b'
check "A->B: boots B in two boots" "$((last - first + 1)) $(value "$last" 'SPROUT-UPDATE reached=[AB]')" '^2 SPROUT-UPDATE reached=B$'
check "A->B: B's kernel command line carries B's root hash" "$(value "$last" "sprout\.roothash=$hash_b")" "$hash_b"
check "A->B: the health gate passed" "$(value "$last" 'SPROUT-UPDATE journal update: healthy[^[:cntrl:]]*')" 'healthy'
check "A->B: B committed" "$(value "$last" 'SPROUT-UPDATE journal update: committed slot b[^[:cntrl:]]*')" 'sprout-2-b\+2-1\.conf -> sprout-2-b\.conf'
check "A->B: status shows slot b booted and committed" "$(value "$last" 'SPROUT-UPDATE status booted: [^[:cntrl:]]*')" 'entry sprout-2-b\.conf \(committed\)'

# A's serial is below B's: going back is a downgrade, which apply takes only when told.
phase "B -> A (slot a)" A a 4 --allow-downgrade
first=$PHASE_FIRST last=$PHASE_LAST
check "B->A: apply took the lower serial with --allow-downgrade" \
  "$(value "$first" 'SPROUT-UPDATE apply update: [^[:cntrl:]]*--allow-downgrade: [^[:cntrl:]]*')" \
  "serial is 1700000000, this node's \\(the running build's\\) 1700000001"
check "B->A: apply wrote slot a and removed A's old entry" \
  "$(value "$first" 'SPROUT-UPDATE apply update: [^[:cntrl:]]*removed the stale entry sprout-1-a.conf')" 'sprout-1-a.conf'
check "B->A: boots A in two boots" "$((last - first + 1)) $(value "$last" 'SPROUT-UPDATE reached=[AB]')" '^2 SPROUT-UPDATE reached=A$'
check "B->A: A's root hash booted" "$(value "$last" "sprout\.roothash=$hash_a")" "$hash_a"
check "B->A: A committed in slot a" "$(value "$last" 'SPROUT-UPDATE status booted: [^[:cntrl:]]*')" 'entry sprout-3-a\.conf \(committed\)'

phase "A -> bad B (slot b): verity refuses, falls back" B bad 7
first=$PHASE_FIRST last=$PHASE_LAST
check "bad: apply accepted the build (sums match)" "$(value "$first" 'SPROUT-UPDATE apply-rc=[0-9]+')" 'apply-rc=0'
failing=0
for ((n = first + 1; n < last; n++)); do
  grep -aqE 'Kernel panic - not syncing|refusing to boot' "$work/serial-$n.log" && failing=$((failing + 1))
done
check "bad: three boots of the bad slot, each stopped by verity" "$failing of $((last - first - 1))" '^3 of 3$'
check "bad: the node fell back to A by itself" "$(value "$last" 'SPROUT-UPDATE fallback build=[AB][^[:cntrl:]]*')" 'build=A'
check "bad: status reports the failed entry" "$(value "$last" 'SPROUT-UPDATE status +entry sprout-4-b[^[:cntrl:]]*')" \
  'sprout-4-b\+0-3\.conf: failed: no tries left after 3 boots'
check "bad: A still committed and booted" "$(value "$last" 'SPROUT-UPDATE status booted: [^[:cntrl:]]*')" 'entry sprout-3-a\.conf \(committed\)'

if [ "$unhealthy" = 1 ]; then
phase "A -> C (slot b): never healthy, the gate reboots it, falls back" C c 7
first=$PHASE_FIRST last=$PHASE_LAST
check "unhealthy: apply succeeded" "$(value "$first" 'SPROUT-UPDATE apply-rc=[0-9]+')" 'apply-rc=0'
failing=0
for ((n = first + 1; n < last; n++)); do
  grep -aqE 'update: slot b not healthy after 60 s' "$work/report-$n.log" "$work/serial-$n.log" && failing=$((failing + 1))
done
check "unhealthy: three boots of C, each failed by the health gate" "$failing of $((last - first - 1))" '^3 of 3$'
check "unhealthy: the gate said why on the console" "$(value "$((first + 1))" 'update: slot b not healthy[^[:cntrl:]]*')" 'not healthy after 60 s'
check "unhealthy: the node fell back to A by itself" "$(value "$last" 'SPROUT-UPDATE fallback build=[ABC][^[:cntrl:]]*')" 'build=A'
check "unhealthy: status reports the failed entry" "$(value "$last" 'SPROUT-UPDATE status +entry sprout-5-b[^[:cntrl:]]*')" \
  'sprout-5-b\+0-3\.conf: failed: no tries left after 3 boots'
else
  echo "== step 5 (never healthy) left out: UPDATE_UNHEALTHY=0"
fi

echo "== sprout inspect of the node's disk after the test"
"$SPROUT" inspect "$work/node.raw" | sed 's/^/   /'
cat "$work/figures"
echo "update: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
