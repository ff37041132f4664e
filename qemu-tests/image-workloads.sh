# The image's own workloads (docs/workloads.md, issue 55), checked on a cluster of
# kubernetes-cluster.sh when its image carries /usr/lib/sprout/workloads/index.json:
# every object the build baked in is applied by the cluster itself, with no human step
# (image_workloads_applied); after a power loss they are all there and none was applied
# again in conflict (image_workloads_after_power_loss); and on container nodes, the
# nodes started again on build B's root (image_workloads_update): B's new version runs,
# what B no longer carries is pruned, and an object a user made by hand is untouched.
# Sourced by kubernetes-cluster.sh, which gives kube, check, wait_until and node_ssh.

# image_workloads_index: one line an object of the node's index.json: RESOURCE NS NAME,
# where RESOURCE is kubectl's kind.version.group, or the kind alone in the core group.
image_workloads_index() {
  node_ssh 1 cat /usr/lib/sprout/workloads/index.json | python3 -c '
import json, sys
for w in json.load(sys.stdin).get("workloads", []):
    for o in w.get("objects", []):
        group, _, version = o["apiVersion"].rpartition("/")
        res = "%s.%s.%s" % (o["kind"], version, group) if group else o["kind"]
        print("%s %s %s" % (res, o.get("namespace") or "-", o["name"]))'
}

image_workloads_get() {  # image_workloads_get RESOURCE NS NAME JSONPATH
  local ns=()
  [ "$2" = - ] || ns=(-n "$2")
  kube get "$1" "${ns[@]}" "$3" -o jsonpath="$4" 2>/dev/null
}

image_workloads_all_there() {  # every object of the index exists
  local r ns n
  while read -r r ns n; do
    [ -n "$(image_workloads_get "$r" "$ns" "$n" '{.metadata.uid}')" ] || return 1
  done <<<"$IMAGE_WL_INDEX"
}

image_workloads_deployments_available() {  # every Deployment of the index has all its replicas available
  local r ns n want got
  while read -r r ns n; do
    case $r in Deployment.*) ;; *) continue ;; esac
    want=$(image_workloads_get "$r" "$ns" "$n" '{.spec.replicas}')
    got=$(image_workloads_get "$r" "$ns" "$n" '{.status.availableReplicas}')
    [ -n "$want" ] && [ "$got" = "$want" ] || return 1
  done <<<"$IMAGE_WL_INDEX"
}

# image_workloads_versions: RESOURCE/NS/NAME=resourceVersion for the objects whose
# resourceVersion only a write of the object itself changes (not a Deployment's, whose
# status the controllers write).
image_workloads_versions() {
  local r ns n
  while read -r r ns n; do
    case $r in Deployment.* | Job.* | CronJob.* | StatefulSet.* | DaemonSet.* | ReplicaSet.* | Pod | Service | Namespace | CustomResourceDefinition.*) continue ;; esac
    echo "$r/$ns/$n=$(image_workloads_get "$r" "$ns" "$n" '{.metadata.resourceVersion}')"
  done <<<"$IMAGE_WL_INDEX" | tr '\n' ' '
}

# image_workloads_managers: the field managers that applied each object (operation Apply).
image_workloads_managers() {
  local r ns n
  while read -r r ns n; do
    image_workloads_get "$r" "$ns" "$n" '{range .metadata.managedFields[?(@.operation=="Apply")]}{.manager}{"\n"}{end}'
  done <<<"$IMAGE_WL_INDEX" | sort | uniq -c | sed 's/^ *//' | tr '\n' ' '
}

# image_workloads_times EPOCH: when the first object was created and when the last
# Deployment turned Available, as the API recorded them, in seconds after EPOCH.
image_workloads_times() {
  local r ns n first="" last="" t
  while read -r r ns n; do
    t=$(image_workloads_get "$r" "$ns" "$n" '{.metadata.creationTimestamp}')
    [ -n "$t" ] && t=$(date -d "$t" +%s) && { [ -z "$first" ] || [ "$t" -lt "$first" ]; } && first=$t
    case $r in Deployment.*) ;; *) continue ;; esac
    t=$(image_workloads_get "$r" "$ns" "$n" '{.status.conditions[?(@.type=="Available")].lastTransitionTime}')
    [ -n "$t" ] && t=$(date -d "$t" +%s) && { [ -z "$last" ] || [ "$t" -gt "$last" ]; } && last=$t
  done <<<"$IMAGE_WL_INDEX"
  echo "$((${first:-0} - $1)) $((${last:-0} - $1))"
}

image_workloads_applied() {  # image_workloads_applied T0 (power-on, in $SECONDS)
  IMAGE_WL_INDEX=$(image_workloads_index)
  local count
  count=$(grep -c . <<<"$IMAGE_WL_INDEX")
  check "the image carries workloads: objects in its index" "$count" '^[1-9][0-9]*$'
  wait_until 300 "every object of the image's workloads applied" image_workloads_all_there
  check "the cluster applied every object of the image's workloads by itself (seconds from power-on)" \
    "$([ -n "${WAITED:-}" ] && echo $((SECONDS - $1)) || echo timeout)" '^[0-9]+$'
  wait_until 300 "the workloads' Deployments available" image_workloads_deployments_available
  IMAGE_WL_READY=$([ -n "${WAITED:-}" ] && echo $((SECONDS - $1)) || echo timeout)
  check "their Deployments are available (seconds from power-on)" "$IMAGE_WL_READY" '^[0-9]+$'
  check "each object was applied by the field manager sprout alone" "$(image_workloads_managers)" "^$count sprout \$"
  check "sprout-firstboot status on node-1 shows the workloads applied" \
    "$(node_ssh 1 sprout-firstboot status | sed -n '/^workloads/,/^[a-z]/p' | grep -c ': applied')" '^[1-9]'
  echo "   kubectl get all -A (from the host):"
  kube get all -A 2>&1 | sed 's/^/     /'
  IMAGE_WL_VERSIONS=$(image_workloads_versions)
  local times
  times=$(image_workloads_times "$(($(date +%s) - (SECONDS - $1)))")
  IMAGE_WL_CREATED=${times% *} IMAGE_WL_AVAILABLE=${times#* }
}

image_workloads_after_power_loss() {
  wait_until 300 "every object of the image's workloads there after the power loss" image_workloads_all_there
  wait_until 300 "the workloads' Deployments available after the power loss" image_workloads_deployments_available
  check "after the power loss the workloads' Deployments are available again (seconds more)" "${WAITED:-timeout}" '^[0-9]+$'
  # The appliers ran again at their start (server-side apply of the same objects): no
  # write, so no new resourceVersion, and still one manager.
  sleep 20
  check "no object was written again by the appliers' passes after the power loss (resourceVersions)" \
    "$(image_workloads_versions)" "^$(sed 's/[.]/\\./g' <<<"$IMAGE_WL_VERSIONS")\$"
  check "each object still has the one field manager sprout" "$(image_workloads_managers)" \
    "^$(grep -c . <<<"$IMAGE_WL_INDEX") sprout \$"
}

# image_workloads_update BUILD-B-IMAGE (container nodes): a ConfigMap made by hand in a
# namespace of the workloads, every node stopped and started again on B's root (its /var
# kept), then B's objects are there, A's that B dropped are gone, the hand-made one stays.
image_workloads_update() {
  local b=$1 ns old_index i
  ns=$(awk '$2 != "-" {print $2; exit}' <<<"$IMAGE_WL_INDEX")
  kube -n "$ns" create configmap made-by-hand --from-literal=by=hand >/dev/null
  old_index=$IMAGE_WL_INDEX
  for i in 1 2 3 4; do vm_kill "$i"; done
  container_switch_root "$b" || { check "the nodes' root switched to build B" failed '^ok$'; return 1; }
  for i in 1 2 3 4; do vm_start "$i"; done
  wait_until "$limit" "four Ready nodes on build B" all_ready $cp_nodes node-4
  IMAGE_WL_INDEX=$(image_workloads_index)
  wait_until 300 "every object of build B's workloads applied" image_workloads_all_there
  wait_until 300 "build B's Deployments available" image_workloads_deployments_available
  check "on build B every object of its workloads is there, its Deployments available (seconds)" "${WAITED:-timeout}" '^[0-9]+$'
  local gone="" r n ns2
  while read -r r ns2 n; do
    grep -qxF "$r $ns2 $n" <<<"$IMAGE_WL_INDEX" && continue
    gone+="$r/$n "
  done <<<"$old_index"
  check "build B drops objects of A" "$gone" '.'
  pruned() {
    local r ns2 n
    while read -r r ns2 n; do
      grep -qxF "$r $ns2 $n" <<<"$IMAGE_WL_INDEX" && continue
      [ -z "$(image_workloads_get "$r" "$ns2" "$n" '{.metadata.uid}')" ] || return 1
    done <<<"$old_index"
  }
  wait_until 120 "the objects build B dropped pruned" pruned
  check "what build B no longer carries is pruned (${gone% })" "${WAITED:-timeout}" '^[0-9]+$'
  # B's chart is a new version: each of its objects that carries Helm's chart label
  # names that version now.
  local versions
  versions=$(node_ssh 1 cat /usr/lib/sprout/workloads/index.json | python3 -c '
import json, sys
for w in json.load(sys.stdin).get("workloads", []):
    if w.get("chartVersion"):
        for o in w.get("objects", []):
            group, _, version = o["apiVersion"].rpartition("/")
            res = "%s.%s.%s" % (o["kind"], version, group) if group else o["kind"]
            print("%s %s %s %s" % (res, o.get("namespace") or "-", o["name"], w["chartVersion"]))')
  local labelled="" v
  while read -r r ns2 n v; do
    [ -n "$r" ] || continue
    local l
    l=$(image_workloads_get "$r" "$ns2" "$n" '{.metadata.labels.helm\.sh/chart}')
    [ -z "$l" ] || labelled+="$l=$v "
  done <<<"$versions"
  check "build B's chart objects are its new version (helm.sh/chart=chartVersion)" "$labelled" '^([a-z0-9-]+-([0-9.]+)=\2 )+$'
  echo "   chart labels on build B: $labelled"
  check "the ConfigMap a user made by hand is untouched" "$(kube -n "$ns" get configmap made-by-hand -o jsonpath='{.data.by}')" '^hand$'
  check "sprout-firstboot status on node-1 shows build B's workloads applied" \
    "$(node_ssh 1 sprout-firstboot status | sed -n '/^workloads/,/^[a-z]/p' | grep -c ': applied')" '^[1-9]'
  echo "   kubectl get all -A on build B (from the host):"
  kube get all -A 2>&1 | sed 's/^/     /'
}
