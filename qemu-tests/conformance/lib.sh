# The upstream conformance suite against a cluster of the harness (sourced after
# cluster-lib.sh; docs/conformance.md).
#
# conformance_run LIST DIR: runs the [Conformance] tests that LIST names (one a line, as
# e2e.test names them) with e2e.test compiled from the same Debian source as the cluster
# (images/conformance/compile.sh, cached), inside the harness's network namespace as the
# cluster's admin. Writes DIR/junit_01.xml (the suite's own JUnit report), DIR/e2e.log
# and DIR/summary.txt, prints the summary (one line a test that did not pass, then
# "conformance: N passed, N failed, N skipped") and returns 0 when every listed test
# passed. CONFORMANCE_TIMEOUT bounds the run (default 1800 s).
CONFORMANCE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

conformance_run() {
  local list=$1 dir=$2 e2e focus rc
  mkdir -p "$dir"
  e2e=$(bash "$CONFORMANCE_DIR/../../images/conformance/compile.sh" "${SPROUT_CACHE:-/var/cache/sprout}") ||
    { echo "conformance: the suite did not compile (images/conformance/compile.sh)" >&2; return 1; }
  cluster_find_kubectl
  [ -s "$CLUSTER_DIR/admin.conf" ] || cluster_kubectl version >/dev/null 2>&1
  # ginkgo matches its focus against each test's full name: the listed names, escaped.
  focus=$(python3 -c 'import re,sys; print("|".join("^" + re.escape(l.strip()) + "$" for l in open(sys.argv[1]) if l.strip() and not l.startswith("#")))' "$list")
  # The control-plane taint does not count against a node being ready for tests (the
  # suite knows only the older "master" taint); one node, so the suite does not count
  # the schedulable ones (a tainted node is not, and the suite would stop at none).
  local args=(--kubeconfig "$CLUSTER_DIR/admin.conf" --provider skeleton --kubectl-path "$CLUSTER_KUBECTL"
    --report-dir "$dir" --non-blocking-taints node-role.kubernetes.io/control-plane,node-role.kubernetes.io/master
    --num-nodes "${CONFORMANCE_NODES:-1}" --disable-log-dump --ginkgo.noColor --ginkgo.focus "$focus")
  echo "   e2e.test (sha256 $(awk '$2 == "e2e.test" {print substr($1, 1, 12)}' "$e2e/SHA256SUMS")...) from $e2e:" \
    "$(grep -cv '^\s*\(#\|$\)' "$list") tests listed in $list"
  local t0=$SECONDS
  timeout "${CONFORMANCE_TIMEOUT:-1800}" ip netns exec "$CLUSTER_NS" "$e2e/e2e.test" "${args[@]}" >"$dir/e2e.log" 2>&1
  rc=$?
  CONFORMANCE_SECONDS=$((SECONDS - t0))
  [ "$rc" -ne 124 ] || echo "   e2e.test stopped after ${CONFORMANCE_TIMEOUT:-1800} s (CONFORMANCE_TIMEOUT)" >&2
  if [ ! -s "$dir/junit_01.xml" ]; then
    echo "   e2e.test wrote no report (status $rc); the end of its log:" >&2
    tail -n 30 "$dir/e2e.log" | sed 's/^/     /' >&2
    return 1
  fi
  python3 "$CONFORMANCE_DIR/summary.py" "$dir/junit_01.xml" "$list" | tee "$dir/summary.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ]
}
