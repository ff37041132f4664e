#!/bin/bash
# CI's time budget in the QEMU harness (qemu-tests/budget.sh within_budget, and
# qemu-tests/cluster-lib.sh wait_until with SPROUT_HARD_END), with no VM:
#   - within_budget runs what fits before SPROUT_DEADLINE, skips what does not and says
#     so with both figures, and runs everything without a deadline;
#   - wait_until returns as soon as its condition holds, and times out after its limit
#     with what it waited for;
#   - with a hard end closer than its limit, wait_until stops at the hard end and says
#     so, and a wait that starts after the hard end returns at once: a scenario that ran
#     long fails on its wait instead of outliving CI's 90 minutes.
set -u
name=harness_budget_test
src=${SPROUT_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
. "$src/qemu-tests/lib.sh"
. "$src/qemu-tests/cluster-lib.sh"
work=$(mktemp -d /tmp/sprout-harness-budget.XXXXXX)
trap 'rm -rf "$work"' EXIT
now=$(date +%s)

# within_budget
check "without a deadline everything fits" \
  "$(SPROUT_DEADLINE='' within_budget "a scenario" 100000 && echo fits)" '^fits$'
check "what fits before the deadline runs" \
  "$(SPROUT_DEADLINE=$((now + 600)) within_budget "a scenario" 300 && echo fits)" '^fits$'
check "what does not fit is skipped, with both figures" \
  "$(SPROUT_DEADLINE=$((now + 600)) within_budget "scenario 9" 900 || echo skipped)" \
  '^   SKIPPED scenario 9: it takes about 900 s and (59[0-9]|600) s are left of this run.s budget \(SPROUT_DEADLINE\); run it by hand
skipped$'

# wait_until without a hard end
unset SPROUT_HARD_END
t=$SECONDS
wait_until 30 "a file" test -e "$work/flag" 2>"$work/err" &
waiter=$!
sleep 1
touch "$work/flag"
wait "$waiter"
check "wait_until returns once its condition holds" "$? $((SECONDS - t < 10 ? 1 : 0))" '^0 1$'
wait_until 2 "what never comes" false 2>"$work/err"
check "wait_until times out after its limit, naming what it waited for" "$? $(cat "$work/err")" \
  '^1 timed out after 2 s waiting for: what never comes$'

# the hard end
t=$SECONDS
SPROUT_HARD_END=$(($(date +%s) + 3)) wait_until 600 "node-9 Ready" false 2>"$work/err"
rc=$? took=$((SECONDS - t))
check "a hard end closer than the limit stops the wait there" "$rc $((took <= 10 ? 1 : 0))" '^1 1$'
check "... and the message says why" "$(cat "$work/err")" \
  "^timed out after [0-9] s waiting for: node-9 Ready \\(cut short: the run's hard end, SPROUT_HARD_END, has come\\)\$"
t=$SECONDS
SPROUT_HARD_END=$(($(date +%s) - 60)) wait_until 600 "node-9 Ready" false 2>"$work/err"
check "a wait that starts after the hard end returns at once" "$? $((SECONDS - t < 5 ? 1 : 0)) $(cat "$work/err")" \
  "^1 1 timed out after 0 s waiting for: node-9 Ready \\(cut short"
SPROUT_HARD_END=$(($(date +%s) + 600)) wait_until 2 "what never comes" false 2>"$work/err"
check "a hard end further than the limit changes nothing" "$(cat "$work/err")" \
  '^timed out after 2 s waiting for: what never comes$'
echo "$name: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
