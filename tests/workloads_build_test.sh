#!/bin/bash
# Workloads in the image, the build side (docs/workloads.md): a profile with a chart (a
# copy of profiles/charts/sprout-demo, with a values file and inline values) and a folder
# of plain manifests is built on a tiny fake base, and the test reads the root it made:
# /usr/lib/sprout/workloads/index.json (the digest over the object files, the order:
# CRDs, Namespaces, the rest), the object files (compact JSON, namespaces filled in,
# modes 0644 and 0755), `sprout inspect`'s list, and a second build that gives the same
# bytes. A profile without workloads gets no folder at all. Then the bad inputs, each
# with its message quoted: an image the profile does not preload, YAML that does not
# parse, a missing values file, an API that Kubernetes 1.36 does not serve, an object
# with no apiVersion, and a chart that does not render; and all of them at once, every
# one reported in one run. The chart is rendered by the helm that images/stack/compile.sh
# compiled (it skips when there is none: compiling takes minutes). Nothing leaves the
# machine: the image comes from an OCI layout written here. When the 1.36 stack is
# compiled, the baked objects are then applied, in their order, with kubectl's
# server-side apply (strict field validation) to a real kube-apiserver 1.36 and etcd on
# loopback: what the image carries is what that API accepts.
# Usage: tests/workloads_build_test.sh   (exit 0: passed or skipped; 1: failed)
set -uo pipefail
name=workloads_build_test
. "$(dirname "$0")/lib/checks.sh"
tests_require "squashfs-tools-ng, python3, fdisk" rdsquashfs tar2sqfs python3 sfdisk
SPROUT=$(realpath "${SPROUT:?set SPROUT to the sprout binary}")
SRC=$(readlink -f "${SPROUT_SOURCE_DIR:-$(dirname "$0")/..}")
# The builds run in the profile's folder: a sprout-firstboot given by a relative path
# is resolved here (ctest gives an absolute one; by default it is the one beside sprout).
[ -z "${SPROUT_FIRSTBOOT:-}" ] || export SPROUT_FIRSTBOOT=$(realpath "$SPROUT_FIRSTBOOT")
CACHE=${SPROUT_CACHE:-/var/cache/sprout}
# The helm that renders the charts: $SPROUT_HELM, else the newest one compiled in the cache.
helm=${SPROUT_HELM:-}
if [ -z "$helm" ]; then
  for d in $(ls -td "$CACHE"/stack/bin/helm/*/ 2>/dev/null); do
    [ -f "$d/.complete" ] && "$d/helm" version >/dev/null 2>&1 && { helm=${d%/}/helm; break; }
  done
fi
if [ -z "$helm" ]; then
  echo "$name: skipped: helm is not compiled in $CACHE/stack/bin/helm (bash images/stack/compile.sh $CACHE helm makes it, in about 5 minutes)"
  exit 0
fi
export SPROUT_HELM=$helm
work=$(mktemp -d /tmp/sprout-workloads.XXXXXX)
pids=()  # the apiserver and etcd of the apply part, newest first
. "$(dirname "$0")/lib/host-control-plane.sh"
cleanup() {
  # The apiserver first, then etcd; a process that does not stop in 10 s is killed.
  hcp_stop "${pids[@]}"
  wait 2>/dev/null
  rm -rf "$work"
  tests_end
}
trap cleanup EXIT
trap 'exit 1' INT TERM
check() {  # check NAME ACTUAL EXPECTED-REGEX
  if [[ "$2" =~ $3 ]]; then ok "$1"; else bad "$1: got '$2', want /$3/"; fi
}
quote() { sed 's/^/     | /'; }
echo "helm: $helm ($("$helm" version --template '{{.Version}}'))"

# --- a fake base, a busybox image in an OCI layout, the chart and the manifests
base="$work/fakebase"
mkdir -p "$base/boot" "$base/usr/lib/systemd/boot/efi" "$base/etc" "$work/layer/bin" "$work/p/manifests/more"
head -c 3000 /dev/urandom > "$base/boot/vmlinuz-6.1.0-99-amd64"
head -c 2001 /dev/urandom > "$base/boot/initrd.img-6.1.0-99-amd64"
head -c 500 /dev/urandom > "$base/usr/lib/systemd/boot/efi/systemd-bootx64.efi"
echo 'ID=debian' > "$base/etc/os-release"
echo 'not really busybox' > "$work/layer/bin/busybox"
python3 "$SRC/images/lib/mkimage.py" "$work/p/layout" localhost/sprout/busybox:1.35 '["/bin/busybox"]' "$work/layer" >/dev/null
cp -r "$SRC/profiles/charts/sprout-demo" "$work/p/charts-demo"
mkdir -p "$work/p/charts" && mv "$work/p/charts-demo" "$work/p/charts/sprout-demo"
printf 'replicas: 3\n' > "$work/p/demo-values.yaml"
cp "$SRC/profiles/workloads/hello-cronjob.yaml" "$work/p/manifests/hello.yaml"
# A stream with empty documents, an object with no namespace and a cluster-scoped one
# that names one (the API server would drop it, so the build does).
cat > "$work/p/manifests/more/reader.yaml" <<'YAML'
# comments only
---
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: greeting-reader, namespace: demo}
rules:
  - {apiGroups: [demo.example.com], resources: [greetings], verbs: [get, list, watch]}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: reader}
YAML
profile() {  # profile NAME [WORKLOAD LINES...]: a profile on the fake base with the busybox image
  local n=$1
  shift
  {
    printf 'name: %s\nbase: ../fakebase\ndisk: {espSize: 40MiB, stateSize: 16MiB}\n' "$n"
    printf 'images:\n  - {ref: localhost/sprout/busybox:1.35, source: "oci:layout"}\n'
    [ $# -eq 0 ] || printf 'workloads:\n'
    printf '%s\n' "$@"
  } > "$work/p/$n.yaml"
}
good=(
  "  - name: demo"
  "    chart: charts/sprout-demo"
  "    namespace: demo"
  "    values: [demo-values.yaml]"
  "    set: {message: built by the workloads test}"
  "  - name: extras"
  "    manifests: [manifests]"
  "    namespace: demo"
)
profile wl "${good[@]}"
build() {  # build PROFILE OUT: prints the build's output, status in $rc
  out=$(cd "$work/p" && "$SPROUT" build "$1.yaml" -o "$work/$2" --cache-dir "$work/cache" 2>&1)
  rc=$?
}
root_of() {  # root_of IMAGE: the root squashfs (partition 2) into $work/root.sqfs
  local start size
  read -r start size < <(sfdisk --json "$1" | python3 -c 'import json,sys; p=json.load(sys.stdin)["partitiontable"]["partitions"][1]; print(p["start"], p["size"])')
  dd if="$1" of="$work/root.sqfs" bs=512 skip="$start" count="$size" status=none
}

# --- the build
build wl out1
echo "$out" | sed -n '/render workloads \.\.\./,/render workloads: done/p' | quote
check "the build succeeds" "$rc" '^0$'
[ "$rc" -eq 0 ] || echo "$out" | tail -20 | quote
check "rendering is step 2 of 11, right after the profile" "$out" $'\n''\[2/11\] render workloads \.\.\.'
check "it says what it rendered, with helm's time" "$out" \
  "demo: chart charts/sprout-demo 0\.1\.0, release demo in demo: 5 objects, rendered in [0-9.]+ s"
check "... and the manifests" "$out" "extras: manifests manifests, namespace demo: 3 objects"
check "... the namespace it makes, since nothing else does" "$out" "namespace demo is made for workload demo"
check "... and the images the objects run" "$out" "images the objects run, all preloaded: localhost/sprout/busybox:1\.35"
check "the step's result" "$out" \
  "render workloads: done in [0-9.]+ s, 2 workloads, 9 objects, 1 image; charts rendered by helm v3\.[0-9.]+ in [0-9.]+ s"
render_s=$(sed -n 's/.*charts rendered by helm [^ ]* in \([0-9.]*\) s.*/\1/p' <<<"$out" | head -1)
step_s=$(sed -n 's/.*render workloads: done in \([0-9.]*\) s.*/\1/p' <<<"$out" | head -1)
echo "figures: helm template took $render_s s; the whole render step $step_s s"

root_of "$work/out1/wl.raw"
ls_dir=$(rdsquashfs -l /usr/lib/sprout/workloads "$work/root.sqfs" 2>&1)
ls_objects=$(rdsquashfs -l /usr/lib/sprout/workloads/objects "$work/root.sqfs" 2>&1)
echo "$ls_dir" | quote
check "index.json 0644 and objects/ 0755, owned by root" "$ls_dir" '^-rw-r--r-- 0/0 +[0-9.k]+ index\.json'$'\n''drwxr-xr-x 0/0 +[0-9]+ objects$'
check "nine object files, 0001 to 0009, each 0644" \
  "$(awk '{print $1, $NF}' <<<"$ls_objects" | tr '\n' ' ')" \
  '^(-rw-r--r-- 000[1-9]\.json ){9}$'
# The folder as files (rdsquashfs -c each: bookworm's -u cannot unpack a subfolder).
W="$work/root/workloads"
mkdir -p "$W/objects"
rdsquashfs -c /usr/lib/sprout/workloads/index.json "$work/root.sqfs" > "$W/index.json"
for f in $(awk '{print $NF}' <<<"$ls_objects"); do
  rdsquashfs -c "/usr/lib/sprout/workloads/objects/$f" "$work/root.sqfs" > "$W/objects/$f"
done
check "the digest is the sha256 of the object files, concatenated in order" \
  "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["digest"])' "$W/index.json")" \
  "^sha256:$(cat "$W"/objects/*.json | sha256sum | cut -c1-64)\$"
summary=$(python3 - "$W/index.json" <<'PY'
import json, sys
i = json.load(open(sys.argv[1]))
print("version", i["version"])
for w in i["workloads"]:
    print(w["name"], w["type"], w["source"], w["release"] or "-", w["namespace"], w["chartVersion"] or "-")
    for o in w["objects"]:
        print(" ", o["file"], o["apiVersion"], o["kind"], o["namespace"] or "-", o["name"], ",".join(o["images"]) or "-")
PY
)
echo "$summary" | quote
check "version 1; the chart's entry: type, source as written, release, namespace, chart version" "$summary" \
  '^version 1'$'\n''demo chart charts/sprout-demo demo demo 0\.1\.0'$'\n'
check "the manifests' entry has no release and no chart version" "$summary" $'\n''extras manifests manifests - demo -'$'\n'
order=$(python3 -c '
import json, sys
i = json.load(open(sys.argv[1]))
objs = sorted((o["file"], o["kind"], o["name"]) for w in i["workloads"] for o in w["objects"])
print(" ".join(f"{k}/{n}" for f, k, n in objs))' "$W/index.json")
check "the order: the CRD, then the Namespace, then the rest as rendered (the chart's in Helm's order, then the manifests' in file order)" \
  "$order" \
  '^CustomResourceDefinition/greetings\.demo\.example\.com Namespace/demo ConfigMap/demo-page Service/demo-web Deployment/demo-web Greeting/demo CronJob/hello ClusterRole/greeting-reader ServiceAccount/reader$'
check "the Deployment runs the preloaded busybox, and so does the CronJob; the ConfigMap runs nothing" "$summary" \
  'objects/0003\.json v1 ConfigMap demo demo-page -.*objects/0005\.json apps/v1 Deployment demo demo-web localhost/sprout/busybox:1\.35.*objects/0007\.json batch/v1 CronJob demo hello localhost/sprout/busybox:1\.35'
lines=$(for f in "$W"/objects/*.json; do wc -l < "$f"; done | sort -u | tr '\n' ' ')
check "each object file is one line of compact JSON" "$lines" '^1 $'
check "values file and inline values reached the chart (replicas 3, the message)" \
  "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); c=json.load(open(sys.argv[2])); print(d["spec"]["replicas"], c["data"]["index.html"].split("<p>")[1].split("<")[0])' "$W/objects/0005.json" "$W/objects/0003.json")" \
  '^3 built by the workloads test$'
check "a namespaced object that named no namespace has the workload's" \
  "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["metadata"]["namespace"])' "$W/objects/0009.json")" '^demo$'
check "a cluster-scoped object that named one has none" \
  "$(python3 -c 'import json,sys; print("namespace" in json.load(open(sys.argv[1]))["metadata"])' "$W/objects/0008.json")" '^False$'
check "the CRD is in the image as the chart's crds/ has it" \
  "$(python3 -c 'import json,sys; o=json.load(open(sys.argv[1])); print(o["kind"], o["spec"]["scope"], o["spec"]["versions"][0]["name"])' "$W/objects/0001.json")" \
  '^CustomResourceDefinition Namespaced v1alpha1$'

insp=$("$SPROUT" inspect "$work/out1/wl.raw" 2>&1)
echo "$insp" | sed -n '/^workloads:/,$p' | quote
check "inspect lists the workloads" "$insp" $'\n''workloads:  2, 9 objects \(sha256:[0-9a-f]{64}\)'$'\n''  demo: chart charts/sprout-demo 0\.1\.0, release demo, namespace demo'$'\n'
check "... each object with its file, and the images it runs" "$insp" \
  '    objects/0005\.json  apps/v1 Deployment demo/demo-web  runs localhost/sprout/busybox:1\.35'
check "... the manifests" "$insp" '  extras: manifests manifests, namespace demo'$'\n''    objects/0007\.json  batch/v1 CronJob demo/hello  runs localhost/sprout/busybox:1\.35'
check "... and every image the workloads run, preloaded" "$insp" $'\n''workload images:'$'\n''  localhost/sprout/busybox:1\.35 \(preloaded\)$'
check "inspect --json has the index" \
  "$("$SPROUT" inspect --json "$work/out1/wl.raw" | python3 -c 'import json,sys; print(json.load(sys.stdin)["workloads"]["digest"])')" \
  "^$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["digest"])' "$W/index.json")\$"

build wl out2
check "a second build gives the same image, bit for bit" \
  "$(cmp "$work/out1/wl.raw" "$work/out2/wl.raw" && cmp "$work/out1/manifest.json" "$work/out2/manifest.json" && echo same)" '^same$'

profile plain
build plain out-plain
check "a profile without workloads builds in ten steps, none of them rendering" \
  "$rc $(grep -c 'render workloads' <<<"$out") $(grep -c '^\[10/10\]' <<<"$out")" '^0 0 [1-9]'
root_of "$work/out-plain/plain.raw"
check "... and its root has no workloads folder" \
  "$(rdsquashfs -l /usr/lib/sprout "$work/root.sqfs" 2>&1 | grep -c ' workloads$')" '^0$'
check "... and inspect says none" "$("$SPROUT" inspect "$work/out-plain/plain.raw" 2>&1)" $'\n''workloads:  none$'

# --- bad inputs: each fails the build in step 2 and names the file, the line and the fix
fails() {  # fails NAME PROFILE EXPECTED-REGEX...: the build of PROFILE fails, saying each
  local what=$1 p=$2
  shift 2
  build "$p" "out-$p"
  echo "$out" | grep -E 'error:|hint:|^sprout:' | quote
  check "$what: the build fails" "$rc" '^1$'
  for want in "$@"; do check "$what: says /$want/" "$out" "$want"; done
  check "$what: leaves nothing in the output folder" "$(ls -A "$work/out-$p" 2>/dev/null | wc -l)" '^0$'
}

profile noimage "${good[@]:0:4}" "    set: {image: localhost/sprout/missing:1}"
fails "an image that is not preloaded" noimage \
  'charts/sprout-demo/templates/deployment\.yaml: error: Deployment demo/demo-web: container .check-page. \(spec\.template\.spec\.initContainers\[0\]\) runs image .localhost/sprout/missing:1., which the profile does not preload' \
  "Deployment demo/demo-web: container 'httpd' \(spec\.template\.spec\.containers\[0\]\) runs image 'localhost/sprout/missing:1'" \
  "hint: add '- ref: localhost/sprout/missing:1' to the profile's 'images:' \(docs/images\.md\); an air-gapped node could only pull it" \
  'the workloads have 2 errors'

mkdir -p "$work/p/bad"
printf 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [broken\n' > "$work/p/bad/broken.yaml"
profile badyaml "  - {name: broken, manifests: [bad/broken.yaml]}"
fails "YAML that does not parse" badyaml 'bad/broken\.yaml:5:1: error: this is not valid YAML: ' \
  'hint: check the indentation and quoting around this place'

profile novalues "${good[@]:0:3}" "    values: [gone.yaml]"
fails "a values file that is missing" novalues \
  "novalues\.yaml:[0-9]+:[0-9]+: error: values file 'gone\.yaml' does not exist \(looked for .*/gone\.yaml\)" \
  "hint: relative paths start at the profile's folder; the chart's own values\.yaml is read without naming it"

printf 'apiVersion: extensions/v1beta1\nkind: Ingress\nmetadata: {name: web}\nspec: {}\n' > "$work/p/bad/ingress.yaml"
profile unserved "  - {name: old, manifests: [bad/ingress.yaml], namespace: demo}"
fails "an API that Kubernetes 1.36 does not serve" unserved \
  'bad/ingress\.yaml:1:1: error: Ingress demo/web: Kubernetes 1\.36 does not serve Ingress in extensions/v1beta1' \
  "hint: use 'apiVersion: networking\.k8s\.io/v1'; Kubernetes 1\.36 serves Ingress there"

printf 'metadata: {name: nameless}\ndata: {a: b}\n' > "$work/p/bad/nokind.yaml"
profile nokind "  - {name: nokind, manifests: [bad/nokind.yaml]}"
fails "an object with no apiVersion or kind" nokind \
  'bad/nokind\.yaml:1:1: error: this object has no apiVersion or kind' \
  "hint: every object names its 'apiVersion' and 'kind'"

cp -r "$work/p/charts/sprout-demo" "$work/p/charts/broken"
printf 'data: {{ .Values.nope.deeper }}\n' > "$work/p/charts/broken/templates/broken.yaml"
profile norender "  - {name: broken, chart: charts/broken}"
fails "a chart that does not render" norender \
  "norender\.yaml:[0-9]+:[0-9]+: error: chart 'charts/broken' of workload 'broken' does not render: template: sprout-demo/templates/broken\.yaml:1:[0-9]+: executing \"sprout-demo/templates/broken\.yaml\" at <\.Values\.nope\.deeper>: nil pointer evaluating interface \{\}\.deeper" \
  'hint: fix the template, or the values it is given; `helm template broken charts/broken` gives the same message'

# A packaged chart renders too; its templates are named inside the .tgz.
(cd "$work/p/charts" && "$helm" package sprout-demo >/dev/null)
profile packaged "  - {name: demo, chart: charts/sprout-demo-0.1.0.tgz, namespace: demo, set: {image: localhost/sprout/missing:1}}"
fails "a packaged chart (.tgz), with an image that is not preloaded" packaged \
  'demo: chart charts/sprout-demo-0\.1\.0\.tgz 0\.1\.0, release demo in demo: 5 objects' \
  'charts/sprout-demo-0\.1\.0\.tgz: sprout-demo/templates/deployment\.yaml: error: Deployment demo/demo-web: container .httpd.'

profile allatonce "${good[@]:0:4}" "    set: {image: localhost/sprout/missing:1}" \
  "  - {name: broken, chart: charts/broken}" \
  "  - {name: bad, manifests: [bad], namespace: demo}"
fails "every mistake at once" allatonce 'the workloads have 6 errors' \
  'does not render' 'not valid YAML' 'does not serve Ingress' 'no apiVersion or kind' 'missing:1., which the profile does not preload'

# --- the baked objects against the real 1.36 API (only if the stack is compiled)
. "$(dirname "$0")/lib/stack-sets.sh"
KDIR=$(stack_set "$CACHE" kubernetes kube-apiserver)
EDIR=$(stack_set "$CACHE" etcd etcd)
if [ -z "$KDIR" ] || [ -z "$EDIR" ] || ! command -v openssl >/dev/null; then
  echo "$name: the apply part is skipped: the 1.36 stack (kubernetes, etcd) is not compiled in $CACHE/stack/bin, or openssl is missing"
  exit 0
fi
read -r p_client p_peer p_api < <(python3 -c '
import socket
s = [socket.socket() for _ in range(3)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
A="$work/api"
mkdir -p "$A/certs"
openssl genrsa -out "$A/sa.key" 2048 2>/dev/null && openssl rsa -in "$A/sa.key" -pubout -out "$A/sa.pub" 2>/dev/null
echo 'test-token,admin,1,system:masters' > "$A/tokens.csv"
"$EDIR/etcd" --data-dir "$A/etcd" --listen-client-urls "http://127.0.0.1:$p_client" \
  --advertise-client-urls "http://127.0.0.1:$p_client" --listen-peer-urls "http://127.0.0.1:$p_peer" \
  --initial-advertise-peer-urls "http://127.0.0.1:$p_peer" --initial-cluster "default=http://127.0.0.1:$p_peer" \
  >"$A/etcd.log" 2>&1 &
pids=($! "${pids[@]}")
"$KDIR/kube-apiserver" --etcd-servers "http://127.0.0.1:$p_client" --bind-address 127.0.0.1 --secure-port "$p_api" \
  --cert-dir "$A/certs" --service-account-issuer https://kubernetes.default.svc --service-account-key-file "$A/sa.pub" \
  --service-account-signing-key-file "$A/sa.key" --token-auth-file "$A/tokens.csv" --authorization-mode RBAC \
  --service-cluster-ip-range 10.96.0.0/12 >"$A/apiserver.log" 2>&1 &
pids=($! "${pids[@]}")
k() { "$KDIR/kubectl" --server "https://127.0.0.1:$p_api" --insecure-skip-tls-verify --token test-token "$@"; }
for _ in $(seq 90); do k get --raw /readyz >/dev/null 2>&1 && break; sleep 1; done
check "kube-apiserver $(k version -o json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["serverVersion"]["gitVersion"])' 2>/dev/null) is ready on 127.0.0.1:$p_api" \
  "$(k get --raw /readyz 2>&1)" '^ok$'
applied=""
for f in "$W"/objects/*.json; do
  applied+=$(k apply --server-side --field-manager sprout-test -f "$f" 2>&1)$'\n'
  # A CRD serves its kind once established; the objects after it need that.
  if python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["kind"] != "CustomResourceDefinition")' "$f"; then
    k wait --for condition=established --timeout 60s \
      "crd/$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["metadata"]["name"])' "$f")" >/dev/null 2>&1
  fi
done
echo "$applied" | quote
check "all nine objects are accepted, in the image's order, by server-side apply with strict field validation" \
  "$(grep -c ' serverside-applied$' <<<"$applied")" '^9$'
check "the Greeting of the chart's own CRD carries the inline message" \
  "$(k get greetings -n demo demo -o jsonpath='{.spec.message}' 2>&1)" '^built by the workloads test$'
check "the Deployment has the values file's replicas, and the ServiceAccount its namespace" \
  "$(k get deploy -n demo demo-web -o jsonpath='{.spec.replicas}' 2>&1) $(k get sa -n demo reader -o name 2>&1)" \
  '^3 serviceaccount/reader$'
