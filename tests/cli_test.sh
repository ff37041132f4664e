#!/bin/bash
# Black-box tests of the sprout binary: validation messages, and a full build from a
# tiny fake base (no kernel that boots; the QEMU test covers booting) checked with
# sgdisk and for bit-identical rebuilds.
set -uo pipefail
SPROUT=$(realpath "${SPROUT:?set SPROUT to the sprout binary}")
src=${SPROUT_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
work=$(mktemp -d /tmp/sprout-cli.XXXXXX)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0
check() {  # check NAME ACTUAL EXPECTED-REGEX
  if [[ "$2" =~ $3 ]]; then echo "ok   $1"; passed=$((passed + 1));
  else echo "FAIL $1: got '$2', want /$3/"; failed=$((failed + 1)); fi
}

# --- validate
out=$("$SPROUT" validate "$src/profiles/default.yaml" 2>&1); rc=$?
check "validate default profile exits 0" "$rc" '^0$'
check "validate default profile says ok" "$out" 'ok \(name default, role control-plane\)'

mkdir -p "$work/p"
cat > "$work/p/bad.yaml" <<'YAML'
name: edge
base: ../base
formts: [raw]
role: master
disk:
  espSize: lots
YAML
mkdir -p "$work/base"
out=$(cd "$work/p" && "$SPROUT" validate bad.yaml 2>&1); rc=$?
check "three mistakes: exit 1" "$rc" '^1$'
check "three mistakes: three errors" "$(grep -c ': error: ' <<<"$out")" '^3$'
check "three mistakes: each with file:line:col" "$(grep -cE '^bad\.yaml:[0-9]+:[0-9]+: error: ' <<<"$out")" '^3$'
check "three mistakes: did you mean" "$out" "did you mean 'formats'\?"
check "three mistakes: summary line" "$out" 'bad\.yaml: 3 errors'

out=$("$SPROUT" frobnicate 2>&1); rc=$?
check "unknown command exits 2 with a pointer to help" "$rc:$out" "^2:.*unknown command 'frobnicate'.*sprout help"
out=$("$SPROUT" build "$src/profiles/default.yaml" 2>&1); rc=$?
check "build without -o explains" "$rc:$out" '^2:.*-o DIR'
out=$("$SPROUT" help); check "help teaches the first commands" "$out" 'sprout build profiles/default.yaml -o out/'
# The help is made from the command table: every command it lists explains itself.
no_help=""
for c in $(sed -n 's/^  sprout \([a-z-]*\) .*/\1/p' <<<"$out" | sort -u); do
  [ "$c" = help ] || "$SPROUT" "$c" --help | grep "^  sprout $c" >/dev/null || no_help+=" $c"
done
check "every command in the help answers --help with its own usage" "$(sed -n 's/^  sprout \([a-z-]*\) .*/\1/p' <<<"$out" | sort -u | wc -l) listed;${no_help:- none} without" '^1[0-9] listed; none without$'

# --- build from a tiny fake base
base="$work/fakebase"
mkdir -p "$base/boot" "$base/usr/lib/systemd/boot/efi" "$base/etc" "$base/var/lib/demo" "$base/usr/bin"
head -c 300000 /dev/urandom > "$base/boot/vmlinuz-6.1.0-99-amd64"
head -c 200001 /dev/urandom > "$base/boot/initrd.img-6.1.0-99-amd64"
head -c 50000 /dev/urandom > "$base/usr/lib/systemd/boot/efi/systemd-bootx64.efi"
echo 'ID=debian' > "$base/etc/os-release"
echo 'state' > "$base/var/lib/demo/file"
ln -s ../lib "$base/usr/bin/lib-link"
cat > "$work/p/tiny.yaml" <<YAML
name: tiny
base: ../fakebase
disk: {espSize: 40MiB, stateSize: 16MiB}
files:
  - {path: /etc/motd, content: hello}
YAML

build() {  # build OUTDIR [env...]: builds tiny.yaml with a different cwd, TMPDIR and umask
  local outdir=$1; shift
  mkdir -p "$work/cwd-$(basename "$outdir")" "$work/tmp-$(basename "$outdir")"
  (cd "$work/cwd-$(basename "$outdir")" && umask "${UMASK:-022}" &&
   env TMPDIR="$work/tmp-$(basename "$outdir")" "$@" "$SPROUT" build "$work/p/tiny.yaml" -o "$outdir" --format raw,qcow2 2>&1)
}
out=$(build "$work/out1" LC_ALL=C); rc=$?
check "tiny build succeeds" "$rc" '^0$'
[ "$rc" -eq 0 ] || echo "$out"
check "tiny build reports step times" "$out" 'total +[0-9.]+ s'
check "outputs, manifest, SBOM and checksums; no work directory left" "$(ls -A "$work/out1" | tr '\n' ' ')" \
  '^manifest.json sbom.spdx.json sha256sums tiny.qcow2 tiny.raw $'
check "sha256sums verifies" "$(cd "$work/out1" && sha256sum -c --quiet sha256sums 2>&1 && echo verified)" '^verified$'
check "manifest lists each output with size and sha256" \
  "$(python3 -c "import json,sys; m=json.load(open(sys.argv[1])); print(' '.join(o['file']+':'+str(o['size']>0)+':'+str(len(o['sha256'])) for o in m['outputs']))" "$work/out1/manifest.json")" \
  '^tiny.raw:True:64 tiny.qcow2:True:64$'
out=$(UMASK=077 build "$work/out2" LC_ALL=C.UTF-8); rc=$?
check "second tiny build succeeds" "$rc" '^0$'
s1=$(sha256sum < "$work/out1/tiny.raw" || echo missing-1); s2=$(sha256sum < "$work/out2/tiny.raw" || echo missing-2)
check "rebuild is bit-identical (other cwd, TMPDIR, umask, locale)" "$s2" "^${s1}\$"
check "rebuilt qcow2 and manifest are bit-identical" "$(cmp "$work/out1/tiny.qcow2" "$work/out2/tiny.qcow2" && cmp "$work/out1/manifest.json" "$work/out2/manifest.json" && echo same)" '^same$'
out=$(build "$work/out3" SOURCE_DATE_EPOCH=1800000000); rc=$?
s3=$(sha256sum < "$work/out3/tiny.raw" || echo missing-3)
check "a different SOURCE_DATE_EPOCH gives different bytes" "$([ "$s3" != "$s1" ] && echo differs)" '^differs$'

v=$(sgdisk -v "$work/out1/tiny.raw" 2>&1)
check "sgdisk -v finds no problems" "$v" 'No problems found'
types=$(sfdisk --json "$work/out1/tiny.raw" | grep -o '"type": *"[^"]*"' | tr 'a-f' 'A-F' | tr '\n' ' ')
check "partition types are DPS GUIDs (ESP, root x86-64, var)" "$types" \
  'C12A7328-F81F-11D2-BA4B-00A0C93EC93B.*4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709.*4D21B016-B534-45C2-A9FB-5C16E091FD2D'

# --- personalize: settings go into the config area only
img="$work/out1/tiny.raw"
cp --sparse=always "$img" "$work/pers.raw"
part_sum() {  # part_sum IMAGE N: sha256 of partition N's bytes
  local start size
  read -r start size < <(sfdisk --json "$1" | python3 -c "import json,sys; p=json.load(sys.stdin)['partitiontable']['partitions'][$2-1]; print(p['start'], p['size'])")
  dd if="$1" bs=512 skip="$start" count="$size" status=none | sha256sum | cut -d' ' -f1
}
root_before=$(part_sum "$work/pers.raw" 2); verity_before=$(part_sum "$work/pers.raw" 3)
head -c 32 /dev/urandom > "$work/secret"
secret_b64=$(base64 -w0 < "$work/secret")
out=$("$SPROUT" personalize "$work/pers.raw" --cluster-secret "$work/secret" --hostname rack1-n1 --role worker \
  --address 198.18.0.10/24 --peer 198.18.0.11 --peer 198.18.0.12 2>&1); rc=$?
check "personalize succeeds" "$rc" '^0$'
check "personalize never prints the secret" "$(grep -c -F "$secret_b64" <<<"$out")" '^0$'
check "an image holding the worker secret is readable by its owner only (0600), and personalize says so" \
  "$(stat -c %a "$work/pers.raw"): $(grep -c 'holds the worker secret now; made it mode 600 (was 644)' <<<"$out")" '^600: 1$'
check "a worker is given the derived worker secret, and personalize says so" \
  "$(grep -c 'role worker: wrote the worker secret derived from the cluster secret, not the cluster secret' <<<"$out")" '^1$'
out=$("$SPROUT" personalize "$work/pers.raw" --print 2>&1)
check "personalize --print shows the settings" "$out" 'hostname=rack1-n1.*role=worker.*peers=198.18.0.11,198.18.0.12.*worker-secret=\(derived from the cluster secret, not shown\)'
check "personalize --print shows no cluster secret for a worker" "$(grep -c 'cluster-secret' <<<"$out")" '^0$'
worker_secret=$("$SPROUT" worker-secret --cluster-secret "$work/secret")
check "sprout worker-secret is hex HMAC-SHA256 of the cluster secret (as openssl computes it)" "$worker_secret" \
  "^$(printf 'sprout worker secret v1' | openssl mac -digest SHA256 -macopt "hexkey:$(od -An -tx1 -v "$work/secret" | tr -d ' \n')" HMAC | tr 'A-F' 'a-f')\$"
check "a worker's image holds no trace of the cluster secret" "$(grep -c -a -F "$secret_b64" "$work/pers.raw")" '^0$'
# The worker pins the CA a cluster formed with that secret has (docs/formation.md,
# "Workers pin the cluster CA"); the pin is public, so --print shows it.
# shellcheck source=tests/lib/ca-cert-hash.sh
. "$src/tests/lib/ca-cert-hash.sh"
pin=$("$SPROUT" ca-cert-hash --cluster-secret "$work/secret")
check "sprout ca-cert-hash prints the pin derived from the secret (as openssl and python3 compute it)" "$pin" \
  "^$(ca_cert_hash_of_secret "$work/secret")\$"
check "personalize --print shows the worker's CA pin" "$("$SPROUT" personalize "$work/pers.raw" --print 2>&1)" \
  "ca-cert-hash=$pin"
out=$("$SPROUT" personalize "$work/pers.raw" --cluster-secret "$work/secret" 2>&1)
check "personalize --role worker --cluster-secret says which CA it pinned" "$out" \
  "role worker: pinned the cluster CA $pin, which a cluster formed with this secret has"
old_cluster=sha256:$(printf 'a cluster formed before' | sha256sum | cut -d' ' -f1)
out=$("$SPROUT" personalize "$work/pers.raw" --cluster-secret "$work/secret" --ca-cert-hash "${old_cluster^^}" 2>&1 &&
  "$SPROUT" personalize "$work/pers.raw" --print)
check "an explicit --ca-cert-hash beats the derived one (kept in lower case)" "$out" "ca-cert-hash=$old_cluster"
out=$("$SPROUT" personalize "$work/pers.raw" --hostname rack1-n1 && "$SPROUT" personalize "$work/pers.raw" --print)
check "... and stays when other settings change" "$out" "ca-cert-hash=$old_cluster"
out=$("$SPROUT" personalize "$work/pers.raw" --ca-cert-hash 0123abcd 2>&1); rc=$?
check "a CA pin of the wrong form is refused with the form" "$rc:$out" \
  "^1:.*option:1: ca-cert-hash must be 'sha256:' and the 64 hex digits of the cluster CA's public-key hash"
out=$("$SPROUT" personalize "$work/pers.raw" --cluster-secret "$work/secret" 2>/dev/null && "$SPROUT" personalize "$work/pers.raw" --print)
check "the cluster secret given again brings its own pin back" "$out" "ca-cert-hash=$pin"
check "personalize leaves the root partition untouched" "$(part_sum "$work/pers.raw" 2)" "^${root_before}\$"
check "personalize leaves the verity partition untouched" "$(part_sum "$work/pers.raw" 3)" "^${verity_before}\$"
cfg_start=$(sfdisk --json "$work/pers.raw" | python3 -c "import json,sys; p=json.load(sys.stdin)['partitiontable']['partitions'][5]; print(p['start']*512, (p['start']+p['size'])*512)")
read -r lo hi <<<"$cfg_start"
offsets=$(grep -abo -F "$worker_secret" "$work/pers.raw" | cut -d: -f1 | tr '\n' ' ')
inside=yes
for o in $offsets; do [ "$o" -ge "$lo" ] && [ "$o" -lt "$hi" ] || inside=no; done
check "the worker secret sits only in the config area ($offsets in [$lo,$hi))" "$inside:$(wc -w <<<"$offsets")" '^yes:1$'
check "the image built without a secret holds none" "$(grep -c -a -F "$secret_b64" "$img")" '^0$'
out=$("$SPROUT" personalize "$work/pers.raw" --role control-plane 2>&1); rc=$?
check "a control-plane role with only a worker secret is refused with the fix" "$rc:$out" \
  "^1:.*needs the cluster secret, and this one would have only a worker secret; give --cluster-secret, or --role worker"
cp --sparse=always "$img" "$work/pers-cp.raw"
out=$("$SPROUT" personalize "$work/pers-cp.raw" --cluster-secret "$work/secret" --role control-plane 2>&1); rc=$?
check "a control-plane node is given the cluster secret itself" \
  "$rc:$(grep -c -a -F "$secret_b64" "$work/pers-cp.raw"):$(grep -c -a -F "$worker_secret" "$work/pers-cp.raw")" '^0:1:0$'
check "... and no CA pin (it holds the CA)" "$(grep -c -a 'ca-cert-hash' "$work/pers-cp.raw")" '^0$'
out=$("$SPROUT" personalize "$work/pers-cp.raw" --ca-cert-hash "$pin" 2>&1); rc=$?
check "--ca-cert-hash on a control-plane node is refused with the fix" "$rc:$out" \
  "^1:.*--ca-cert-hash pins the cluster CA on a worker, and this node's role is control-plane; give --role worker"
rm -f "$work/pers-cp.raw"
# A weak cluster secret is refused; --new-cluster-secret makes one (mode 600) and never
# overwrites one that exists.
cp --sparse=always "$img" "$work/pers-new.raw"
printf 'passwordpassword' >"$work/weak-secret"
out=$("$SPROUT" personalize "$work/pers-new.raw" --cluster-secret "$work/weak-secret" 2>&1); rc=$?
check "a repeated-pattern cluster secret is refused, naming the fix" "$rc:$out" \
  "^1:.*weak-secret is too weak: its 16 bytes hold only 7 distinct values.*--new-cluster-secret FILE"
printf 'short' >"$work/weak-secret"
out=$("$SPROUT" personalize "$work/pers-new.raw" --cluster-secret "$work/weak-secret" 2>&1); rc=$?
check "a short cluster secret is refused" "$rc:$out" "^1:.*it has 5 bytes; a cluster secret needs at least 16"
out=$("$SPROUT" personalize "$work/pers-new.raw" --new-cluster-secret "$work/new-secret" --role control-plane 2>&1); rc=$?
check "--new-cluster-secret makes 32 bytes, mode 600, and says how to use it on the other nodes" \
  "$rc:$(stat -c '%a %s' "$work/new-secret"):$out" \
  "^0:600 32:.*made a new cluster secret in $work/new-secret .*--cluster-secret $work/new-secret"
check "... and the image holds that secret" "$(grep -c -a -F "$(base64 -w0 <"$work/new-secret")" "$work/pers-new.raw")" '^1$'
before=$(sha256sum <"$work/new-secret")
out=$("$SPROUT" personalize "$work/pers-new.raw" --new-cluster-secret "$work/new-secret" 2>&1); rc=$?
check "--new-cluster-secret refuses a file that exists, and leaves it as it was" \
  "$rc:$(sha256sum <"$work/new-secret" | cut -c1-64):$out" "^1:${before:0:64}:.*exists; a second cluster secret would found a second cluster"
out=$("$SPROUT" personalize "$work/pers-new.raw" --new-cluster-secret "$work/other-secret" --address nonsense 2>&1); rc=$?
check "a refused personalize removes the secret it made" "$rc:$([ -e "$work/other-secret" ] && echo kept || echo gone)" '^1:gone$'
rm -f "$work/pers-new.raw"
out=$("$SPROUT" personalize "$work/pers.raw" --role boss 2>&1); rc=$?
check "a bad role is refused with the rule" "$rc:$out" "^1:.*role must be 'control-plane' or 'worker'; got 'boss'"
out=$("$SPROUT" personalize "$work/pers.raw" --hostname rack1-n2 && "$SPROUT" personalize "$work/pers.raw" --print)
check "settings accumulate; a later hostname wins" "$out" 'hostname=rack1-n2.*role=worker'
bundle=nfs://198.18.0.5/backups/rack1-20261126T000000Z-scheduled.sprout-backup
out=$("$SPROUT" personalize "$work/pers.raw" --backup-dir nfs://198.18.0.5/backups --restore-from "$bundle" &&
  "$SPROUT" personalize "$work/pers.raw" --print)
check "personalize writes backup-dir and restore-from (docs/backup.md)" "$out" \
  "backup-dir=nfs://198.18.0.5/backups.*restore-from=$bundle"
out=$("$SPROUT" personalize "$work/pers.raw" --backup-dir nfs://nas:2049/backups 2>&1); rc=$?
check "a backup-dir that does not parse is refused with the fix" "$rc:$out" \
  '^1:.*--backup-dir: .*bare name or IPv4 address.*give a folder or nfs://HOST/PATH'
out=$("$SPROUT" personalize "$work/pers.raw" --restore-from nfs://198.18.0.5/backups/ 2>&1); rc=$?
check "a restore-from that names no bundle is refused with the fix" "$rc:$out" \
  "^1:.*--restore-from: 'nfs://198.18.0.5/backups/' names a folder; give the bundle's file"

# A failing build leaves nothing behind and names the fix.
cat > "$work/p/small-esp.yaml" <<YAML
extends: tiny.yaml
disk: {espSize: 32MiB}
files:
  - {path: /etc/big, source: big.bin}
YAML
head -c 1000 /dev/zero > "$work/p/big.bin"
head -c 30000000 /dev/urandom > "$base/boot/initrd.img-6.1.0-99-amd64"
out=$("$SPROUT" build "$work/p/small-esp.yaml" -o "$work/out4" 2>&1); rc=$?
check "an ESP too small fails with the fix" "$rc:$out" '^1:.*raise disk.espSize'
check "a failed build leaves no files" "$(ls -A "$work/out4" 2>/dev/null | wc -l)" '^0$'

echo "cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
