#!/bin/bash
# Builds the sprout base OS root file system as a tarball with mmdebstrap.
# Usage: [SPROUT_ARCH=amd64|arm64] build.sh OUTPUT.tar
# Called by `sprout base`, which caches the result under a key of this folder's
# contents, the apt sources and the architecture; run it by hand only to debug the
# recipe. A foreign architecture (arm64 on an x86-64 host) runs the packages'
# maintainer scripts under qemu-user through binfmt_misc (docs/arm64.md).
set -euo pipefail
out=${1:?usage: build.sh OUTPUT.tar}
here=$(cd "$(dirname "$0")" && pwd)
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-1700000000}

arch=${SPROUT_ARCH:-amd64}

# One package per line; a line ending in "[ARCH]" is for that architecture only.
packages=$(awk -v arch="$arch" '
  /^[[:space:]]*(#|$)/ { next }
  NF >= 2 && $2 ~ /^\[.*\]$/ { if ($2 != "[" arch "]") next }
  { print $1 }' "$here/packages" | paste -sd, -)

# The host's own apt sources name the mirror; this keeps the recipe free of hosts.
sources=${SPROUT_APT_SOURCES:-/etc/apt/sources.list.d/debian.sources}
[ -f "$sources" ] || sources=/etc/apt/sources.list

mode=root
[ "$(id -u)" -eq 0 ] || mode=unshare

# Files the kernel package's postinst must see before it builds the initrd.
essential_hook='mkdir -p "$1/etc/initramfs-tools/conf.d" "$1/etc/initramfs-tools/hooks" "$1/etc/initramfs-tools/scripts/local-top" "$1/etc/initramfs-tools/scripts/local-bottom"'
essential_hook+=" && cp '$here/initramfs/sprout.conf' \"\$1/etc/initramfs-tools/conf.d/sprout\""
essential_hook+=" && install -m 0755 '$here/initramfs/hook' \"\$1/etc/initramfs-tools/hooks/sprout\""
essential_hook+=" && install -m 0755 '$here/initramfs/local-top' \"\$1/etc/initramfs-tools/scripts/local-top/sprout\""
essential_hook+=" && install -m 0755 '$here/initramfs/local-bottom' \"\$1/etc/initramfs-tools/scripts/local-bottom/sprout\""

# The initrd is made once, after every package is configured (the last customize hook).
# Left to the packages, the kernel's postinst makes it and initramfs-tools' trigger makes
# it again when later packages add hooks: on arm64 each run of MODULES=most under
# qemu-user takes about 9 minutes. INITRD=No stops the kernel's hook
# (/etc/kernel/postinst.d/initramfs-tools), and then the trigger has no initrd to update.
export INITRD=No

exec mmdebstrap \
  --mode="$mode" \
  --variant=minbase \
  --format=tar \
  --architectures="$arch" \
  --include="$packages" \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  --dpkgopt='path-exclude=/lib/modules/*/kernel/sound/*' \
  --dpkgopt='path-exclude=/lib/modules/*/kernel/drivers/gpu/*' \
  --dpkgopt='path-exclude=/lib/modules/*/kernel/drivers/media/*' \
  --dpkgopt='path-exclude=/lib/modules/*/kernel/drivers/net/wireless/*' \
  --dpkgopt='path-exclude=/lib/modules/*/kernel/drivers/infiniband/*' \
  --dpkgopt='path-exclude=/lib/modules/*/kernel/drivers/staging/*' \
  --dpkgopt='path-exclude=/lib/modules/*/kernel/net/wireless/*' \
  --dpkgopt='path-exclude=/lib/modules/*/kernel/net/mac80211/*' \
  --dpkgopt='path-exclude=/lib/modules/*/kernel/drivers/bluetooth/*' \
  --dpkgopt='path-exclude=/lib/modules/*/kernel/net/bluetooth/*' \
  --essential-hook="$essential_hook" \
  --customize-hook='chroot "$1" update-initramfs -c -k all' \
  --customize-hook='rm -f "$1/etc/machine-id" && touch "$1/etc/machine-id"' \
  --customize-hook='rm -f "$1"/etc/ssh/ssh_host_*' \
  --customize-hook='rm -f "$1/etc/systemd/system/multi-user.target.wants/knot.service"' \
  --customize-hook='rm -rf "$1/var/cache/apt/"*.bin "$1/var/lib/apt/lists/"*' \
  bookworm "$out" "$sources"
