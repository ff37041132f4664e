#!/bin/bash
# Builds, with no registry at all, every container image the Kubernetes 1.20 [Conformance]
# tests run, into one OCI image layout, and prints its folder. Usage: test-images.sh CACHE-DIR
#
# The e2e run pushes the layout into a local registry (skopeo copy oci:FOLDER:REF ...) and
# points e2e.test at it with KUBE_TEST_REPO_LIST; refs.txt in the folder names every image
# by its path under that registry (e2e-test-images/agnhost:2.21, library/busybox:1.29, ...).
# docs/conformance-images.md says which test needs which image, and what each is made of.
#
# Made from the same Debian `kubernetes` source package as the components (the Go test
# images: agnhost, sample-apiserver, nonewprivs; the pod sandbox from the components'
# recipe) and from Debian packages (busybox, dig, curl, nc, iproute2, bash, nginx, Apache,
# etcd). A Debian program comes with exactly the shared libraries it loads (read from its
# ELF headers), not with its package's dependency closure, so the images stay small; the
# layers several images have in common (the C library base, busybox, the DNS tools) are
# the same folders, so the layout stores each once.
#
# Cached: CACHE-DIR/kubernetes/test-images/KEY, KEY the sha256 of the source package's .dsc,
# this recipe and its layers.sh, images/lib/common.sh and mkimage.py, and the components'
# source, go-env.sh, compile.sh and patches; the same inputs print the same folder at once. The layout is written in a
# scratch folder beside it and moved into place complete (marker .complete). The Debian
# packages are not in the key (as for images/etcd and images/busybox): the host's apt
# package lists decide their versions.
set -euo pipefail
cache=${1:?usage: test-images.sh CACHE-DIR}
here=$(cd "$(dirname "$0")" && pwd)
lib=$(cd "$here/../lib" && pwd)
kube=$(cd "$here/../kubernetes" && pwd)
# shellcheck source=../kubernetes/source
. "$kube/source"
# shellcheck source=../kubernetes/go-env.sh
. "$kube/go-env.sh"
t0=$SECONDS
log() { echo "test-images: [$((SECONDS - t0)) s] $*" >&2; }
die() {
  echo "test-images: $*" >&2
  exit 1
}
# The layout is for the machine that runs the e2e suite: the build host's architecture
# (the Go builds, the pod sandbox and the Debian packages all follow it).
unset SPROUT_IMAGE_ARCH SPROUT_ARCH
arch=$(dpkg --print-architecture)
case $arch in
  amd64) triplet=x86_64-linux-gnu ;;
  arm64) triplet=aarch64-linux-gnu ;;
  *) die "no test images for architecture '$arch'; architectures: amd64, arm64" ;;
esac
for tool in go apt-get dpkg-deb dpkg-source patch readelf python3; do
  command -v "$tool" >/dev/null ||
    die "'$tool' is missing; scripts/install-deps installs it (golang-go, dpkg-dev, patch, binutils, python3)"
done
mkdir -p "$cache/kubernetes"
cache=$(cd "$cache" && pwd)
work=""
trap 'rm -rf ${work:+"$work"}' EXIT

# 1. The components (the pause binary is one of them), and with them the source package;
#    both are a cache hit once the cluster's images were built.
bin=$(bash "$kube/compile.sh" "$cache") || die "images/kubernetes/compile.sh $cache failed (its log is above)"
dsc=$(kube_dsc "$cache") || exit 1
out="$cache/kubernetes/test-images/$(kube_key "$dsc" "$here/test-images.sh" "$here/layers.sh" "$lib/common.sh" \
  "$lib/mkimage.py" "$kube/source" "$kube/go-env.sh" "$kube/compile.sh" "$kube"/patches/*.patch)"
mkdir -p "$cache/kubernetes/test-images"
# One build at a time: CI's single-node boot asks for the layout while the suite of the
# test images may be building it; the second waits, then finds it made.
exec 9>"$cache/kubernetes/test-images/.lock"
flock 9
kube_cached "test-images: [$((SECONDS - t0)) s]" "$out"
work=$(mktemp -d "$cache/kubernetes/test-images/.work.XXXXXX")
umask 022
# shellcheck source=../lib/common.sh
. "$lib/common.sh"

# 2. The Go test images, compiled from the tree as the components are (GOPATH mode with the
#    package's vendor/ tree, CGO off, -trimpath, no build ID, the release's version stamps).
log "unpacking $(basename "$dsc")"
kube_unpack "$work" "$dsc" || exit 1
kube_patch "$work/tree" || exit 1
mkdir -p "$work/go"
kube_go_env "$work" "$arch" "$cache"
ldflags=$(kube_ldflags)
tree="$GOPATH/src/k8s.io/kubernetes"
# agnhost: the tests' multi-tool (netexec, webhook, porter, test-webserver, ...).
# sample-apiserver: the aggregator test's API server, from the tree's staging copy (upstream's
#   1.17 image is the same program at v0.17.0).
# nnp (nonewprivs): prints its effective uid; the allowPrivilegeEscalation=false test.
for target in agnhost:./test/images/agnhost sample-apiserver:./vendor/k8s.io/sample-apiserver \
  nnp:./test/images/nonewprivs; do
  start=$SECONDS
  log "compiling ${target%%:*} ($(go version | cut -d' ' -f3))"
  (cd "$tree" && go build -trimpath -ldflags "$ldflags" -o "$work/go/${target%%:*}" "${target#*:}") >&2 ||
    die "compiling ${target#*:} failed (go build, above)"
  log "compiled ${target%%:*} in $((SECONDS - start)) s"
done

# 3. The Debian packages with their dependencies, resolved and downloaded by apt from the
#    host's own package lists (as pkg_root in images/lib/common.sh does: no mirror is named
#    here) with an empty dpkg status, so nothing on the host is taken for installed, and
#    extracted into one folder (dpkg-deb -x: no maintainer script runs). Only the files the
#    images name, and the libraries those load, are taken from it. The .debs are kept in
#    CACHE-DIR/kubernetes/test-images/debs (the last build's set), so a rebuild after a
#    change of this recipe fetches nothing.
packages=(busybox libc-bin bind9-dnsutils curl netcat-openbsd iproute2 bash nginx nginx-common apache2-bin
  media-types)
debs="$cache/kubernetes/test-images/debs"
mkdir -p "$debs/partial" "$work/apt"
touch "$work/apt/status"
apt_opts=(-q -o "Dir::State::status=$work/apt/status" -o "Dir::State::extended_states=$work/apt/extended_states"
  -o "Dir::Cache::archives=$debs" -o Debug::NoLocking=1 -o APT::Install-Recommends=false -o APT::Sandbox::User=root
  -o "APT::Architecture=$arch")
start=$SECONDS
log "fetching Debian packages: ${packages[*]} and their dependencies (apt-get, the host's package lists)"
# The files apt will fetch, from its plan: "Inst NAME (VERSION ... [ARCH])" is NAME_VERSION_ARCH.deb
# (an epoch's colon written %3a).
if ! files=$(apt-get "${apt_opts[@]}" -s install "${packages[@]}" 2>"$work/apt.log" |
  sed -n 's/^Inst \([^ ]*\) (\([^ ]*\) .*\[\([a-z0-9]*\)\]).*/\1_\2_\3.deb/p' | sed 's/:/%3a/g') ||
  [ -z "$files" ]; then
  cat "$work/apt.log" >&2
  die "apt cannot resolve ${packages[*]} (above); is the host's apt (apt-get update) set up for Debian bookworm?"
fi
apt-get "${apt_opts[@]}" -y install --download-only "${packages[@]}" >"$work/apt.log" 2>&1 || {
  tail -n 20 "$work/apt.log" >&2
  die "apt-get could not download the packages (above); run apt-get update if the lists are stale"
}
deb="$work/deb"
mkdir -p "$deb"
for f in $files; do
  [ -f "$debs/$f" ] || die "apt-get left no $debs/$f; run apt-get update and build again"
  dpkg-deb -x "$debs/$f" "$deb" || die "dpkg-deb -x $debs/$f failed"
done
# The cache keeps this build's set only.
for f in "$debs"/*.deb; do
  grep -qxF "$(basename "$f")" <<<"$files" || rm -f "$f"
done
log "fetched and extracted $(wc -w <<<"$files") packages in $((SECONDS - start)) s"
# The C library every layer uses is the one base_layer (images/lib/common.sh) puts into the
# base layer: libc6 and libc-bin as pkg_root finds them (the host's, when installed), laid
# over the extracted ones, so libm or getent never come from another build than libc.so.6.
overlay_pkg() {
  local pkg=$1 src f
  src=$(pkg_root "$pkg")
  if [ "$src" != / ]; then  # downloaded and extracted by pkg_root
    cp -a "$src/." "$deb/"
    return
  fi
  # Files and links only: the host's /lib may be a link (merged /usr), and tar would copy it
  # as one over the extracted /lib folder.
  dpkg -L "$pkg" | while read -r f; do
    if [ ! -d "$f" ] && { [ -L "$f" ] || [ -f "$f" ]; }; then echo "${f#/}"; fi
  done >"$work/$pkg.files"
  tar -C / --no-recursion -cf - -T "$work/$pkg.files" | tar -C "$deb" --overwrite -xf - ||
    die "copying the host's $pkg files into $deb failed"
}
overlay_pkg libc6
overlay_pkg libc-bin

# The helpers that copy programs with the libraries they load into layer folders.
# shellcheck source=layers.sh
. "$here/layers.sh"

# 4. The layers.
log "assembling the layers"
layers="$work/layers"
mkdir -p "$layers"
L_base="$layers/base" L_busybox="$layers/busybox" L_dns="$layers/dns" L_net="$layers/net"
# The C library, users and /tmp: base_layer, the base of every sprout image (the etcd,
# busybox and component images share it, and so do these).
base_layer "$L_base"
# busybox: every applet as a /bin link, as in the busybox image (upstream's busybox:1.29 has
# all of them in /bin); the shell, file, text and network tools of all the images below.
# Debian's `busybox`, not `busybox-static`: the static one is built as a rescue shell that
# runs its own applet for a command name even when PATH has the real program first (with
# /proc mounted, as in every container), so agnhost's `sh -c "nc ..."` would get busybox's
# nc, and httpd-foreground's `exec httpd` busybox's httpd. This one looks in PATH.
# libgcc_s.so.1 too: glibc loads it (dlopen, so no program names it) to unwind a thread
# that ends with pthread_exit or is cancelled, and aborts without it (Apache's workers).
below=("$L_base")
put_programs "$L_busybox" /bin/busybox "/lib/$triplet/libgcc_s.so.1"
applets=$("$deb/bin/busybox" --list) || die "$deb/bin/busybox does not run on this host"
mkdir -p "$L_busybox/usr/bin" "$L_busybox/etc"
for a in $applets; do
  [ "$a" = busybox ] || ln -s busybox "$L_busybox/bin/$a"
done
ln -s /bin/env "$L_busybox/usr/bin/env" # for #!/usr/bin/env scripts
# /etc/hosts first: without nsswitch.conf glibc asks DNS first and stops at its "no such
# name" (the DNS tests read the pod's own /etc/hosts entries with getent).
printf 'passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n' \
  >"$L_busybox/etc/nsswitch.conf"
# dns: dig, nslookup and host (bind9-dnsutils, as in upstream's jessie-dnsutils and the
# alpine bind-tools of agnhost), and getent. The DNS tests' probe loops run them in both.
below=("$L_base" "$L_busybox")
put_programs "$L_dns" /usr/bin/dig /usr/bin/nslookup /usr/bin/host /usr/bin/getent
shadow "$L_dns"
# net: agnhost's other tools (upstream adds curl, netcat-openbsd, iproute2 and bash to alpine).
below=("$L_base" "$L_busybox" "$L_dns")
put_programs "$L_net" /usr/bin/curl /bin/nc.openbsd /bin/ip /bin/ss /bin/bash
for d in /etc/iproute2 /usr/share/iproute2; do
  if [ -e "$deb$d" ]; then put "$deb" "$L_net" "$d"; fi
done
ln -s nc.openbsd "$L_net/bin/nc" # the link Debian's postinst makes with update-alternatives
shadow "$L_net"

# agnhost, laid out as test/images/agnhost/Dockerfile: /agnhost, /agnhost-2 (the entrypoint
# tests run it by that name), /uploads (netexec) and porter's certificate at /.
src="$work/tree/test/images"
L_agnhost="$layers/agnhost"
mkdir -p "$L_agnhost/uploads"
install -m 0755 "$work/go/agnhost" "$L_agnhost/agnhost"
ln -s agnhost "$L_agnhost/agnhost-2"
install -m 0644 "$src/agnhost/porter/localhost.crt" "$src/agnhost/porter/localhost.key" "$L_agnhost/"
# kitten and nautilus: agnhost serving a picture and a data.json (test-webserver serves /).
for pic in kitten nautilus; do
  mkdir -p "$layers/$pic"
  install -m 0644 "$src/$pic/html/$pic.jpg" "$src/$pic/html/data.json" "$layers/$pic/"
done
L_sample="$layers/sample-apiserver"
mkdir -p "$L_sample"
install -m 0755 "$work/go/sample-apiserver" "$L_sample/sample-apiserver"
L_nnp="$layers/nonewprivs"
mkdir -p "$L_nnp/usr/local/bin"
install -m 4755 "$work/go/nnp" "$L_nnp/usr/local/bin/nnp" # set-user-ID root, as upstream's
# pause: the same layer as images/kubernetes/build.sh makes, so the image is the same too.
L_pause="$layers/pause"
mkdir -p "$L_pause"
cp "$bin/pause" "$L_pause/pause"
chmod -R a+rX,go-w "$L_pause"
# etcd: Debian's etcd-server at /usr/local/bin/etcd, the same layer as images/etcd/build.sh
# makes; etcdctl (etcd-client) in a layer of its own, as upstream's image has it.
L_etcd="$layers/etcd" L_etcdctl="$layers/etcdctl"
pkg_program etcd-server /usr/bin/etcd "$L_etcd" /usr/local/bin/etcd
pkg_program etcd-client /usr/bin/etcdctl "$L_etcdctl" /usr/local/bin/etcdctl

# nginx: Debian's nginx serving /usr/share/nginx/html on port 80 in the foreground, with the
# paths and logs of upstream's image (logs to the container's stdout and stderr).
L_nginx="$layers/nginx"
below=("$L_base" "$L_busybox")
put_programs "$L_nginx" /usr/sbin/nginx
put "$deb" "$L_nginx" /etc/nginx/mime.types
mkdir -p "$L_nginx/etc/nginx/conf.d" "$L_nginx/usr/share/nginx/html" "$L_nginx/var/log/nginx" \
  "$L_nginx/var/lib/nginx" "$L_nginx/var/cache/nginx" "$L_nginx/run"
cat >"$L_nginx/etc/nginx/nginx.conf" <<'EOF'
# sprout's stand-in for the nginx image of the Kubernetes e2e tests (dockerLibraryRegistry/nginx).
user nobody nogroup;
worker_processes 1;
error_log /var/log/nginx/error.log warn;
pid /run/nginx.pid;
events {
    worker_connections 1024;
}
http {
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    access_log /var/log/nginx/access.log;
    sendfile on;
    keepalive_timeout 65;
    include /etc/nginx/conf.d/*.conf;
}
EOF
cat >"$L_nginx/etc/nginx/conf.d/default.conf" <<'EOF'
server {
    listen 80;
    server_name localhost;
    location / {
        root /usr/share/nginx/html;
        index index.html index.htm;
    }
}
EOF
cat >"$L_nginx/usr/share/nginx/html/index.html" <<'EOF'
<!DOCTYPE html>
<html><head><title>Welcome to nginx!</title></head>
<body><h1>Welcome to nginx!</h1></body></html>
EOF
ln -s /dev/stdout "$L_nginx/var/log/nginx/access.log"
ln -s /dev/stderr "$L_nginx/var/log/nginx/error.log"

# httpd: Debian's Apache (apache2-bin) laid out as upstream's httpd image: server root
# /usr/local/apache2, htdocs/index.html (the StatefulSet tests move it away and back to
# fail and restore a readiness probe), `httpd` and `httpd-foreground` on PATH.
L_httpd="$layers/httpd"
# The modules the configuration loads: the event MPM, `Require`, DirectoryIndex, MIME types.
mods=(mpm_event authz_core dir mime)
modfiles=()
for m in "${mods[@]}"; do modfiles+=("/usr/lib/apache2/modules/mod_$m.so"); done
put_programs "$L_httpd" /usr/sbin/apache2 "${modfiles[@]}"
put "$deb" "$L_httpd" /etc/mime.types
ap="$L_httpd/usr/local/apache2"
mkdir -p "$ap/conf" "$ap/htdocs" "$ap/logs" "$L_httpd/usr/local/bin"
{
  echo '# sprout'"'"'s stand-in for the httpd image of the Kubernetes e2e tests (dockerLibraryRegistry/httpd).'
  echo 'ServerRoot "/usr/local/apache2"'
  echo 'Listen 80'
  for m in "${mods[@]}"; do echo "LoadModule ${m}_module /usr/lib/apache2/modules/mod_$m.so"; done
  cat <<'EOF'
User nobody
Group nogroup
ServerName localhost
ServerAdmin you@example.com
PidFile logs/httpd.pid
DefaultRuntimeDir logs
<Directory />
    AllowOverride none
    Require all denied
</Directory>
DocumentRoot "/usr/local/apache2/htdocs"
<Directory "/usr/local/apache2/htdocs">
    Options FollowSymLinks
    AllowOverride None
    Require all granted
</Directory>
DirectoryIndex index.html
ErrorLog /proc/self/fd/2
LogLevel warn
LogFormat "%h %l %u %t \"%r\" %>s %b" common
CustomLog /proc/self/fd/1 common
TypesConfig /etc/mime.types
EOF
} >"$ap/conf/httpd.conf"
echo '<html><body><h1>It works!</h1></body></html>' >"$ap/htdocs/index.html"
cat >"$L_httpd/usr/local/bin/httpd" <<'EOF'
#!/bin/sh
# Debian's apache2 with the image's server root and configuration (upstream's is httpd).
exec /usr/sbin/apache2 -d /usr/local/apache2 -f conf/httpd.conf "$@"
EOF
cat >"$L_httpd/usr/local/bin/httpd-foreground" <<'EOF'
#!/bin/sh
set -e
# As upstream's entrypoint: a pid file left by a killed container stops Apache's start.
rm -f /usr/local/apache2/logs/httpd.pid
exec httpd -DFOREGROUND "$@"
EOF
chmod 0755 "$L_httpd/usr/local/bin/httpd" "$L_httpd/usr/local/bin/httpd-foreground"

# 5. The images. Each names the upstream image it stands in for in a label; that also makes
#    the two nginx and the two httpd tags distinct images (the deployment tests roll from
#    one to the other and wait for the new one).
layout="$work/out"
mkdir -p "$layout"
path_env=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
: >"$work/refs.txt"
image() { # image REF UPSTREAM ENTRYPOINT_JSON [--option VALUE]... -- LAYER...
  local ref=$1 upstream=$2 entry=$3 opts=()
  shift 3
  while [ "$1" != -- ]; do
    opts+=("$1" "$2")
    shift 2
  done
  shift
  [ "$upstream" = - ] || opts+=(--env "$path_env" --label "io.sprout.conformance.stands-in-for=$upstream")
  log "image $ref"
  python3 "$lib/mkimage.py" "${opts[@]}" "$layout" "$ref" "$entry" "$@" >/dev/null ||
    die "mkimage.py failed for $ref"
  echo "$ref" >>"$work/refs.txt"
}
agnhost_layers=("$L_base" "$L_busybox" "$L_dns" "$L_net" "$L_agnhost")
# pause is byte for byte images/kubernetes/build.sh's pause image (no options, no label).
image k8s/pause:3.2 - '["/pause"]' -- "$L_base" "$L_pause"
image library/busybox:1.29 dockerLibraryRegistry/busybox:1.29 null --cmd '["sh"]' -- "$L_base" "$L_busybox"
image e2e/jessie-dnsutils:1.0 e2eRegistry/jessie-dnsutils:1.0 null --cmd '["sh"]' -- \
  "$L_base" "$L_busybox" "$L_dns"
image e2e-test-images/agnhost:2.21 promoterE2eRegistry/agnhost:2.21 '["/agnhost"]' --cmd '["pause"]' -- \
  "${agnhost_layers[@]}"
for pic in kitten nautilus; do
  image "e2e/$pic:1.0" "e2eRegistry/$pic:1.0" '["/agnhost"]' --cmd '["test-webserver"]' -- \
    "${agnhost_layers[@]}" "$layers/$pic"
done
for tag in 1.14-alpine 1.15-alpine; do
  image "library/nginx:$tag" "dockerLibraryRegistry/nginx:$tag" null --cmd '["nginx","-g","daemon off;"]' -- \
    "$L_base" "$L_busybox" "$L_nginx"
done
for tag in 2.4.38-alpine 2.4.39-alpine; do
  image "library/httpd:$tag" "dockerLibraryRegistry/httpd:$tag" null --cmd '["httpd-foreground"]' \
    --workdir /usr/local/apache2 -- "$L_base" "$L_busybox" "$L_httpd"
done
image e2e/sample-apiserver:1.17 e2eRegistry/sample-apiserver:1.17 '["/sample-apiserver"]' -- \
  "$L_base" "$L_busybox" "$L_sample"
image k8s/etcd:3.4.13-0 gcRegistry/etcd:3.4.13-0 null --cmd '["/usr/local/bin/etcd"]' -- \
  "$L_base" "$L_busybox" "$L_etcd" "$L_etcdctl"
image e2e/nonewprivs:1.0 e2eRegistry/nonewprivs:1.0 null --cmd '["nnp"]' -- \
  "$L_base" "$L_busybox" "$L_nnp"

mv "$work/refs.txt" "$layout/refs.txt"
touch "$layout/.complete"
rm -rf "$out" && mv "$layout" "$out"
log "built $(wc -l <"$out/refs.txt") images, $(du -sh "$out" | cut -f1), into $out"
echo "$out"
