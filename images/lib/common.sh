# Shared by the container image recipes (images/etcd, images/busybox).
# Package files come from the host's installed Debian packages, or, when a package is
# not installed, from `apt-get download` (the host's configured Debian archive) and
# `dpkg-deb -x`; nothing else is fetched.

# pkg_root PACKAGE prints a directory holding PACKAGE's files.
pkg_root() {
  local pkg=$1
  if dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    echo /
    return
  fi
  local dir="$work/pkg-$pkg"
  mkdir -p "$dir"
  (cd "$work" && apt-get download "$pkg" >&2)
  dpkg-deb -x "$work"/"${pkg}"_*.deb "$dir"
  echo "$dir"
}

# base_layer DIR fills DIR with the layer both images share: users, /tmp and the C
# library from libc6 (etcd links against it; busybox is static but gets it too, so
# the layer is identical and stored once).
base_layer() {
  local d=$1 libc
  libc=$(pkg_root libc6)
  mkdir -p "$d/etc" "$d/tmp" "$d/lib64" "$d/lib/x86_64-linux-gnu"
  chmod 1777 "$d/tmp"
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' >"$d/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$d/etc/group"
  cp "$libc/lib/x86_64-linux-gnu/libc.so.6" "$d/lib/x86_64-linux-gnu/"
  cp -L "$libc/lib64/ld-linux-x86-64.so.2" "$d/lib64/" 2>/dev/null ||
    cp "$libc/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" "$d/lib64/"
  chmod 0755 "$d/lib64/ld-linux-x86-64.so.2" "$d/lib/x86_64-linux-gnu/libc.so.6"
}
