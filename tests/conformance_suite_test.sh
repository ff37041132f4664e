#!/bin/bash
# The conformance suite's recipe (images/conformance/compile.sh, docs/conformance.md):
# e2e.test compiled from the same Debian source as the components holds every one of
# the 311 [Conformance] tests the tree's conformance.yaml lists, by name (a ginkgo dry
# run of its [Conformance] focus, read through its JUnit report by
# qemu-tests/conformance/summary.py); every test CI's single-node list names is one of
# them; the summary counts a failure, a skip and a test missing from the report; and a
# second run of the recipe is a cache hit that prints the same folder; sprout's patch to
# the suite is compiled in; and tally.py counts the tests over several runs.
set -u
name=conformance_suite_test
. "$(dirname "$0")/lib/checks.sh"
tests_require "golang-go and python3" go /usr/bin/python3
tests_cache
WORK=$(mktemp -d /tmp/sprt-conf.XXXXXX)
finish() {
  rm -rf "$WORK"
  tests_end
}
trap finish EXIT

E2E=$(bash "$SRC/images/conformance/compile.sh" "$CACHE" 2>"$WORK/compile.log") || {
  bad "the conformance suite did not compile:"
  tail -n 20 "$WORK/compile.log"
  exit 1
}
for f in e2e.test ginkgo conformance.yaml; do
  [ -s "$E2E/$f" ] && ok "the recipe made $f" || bad "the recipe made no $f in $E2E"
done
(cd "$E2E" && sha256sum --quiet -c SHA256SUMS) && ok "SHA256SUMS holds for the folder" || bad "SHA256SUMS does not hold in $E2E"
again=$(bash "$SRC/images/conformance/compile.sh" "$CACHE" 2>"$WORK/again.log")
if [ "$again" = "$E2E" ] && grep -q '^conformance: cached: ' "$WORK/again.log"; then
  ok "a second run is a cache hit: $(grep '^conformance: cached' "$WORK/again.log")"
else
  bad "a second run printed '$again' ($(tail -n 1 "$WORK/again.log"))"
fi

# sprout's patch to the suite (images/conformance/patches) is compiled in: the scaled
# waits read SPROUT_E2E_WAIT_SCALE.
grep -aq SPROUT_E2E_WAIT_SCALE "$E2E/e2e.test" &&
  ok "e2e.test holds the scalable waits (SPROUT_E2E_WAIT_SCALE)" ||
  bad "e2e.test lacks SPROUT_E2E_WAIT_SCALE: images/conformance/patches was not applied"

# The tree's list of the release's conformance tests.
/usr/bin/python3 -c 'import sys, yaml; [print(t["codename"]) for t in yaml.safe_load(open(sys.argv[1]))]' \
  "$E2E/conformance.yaml" >"$WORK/listed.txt"
n=$(wc -l <"$WORK/listed.txt")
[ "$n" = 311 ] && ok "conformance.yaml lists the 311 [Conformance] tests of 1.20" || bad "conformance.yaml lists $n tests, not 311"

# A dry run reports every focused test as passed without running it.
if (cd "$WORK" && timeout 300 "$E2E/e2e.test" --ginkgo.dryRun --ginkgo.focus='\[Conformance\]' --ginkgo.noColor \
  --report-dir "$WORK/dry" >"$WORK/dry.log" 2>&1); then
  ok "e2e.test runs (a dry run of its [Conformance] focus): $(grep -o 'Ran [0-9]* of [0-9]* Specs' "$WORK/dry.log")"
else
  bad "the dry run failed: $(tail -n 3 "$WORK/dry.log" | tr '\n' ' ')"
fi
summary() { /usr/bin/python3 "$SRC/qemu-tests/conformance/summary.py" --wanted "$2" "$1" | tail -n 1; }
got=$(summary "$WORK/dry/junit_01.xml" "$WORK/listed.txt")
[ "$got" = "conformance: 311 passed, 0 failed, 0 skipped" ] &&
  ok "the suite holds every test conformance.yaml names: $got" || bad "against conformance.yaml: $got"
list=$SRC/qemu-tests/conformance/api-only.txt
want=$(grep -cv '^\s*\(#\|$\)' "$list")
got=$(summary "$WORK/dry/junit_01.xml" "$list")
[ "$got" = "conformance: $want passed, 0 failed, 0 skipped" ] &&
  ok "every test of CI's single-node list is a [Conformance] test of the suite: $got" || bad "api-only.txt: $got"
grep -v '^\s*\(#\|$\)' "$list" | grep -vxFf "$WORK/listed.txt" | sed 's/^/     not in conformance.yaml: /'
# The lists with pods, named exactly the same way: CI's single-node one (kubernetes.sh)
# and the three-node one (kubernetes-cluster.sh scenario 7).
for slice in node-slice cluster-slice; do
  file=$SRC/qemu-tests/conformance/$slice.txt
  slice_want=$(grep -cv '^\s*\(#\|$\)' "$file")
  slice_got=$(summary "$WORK/dry/junit_01.xml" "$file")
  [ "$slice_want" -ge 1 ] && [ "$slice_got" = "conformance: $slice_want passed, 0 failed, 0 skipped" ] &&
    ok "every test of $slice.txt is a [Conformance] test of the suite: $slice_got" || bad "$slice.txt: $slice_got"
done
# The tests the scaled waits reach (tally.py counts their passes under a scale apart)
# are tests of the release, named exactly: a misspelt name would let a scaled pass count
# as a plain one.
scaled=$SRC/qemu-tests/conformance/scaled-waits.txt
scaled_want=$(grep -cv '^\s*\(#\|$\)' "$scaled")
scaled_got=$(summary "$WORK/dry/junit_01.xml" "$scaled")
[ "$scaled_want" -ge 1 ] && [ "$scaled_got" = "conformance: $scaled_want passed, 0 failed, 0 skipped" ] &&
  ok "every test of scaled-waits.txt is a [Conformance] test of the suite: $scaled_got" || bad "scaled-waits.txt: $scaled_got"
# The runner's two passes (qemu-tests/conformance/lib.sh), under the compiled ginkgo as
# it runs them: most two at a time, then those that run alone ([Serial], and those that
# make custom resource definitions: summary.py's SERIAL);
# between them they select exactly the listed tests, and the summary reads the reports
# of every ginkgo node.
serial=$(/usr/bin/python3 -B -c 'import sys; sys.path.insert(0, sys.argv[1]); import summary
print(sum(1 for n in summary.wanted_tests(sys.argv[2]) if summary.SERIAL.search(n)))' "$SRC/qemu-tests/conformance" "$list")
runs=""
for pass in parallel serial; do
  focus=$(/usr/bin/python3 "$SRC/qemu-tests/conformance/summary.py" --focus "$list" --$pass)
  nodes=1
  [ "$pass" = serial ] || nodes=2
  (cd "$WORK" && timeout 300 "$E2E/ginkgo" -nodes=$nodes -noColor -dryRun -focus="$focus" "$E2E/e2e.test" -- \
    --report-dir "$WORK/passes/$pass" >"$WORK/$pass.log" 2>&1)
  runs+="$pass: $(grep -ao 'Ran [0-9]* of [0-9]* Specs' "$WORK/$pass.log" | head -n 1); "
done
got="$runs$(/usr/bin/python3 "$SRC/qemu-tests/conformance/summary.py" --wanted "$list" "$WORK/passes" | tail -n 1)"
[ "$got" = "parallel: Ran $((want - serial)) of 5667 Specs; serial: Ran $serial of 5667 Specs; conformance: $want passed, 0 failed, 0 skipped" ] &&
  ok "the runner's passes select exactly the $want listed tests: $got" || bad "the runner's passes: $got"

# The summary counts what did not pass, and what the report lacks.
cat >"$WORK/report.xml" <<'EOF'
<testsuite name="Kubernetes e2e suite" tests="4" failures="1">
  <testcase name="test a [Conformance]" time="1.5"></testcase>
  <testcase name="test b [Conformance]" time="2"><failure type="Failure">timed out waiting
for the condition</failure></testcase>
  <testcase name="test c [Conformance]" time="0"><skipped message="skipped: needs two nodes"></skipped></testcase>
</testsuite>
EOF
printf '%s\n' '# a comment' 'test a [Conformance]' 'test b [Conformance]' 'test c [Conformance]' 'test d [Conformance]' >"$WORK/want.txt"
out=$(/usr/bin/python3 "$SRC/qemu-tests/conformance/summary.py" --wanted "$WORK/want.txt" "$WORK/report.xml")
rc=$?
echo "$out" | sed 's/^/     /'
[ "$rc" = 1 ] && [ "$(echo "$out" | tail -n 1)" = "conformance: 1 passed, 1 failed, 2 skipped" ] &&
  echo "$out" | grep -q 'FAILED  test b \[Conformance\]: timed out waiting / for the condition' &&
  echo "$out" | grep -q 'SKIPPED  test d \[Conformance\]: not in any report' &&
  ok "the summary counts a failure (with its message), a skip and a missing test, and exits 1" ||
  bad "the summary of a report with a failure, a skip and a missing test (status $rc)"

# A part cut short writes no report; the verdicts e2e.test printed as each test ended, in
# the part's e2e.log, still count (and a report, when there is one, wins).
mkdir -p "$WORK/cut/000-parallel"
cat >"$WORK/cut/000-parallel/e2e.log" <<'EOF2'
{"msg":"PASSED test a [Conformance]","total":-1,"completed":1,"skipped":10,"failed":0}
{"msg":"FAILED test b [Conformance]","total":-1,"completed":1,"skipped":10,"failed":1,"failures":["test b [Conformance]"]}
EOF2
out=$(/usr/bin/python3 "$SRC/qemu-tests/conformance/summary.py" --wanted "$WORK/want.txt" "$WORK/cut")
[ "$(echo "$out" | tail -n 1)" = "conformance: 1 passed, 1 failed, 2 skipped" ] &&
  echo "$out" | grep -q "FAILED  test b \[Conformance\]: failed (from e2e.test's progress line" &&
  ok "a part cut short: the summary reads e2e.test's progress lines ($(echo "$out" | tail -n 1))" ||
  bad "the summary of a part cut short: $(echo "$out" | tr '\n' ' ')"

# Beside the part cut short, another part that ended wrote a report; it lists the cut
# part's tests as skipped (outside its focus), and the progress lines must still count.
# (29 Nov: they did not, and a cut part's passes and failures read as never run.)
mkdir -p "$WORK/cut/001-parallel"
cat >"$WORK/cut/001-parallel/junit_01.xml" <<'EOF'
<testsuite name="Kubernetes e2e suite" tests="3" failures="0">
  <testcase name="test a [Conformance]" time="0"><skipped message="skipped"></skipped></testcase>
  <testcase name="test b [Conformance]" time="0"><skipped message="skipped"></skipped></testcase>
  <testcase name="test c [Conformance]" time="3"></testcase>
</testsuite>
EOF
out=$(/usr/bin/python3 "$SRC/qemu-tests/conformance/summary.py" --wanted "$WORK/want.txt" "$WORK/cut")
[ "$(echo "$out" | tail -n 1)" = "conformance: 2 passed, 1 failed, 1 skipped" ] &&
  echo "$out" | grep -q "FAILED  test b \[Conformance\]: failed (from e2e.test's progress line" &&
  ok "a part cut short beside a part with a report: its progress lines win over the report's skips ($(echo "$out" | tail -n 1))" ||
  bad "the summary of a part cut short beside a report: $(echo "$out" | tr '\n' ' ')"

# A second try: --failed lists what the first try failed; a test that passes on its
# second try counts as passed, and the summary says so (the test and the count); one
# that fails twice fails. The second try's folder inside the run's is not read as a
# first try.
fails=$(/usr/bin/python3 "$SRC/qemu-tests/conformance/summary.py" --failed --wanted "$WORK/want.txt" "$WORK/report.xml")
[ "$fails" = "test b [Conformance]" ] && ok "--failed lists the one test that failed: $fails" ||
  bad "--failed listed '$fails', want 'test b [Conformance]'"
printf '%s\n' 'test a [Conformance]' 'test b [Conformance]' >"$WORK/want2.txt"
mkdir -p "$WORK/retry/parallel" "$WORK/retry/second-try"
cp "$WORK/report.xml" "$WORK/retry/parallel/junit_01.xml"
cat >"$WORK/retry/second-try/junit_01.xml" <<'EOF3'
<testsuite name="Kubernetes e2e suite" tests="1" failures="0">
  <testcase name="test b [Conformance]" time="3.5"></testcase>
</testsuite>
EOF3
out=$(/usr/bin/python3 "$SRC/qemu-tests/conformance/summary.py" --wanted "$WORK/want2.txt" "$WORK/retry")
[ "$(echo "$out" | tail -n 1)" = "conformance: 1 passed, 1 failed, 0 skipped" ] &&
  ok "without --second-try, the second try's reports inside the run's folder do not count" ||
  bad "the second try's folder was read as a first try: $(echo "$out" | tr '\n' ' ')"
out=$(/usr/bin/python3 "$SRC/qemu-tests/conformance/summary.py" --wanted "$WORK/want2.txt" \
  --second-try "$WORK/retry/second-try" "$WORK/retry")
rc=$?
[ "$rc" = 0 ] && [ "$(echo "$out" | tail -n 1)" = "conformance: 2 passed, 0 failed, 0 skipped; 1 of them on a second try" ] &&
  echo "$out" | grep -q 'passed  test b \[Conformance\] (on a second try, alone, 3.5 s; the first try FAILED: timed out' &&
  ok "a test that passed on its second try passes, named with its first failure ($(echo "$out" | tail -n 1))" ||
  bad "a test that passed on its second try (status $rc): $(echo "$out" | tr '\n' ' ')"
sed -i 's|<testcase name="test b \[Conformance\]" time="3.5"></testcase>|<testcase name="test b [Conformance]" time="3.5"><failure>again</failure></testcase>|' \
  "$WORK/retry/second-try/junit_01.xml"
out=$(/usr/bin/python3 "$SRC/qemu-tests/conformance/summary.py" --wanted "$WORK/want2.txt" \
  --second-try "$WORK/retry/second-try" "$WORK/retry")
rc=$?
[ "$rc" = 1 ] && [ "$(echo "$out" | tail -n 1)" = "conformance: 1 passed, 1 failed, 0 skipped" ] &&
  echo "$out" | grep -q 'FAILED  test b .*(and again on a second try, alone)' &&
  ok "a test that failed twice fails" || bad "a test that failed twice (status $rc): $(echo "$out" | tr '\n' ' ')"

# The tally over several runs (tally.py): a test passed in any run passes; one that only
# failed is named with its run and failure; a pass under scaled waits counts apart; a
# plain list (CI's) passes as a whole; a name holding " (" is read whole; in a run with
# scaled waits, a test the scale does not reach (test f) passes plainly.
printf '%s\n' 'test a [Conformance]' 'test b [Conformance]' 'test c [Conformance]' 'test d [Conformance]' \
  'test (e) [Conformance]' 'test f [Conformance]' >"$WORK/all.txt"
echo 'test c [Conformance]' >"$WORK/scaled.txt"
/usr/bin/python3 "$SRC/qemu-tests/conformance/summary.py" --wanted "$WORK/want.txt" "$WORK/report.xml" >"$WORK/run1.txt"
printf '%s\n' "waits scaled: the namespace tests' by 3 (CONFORMANCE_WAIT_SCALE), every other wait upstream's" \
  '  passed  test c [Conformance] (4.0 s)' '  passed  test f [Conformance] (5.0 s)' \
  'conformance: 2 passed, 0 failed, 0 skipped' >"$WORK/run2.txt"
echo 'test (e) [Conformance]' >"$WORK/ci.txt"
out=$(/usr/bin/python3 -B "$SRC/qemu-tests/conformance/tally.py" "$WORK/all.txt" --scaled-waits "$WORK/scaled.txt" "one=$WORK/run1.txt" \
  "two=$WORK/run2.txt" "ci=$WORK/ci.txt")
rc=$?
echo "$out" | sed 's/^/     /'
[ "$rc" = 1 ] &&
  [ "$(echo "$out" | head -n 1)" = "of 6 [Conformance] tests: 3 passed (1 more only with scaled waits), 1 failed in every run that ran them, 1 not run yet" ] &&
  echo "$out" | grep -q '^  FAILED  test b \[Conformance\] (one: timed out waiting / for the condition)$' &&
  echo "$out" | grep -q '^  passed with scaled waits  test c \[Conformance\] (two: 4.0 s)$' &&
  echo "$out" | grep -q '^  not run  test d \[Conformance\]$' && ! echo "$out" | grep -q 'test (e)' &&
  ! echo "$out" | grep -q 'test f' &&
  ok "the tally over three runs: $(echo "$out" | head -n 1)" || bad "the tally over three runs (status $rc)"
# --todo writes the tests not yet passed (failed, only with scaled waits, not run), bare
# names one a line, which the runner reads back as the same tests (summary.py's reading).
/usr/bin/python3 -B "$SRC/qemu-tests/conformance/tally.py" "$WORK/all.txt" --todo "$WORK/todo.txt" --scaled-waits "$WORK/scaled.txt" \
  "one=$WORK/run1.txt" "two=$WORK/run2.txt" "ci=$WORK/ci.txt" >/dev/null 2>&1
todo=$(cat "$WORK/todo.txt" 2>/dev/null | tr '\n' '|')
[ "$todo" = 'test b [Conformance]|test c [Conformance]|test d [Conformance]|' ] &&
  [ "$(/usr/bin/python3 -B -c 'import sys; sys.path.insert(0, sys.argv[1]); from summary import wanted_tests; print(len(wanted_tests(sys.argv[2])))' \
        "$SRC/qemu-tests/conformance" "$WORK/todo.txt")" = 3 ] &&
  ok "tally --todo lists the tests not yet passed, as a list the runner reads: $todo" ||
  bad "tally --todo: got '$todo'"
