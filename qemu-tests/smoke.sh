#!/bin/bash
# QEMU smoke test: build the smoke image offline (as an unprivileged user when run as
# root, to prove `sprout build` needs no root), boot it twice under UEFI with its only
# NIC on an empty QEMU hub, and check: multi-user.target reached, sprout-firstboot
# ready, root read-only squashfs, /var on the state partition, the settings and their
# sources, a file written in boot 1 read back in boot 2; and in boot 1 the preloaded
# container images: containerd lists each with the digest the build recorded, runs a
# busybox and an etcd container, and a second import skips them all.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
. "$here/lib.sh"

SPROUT=${SPROUT:-$top/build/sprout}
SPROUT_FIRSTBOOT=${SPROUT_FIRSTBOOT:-$(dirname "$SPROUT")/sprout-firstboot}
CACHE=${SPROUT_CACHE:-/var/cache/sprout}
work=$(mktemp -d /tmp/sprout-smoke.XXXXXX)
chmod 0755 "$work"
keep_logs=${KEEP_LOGS:-}
cleanup() {
  if [ "$failed" -gt 0 ] || [ -n "$keep_logs" ]; then
    echo "logs kept in $work"
    rm -f "$work"/*.raw "$work"/*.qcow2 "$work"/data -r 2>/dev/null
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

same() {  # same A B: "same" if the strings are equal, else both (for literal comparisons)
  if [ "$1" = "$2" ]; then echo same; else echo "'$1' != '$2'"; fi
}

find_ovmf || exit 1
mkdir -p "$CACHE"
echo "== base OS (cached in $CACHE)"
"$SPROUT" base "$top/profiles/default.yaml" --cache-dir "$CACHE" || exit 1
# The default profile preloads container images, made from their recipes with no
# network; make them as this user so the unprivileged build below only reads the cache
# (docs/images.md).
"$SPROUT" pull "$top/profiles/default.yaml" --cache-dir "$CACHE" --offline || exit 1

echo "== build the smoke image"
# The smoke image is a Secure Boot build (docs/secure-boot.md), signed with Debian's
# snakeoil test key (ovmf), whose certificate OVMF_VARS_4M.snakeoil.fd enrolls: its boots
# below start its signed UKI without Secure Boot, and qemu-tests/secure-boot.sh boots it
# with Secure Boot on. The key is a public test key; SMOKE_SECURE_BOOT=0 builds unsigned.
sb_key=$work/sb/snakeoil.key
sb_flags=()
if [ "${SMOKE_SECURE_BOOT:-1}" = 1 ]; then
  mkdir -p "$work/sb" && chmod 0755 "$work/sb"
  openssl pkey -in /usr/share/ovmf/PkKek-1-snakeoil.key -passin pass:snakeoil -out "$sb_key" || exit 1
  chmod 0644 "$sb_key"
  sb_flags=(--secure-boot-key "$sb_key" --secure-boot-cert /usr/share/ovmf/PkKek-1-snakeoil.pem)
fi
if [ "$(id -u)" -eq 0 ]; then
  # Stage sprout and its data where an unprivileged user can read them, then build as that user.
  id sprout-build >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin sprout-build
  data="$work/data"
  mkdir -p "$data/bin"
  cp -a "$top/profiles" "$top/overlays" "$top/images" "$top/firstboot" "$top/staticpods" "$top/qemu-tests" "$data/"
  cp "$SPROUT" "$SPROUT_FIRSTBOOT" "$data/bin/"
  chmod -R a+rX "$data"
  mkdir -p "$work/out" && chown sprout-build "$work/out"
  runuser -u sprout-build -- env HOME="$work" SPROUT_DATA_DIR="$data" SPROUT_FIRSTBOOT="$data/bin/sprout-firstboot" \
    "$data/bin/sprout" build "$data/qemu-tests/smoke.yaml" -o "$work/out" --cache-dir "$CACHE" --offline "${sb_flags[@]}" 2>&1 | tee "$work/build.log"
  build_rc=${PIPESTATUS[0]}
  check "build as unprivileged user $(id -u sprout-build)" "$build_rc" '^0$'
else
  "$SPROUT" build "$here/smoke.yaml" -o "$work/out" --cache-dir "$CACHE" --offline "${sb_flags[@]}" 2>&1 | tee "$work/build.log"
  build_rc=${PIPESTATUS[0]}
  check "build as user $(id -u)" "$build_rc" '^0$'
fi
[ "$build_rc" -eq 0 ] || exit 1

echo "== secrets: none in the built image; after personalize, only in the config area"
image="$work/out/smoke.raw"
scan=$(root_tar "$image" | python3 "$here/scan-secrets.py" 2>&1)
check "built image: no key material in the root" "$(tail -n 1 <<<"$scan")" 'scanned [0-9]+ files: 0 findings'
head -c 32 /dev/urandom > "$work/secret"
cp --sparse=always "$image" "$work/node.raw"
echo "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHNwcm91dC1zbW9rZS10ZXN0LWtleS1ub3QtcmVhbA smoke@sprout" > "$work/id.pub"
"$SPROUT" personalize "$work/node.raw" --cluster-secret "$work/secret" --hostname area-host --role control-plane \
  --address 198.18.0.10/24 --ssh-key "$work/id.pub" >/dev/null || check "personalize the node image" "failed" '^ok$'
scan=$(root_tar "$work/node.raw" | python3 "$here/scan-secrets.py" "$work/secret" 2>&1)
check "personalized image: neither the secret nor key material in the root" "$(tail -n 1 <<<"$scan")" \
  'scanned [0-9]+ files: 0 findings'
read -r lo hi < <(partition_range "$work/node.raw" 6)
offsets=$(grep -abo -F "$(base64 -w0 < "$work/secret")" "$work/node.raw" | cut -d: -f1)
inside=yes; for o in $offsets; do { [ "$o" -ge "$lo" ] && [ "$o" -lt "$hi" ]; } || inside=no; done
check "personalized image: the secret sits only in the config area" "$inside:$(wc -w <<<"$offsets")" '^yes:1$'
check "built image: the secret is nowhere" "$(grep -c -a -F "$(base64 -w0 < "$work/secret")" "$image")" '^0$'

# fw_cfg overrides the config area (docs/personalization.md: precedence): boot 1 gets a
# hostname through fw_cfg, boot 2 a role, so each setting is seen from both sources.
printf 'hostname=fwcfg-host\n' > "$work/fwcfg-1.txt"
printf 'role=worker\n' > "$work/fwcfg-2.txt"

# One copy-on-write disk over the image keeps both boots' writes; the image stays pristine.
# The disk is 4 times the image's size, so first boot must grow /var into the rest.
image_mib=$(( $(stat -c %s "$work/node.raw") / 1048576 ))
qemu-img create -q -f qcow2 -b "$work/node.raw" -F raw "$work/disk.qcow2" "$((4 * image_mib))M"
cp "$OVMF_VARS" "$work/vars.fd"

for boot in 1 2; do
  echo "== boot $boot"
  # A NIC on a QEMU hub with nothing else attached: the node can configure its static
  # address, and no frame leaves the VM.
  export QEMU_EXTRA="-fw_cfg name=opt/sprout/config,file=$work/fwcfg-$boot.txt -netdev hubport,id=n0,hubid=7 -device virtio-net-pci,netdev=n0"
  # Boot 1 also imports the images and runs two containers.
  boot_vm "$work/disk.qcow2" "$work/vars.fd" "$work/serial-$boot.log" "$([ "$boot" = 1 ] && echo 600 || echo 420)"
  rc=$?
  check "boot $boot: guest powered off by itself" "$rc" '^0$'
  log="$work/serial-$boot.log"
  echo "   login prompt after ${BOOT_LOGIN_SECONDS:-never} s, powered off after ${BOOT_TOTAL_SECONDS:-?} s"
  echo "BOOT_LOGIN_SECONDS boot=$boot ${BOOT_LOGIN_SECONDS:-never}" >> "$work/figures"
  # systemd's own "Reached target" console line is racy once a getty owns the serial
  # console, so the guest's answer is what counts.
  check "boot $boot: reached multi-user.target" "$(smoke_value "$log" multi-user)" '^active$'
  check "boot $boot: login prompt" "$(grep -ac 'login:' "$log")" '^[1-9]'
  check "boot $boot: smoke report complete" "$(smoke_value "$log" done; grep -ac 'SPROUT-SMOKE done' "$log")" '1$'
  check "boot $boot: boot counter" "$(smoke_value "$log" boot)" "^$boot\$"
  check "boot $boot: system state" "$(smoke_value "$log" system)" '^running$'
  check "boot $boot: sprout-firstboot active (READY sent)" "$(smoke_value "$log" firstboot)" '^active$'
  check "boot $boot: sprout-firstboot reports a status" "$(smoke_value "$log" firstboot-status)" '.+'
  check "boot $boot: sprout-firstboot logged to the journal" "$(smoke_value "$log" journal)" '^[1-9]'
  check "boot $boot: root is read-only squashfs" "$(smoke_value "$log" root)" '^squashfs +ro'
  check "boot $boot: writing the root is refused" "$(smoke_value "$log" root-write)" '^refused$'
  check "boot $boot: /var is ext4 on the state partition" "$(smoke_value "$log" var)" '^ext4 +/dev/vda7'
  # smoke.yaml asks for encrypted state but allows a machine without a TPM (this VM) to
  # run plain: loudly, at every boot.
  check "boot $boot: sprout-firstboot status says the state is not encrypted" "$(smoke_value "$log" state-status)" \
    '^state: NOT encrypted: the image asks for sprout.state.encryption=tpm2, and /var is on /dev/vda7'
  if [ "$boot" = 1 ]; then
    check "boot 1: no TPM, so the state stays plain, with a warning on the console" \
      "$(grep -ac 'WARNING: no TPM 2.0 on this machine: the state partition /dev/vda7 stays NOT encrypted' "$log")" '^[1-9]'
  else
    check "boot 2: the plain state is kept, with a warning on the console" \
      "$(grep -ac 'WARNING: the state partition /dev/vda7 is NOT encrypted' "$log")" '^[1-9]'
  fi
  var_mib=$(smoke_value "$log" var-size-mib)
  check "boot $boot: /var grew into a disk 4x the image ($((4 * image_mib)) MiB): ${var_mib} MiB" \
    "$([ "${var_mib:-0}" -ge $((3 * image_mib * 9 / 10)) ] && echo yes)" '^yes$'
  check "boot $boot: root is mounted from the verity device" "$(smoke_value "$log" root-source)" '^/dev/mapper/root$'
  check "boot $boot: dmsetup table shows verity" "$(smoke_value "$log" root-table)" '^verity$'
  check "boot $boot: the initrd seeded /var from the factory copy" "$(smoke_value "$log" seeded)" '^yes$'
  if [ "$boot" = 1 ]; then
    check "boot 1: hostname from fw_cfg, which overrides the config area" "$(smoke_value "$log" hostname)" '^fwcfg-host$'
    check "boot 1: hostname setting and source" "$(smoke_value "$log" hostname-setting)" '^hostname=fwcfg-host +\(fw_cfg\)$'
    check "boot 1: role from the config area" "$(smoke_value "$log" role-setting)" '^role=control-plane +\(config area\)$'
    sources='address set by the config area;cluster-secret set by the config area;hostname set by the fw_cfg;role set by the config area;ssh-authorized-key set by the config area;'
  else
    check "boot 2: hostname from the config area (fw_cfg has none now)" "$(smoke_value "$log" hostname)" '^area-host$'
    check "boot 2: hostname setting and source" "$(smoke_value "$log" hostname-setting)" '^hostname=area-host +\(config area\)$'
    check "boot 2: role from fw_cfg, which overrides the config area" "$(smoke_value "$log" role-setting)" '^role=worker +\(fw_cfg\)$'
    sources='address set by the config area;cluster-secret set by the config area;hostname set by the config area;role set by the fw_cfg;ssh-authorized-key set by the config area;'
  fi
  check "boot $boot: SSH server running (debug access)" "$(smoke_value "$log" ssh)" '^active$'
  check "boot $boot: the serial console's getty is running" "$(smoke_value "$log" serial-getty)" '^active$'
  check "boot $boot: systemd waits 5 min for the serial port, not 90 s" "$(smoke_value "$log" serial-port-wait)" '^5min$'
  check "boot $boot: SSH authorized key from the config area" "$(same "$(smoke_value "$log" ssh-authorized)" "$(cat "$work/id.pub")")" '^same$'
  check "boot $boot: the config area (it holds the secret) is readable by root only" \
    "$(smoke_value "$log" config-area-mode)" '^600 root$'
  check "boot $boot: the fw_cfg settings are readable by root only" "$(smoke_value "$log" fwcfg-mode)" '^[46]00 root$'
  check "boot $boot: static address from the config area" "$(smoke_value "$log" address)" '^198\.18\.0\.10/24$'
  check "boot $boot: every setting and its source in the journal" "$(smoke_value "$log" config)" "^${sources}\$"
done
check "/var persists: boot 2 reads boot 1's file" "$(smoke_value "$work/serial-2.log" prev-marker)" '^written-in-boot-1$'
id1=$(smoke_value "$work/serial-1.log" machine-id)
check "machine-id is stable across reboots" "$(same "$(smoke_value "$work/serial-2.log" machine-id)" "$id1")" '^same$'
check "machine-id is set" "$id1" '^[0-9a-f]{32}$'
key1=$(smoke_value "$work/serial-1.log" ssh-hostkey)
check "SSH host key made at first boot" "$key1" '^SHA256:'
check "SSH host key is stable across reboots" "$(same "$(smoke_value "$work/serial-2.log" ssh-hostkey)" "$key1")" '^same$'

echo "== the preloaded images (boot 1)"
log1=$work/serial-1.log
images_value() { grep -a "SPROUT-IMAGES $1=" "$log1" | sed "s/^.*SPROUT-IMAGES $1=//" | tr -d '\r'; }
want=$(python3 -c 'import json,sys; print(" ".join(i["reference"]+" "+i["manifestDigest"] for i in json.load(open(sys.argv[1]))["images"]))' "$work/out/manifest.json")
nwant=$(($(wc -w <<<"$want") / 2))
check "the build recorded the preloaded images" "$nwant" '^[1-9]'
check "images report complete" "$(grep -ac 'SPROUT-IMAGES done' "$log1")" '^1$'
check "the import unit succeeded" "$(images_value import)" '^active$'
check "no default route: the NIC sits on an empty hub, so nothing could be pulled" "$(images_value default-routes)" '^0$'
listed=$(images_value image | tr '\n' ';')
for ref in $(tr ' ' '\n' <<<"$want" | grep '^localhost/'); do
  digest=$(tr ' ' '\n' <<<"$want" | grep -A1 -x "$ref" | tail -n 1)
  check "containerd lists $ref with the built digest" "$(grep -o "$ref $digest" <<<"$listed")" "^$ref $digest\$"
done
check "containerd has exactly the $nwant preloaded images" "$(images_value image | wc -l)" "^$nwant\$"
check "a busybox container runs" "$(images_value busybox)" 'hello-from-busybox'
check "an etcd container runs" "$(images_value etcd)" 'etcd Version: 3\.4'
check "the import at boot imported every one" "$(images_value journal)" "^$nwant\$"
check "a second import skips what is present" "$(images_value reimport)" 'etcd:3.4 already present.*busybox:1.35 already present'

# Hand the pristine image to the tamper test, if asked.
[ -n "${KEEP_IMAGE:-}" ] && cp --sparse=always "$image" "$KEEP_IMAGE"
# And a second build of the same profile, signed with the same key, with a later epoch
# (so another root hash, and no downgrade): qemu-tests/secure-boot.sh check 8 updates a
# node of the first build to it and rolls back.
if [ -n "${KEEP_UPDATE:-}" ]; then
  echo "== a second build of the smoke profile, epoch +100 (the update of secure-boot.sh check 8)"
  t_update=$SECONDS
  epoch=$(sed -n 's/^ *sourceDateEpoch: *//p' "$top/profiles/default.yaml" | head -n 1)
  rm -rf "$KEEP_UPDATE"
  if SOURCE_DATE_EPOCH=$((epoch + 100)) "$SPROUT" build "$here/smoke.yaml" -o "$KEEP_UPDATE" --cache-dir "$CACHE" \
    --offline --format raw "${sb_flags[@]}" >"$work/update-build.log" 2>&1; then
    echo "   built in $((SECONDS - t_update)) s: $(grep -o '"rootHash": *"[0-9a-f]\{12\}' "$KEEP_UPDATE/manifest.json" | head -n 1)"
  else
    tail -n 20 "$work/update-build.log"
    check "the second build (for the update test)" "failed" '^built$'
  fi
fi
cat "$work/figures" 2>/dev/null
echo "smoke: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
