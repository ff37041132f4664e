#!/bin/bash
# A fake base recipe for tests/repro_test.sh: what `sprout base` runs, but instead of
# mmdebstrap it writes a tiny root (kernel, initrd and systemd-boot stand-ins, a dpkg
# status with one package) as a tarball, the same bytes every time. Usage: build.sh OUT.tar
set -euo pipefail
out=${1:?usage: build.sh OUT.tar}
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
umask 022
chmod 755 "$root"
mkdir -p "$root/boot" "$root/usr/lib/systemd/boot/efi" "$root/etc" "$root/var/lib/dpkg"
# (head reads from a process substitution: `yes | head` fails under pipefail.)
head -c 300000 < <(yes 'fake kernel') > "$root/boot/vmlinuz-6.1.0-99-amd64"
head -c 200001 < <(yes 'fake initrd') > "$root/boot/initrd.img-6.1.0-99-amd64"
head -c 50000 < <(yes 'fake systemd-boot') > "$root/usr/lib/systemd/boot/efi/systemd-bootx64.efi"
echo 'ID=debian' > "$root/etc/os-release"
cat > "$root/var/lib/dpkg/status" <<'STATUS'
Package: base-files
Status: install ok installed
Version: 12.4+deb12u5
Architecture: amd64
Maintainer: Santiago Vila <sanvila@debian.org>

STATUS
echo "building the fake base"
tar -C "$root" --sort=name --mtime=@1700000000 --owner=0 --group=0 --numeric-owner -cf "$out" .
