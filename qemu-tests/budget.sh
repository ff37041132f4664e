# shellcheck shell=bash
# Sourced by qemu-tests/lib.sh and run-tests.
# within_budget WHAT SECONDS: whether WHAT, which takes about SECONDS, still fits before
# SPROUT_DEADLINE (a Unix time; run-tests sets it from CI's 90 minutes). Without a
# deadline everything fits. When it does not fit it says so, with both figures, so a
# skipped scenario is never silent.
within_budget() {
  [ -n "${SPROUT_DEADLINE:-}" ] || return 0
  local left=$((SPROUT_DEADLINE - $(date +%s)))
  [ "$left" -ge "$2" ] && return 0
  echo "   SKIPPED $1: it takes about $2 s and $left s are left of this run's budget (SPROUT_DEADLINE); run it by hand"
  return 1
}
