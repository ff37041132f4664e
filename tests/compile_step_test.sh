#!/bin/bash
# The Kubernetes compile is a build step of its own, with progress: a profile whose
# kubelet comes from a recipe gets the step "compile Kubernetes (kubelet recipe)" second
# in its list, which shows the recipe's phases and the component it compiles with the
# time since the step began, and ends with a cache miss or hit; a failed recipe shows
# the tail of its log. The recipe here is a stand-in with images/kubernetes/compile.sh's
# way of talking (its lines, its cache folder), so nothing is compiled: the real one
# takes ten minutes.
set -uo pipefail
SPROUT=$(realpath "${SPROUT:?set SPROUT to the sprout binary}")
work=$(mktemp -d /tmp/sprout-compile-step.XXXXXX)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0
check() {  # check NAME ACTUAL EXPECTED-REGEX
  if [[ "$2" =~ $3 ]]; then echo "ok   $1"; passed=$((passed + 1));
  else echo "FAIL $1: got '$2', want /$3/"; failed=$((failed + 1)); fi
}

base="$work/fakebase"
mkdir -p "$base/boot" "$base/usr/lib/systemd/boot/efi" "$base/etc"
head -c 3000 /dev/urandom > "$base/boot/vmlinuz-6.1.0-99-amd64"
head -c 2001 /dev/urandom > "$base/boot/initrd.img-6.1.0-99-amd64"
head -c 500 /dev/urandom > "$base/usr/lib/systemd/boot/efi/systemd-bootx64.efi"
echo 'ID=debian' > "$base/etc/os-release"
mkdir -p "$work/p/kubernetes"
cat > "$work/p/kubernetes/host.sh" <<'EOF'
#!/bin/bash
# Talks as images/kubernetes/compile.sh does: phases on stderr, the folder on stdout.
set -eu
bin=$1/fake-kubernetes/bin
log() { echo "kubernetes: $*" >&2; }
if [ -f "$bin/.complete" ]; then log "cached: $bin"; echo "$bin"; exit 0; fi
log "unpacking kubernetes_1.20.5+really1.20.2-1.1+deb12u1.dsc"
echo "dpkg-source: info: applying CVE-2021-25743.patch" >&2
for c in kube-apiserver kubelet; do
  log "compiling $c (go1.19.8)"
  sleep 1.5
  if [ -n "${FAKE_COMPILE_FAILS:-}" ]; then
    echo "# k8s.io/kubernetes/cmd/$c" >&2
    echo "cmd/$c/app/server.go:42:2: undefined: fakeSymbol" >&2
    exit 2
  fi
  log "compiled $c in 1 s"
done
mkdir -p "$bin"
cp "$(type -P true)" "$bin/kubelet"
touch "$bin/.complete"
log "compiled into $bin"
echo "$bin"
EOF
cat > "$work/p/k.yaml" <<'YAML'
name: k
base: ../fakebase
disk: {espSize: 40MiB, stateSize: 16MiB}
podHost: kubelet
kubelet:
  recipe: kubernetes
YAML

# build: the build's progress (not a terminal: one line per phase) up to the step after
# the compile; the fake base has no pause image to build on, so it need not get further.
build() { (cd "$work/p" && "$SPROUT" build k.yaml -o "$work/out" --cache-dir "$work/cache" 2>&1); }

out=$(FAKE_COMPILE_FAILS=1 build)
echo "$out" | sed -n '1,/^\[3\//p' | sed 's/^/     | /'
check "the compile is step 2 of 11, after the profile" "$out" $'\n''\[2/11\] compile Kubernetes \(kubelet recipe\) \.\.\.'
check "it shows the component it compiles, with the time since the step began and the cache miss" "$out" \
  '\[2/11\] compile Kubernetes \(kubelet recipe\): 0:0[0-9] compiling kube-apiserver: cache miss'
check "a failure names the recipe, the phase and its log" "$out" \
  'the kubelet recipe .*/kubernetes/host\.sh failed \(exit 2\) while: compiling kube-apiserver \(go1\.19\.8\); the last lines of its log, .*compile-[0-9]+\.log:'
check "... and quotes the log's tail" "$out" '  \| cmd/kube-apiserver/app/server\.go:42:2: undefined: fakeSymbol'
check "... keeping the log" "$(ls "$work/cache/kubernetes"/compile-*.log 2>/dev/null | wc -l)" '^1$'
check "a failed compile is not done, and no later step runs" \
  "$(grep -c -e 'compile Kubernetes (kubelet recipe): done' -e '^\[3/11\]' <<<"$out")" '^0$'
rm -f "$work/cache/kubernetes"/compile-*.log

out=$(build)
echo "$out" | sed -n '1,/^\[3\//p' | sed 's/^/     | /'
check "a cold cache: each component as it is compiled, with the count so far" "$out" \
  '\[2/11\] compile Kubernetes \(kubelet recipe\): 0:0[0-9] compiling kubelet: cache miss, 1 compiled'
check "... and a cache miss at the end, with the folder" "$out" \
  '\[2/11\] compile Kubernetes \(kubelet recipe\): done in [0-9.]+ s, cache miss: 2 components compiled into .*/fake-kubernetes/bin'
check "... and each component's time" "$out" '  compiled: kube-apiserver 1 s, kubelet 1 s'
check "... then the next step" "$out" '\[3/11\] prepare base OS'
check "the log of a compile that worked is gone" "$(ls "$work/cache/kubernetes"/compile-*.log 2>/dev/null | wc -l)" '^0$'

out=$(build)
check "a warm cache: a cache hit, at once" "$out" \
  '\[2/11\] compile Kubernetes \(kubelet recipe\): done in 0\.[0-9] s, cache hit: .*/fake-kubernetes/bin'
check "... and no component compiled" "$(grep -c -e '  compiled: ' -e 'compiling' <<<"$out")" '^0$'

echo "compile_step_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
