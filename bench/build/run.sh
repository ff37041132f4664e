#!/bin/bash
# Build benchmark: wall time of `sprout build` of the default profile making all four
# media (raw, iso, pxe, qcow2), against the floor: tar2sqfs alone (the packer sprout
# uses) turning the very same root, as a tar file, into a squashfs with the same
# compressor and threads. Prints both times, their ratio (goal: at most 1.3) and the
# size of each output. The base must be cached (sprout base profiles/default.yaml).
# Both wall time and CPU time (user + system, children included) are measured: on a
# shared machine the wall-time ratio is noisy, the CPU-time ratio much less so.
# Usage: bench/build/run.sh [JOBS]   (JOBS: compressor threads for both; default 2)
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
SPROUT=${SPROUT:-$top/build/sprout}
CACHE=${SPROUT_CACHE:-/var/cache/sprout}
jobs=${1:-2}
work=$(mktemp -d /tmp/sprout-bench-build.XXXXXX)
trap 'rm -rf "$work"' EXIT

timed() {  # timed FILE COMMAND...: runs COMMAND; FILE gets "wall-seconds cpu-seconds"
  local file=$1; shift
  /usr/bin/time -f '%e %U %S' -o "$file.raw" "$@"
  awk '{ printf "%s %.2f\n", $1, $2 + $3 }' "$file.raw" > "$file"
}
echo "== sprout build (raw, iso, pxe, qcow2), $jobs compressor threads"
timed "$work/t.build" "$SPROUT" build "$top/profiles/default.yaml" -o "$work/out" --cache-dir "$CACHE" -j "$jobs" \
  --format raw,iso,pxe,qcow2 2> "$work/build.log" || { cat "$work/build.log"; exit 1; }
read -r build_s build_cpu < "$work/t.build"

# The same root as a tar file, read back from the built image (not timed).
raw="$work/out/default.raw"
read -r start size < <(sfdisk --json "$raw" | python3 -c "import json,sys; p=json.load(sys.stdin)['partitiontable']['partitions'][1]; print(p['start'], p['size'])")
dd if="$raw" of="$work/root.squashfs" bs=512 skip="$start" count="$size" status=none
sqfs2tar "$work/root.squashfs" > "$work/root.tar"
rm -f "$work/root.squashfs"

echo "== floor: tar2sqfs alone on the same root, zstd, $jobs threads"
timed "$work/t.floor" sh -c 'tar2sqfs --quiet --force --no-skip --compressor zstd --num-jobs "$1" "$2" < "$3"' \
  tar2sqfs "$jobs" "$work/floor.squashfs" "$work/root.tar"
read -r floor_s floor_cpu < "$work/t.floor"

echo
grep -A20 '^steps:' "$work/build.log" | sed 's/^/  /'
printf 'sprout build (4 media): %8.1f s wall, %8.1f s CPU\n' "$build_s" "$build_cpu"
printf 'tar2sqfs alone (floor): %8.1f s wall, %8.1f s CPU\n' "$floor_s" "$floor_cpu"
printf 'ratio: %.2f wall, %.2f CPU (goal <= 1.3)\n' "$(echo "$build_s / $floor_s" | bc -l)" "$(echo "$build_cpu / $floor_cpu" | bc -l)"
printf 'floor squashfs: %d bytes\n' "$(stat -c %s "$work/floor.squashfs")"
echo "outputs:"
(cd "$work/out" && find . -type f -printf '%P\n' | LC_ALL=C sort | while read -r f; do
  printf '  %-18s %12d bytes  %s allocated\n' "$f" "$(stat -c %s "$f")" "$(du -h "$f" | cut -f1)"
done)
