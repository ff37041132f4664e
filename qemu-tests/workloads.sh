# shellcheck shell=bash
# Workloads written for current Kubernetes (issue 52, item 7): manifests that use APIs
# and admission features added since 1.21, applied to a running cluster of the 1.36
# image, each checked for what it does, not only for being accepted:
#   - a ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1, GA in 1.30) with its
#     binding refuses a Deployment of more than 3 replicas in the namespaces it selects,
#     with the policy's own message, and lets one of 2 through;
#   - a Job whose main container needs a sidecar (an init container with
#     restartPolicy: Always, GA in 1.33): it completes, the sidecar ended with it;
#   - a Job's podFailurePolicy (GA in 1.31): exit code 42 fails the Job at once, with
#     reason PodFailurePolicy, and no retry;
#   - Pod Security admission (GA in 1.25): a namespace enforcing `restricted` refuses a
#     privileged pod and runs a compliant one (non-root, seccomp RuntimeDefault, no
#     capabilities) to completion;
#   - a PodDisruptionBudget (policy/v1, 1.21) makes the Eviction API refuse to evict the
#     one pod it protects (HTTP 429);
#   - a StatefulSet behind a headless Service: its pods' stable names answer in cluster
#     DNS (web-0.web.NS.svc.cluster.local), from another pod;
#   - an ephemeral container (`kubectl debug`, GA in 1.25) runs in a running pod.
# Usage (sourced by qemu-tests/kubernetes-cluster.sh, which gives kube, check and
# wait_until): current_workloads NODE IMAGE-REF, NODE the node the pods go to.

current_workloads() {
  local node=$1 image=$2 ns=sprout-current out
  local dir=$CLUSTER_DIR/workloads
  mkdir -p "$dir"
  kube create namespace "$ns" >/dev/null
  kube label namespace "$ns" sprout-policy=enforce >/dev/null
  # A namespace's default ServiceAccount comes from the controller-manager; pods wait for it.
  wait_until 60 "the default ServiceAccount of $ns" kube get serviceaccount default -n "$ns"

  # 1. A ValidatingAdmissionPolicy (CEL) and its binding.
  cat >"$dir/policy.yaml" <<EOF
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: sprout-max-replicas}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - apiGroups: [apps]
        apiVersions: [v1]
        operations: [CREATE, UPDATE]
        resources: [deployments]
  validations:
    - expression: "object.spec.replicas <= 3"
      message: "sprout: at most 3 replicas here"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: sprout-max-replicas}
spec:
  policyName: sprout-max-replicas
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels: {sprout-policy: enforce}
EOF
  kube apply -f "$dir/policy.yaml" >/dev/null
  deployment() {  # deployment NAME REPLICAS
    cat <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: $1, namespace: $ns}
spec:
  replicas: $2
  selector: {matchLabels: {app: $1}}
  template:
    metadata: {labels: {app: $1}}
    spec:
      nodeSelector: {kubernetes.io/hostname: $node}
      containers: [{name: c, image: $image, imagePullPolicy: Never, command: [sleep, "3600"]}]
EOF
  }
  # The binding takes a moment to reach the admission plugin: try for up to 30 s, each
  # try a server-side dry run (admission runs, nothing is stored, so a try made before the
  # policy was in force leaves no Deployment behind).
  refused() { ! out=$(deployment wide 6 | kube_stderr create --dry-run=server -f - 2>&1) && grep -q "at most 3 replicas" <<<"$out"; }
  wait_until 30 "the ValidatingAdmissionPolicy in force" refused
  check "a ValidatingAdmissionPolicy (CEL) refuses a Deployment of 6 replicas, with its message" \
    "$(grep -o 'ValidatingAdmissionPolicy .sprout-max-replicas.[^:]*: sprout: at most 3 replicas here' <<<"$out" | head -n 1)" \
    'sprout-max-replicas.*denied request: sprout: at most 3 replicas here'
  check "and admits one of 2 replicas" "$(deployment narrow 2 | kube apply -f - 2>&1)" 'deployment.apps/narrow created'

  # 2. A sidecar: the Job's main container reads what its sidecar serves, then ends;
  #    the Job completes with the sidecar still running until then.
  cat >"$dir/sidecar.yaml" <<EOF
apiVersion: batch/v1
kind: Job
metadata: {name: with-sidecar, namespace: $ns}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      nodeSelector: {kubernetes.io/hostname: $node}
      initContainers:
        - name: server
          image: $image
          imagePullPolicy: Never
          restartPolicy: Always
          command: [sh, -c, 'mkdir -p /www && echo from-the-sidecar > /www/index.html && exec httpd -f -p 8080 -h /www']
          startupProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}
      containers:
        - name: main
          image: $image
          imagePullPolicy: Never
          command: [sh, -c, 'wget -q -O - http://127.0.0.1:8080/']
EOF
  kube apply -f "$dir/sidecar.yaml" >/dev/null
  job_done() { kube get job "$1" -n "$ns" -o jsonpath='{.status.conditions[*].type}' | grep -E 'Complete|Failed' >/dev/null; }
  wait_until 180 "the sidecar Job done" job_done with-sidecar
  check "a Job with a sidecar (restartPolicy: Always init container) completes, its main container served by it" \
    "$(kube get job with-sidecar -n "$ns" -o jsonpath='{.status.conditions[?(@.status=="True")].type}') $(kube logs -n "$ns" job/with-sidecar -c main 2>&1)" \
    '(^| )Complete( .*)? from-the-sidecar$'

  # 3. podFailurePolicy: exit code 42 ends the Job at once.
  cat >"$dir/failure-policy.yaml" <<EOF
apiVersion: batch/v1
kind: Job
metadata: {name: fail-fast, namespace: $ns}
spec:
  backoffLimit: 6
  podFailurePolicy:
    rules:
      - action: FailJob
        onExitCodes: {containerName: c, operator: In, values: [42]}
  template:
    spec:
      restartPolicy: Never
      nodeSelector: {kubernetes.io/hostname: $node}
      containers: [{name: c, image: $image, imagePullPolicy: Never, command: [sh, -c, 'exit 42']}]
EOF
  kube apply -f "$dir/failure-policy.yaml" >/dev/null
  wait_until 180 "the failing Job done" job_done fail-fast
  check "a Job's podFailurePolicy fails it on exit code 42 with no retry" \
    "$(kube get job fail-fast -n "$ns" -o jsonpath='{.status.conditions[?(@.type=="Failed")].reason} failed={.status.failed}')" \
    '^PodFailurePolicy failed=1$'

  # 4. Pod Security admission, restricted.
  kube create namespace sprout-restricted >/dev/null
  kube label namespace sprout-restricted pod-security.kubernetes.io/enforce=restricted >/dev/null
  wait_until 60 "the default ServiceAccount of sprout-restricted" kube get serviceaccount default -n sprout-restricted
  out=$(kube_stderr run priv -n sprout-restricted --image="$image" --image-pull-policy=Never --restart=Never \
    --overrides='{"spec":{"containers":[{"name":"priv","image":"'"$image"'","imagePullPolicy":"Never","securityContext":{"privileged":true}}]}}' 2>&1)
  check "Pod Security admission: a restricted namespace refuses a privileged pod" \
    "$(grep -o 'violates PodSecurity "restricted:latest": privileged' <<<"$out")" '^violates PodSecurity "restricted:latest": privileged$'
  cat >"$dir/restricted.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata: {name: compliant, namespace: sprout-restricted}
spec:
  restartPolicy: Never
  nodeSelector: {kubernetes.io/hostname: $node}
  securityContext: {runAsNonRoot: true, runAsUser: 65534, seccompProfile: {type: RuntimeDefault}}
  containers:
    - name: c
      image: $image
      imagePullPolicy: Never
      command: [sh, -c, 'id -u; grep ^Seccomp: /proc/self/status']
      securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
EOF
  kube apply -f "$dir/restricted.yaml" >/dev/null
  pod_done() { kube get pod "$1" -n "$2" -o jsonpath='{.status.phase}' | grep -E '^(Succeeded|Failed)$' >/dev/null; }
  wait_until 120 "the compliant pod done" pod_done compliant sprout-restricted
  check "and runs a compliant pod: as uid 65534 under the runtime's seccomp filter (mode 2)" \
    "$(kube get pod compliant -n sprout-restricted -o jsonpath='{.status.phase}') $(kube logs compliant -n sprout-restricted 2>&1 | tr -s '\t\n' '  ')" \
    '^Succeeded 65534 Seccomp: 2 ?$'

  # 5. A PodDisruptionBudget guards the one pod of "narrow" it may not lose.
  kube scale deployment narrow -n "$ns" --replicas=1 >/dev/null
  narrow_one() { [ "$(kube get deployment narrow -n "$ns" -o jsonpath='{.status.readyReplicas}')" = 1 ] &&
    [ "$(kube get pods -n "$ns" -l app=narrow --no-headers | wc -l)" = 1 ]; }
  wait_until 120 "one pod of narrow" narrow_one
  cat >"$dir/pdb.yaml" <<EOF
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: narrow, namespace: $ns}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: narrow}}
EOF
  kube apply -f "$dir/pdb.yaml" >/dev/null
  pdb_known() { [ "$(kube get pdb narrow -n "$ns" -o jsonpath='{.status.currentHealthy}')" = 1 ]; }
  wait_until 60 "the PodDisruptionBudget observed" pdb_known
  local pod
  pod=$(kube get pods -n "$ns" -l app=narrow -o jsonpath='{.items[0].metadata.name}')
  out=$(printf '{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"%s","namespace":"%s"}}' "$pod" "$ns" |
    kube_stderr create --raw "/api/v1/namespaces/$ns/pods/$pod/eviction" -f - 2>&1)
  check "a PodDisruptionBudget (minAvailable 1) makes the Eviction API refuse to evict its one pod" \
    "$(grep -o 'Cannot evict pod as it would violate the pod.s disruption budget' <<<"$out" | head -n 1)" \
    "^Cannot evict pod as it would violate the pod.s disruption budget$"

  # 6. A StatefulSet's stable names in cluster DNS, from another pod.
  cat >"$dir/statefulset.yaml" <<EOF
apiVersion: v1
kind: Service
metadata: {name: web, namespace: $ns}
spec:
  clusterIP: None
  selector: {app: web}
  ports: [{name: http, port: 8080}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web, namespace: $ns}
spec:
  serviceName: web
  replicas: 2
  minReadySeconds: 1
  persistentVolumeClaimRetentionPolicy: {whenDeleted: Delete, whenScaled: Retain}
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      nodeSelector: {kubernetes.io/hostname: $node}
      containers:
        - name: c
          image: $image
          imagePullPolicy: Never
          command: [sh, -c, 'mkdir -p /www && hostname > /www/index.html && exec httpd -f -p 8080 -h /www']
EOF
  kube apply -f "$dir/statefulset.yaml" >/dev/null
  sts_ready() { [ "$(kube get statefulset web -n "$ns" -o jsonpath='{.status.availableReplicas}')" = 2 ]; }
  wait_until 180 "the StatefulSet's two pods available" sts_ready
  cat >"$dir/sts-client.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata: {name: sts-client, namespace: $ns}
spec:
  restartPolicy: Never
  nodeSelector: {kubernetes.io/hostname: $node}
  containers:
    - name: c
      image: $image
      imagePullPolicy: Never
      # (timeout, not wget -T: the toolbox's busybox 1.35 wget crashes with -T)
      command: [sh, -c, 'for i in \$(seq 1 20); do a=\$(timeout 3 wget -q -O - http://web-0.web:8080/) && b=\$(timeout 3 wget -q -O - http://web-1.web.$ns.svc.cluster.local:8080/) && echo \$a \$b && exit 0; sleep 2; done; exit 1']
EOF
  kube apply -f "$dir/sts-client.yaml" >/dev/null
  wait_until 120 "the StatefulSet client done" pod_done sts-client "$ns"
  check "a StatefulSet's pods answer by their stable DNS names (web-0.web, web-1.web.NS.svc.cluster.local)" \
    "$(kube get pod sts-client -n "$ns" -o jsonpath='{.status.phase}') $(kube logs sts-client -n "$ns" 2>&1)" \
    '^Succeeded web-0 web-1$'

  # 7. An ephemeral container in a running pod.
  kube_stderr debug -n "$ns" "$pod" --image="$image" --image-pull-policy=Never --container=dbg --target=c \
    -- sh -c 'echo debug-ran-in-$(hostname)' >/dev/null 2>&1
  eph_done() { kube get pod "$pod" -n "$ns" -o jsonpath='{.status.ephemeralContainerStatuses[0].state.terminated.reason}' | grep . >/dev/null; }
  wait_until 120 "the ephemeral container done" eph_done
  check "an ephemeral container (kubectl debug) runs in a running pod" \
    "$(kube logs -n "$ns" "$pod" -c dbg 2>&1)" "^debug-ran-in-$pod\$"

  kube delete namespace "$ns" sprout-restricted --wait=false >/dev/null 2>&1
  kube delete validatingadmissionpolicybinding sprout-max-replicas >/dev/null 2>&1
  kube delete validatingadmissionpolicy sprout-max-replicas >/dev/null 2>&1
}

# kube_stderr runs kubectl once against node-1's apiserver, its errors kept: for the
# refusals above, which kube (kubernetes-cluster.sh) would retry elsewhere and silence.
kube_stderr() { KUBE_SERVER="https://$(node_ip 1):6443" cluster_kubectl "$@"; }
