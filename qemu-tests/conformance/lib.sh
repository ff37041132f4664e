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
# 0 when every listed test passed. A few tests that failed get one second try, alone,
# under DIR/second-try; the summary names each one that passed only then. CONFORMANCE_TIMEOUT bounds each pass (default 1200 s).
# CONFORMANCE_REPO_LIST (set by conformance_registry) remaps the test images' registries.
# CONFORMANCE_API_NODES (node numbers) sends the suite's API traffic through a forwarder
# in the namespace to the first live apiserver of those nodes (conformance_api_forward);
# unset, it goes to the server the admin kubeconfig names.
# CONFORMANCE_CHUNK=N runs the list in parts of N tests (DIR/NNN-parallel, -serial), and
# CONFORMANCE_DEADLINE (epoch seconds) starts no part after it: for long runs by hand.
# CONFORMANCE_WAIT_SCALE=N multiplies the fixed waits that sprout's e2e.test makes scalable
# (images/conformance/patches: a namespace's deletion, a critical pod's start; the tests
# are named in scaled-waits.txt) by N; unset, every wait is upstream's.
# Before each serial pass and the second try, the run waits (at most CONFORMANCE_QUIET s,
# default 180) until no namespace is still being deleted: the tests before them leave the
# namespace controller a backlog, and a test meant to run alone then shares the cluster.
CONFORMANCE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# conformance_quiesce: waits until the cluster lists no Terminating namespace, at most
# CONFORMANCE_QUIET seconds; says how long it waited, and what was left when it gave up.
conformance_quiesce() {
  local limit=${CONFORMANCE_QUIET:-180} start=$SECONDS left first=""
  while left=$(cluster_kubectl get namespaces --no-headers 2>/dev/null | awk '$2 == "Terminating"' | wc -l); do
    [ -n "$first" ] || first=$left
    [ "$left" -gt 0 ] || break
    if [ $((SECONDS - start)) -ge "$limit" ]; then
      echo "   $left namespace(s) still terminating after $limit s (CONFORMANCE_QUIET); going on"
      return 0
    fi
    sleep 5
  done
  [ "${first:-0}" -eq 0 ] || echo "   waited $((SECONDS - start)) s for $first terminating namespace(s) to go"
}

# conformance_api_forward NODE...: prints the path of an admin kubeconfig whose server
# is a forwarder on the namespace's own loopback, where e2e.test runs, to the first live
# apiserver of NODEs (cluster_api_forward --inside). With one server in the kubeconfig,
# a suite of hours lost the cluster when that node's network stalled while the other two
# control planes were healthy (docs/conformance.md, "Three control-plane nodes"); through
# the forwarder a new connection goes to the next live one.
conformance_api_forward() {
  local CLUSTER_API_PORT
  cluster_api_forward --inside "$@" &&
    cluster_kubeconfig_at "$CLUSTER_API_PORT" "$CLUSTER_DIR/admin-forwarded.conf" &&
    echo "$CLUSTER_DIR/admin-forwarded.conf"
}

conformance_run() {
  local list=$1 dir=$2 e2e rc=0 cut=0
  # The environment of every e2e.test run: the registries' remapping, and the scale of
  # the waits when one is asked for (the summary then says so).
  local run_env=(env)
  [ -z "${CONFORMANCE_REPO_LIST:-}" ] || run_env+=(KUBE_TEST_REPO_LIST="$CONFORMANCE_REPO_LIST")
  if [ -n "${CONFORMANCE_WAIT_SCALE:-}" ]; then
    [[ $CONFORMANCE_WAIT_SCALE =~ ^[1-9][0-9]*$ ]] ||
      { echo "conformance: CONFORMANCE_WAIT_SCALE=$CONFORMANCE_WAIT_SCALE is not a whole number of at least 1" >&2; return 2; }
    run_env+=(SPROUT_E2E_WAIT_SCALE="$CONFORMANCE_WAIT_SCALE")
    echo "   the waits of the tests in conformance/scaled-waits.txt scaled by $CONFORMANCE_WAIT_SCALE (CONFORMANCE_WAIT_SCALE; images/conformance/patches)"
  fi
  mkdir -p "$dir"
  e2e=$(bash "$CONFORMANCE_DIR/../../images/conformance/compile.sh" "${SPROUT_CACHE:-/var/cache/sprout}") ||
    { echo "conformance: the suite did not compile (images/conformance/compile.sh)" >&2; return 1; }
  cluster_find_kubectl
  [ -s "$CLUSTER_DIR/admin.conf" ] || cluster_kubectl version >/dev/null 2>&1
  local kubeconfig=$CLUSTER_DIR/admin.conf
  if [ -n "${CONFORMANCE_API_NODES:-}" ]; then
    kubeconfig=$(conformance_api_forward $CONFORMANCE_API_NODES) || return 1
  fi
  # The control-plane taint does not count against a node being ready for tests (the
  # suite knows only the older "master" taint); the node count is given, since the suite
  # would otherwise count the untainted schedulable nodes and stop at none on a cluster
  # of control-plane nodes alone.
  local args=(--kubeconfig "$kubeconfig" --provider skeleton --kubectl-path "$CLUSTER_KUBECTL"
    --non-blocking-taints node-role.kubernetes.io/control-plane,node-role.kubernetes.io/master
    --num-nodes "${CONFORMANCE_NODES:-1}" --disable-log-dump)
  local listed
  listed=$(grep -cv '^\s*\(#\|$\)' "$list")
  echo "   e2e.test (sha256 $(awk '$2 == "e2e.test" {print substr($1, 1, 12)}' "$e2e/SHA256SUMS")...) from $e2e:" \
    "$listed tests listed in $list"
  local t0=$SECONDS pass nodes focus part parts=("$list") name
  if [ "${CONFORMANCE_CHUNK:-0}" -gt 0 ]; then
    # A long run in parts, each a ginkgo run of its own that writes its reports when it
    # ends: a run cut short still has the reports of every part it finished.
    mkdir -p "$dir/parts"
    grep -v '^\s*\(#\|$\)' "$list" | split -d -a 3 -l "$CONFORMANCE_CHUNK" - "$dir/parts/"
    parts=("$dir"/parts/*)
  fi
  for part in "${parts[@]}"; do
    if [ -n "${CONFORMANCE_DEADLINE:-}" ] && [ "$(date +%s)" -ge "$CONFORMANCE_DEADLINE" ]; then
      echo "   CONFORMANCE_DEADLINE passed: the tests of $part and after are not run"
      break
    fi
    for pass in parallel serial; do
      focus=$(python3 "$CONFORMANCE_DIR/summary.py" --focus "$part" --"$pass")
      [ -n "$focus" ] || continue
      nodes=1
      if [ "$pass" = serial ]; then conformance_quiesce; else nodes=${CONFORMANCE_PARALLEL:-4}; fi
      name=$pass
      [ "$part" = "$list" ] || name=$(basename "$part")-$pass
      mkdir -p "$dir/$name"
      timeout "${CONFORMANCE_TIMEOUT:-1200}" ip netns exec "$CLUSTER_NS" \
        "${run_env[@]}" "$e2e/ginkgo" -nodes="$nodes" -noColor \
        -focus="$focus" "$e2e/e2e.test" -- "${args[@]}" --report-dir "$dir/$name" >"$dir/$name/e2e.log" 2>&1
      case $? in
        0) ;;
        124) echo "   $name stopped after ${CONFORMANCE_TIMEOUT:-1200} s (CONFORMANCE_TIMEOUT)" >&2; rc=1 cut=1 ;;
        *) rc=1 ;;
      esac
      echo "   $name ($nodes at a time): $(grep -ao 'Ran [0-9]* of [0-9]* Specs in [0-9.]* seconds' "$dir/$name/e2e.log" |
        head -n 1)$(grep -aoE '[0-9]+ Passed \| [0-9]+ Failed' "$dir/$name/e2e.log" | tail -n 1 | sed 's/^/: /')"
    done
  done
  # A second try, alone, for the few listed tests that failed: a test that waits 30 s
  # for a controller can miss that on an emulated node under CI's other lanes ("a
  # ResourceQuota ... the life of a replica set" did once, after passing in every run
  # before). The summary prints every test that needed it, with its first failure, and
  # a test that fails twice fails. More failures than CONFORMANCE_RETRIES (default: a
  # tenth of the list, at least 3) are not retried: that many is not chance. A long list
  # by hand on two emulated nodes has more load failures than CI's slice of 41.
  local failed retries
  retries=${CONFORMANCE_RETRIES:-$((listed / 10 > 3 ? listed / 10 : 3))}
  failed=$(python3 "$CONFORMANCE_DIR/summary.py" --failed --wanted "$list" "$dir")
  if [ -n "$failed" ] && [ "$(echo "$failed" | wc -l)" -le "$retries" ]; then
    echo "$failed" >"$dir/second-try.txt"
    mkdir -p "$dir/second-try"
    echo "   a second try, one at a time, for $(echo "$failed" | wc -l) test(s) that failed:"
    echo "$failed" | sed 's/^/     /'
    conformance_quiesce
    rc=0
    timeout "${CONFORMANCE_TIMEOUT:-1200}" ip netns exec "$CLUSTER_NS" \
      "${run_env[@]}" "$e2e/ginkgo" -nodes=1 -noColor \
      -focus="$(python3 "$CONFORMANCE_DIR/summary.py" --focus "$dir/second-try.txt")" "$e2e/e2e.test" -- \
      "${args[@]}" --report-dir "$dir/second-try" >"$dir/second-try/e2e.log" 2>&1 || rc=1
    echo "   second try: $(grep -ao 'Ran [0-9]* of [0-9]* Specs in [0-9.]* seconds' "$dir/second-try/e2e.log" |
      head -n 1)$(grep -aoE '[0-9]+ Passed \| [0-9]+ Failed' "$dir/second-try/e2e.log" | tail -n 1 | sed 's/^/: /')"
  elif [ -n "$failed" ]; then
    echo "   $(echo "$failed" | wc -l) tests failed, more than CONFORMANCE_RETRIES ($retries): no second try"
  fi
  CONFORMANCE_SECONDS=$((SECONDS - t0))
  # A part cut short writes no report, but e2e.test printed each finished test's verdict
  # in its log, and summary.py reads those too.
  if ! ls "$dir"/*/junit_*.xml >/dev/null 2>&1 && ! grep -aqs '^{"msg":"\(PASSED\|FAILED\) ' "$dir"/*/e2e.log; then
    echo "   e2e.test wrote no report; the end of its log:" >&2
    tail -n 30 "$dir"/*/e2e.log | sed 's/^/     /' >&2
    return 1
  fi
  {
    [ -z "${CONFORMANCE_WAIT_SCALE:-}" ] ||
      echo "waits scaled: those of the tests in qemu-tests/conformance/scaled-waits.txt by $CONFORMANCE_WAIT_SCALE (CONFORMANCE_WAIT_SCALE), every other wait upstream's"
    python3 "$CONFORMANCE_DIR/summary.py" --wanted "$list" --second-try "$dir/second-try" "$dir"
  } | tee "$dir/summary.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ] && [ "$rc" -eq 0 ] && [ "$cut" -eq 0 ]
}

# conformance_registry LAYOUT: serves the suite's test images (the OCI layout that
# images/conformance/test-images.sh builds, with its refs.txt) to the cluster from Debian's
# docker-registry inside the harness's namespace, at $CLUSTER_NET.1:5000 (plain HTTP: the
# namespace has no other host), and
# - tells every running node's containerd about it: a hosts.toml in the node's
#   /var/lib/sprout/registries/HOST:5000/, which containerd reads at each pull (no restart);
# - writes the suite's remapping of every registry it knows to that one to
#   $CLUSTER_DIR/repo-list.yaml, which conformance_run hands e2e.test as KUBE_TEST_REPO_LIST.
#   Tests that pull from the "invalid" registry on purpose get a port where nothing listens.
# The registry is stopped with the cluster (cluster_teardown kills server-*.pid).
conformance_registry() {
  local layout=$1 host=$CLUSTER_NET.1:5000 ref n=0 t0=$SECONDS i
  [ -s "$layout/refs.txt" ] || { echo "conformance: no refs.txt in $layout (images/conformance/test-images.sh makes it)" >&2; return 1; }
  command -v docker-registry >/dev/null || { echo "conformance: docker-registry not found: apt-get install docker-registry" >&2; return 1; }
  command -v skopeo >/dev/null || { echo "conformance: skopeo not found: apt-get install skopeo" >&2; return 1; }
  mkdir -p "$CLUSTER_DIR/registry/data"
  cat >"$CLUSTER_DIR/registry/config.yml" <<YAML
version: 0.1
log: {level: warn}
storage: {filesystem: {rootdirectory: $CLUSTER_DIR/registry/data}}
http: {addr: "$host"}
YAML
  ip netns exec "$CLUSTER_NS" docker-registry serve "$CLUSTER_DIR/registry/config.yml" \
    >"$CLUSTER_DIR/registry/log" 2>&1 &
  echo $! >"$CLUSTER_DIR/server-registry.pid"
  disown $! 2>/dev/null  # its end is not news: teardown kills it
  wait_until 30 "the test registry at $host" ip netns exec "$CLUSTER_NS" curl -fsS -o /dev/null "http://$host/v2/" ||
    { echo "conformance: docker-registry did not answer at $host; its log: $CLUSTER_DIR/registry/log" >&2; return 1; }
  while read -r ref; do
    [ -n "$ref" ] || continue
    ip netns exec "$CLUSTER_NS" skopeo copy --quiet --dest-tls-verify=false \
      "oci:$layout:$ref" "docker://$host/$ref" >"$CLUSTER_DIR/registry/push.log" 2>&1 ||
      { echo "conformance: pushing $ref to $host failed:" >&2; tail -n 5 "$CLUSTER_DIR/registry/push.log" >&2; return 1; }
    n=$((n + 1))
  done <"$layout/refs.txt"
  echo "   test registry: $n images pushed to $host in $((SECONDS - t0)) s"
  for i in "${!CLUSTER_NODES[@]}"; do
    node_ssh "$i" "mkdir -p /var/lib/sprout/registries/$host && printf '%s\n' 'server = \"http://$host\"' '' '[host.\"http://$host\"]' '  capabilities = [\"pull\", \"resolve\"]' >/var/lib/sprout/registries/$host/hosts.toml" ||
      { echo "conformance: could not write node-$i's registry configuration" >&2; return 1; }
  done
  # Every node pulls every test image once, before the suite: a first pull in emulation
  # (unpacking agnhost's 37 MB takes minutes) outlasts the suite's waits for a pod, and a
  # test would fail on it alone ("should serve a basic endpoint from pods" did, 237 s).
  # CONFORMANCE_PREPULL (an extended regex) limits it to the images a short list uses, and
  # CONFORMANCE_PULL_NODES (node numbers) to the nodes that take the tests' pods.
  local pull
  pull=$(grep -E "${CONFORMANCE_PREPULL:-.}" "$layout/refs.txt")
  t0=$SECONDS
  for i in ${CONFORMANCE_PULL_NODES:-${!CLUSTER_NODES[@]}}; do
    node_ssh "$i" "sed 's|^|$host/|' | xargs -n 1 ctr -n k8s.io images pull --hosts-dir /var/lib/sprout/registries >/dev/null 2>&1" \
      <<<"$pull" || { echo "conformance: node-$i could not pull the test images from $host" >&2; return 1; }
  done
  echo "   $([ -n "${CONFORMANCE_PULL_NODES:-}" ] && echo "node ${CONFORMANCE_PULL_NODES// /, node }" || echo "every node") pulled $(wc -l <<<"$pull") of the $n test images in $((SECONDS - t0)) s"
  local r
  {
    for r in dockerLibraryRegistry:library e2eRegistry:e2e e2eVolumeRegistry:e2e/volume promoterE2eRegistry:e2e-test-images \
      gcRegistry:k8s buildImageRegistry:build-image sigStorageRegistry:sig-storage gcAuthenticatedRegistry:authenticated \
      privateRegistry:private sampleRegistry:samples gcrReleaseRegistry:release dockerGluster:gluster; do
      echo "${r%%:*}: $host/${r#*:}"
    done
    echo "invalidRegistry: $CLUSTER_NET.1:5001/invalid"
  } >"$CLUSTER_DIR/repo-list.yaml"
  CONFORMANCE_REPO_LIST=$CLUSTER_DIR/repo-list.yaml
}
