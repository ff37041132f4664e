#!/bin/bash
# The conformance test images (images/conformance/test-images.sh, docs/conformance-images.md):
# the recipe's OCI layout holds every image the 1.20 [Conformance] tests run, under the
# refs e2e.test asks its registry for; skopeo reads each; and each image's own programs
# run from its unpacked layers (chroot, in a mount, UTS and network namespace of their
# own, as a container would): agnhost's tools (dig, curl, OpenBSD nc, iproute2, bash) and
# servers, the DNS tests' probe commands, nginx and Apache serving port 80, etcd with the
# aggregator test's command line, the sample API server, nonewprivs with and without
# no_new_privs, pause. Shared layers are stored once; pause is images/kubernetes's image;
# a second run of the recipe is a cache hit.
# The commands run inside the images are single-quoted on purpose:
# shellcheck disable=SC2016
set -u
name=conformance_images_test
# shellcheck source=lib/checks.sh
. "$(dirname "$0")/lib/checks.sh"
if [ "$(id -u)" -ne 0 ]; then
  echo "$name: skipped: needs root (the images' programs run under chroot in namespaces)"
  exit 0
fi
tests_require "golang-go, python3, skopeo, binutils, util-linux and iproute2" go /usr/bin/python3 skopeo readelf \
  unshare setpriv ip
tests_cache
WORK=$(mktemp -d /tmp/sprt-cimg.XXXXXX)
finish() {
  rm -rf "$WORK"
  tests_end
}
trap finish EXIT
# check NAME ACTUAL REGEX: passes when ACTUAL matches REGEX (as qemu-tests/lib.sh's check).
check() {
  if [[ "$2" =~ $3 ]]; then ok "$1: $(head -n 1 <<<"$2")"; else bad "$1: got '$2', want /$3/"; fi
}

start=$SECONDS
L=$(bash "$SRC/images/conformance/test-images.sh" "$CACHE" 2>"$WORK/build.log") || {
  bad "the recipe failed:"
  tail -n 20 "$WORK/build.log"
  exit 1
}
ok "the recipe made $L in $((SECONDS - start)) s"
start=$SECONDS
again=$(bash "$SRC/images/conformance/test-images.sh" "$CACHE" 2>"$WORK/again.log")
if [ "$again" = "$L" ] && grep -q '^test-images: .*cached: ' "$WORK/again.log"; then
  ok "a second run is a cache hit ($((SECONDS - start)) s)"
else
  bad "a second run printed '$again' ($(tail -n 1 "$WORK/again.log"))"
fi

refs=(e2e-test-images/agnhost:2.21 library/busybox:1.29 e2e/jessie-dnsutils:1.0 library/nginx:1.14-alpine
  library/nginx:1.15-alpine library/httpd:2.4.38-alpine library/httpd:2.4.39-alpine e2e/kitten:1.0 e2e/nautilus:1.0
  e2e/sample-apiserver:1.17 k8s/etcd:3.4.13-0 k8s/pause:3.2 e2e/nonewprivs:1.0)
check "refs.txt names the ${#refs[@]} images" "$(sort "$L/refs.txt" | paste -sd' ')" \
  "^$(printf '%s\n' "${refs[@]}" | sort | paste -sd' ')$"
# image_info LAYOUT: one line an image: REF MANIFEST-DIGEST CONFIG-DIGEST SIZE LAYER-DIGEST...
/usr/bin/python3 - "$L" >"$WORK/images.txt" <<'EOF'
import json, os, sys
layout = sys.argv[1]
blob = lambda d: os.path.join(layout, "blobs", "sha256", d.split(":")[1])
for m in json.load(open(os.path.join(layout, "index.json")))["manifests"]:
    man = json.load(open(blob(m["digest"])))
    size = man["config"]["size"] + sum(l["size"] for l in man["layers"])
    print(m["annotations"]["org.opencontainers.image.ref.name"], m["digest"], man["config"]["digest"], size,
          *[l["digest"] for l in man["layers"]])
EOF
arch=$(dpkg --print-architecture)
for ref in "${refs[@]}"; do
  line=$(awk -v r="$ref" '$1 == r' "$WORK/images.txt")
  [ -n "$line" ] || {
    bad "$ref is not in the layout's index.json"
    continue
  }
  got=$(skopeo inspect --format '{{.Os}}/{{.Architecture}} {{len .Layers}} layers' "oci:$L:$ref" 2>&1)
  check "skopeo inspect oci:LAYOUT:$ref" "$got" "^linux/$arch [0-9]+ layers$"
done
# Shared layers are shared: the C library base in all 13, busybox in all but pause, the DNS
# tools in jessie-dnsutils and the four agnhost images (agnhost, kitten, nautilus).
layer_users() { awk '{for (i = 5; i <= NF; i++) print $i}' "$WORK/images.txt" | sort | uniq -c | sort -rn | awk '{print $1}' | paste -sd' '; }
check "layers shared between images (how many images use each)" "$(layer_users)" '^13 12 4 3 3 '
# The deployment tests roll from one tag to the other: two images, one set of layers.
for n in nginx httpd; do
  check "the two $n tags are distinct images with the same layers" \
    "$(awk -v n="$n" 'index($1, "library/" n ":") == 1 {print $2}' "$WORK/images.txt" | sort -u | wc -l) manifests, $(
      awk -v n="$n" 'index($1, "library/" n ":") == 1 {$1 = $2 = $3 = $4 = ""; print}' "$WORK/images.txt" | sort -u | wc -l
    ) layer list" '^2 manifests, 1 layer list$'
done
# pause is the component recipe's pause image, byte for byte (one blob set for both).
SPROUT_IMAGE_REF=k8s/pause:3.2 SPROUT_CACHE_DIR=$CACHE bash "$SRC/images/kubernetes/build.sh" "$WORK/kpause" \
  >"$WORK/kpause.out" 2>"$WORK/kpause.log"
check "k8s/pause:3.2 is images/kubernetes/build.sh's pause image" "$(awk '{print $2}' "$WORK/kpause.out")" \
  "^$(awk '$1 == "k8s/pause:3.2" {print $2}' "$WORK/images.txt")$"
SPROUT_IMAGE_REF=etcd bash "$SRC/images/etcd/build.sh" "$WORK/etcd" >/dev/null 2>&1
etcd_layer=$(/usr/bin/python3 -c 'import json, sys; L = sys.argv[1]; m = json.load(open(L + "/index.json"))["manifests"][0]
print(json.load(open(L + "/blobs/sha256/" + m["digest"][7:]))["layers"][1]["digest"])' "$WORK/etcd")
check "k8s/etcd:3.4.13-0's etcd layer is images/etcd's" "$(awk '$1 == "k8s/etcd:3.4.13-0" {print $7}' "$WORK/images.txt")" \
  "^$etcd_layer$"

# unpack REF DIR: the image's layers in order (a later layer's file replaces an earlier one,
# a link included, as in an overlay mount); prints its config's Env PATH.
unpack() {
  /usr/bin/python3 - "$L" "$1" "$2" <<'EOF'
import json, os, sys, tarfile
layout, ref, out = sys.argv[1:]
blob = lambda d: os.path.join(layout, "blobs", "sha256", d.split(":")[1])
for m in json.load(open(os.path.join(layout, "index.json")))["manifests"]:
    if m["annotations"]["org.opencontainers.image.ref.name"] == ref:
        man = json.load(open(blob(m["digest"])))
        for layer in man["layers"]:
            with tarfile.open(blob(layer["digest"])) as t:
                for member in t.getmembers():
                    p = os.path.join(out, member.name)
                    if os.path.lexists(p) and not (member.isdir() and os.path.isdir(p)):
                        os.unlink(p)
                    t.extract(member, out, numeric_owner=True)
        env = json.load(open(blob(man["config"]["digest"])))["config"]["Env"]
        print([e for e in env if e.startswith("PATH=")][0])
EOF
}
# run DIR [--nnp] [CHROOT-OPTION]... -- COMMAND...: COMMAND in DIR as a container would run
# it: its own mount, PID (what it starts ends with it), UTS (hostname pod-a) and network
# namespace (loopback up), /dev and /proc mounted, the image's PATH, and an /etc/hosts as
# the kubelet writes one; --nnp sets no_new_privs (allowPrivilegeEscalation: false).
run() {
  local d=$1 pre=() opts=()
  shift
  while [ "$1" != -- ]; do
    if [ "$1" = --nnp ]; then pre=(setpriv --no-new-privs); else opts+=("$1"); fi
    shift
  done
  shift
  mkdir -p "$d/dev" "$d/proc" "$d/etc"
  printf '127.0.0.1 localhost\n10.244.1.7 pod-a.sub.ns.svc.cluster.local pod-a\n' >"$d/etc/hosts"
  timeout 120 unshare --mount --uts --net --pid --fork sh -c \
    'd=$1; shift; ip link set lo up && hostname pod-a && mount --rbind /dev "$d/dev" && mount -t proc proc "$d/proc" &&
     cd "$d" && exec "$@"' _ "$d" "${pre[@]}" env -i "$(cat "$d.path")" "$CHROOT" "${opts[@]}" "$d" "$@" 2>&1
}
# The host's chroot by its path: the image's PATH (pause's has no sbin) finds it no more.
CHROOT=$(command -v chroot)
for ref in "${refs[@]}"; do
  d=$WORK/img/${ref//[\/:]/_}
  mkdir -p "$d"
  unpack "$ref" "$d" >"$d.path" || bad "unpacking $ref failed"
done
img() { echo "$WORK/img/${1//[\/:]/_}"; }
# wait_for URL...: a loop for sh -c: polls URL with the image's own wget, up to 30 s.
wait_for='for i in $(seq 150); do wget -qO /dev/null "$1" 2>/dev/null && break; sleep 0.2; done'

# busybox: a shell, and every applet as a /bin link.
d=$(img library/busybox:1.29)
check "busybox: sh -c 'echo ok'" "$(run "$d" -- sh -c 'echo ok')" '^ok$'
check "busybox: a /bin link for every applet" \
  "$(run "$d" -- sh -c 'n=0; for a in $(busybox --list); do [ -e /bin/$a ] || echo "no /bin/$a"; n=$((n+1)); done; echo "$n applets"')" \
  '^[0-9]{3} applets$'

# The DNS tests' probes (test/e2e/network/dns_common.go) in both images that run them.
probe='for i in `seq 1 2`; do check="$(getent hosts pod-a)" && test -n "$check" && echo OK-hosts;
  podARec=$(hostname -i | awk -F. '"'"'{print $1"-"$2"-"$3"-"$4".ns.pod.cluster.local"}'"'"'); echo $podARec; done
  hostname -s; dig -v 2>&1; nslookup -version'
for ref in e2e/jessie-dnsutils:1.0 e2e-test-images/agnhost:2.21; do
  out=$(run "$(img "$ref")" -- sh -c "$probe")
  check "$ref: getent reads /etc/hosts" "$(grep -c OK-hosts <<<"$out")" '^2$'
  check "$ref: hostname -i | awk (the pod A record)" "$(grep -m1 pod.cluster <<<"$out")" '^10-244-1-7\.ns\.pod\.cluster\.local$'
  check "$ref: hostname -s" "$(sed -n 5p <<<"$out")" '^pod-a$'
  check "$ref: dig -v" "$(grep DiG <<<"$out")" '^DiG 9\.'
  check "$ref: nslookup is BIND's" "$(grep '^nslookup' <<<"$out")" '^nslookup 9\.'
done

# agnhost: the multi-tool and the tools its image adds.
d=$(img e2e-test-images/agnhost:2.21)
check "agnhost: /agnhost --help lists its servers" \
  "$(run "$d" -- /agnhost --help | awk '/^  [a-z]/ {print $1}' | grep -cxE 'netexec|webhook|test-webserver|porter|pause')" '^5$'
check "agnhost: /agnhost-2 is agnhost" "$(run "$d" -- /agnhost-2 --version)" '^app version 2\.'
check "agnhost: curl --version" "$(run "$d" -- sh -c 'curl --version | head -n 1')" '^curl 7\.'
check "agnhost: nc is OpenBSD's (sh and /bin/nc)" "$(run "$d" -- sh -c 'nc -h 2>&1 | head -n 1; /bin/nc -h 2>&1 | head -n 1' | sort -u)" \
  '^OpenBSD netcat'
check "agnhost: ip and ss are iproute2's" "$(run "$d" -- sh -c 'ip -V; ss -V' | paste -sd' ')" \
  '^ip utility, iproute2-[0-9.]+.* ss utility, iproute2-'
check "agnhost: bash" "$(run "$d" -- bash -c 'echo "$BASH_VERSION"')" '^5\.'
check "agnhost: /uploads and porter's certificate" "$(run "$d" -- sh -c 'test -d /uploads && head -n 1 /localhost.crt')" \
  'BEGIN CERTIFICATE'
# netexec answers HTTP, and UDP "hostName" with the pod's name (as the Service tests ask it,
# with nc); test-webserver serves kitten's and nautilus's data.json.
check "agnhost: netexec over HTTP (curl) and UDP (nc)" "$(run "$d" -- sh -c "/agnhost netexec --http-port 8080 --udp-port 8081 >/dev/null 2>&1 &
  set -- http://127.0.0.1:8080/; $wait_for
  curl -s 'http://127.0.0.1:8080/echo?msg=hello'; echo; echo hostName | nc -u -w 1 127.0.0.1 8081; echo" | paste -sd' ')" \
  '^hello pod-a'
for pic in kitten nautilus; do
  check "$pic: test-webserver serves /data.json" "$(run "$(img "e2e/$pic:1.0")" -- sh -c "/agnhost test-webserver >/dev/null 2>&1 &
    set -- http://127.0.0.1/data.json; $wait_for; curl -s http://127.0.0.1/data.json; curl -s http://127.0.0.1/$pic.jpg | wc -c" |
    paste -sd' ')" "\"image\": \"$pic.jpg\" [}] [0-9]{4,}$"
done

# nginx and httpd serve port 80 in the foreground, with each image's own command.
for tag in 1.14-alpine 1.15-alpine; do
  d=$(img "library/nginx:$tag")
  check "nginx:$tag: nginx -t" "$(run "$d" -- nginx -t | tail -n 1)" 'test is successful'
  check "nginx:$tag: serves / on port 80" "$(run "$d" -- sh -c "nginx -g 'daemon off;' >/dev/null 2>&1 &
    set -- http://127.0.0.1/; $wait_for; wget -qO- http://127.0.0.1/ | grep -o '<h1>.*</h1>'")" '^<h1>Welcome to nginx!</h1>$'
done
for tag in 2.4.38-alpine 2.4.39-alpine; do
  d=$(img "library/httpd:$tag")
  check "httpd:$tag: httpd -t" "$(run "$d" -- httpd -t)" '^Syntax OK$'
  check "httpd:$tag: httpd -v" "$(run "$d" -- httpd -v | head -n 1)" '^Server version: Apache/2\.4\.'
  # The StatefulSet tests fail a pod's readiness probe by moving index.html away, and restore it.
  check "httpd:$tag: httpd-foreground serves htdocs/index.html, 404 when moved away" "$(run "$d" -- sh -c "httpd-foreground >/dev/null 2>&1 &
    set -- http://127.0.0.1/index.html; $wait_for; wget -qO- http://127.0.0.1/index.html
    mv /usr/local/apache2/htdocs/index.html /tmp/ && { wget -qO- http://127.0.0.1/index.html 2>&1 || :; }
    mv /tmp/index.html /usr/local/apache2/htdocs/ && wget -qO- http://127.0.0.1/index.html" | paste -sd' ')" \
    '^<html><body><h1>It works!</h1></body></html> .*404 Not Found <html><body><h1>It works!</h1></body></html>$'
done

# etcd with the aggregator test's command line (test/e2e/apimachinery/aggregator.go).
d=$(img k8s/etcd:3.4.13-0)
check "etcd: etcd --version" "$(run "$d" -- etcd --version | head -n 1)" '^etcd Version: 3\.4\.'
check "etcd: serves the aggregator test's command line (etcdctl put, get)" "$(run "$d" -- sh -c 'cd /tmp &&
  /usr/local/bin/etcd --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 >/dev/null 2>&1 &
  for i in $(seq 150); do etcdctl --endpoints http://127.0.0.1:2379 put k v >/dev/null 2>&1 && break; sleep 0.2; done
  etcdctl --endpoints http://127.0.0.1:2379 get k --print-value-only')" '^v$'
check "sample-apiserver: --help names the aggregator test's flags" \
  "$(run "$(img e2e/sample-apiserver:1.17)" -- /sample-apiserver --help | grep -oE -- '--(etcd-servers|tls-cert-file|tls-private-key-file|audit-log-path|audit-log-maxage|audit-log-maxbackup) ' | sort -u | wc -l)" '^6$'
# nonewprivs: set-user-ID root, so uid 1000 runs it as 0 unless no_new_privs is set (the
# allowPrivilegeEscalation=false test expects 1000).
d=$(img e2e/nonewprivs:1.0)
check "nonewprivs: nnp as uid 1000" "$(run "$d" --userspec=1000:1000 -- nnp)" '^Effective uid: 0$'
check "nonewprivs: nnp as uid 1000 with no_new_privs" "$(run "$d" --nnp --userspec=1000:1000 -- nnp)" \
  '^Effective uid: 1000$'
check "pause: /pause -v" "$(run "$(img k8s/pause:3.2)" -- /pause -v)" '^pause\.c v1\.20\.'

# Sizes, for the record (compressed, as the registry stores them).
echo "     layout: $(du -sh "$L" | cut -f1) on disk, $(find "$L/blobs" -type f | wc -l) blobs"
awk '{printf "     %-30s %6.1f MB\n", $1, $4 / 1e6}' "$WORK/images.txt"
