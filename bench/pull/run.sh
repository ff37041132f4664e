#!/bin/bash
# bench/pull: `sprout pull` against `skopeo copy docker://… oci:…` for the same images
# from a local docker-registry (127.0.0.1, TLS from a CA made here, basic auth), cold
# cache each run, side by side. Prints the median times, the ratio (goal: sprout at
# least 1.5x faster) and the OCI layout size with and without layer deduplication.
# Usage: bench/pull/run.sh [RUNS]   (SPROUT=path/to/sprout, default build/sprout)
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
SPROUT=$(realpath "${SPROUT:-$src/build/sprout}")
runs=${1:-3}
work=$(mktemp -d /tmp/sprout-bench-pull.XXXXXX)
reg_pid=
cleanup() { [ -n "$reg_pid" ] && kill "$reg_pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
cd "$work"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj /CN=bench-ca 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=127.0.0.1 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\n' >san.ext
openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 2 -extfile san.ext 2>/dev/null
mkdir -p certs && cp ca.crt certs/
htpasswd -Bbn bench bench >htpasswd 2>/dev/null
cat >reg.yml <<YAML
version: 0.1
log: {level: error, accesslog: {disabled: true}}
storage: {filesystem: {rootdirectory: $work/data}}
http: {addr: 127.0.0.1:$port, tls: {certificate: $work/server.crt, key: $work/server.key}}
auth: {htpasswd: {realm: bench, path: $work/htpasswd}}
YAML
docker-registry serve reg.yml >reg.log 2>&1 &
reg_pid=$!
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done

images=(etcd busybox)
SPROUT_IMAGE_REF=etcd "$src/images/etcd/build.sh" "$work/src" >/dev/null
SPROUT_IMAGE_REF=busybox "$src/images/busybox/build.sh" "$work/src" >/dev/null
for i in "${images[@]}"; do
  skopeo copy -q --dest-cert-dir certs --dest-creds bench:bench "oci:$work/src:$i" "docker://127.0.0.1:$port/bench/$i:1"
done
printf '{"auths":{"127.0.0.1:%s":{"auth":"%s"}}}\n' "$port" "$(printf bench:bench | base64)" >auth.json
{ echo "name: bench"; echo "base: ."; echo "images:"
  for i in "${images[@]}"; do echo "  - {ref: 127.0.0.1:$port/bench/$i:1, credentials: auth.json}"; done; } >bench.yaml

now() { date +%s.%N; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
: >sprout.times; : >skopeo.times
for r in $(seq "$runs"); do
  rm -rf c-sprout c-skopeo && mkdir -p c-skopeo
  t0=$(now)
  "$SPROUT" pull bench.yaml --cache-dir "$work/c-sprout" --ca-bundle ca.crt >/dev/null
  t1=$(now)
  for i in "${images[@]}"; do
    skopeo copy -q --src-cert-dir certs --src-creds bench:bench "docker://127.0.0.1:$port/bench/$i:1" "oci:$work/c-skopeo/$i:1"
  done
  t2=$(now)
  echo "$t1 - $t0" | bc >>sprout.times
  echo "$t2 - $t1" | bc >>skopeo.times
  echo "run $r: sprout $(tail -1 sprout.times) s, skopeo $(tail -1 skopeo.times) s"
done
s=$(median <sprout.times); k=$(median <skopeo.times)
printf 'images: %s (%s runs, cold cache each)\n' "${images[*]}" "$runs"
printf 'median: sprout pull %.3f s, skopeo copy %.3f s\n' "$s" "$k"
printf 'ratio (skopeo / sprout): %.2fx\n' "$(echo "$k / $s" | bc -l)"

# One layout for all images (blobs shared) against one layout per image.
"$SPROUT" pull bench.yaml --cache-dir "$work/c-sprout" --offline --layout "$work/shared" >/dev/null
shared=$(du -sb "$work/shared" | cut -f1)
separate=$(du -sb "$work/c-skopeo" | cut -f1)
printf 'layout size: %s bytes with dedup (one layout), %s bytes without (one layout per image), saved %s%%\n' \
  "$shared" "$separate" "$(echo "scale=1; 100 * ($separate - $shared) / $separate" | bc)"
