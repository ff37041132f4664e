#!/bin/bash
# Sourced by the shell tests (after setting name=THE_TEST): the pass and fail counters,
# the checks that decide whether the test can run, and the end that turns the counters
# into the script's status.
#
#   tests_require PACKAGES TOOL...   skipped (status 0), naming what installs them, when
#                                    a TOOL is missing
#   tests_cache                      SRC (the checkout) and CACHE (SPROUT_CACHE, default
#                                    /var/cache/sprout); skipped when CACHE is read-only
#   ok TEXT / bad TEXT               one check passed / failed
#   tests_end                        prints the counts; status 1 after any failure

passed=0 failed=0
ok() { echo "ok: $*"; passed=$((passed + 1)); }
# cpu_seconds PID: the CPU time (user + system, seconds) process PID has used so far.
cpu_seconds() {
  awk -v tck="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%.1f\n", ($12 + $13) / tck }' "/proc/$1/stat"
}
bad() { echo "FAIL: $*"; failed=$((failed + 1)); }

tests_require() {
  local packages=$1 tool
  shift
  for tool in "$@"; do
    if ! command -v "$tool" >/dev/null; then
      echo "$name: skipped: '$tool' not found (scripts/install-deps installs $packages)"
      exit 0
    fi
  done
}

tests_cache() {
  SRC=$(readlink -f "${SPROUT_SOURCE_DIR:-$(dirname "$0")/..}")
  CACHE=${SPROUT_CACHE:-/var/cache/sprout}
  if [ ! -w "$(dirname "$CACHE")" ] && [ ! -w "$CACHE" ]; then
    echo "$name: skipped: the cache $CACHE is not writable (set SPROUT_CACHE)"
    exit 0
  fi
}

# tests_end, last in an EXIT trap: an EXIT trap's last status is not the script's, so
# without its exit a run with failures would end 0 and ctest would count it passed.
tests_end() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ] || exit 1
}
