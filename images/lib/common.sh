# Shared by the container image recipes (images/etcd, images/busybox, images/kubernetes;
# images/conformance/test-images.sh too). sprout puts this folder into every recipe's
# cache key (docs/images.md), so a change here rebuilds the images made with it.
# Package files come from the host's installed Debian packages, or, when a package is
# not installed, from `apt-get download` (the host's configured Debian archive) and
# `dpkg-deb -x`; nothing else is fetched. SPROUT_IMAGE_ARCH (sprout sets it from the
# image's platform) picks another architecture: its packages are always downloaded,
# with a private apt state of that architecture (docs/arm64.md).

image_arch=${SPROUT_IMAGE_ARCH:-$(dpkg --print-architecture)}

# apt_get ARGS... runs apt-get for image_arch. For a foreign architecture it keeps its
# own package lists (under the sprout cache, else the work folder) from the host's
# sources, so the host's dpkg never gets a foreign architecture added.
apt_get() {
  if [ "$image_arch" = "$(dpkg --print-architecture)" ]; then
    apt-get "$@"
    return
  fi
  local state=${SPROUT_CACHE_DIR:-$work}/apt-$image_arch
  mkdir -p "$state/lists/partial" "$state/cache/archives/partial"
  touch "$state/status"
  local opts=(-o "APT::Architecture=$image_arch" -o "APT::Architectures=$image_arch"
    -o "Dir::State=$state" -o "Dir::State::Lists=$state/lists" -o "Dir::State::status=$state/status"
    -o "Dir::Cache=$state/cache" -o "APT::Sandbox::User=root")
  if [ ! -f "$state/updated" ]; then
    apt-get "${opts[@]}" update >&2
    touch "$state/updated"
  fi
  apt-get "${opts[@]}" "$@"
}

# pkg_root PACKAGE prints a directory holding PACKAGE's files.
pkg_root() {
  local pkg=$1
  if [ "$image_arch" = "$(dpkg --print-architecture)" ] &&
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    echo /
    return
  fi
  local dir="$work/pkg-$pkg"
  mkdir -p "$dir"
  (cd "$work" && apt_get download "$pkg" >&2)
  dpkg-deb -x "$work"/"${pkg}"_*.deb "$dir"
  echo "$dir"
}

# pkg_program PACKAGE PATH LAYER [DEST]: copies the program PATH of PACKAGE's files into
# the layer folder LAYER, at DEST (default: the same path), mode 0755.
pkg_program() {
  local root dest=${4:-$2}
  root=$(pkg_root "$1") || return 1
  mkdir -p "$3$(dirname "$dest")"
  cp "$root$2" "$3$dest"
  chmod 0755 "$3$dest"
}

# base_layer DIR fills DIR with the layer both images share: users, /tmp and the C
# library from libc6 (etcd links against it; busybox is static but gets it too, so
# the layer is identical and stored once).
base_layer() {
  local d=$1 libc
  libc=$(pkg_root libc6)
  if [ "$image_arch" = arm64 ]; then
    mkdir -p "$d/etc" "$d/tmp" "$d/lib/aarch64-linux-gnu"
  else
    mkdir -p "$d/etc" "$d/tmp" "$d/lib64" "$d/lib/x86_64-linux-gnu"
  fi
  chmod 1777 "$d/tmp"
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' >"$d/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$d/etc/group"
  if [ "$image_arch" = arm64 ]; then
    # The dynamic loader's path in arm64 programs is /lib/ld-linux-aarch64.so.1.
    cp "$libc/lib/aarch64-linux-gnu/libc.so.6" "$libc/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1" \
      "$d/lib/aarch64-linux-gnu/"
    ln -s aarch64-linux-gnu/ld-linux-aarch64.so.1 "$d/lib/ld-linux-aarch64.so.1"
    chmod 0755 "$d/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1" "$d/lib/aarch64-linux-gnu/libc.so.6"
    return
  fi
  cp "$libc/lib/x86_64-linux-gnu/libc.so.6" "$d/lib/x86_64-linux-gnu/"
  cp -L "$libc/lib64/ld-linux-x86-64.so.2" "$d/lib64/" 2>/dev/null ||
    cp "$libc/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" "$d/lib64/"
  chmod 0755 "$d/lib64/ld-linux-x86-64.so.2" "$d/lib/x86_64-linux-gnu/libc.so.6"
}

# recipe_start DEFAULT-REF LAYOUT-DIR: how every image recipe begins. Sets `out` (the OCI
# layout to write), `ref` (the image's name: $SPROUT_IMAGE_REF, which sprout sets, else
# DEFAULT-REF) and `work` (a scratch folder, removed when the recipe ends however it
# ends), and a umask that does not depend on the caller's, so the layers are the same.
recipe_start() {
  if [ -z "${2:-}" ]; then
    echo "usage: $0 LAYOUT-DIR: the folder to write the image into, as an OCI image layout" >&2
    exit 2
  fi
  out=$2
  ref=${SPROUT_IMAGE_REF:-$1}
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  umask 022
}
