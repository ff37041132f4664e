# shellcheck shell=bash
# Cluster DNS figures from inside a pod (sourced after cluster-lib.sh; docs/dns.md).
#
# dns_figures I NAME: on node I, a pod of the preloaded toolbox image resolves NAME 1,000
# times one at a time through the C library (bench/dns/lookups.c, compiled here with the
# host's gcc against the same Debian libc6 the image carries, handed to the pod through a
# hostPath under /run), and then, as the baseline, the pod's own name, which the kubelet
# wrote into its /etc/hosts. Prints the p50 and p99 of each and knotd's resident memory
# on the node, and sets DNS_FIGURES to the lookups' output (two lines), or "" when the
# pod did not finish. Figures only: the machine's load decides them, so nothing asserts
# on their values.
dns_figures() {
  local i=$1 name=$2 image bin=$CLUSTER_DIR/lookups pod=dns-lookups-$RANDOM
  DNS_FIGURES=""
  command -v gcc >/dev/null || { echo "   dns figures: SKIPPED: no gcc on the host to build bench/dns/lookups.c (apt-get install gcc)"; return 0; }
  gcc -O2 -Wall -Werror -o "$bin" "$CLUSTER_LIB_DIR/../bench/dns/lookups.c" || return 1
  # The toolbox image has no /etc/nsswitch.conf, and without one the C library asks DNS
  # before /etc/hosts; the pod gets Debian's order (files, then DNS), as most images have.
  node_ssh "$i" 'mkdir -p /run/sprout-bench && cat >/run/sprout-bench/lookups && chmod 0755 /run/sprout-bench/lookups &&
    printf "hosts: files dns\n" >/run/sprout-bench/nsswitch.conf' <"$bin" || return 1
  image=$(node_ssh "$i" ctr -n k8s.io images ls -q | grep '^localhost/sprout/busybox@sha256:' | head -n 1)
  [ -n "$image" ] || { echo "   dns figures: node-$i has no preloaded toolbox image" >&2; return 1; }
  cluster_kubectl apply -f - >/dev/null <<EOF || return 1
apiVersion: v1
kind: Pod
metadata: {name: $pod, namespace: default}
spec:
  nodeName: node-$i
  restartPolicy: Never
  automountServiceAccountToken: false
  tolerations: [{operator: Exists}]
  volumes:
    - {name: bench, hostPath: {path: /run/sprout-bench, type: Directory}}
    - {name: nsswitch, hostPath: {path: /run/sprout-bench/nsswitch.conf, type: File}}
  containers:
    - name: lookups
      image: $image
      imagePullPolicy: Never
      volumeMounts:
        - {name: bench, mountPath: /bench, readOnly: true}
        - {name: nsswitch, mountPath: /etc/nsswitch.conf, readOnly: true}
      command: [sh, -c, 'exec /bench/lookups $name \$(hostname)']
EOF
  lookups_done() { cluster_kubectl get pod "$pod" -o jsonpath='{.status.phase}' 2>/dev/null | grep -E '^(Succeeded|Failed)$' >/dev/null; }
  wait_until 600 "the DNS lookup pod done" lookups_done
  DNS_FIGURES=$(cluster_kubectl logs "$pod" 2>&1)
  cluster_kubectl delete pod "$pod" --wait=false >/dev/null 2>&1
  echo "$DNS_FIGURES" | sed 's/^/     lookups: /'
  echo "figures: 1,000 lookups from a pod on node-$i, p50/p99 in microseconds: cluster DNS" \
    "$(echo "$DNS_FIGURES" | awk 'NR == 1 {sub("p50_us=", "", $4); sub("p99_us=", "", $5); print $4 "/" $5}')," \
    "the pod's /etc/hosts entry $(echo "$DNS_FIGURES" | awk 'NR == 2 {sub("p50_us=", "", $4); sub("p99_us=", "", $5); print $4 "/" $5}');" \
    "$(node_ssh "$i" ps -o comm=,rss= -C knotd,coredns | awk '{print $1 " resident " $2 " KiB"}' | paste -sd, -)"
}
