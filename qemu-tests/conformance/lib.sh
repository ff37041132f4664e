# The upstream conformance suite against a cluster of the harness (sourced after
# cluster-lib.sh; docs/conformance.md).
#
# conformance_run LIST DIR: runs the [Conformance] tests that LIST names (one a line, as
# e2e.test names them) with e2e.test compiled from the same Debian source as the cluster
# (images/conformance/compile.sh, cached), inside the harness's network namespace as the
# cluster's admin. Most tests run first, CONFORMANCE_PARALLEL (default 4) at a time under
# ginkgo (they spend most of their time waiting on controllers); then, one at a time,
# those marked [Serial] and those that create custom resource definitions (summary.py's
# SERIAL says why). Writes the suite's own JUnit reports (one a ginkgo
# node) and logs under DIR/parallel and DIR/serial, and DIR/summary.txt; prints the
# summary (a line a test, then "conformance: N passed, N failed, N skipped") and returns
# 0 when every listed test passed. CONFORMANCE_TIMEOUT bounds each pass (default 1200 s).
CONFORMANCE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

conformance_run() {
  local list=$1 dir=$2 e2e rc=0
  mkdir -p "$dir"
  e2e=$(bash "$CONFORMANCE_DIR/../../images/conformance/compile.sh" "${SPROUT_CACHE:-/var/cache/sprout}") ||
    { echo "conformance: the suite did not compile (images/conformance/compile.sh)" >&2; return 1; }
  cluster_find_kubectl
  [ -s "$CLUSTER_DIR/admin.conf" ] || cluster_kubectl version >/dev/null 2>&1
  # The control-plane taint does not count against a node being ready for tests (the
  # suite knows only the older "master" taint); the node count is given, since the suite
  # would otherwise count the untainted schedulable nodes and stop at none on a cluster
  # of control-plane nodes alone.
  local args=(--kubeconfig "$CLUSTER_DIR/admin.conf" --provider skeleton --kubectl-path "$CLUSTER_KUBECTL"
    --non-blocking-taints node-role.kubernetes.io/control-plane,node-role.kubernetes.io/master
    --num-nodes "${CONFORMANCE_NODES:-1}" --disable-log-dump)
  echo "   e2e.test (sha256 $(awk '$2 == "e2e.test" {print substr($1, 1, 12)}' "$e2e/SHA256SUMS")...) from $e2e:" \
    "$(grep -cv '^\s*\(#\|$\)' "$list") tests listed in $list"
  local t0=$SECONDS pass nodes focus
  for pass in parallel serial; do
    focus=$(python3 "$CONFORMANCE_DIR/summary.py" --focus "$list" --"$pass")
    [ -n "$focus" ] || continue
    nodes=1
    [ "$pass" = serial ] || nodes=${CONFORMANCE_PARALLEL:-4}
    mkdir -p "$dir/$pass"
    timeout "${CONFORMANCE_TIMEOUT:-1200}" ip netns exec "$CLUSTER_NS" "$e2e/ginkgo" -nodes="$nodes" -noColor \
      -focus="$focus" "$e2e/e2e.test" -- "${args[@]}" --report-dir "$dir/$pass" >"$dir/$pass/e2e.log" 2>&1
    case $? in
      0) ;;
      124) echo "   the $pass pass stopped after ${CONFORMANCE_TIMEOUT:-1200} s (CONFORMANCE_TIMEOUT)" >&2; rc=1 ;;
      *) rc=1 ;;
    esac
    echo "   $pass pass ($nodes at a time): $(grep -ao 'Ran [0-9]* of [0-9]* Specs in [0-9.]* seconds' "$dir/$pass/e2e.log" |
      head -n 1)"
  done
  CONFORMANCE_SECONDS=$((SECONDS - t0))
  if ! ls "$dir"/*/junit_*.xml >/dev/null 2>&1; then
    echo "   e2e.test wrote no report; the end of its log:" >&2
    tail -n 30 "$dir"/*/e2e.log | sed 's/^/     /' >&2
    return 1
  fi
  python3 "$CONFORMANCE_DIR/summary.py" --wanted "$list" "$dir" | tee "$dir/summary.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ] && [ "$rc" -eq 0 ]
}
