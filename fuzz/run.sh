#!/bin/bash
# Builds every fuzz/*_fuzz.cc with clang + libFuzzer (ASan, UBSan) and runs each for a
# bounded time, seeded from fuzz/corpus/<target>/. Usage: fuzz/run.sh [SECONDS-PER-TARGET]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-${SPROUT_FUZZ_SECONDS:-30}}
# SPROUT_FUZZ_BUILD names a build folder already configured with SPROUT_FUZZ=ON (run-tests
# shares its sanitizer build with the unit tests); without it, build-fuzz is made here.
bdir=${SPROUT_FUZZ_BUILD:-build-fuzz}
if ! grep -qs '^SPROUT_FUZZ:BOOL=ON' "$bdir/CMakeCache.txt"; then
  cmake -S . -B "$bdir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
    -DSPROUT_FUZZ=ON -DSPROUT_TESTS=OFF >/dev/null
fi
targets=()
for f in fuzz/*_fuzz.cc; do
  [ -e "$f" ] || continue
  targets+=("$(basename "$f" .cc)")
done
if [ ${#targets[@]} -eq 0 ]; then
  echo "fuzz: no targets in fuzz/"; exit 1
fi
ninja -C "$bdir" "${targets[@]}"
for t in "${targets[@]}"; do
  corpus=$(mktemp -d)
  [ -d "fuzz/corpus/$t" ] && cp -r "fuzz/corpus/$t/." "$corpus/"
  echo "fuzz: $t for ${seconds} s"
  # -max_total_time bounds the run; a crash exits non-zero and leaves crash-* here.
  status=0
  "$bdir/$t" -max_total_time="$seconds" -print_final_stats=1 -rss_limit_mb=2048 \
    -artifact_prefix="$bdir/$t-" "$corpus" >"$bdir/$t.log" 2>&1 || status=$?
  grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|==[0-9]+==ERROR|SUMMARY)' "$bdir/$t.log" || true
  rm -rf "$corpus"
  if [ "$status" -ne 0 ]; then echo "fuzz: $t FAILED (exit $status); see $bdir/$t.log and $bdir/$t-*"; exit 1; fi
done
echo "fuzz: ${#targets[@]} targets ran clean"
