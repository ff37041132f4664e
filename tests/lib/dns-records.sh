#!/bin/bash
# Sourced by the shell tests that check a cluster DNS server against a running
# kube-apiserver (dns_test: knotd fed by sprout-firstboot dns on 1.20;
# stack_control_plane_test: CoreDNS on 1.36): every record kind of the Kubernetes DNS
# specification, and how long a deleted Service keeps answering. ok/bad are checks.sh's.
#
# What differs between the tests is given by the caller before the calls:
#   DNS_DIG=(CMD...)          dig with its server and port, and whatever runs it (such as
#                             ip netns exec NS): "${DNS_DIG[@]}" +short NAME TYPE must work
#   DNS_SLICE_API=VERSION     the EndpointSlice apiVersion the apiserver serves
#                             (discovery.k8s.io/v1beta1 on 1.20, discovery.k8s.io/v1 on 1.36)
#   kc ARGS...                kubectl with an admin's credentials
#   dns_set_pod_ip NS POD IP  sets the pod's status.podIP(s), as a kubelet would report them
#   wait_for SECONDS CMD...   true once CMD succeeds (bounded)
# then:
#   dns_records_check         section 1: every record kind (makes namespace shop)
#   dns_records_delete_timing section 2: a deleted Service is NXDOMAIN, and how fast
# and q/status_of/answers for the caller's own checks.

q() { "${DNS_DIG[@]}" +short +time=1 +tries=1 "$@" 2>/dev/null; }
status_of() { "${DNS_DIG[@]}" +time=1 +tries=1 "$@" 2>/dev/null | sed -n 's/.*status: \([A-Z]*\).*/\1/p'; }
answers() {  # answers EXPECTED DIG-ARGS...: dig's short answer contains EXPECTED
  local want=$1
  shift
  q "$@" | grep -qxF -- "$want"
}
has_answer() { q "$@" | grep -q .; }                       # has_answer DIG-ARGS...
is_status() { [ "$(status_of "${@:2}")" = "$1" ]; }        # is_status STATUS DIG-ARGS...

# srv_is ANSWER PORT TARGET...: every record of the SRV answer has priority 0, a numeric
# weight, the port PORT, and the targets are exactly TARGETs. The weight is not compared:
# knotd gives 100 to each, CoreDNS divides 100 by the number of targets (0 50 ... for two).
srv_is() {
  local answer=$1 port=$2 got want
  shift 2
  [ -n "$answer" ] || return 1
  awk -v port="$port" '$1 != "0" || $2 !~ /^[0-9]+$/ || $3 != port || NF != 4 { bad = 1 } END { exit bad }' \
    <<<"$answer" || return 1
  got=$(awk '{ print $4 }' <<<"$answer" | sort | tr '\n' ' ')
  want=$(printf '%s\n' "$@" | sort | tr '\n' ' ')
  [ "$got" = "$want" ]
}

dns_records_check() {
  local srv ptr v all cname s
  if wait_for 30 answers 10.96.0.1 kubernetes.default.svc.cluster.local A; then
    ok "A: kubernetes.default.svc.cluster.local -> $(q kubernetes.default.svc.cluster.local A)"
  else
    bad "kubernetes.default.svc.cluster.local has no A record 10.96.0.1 after 30 s"
  fi
  srv=$(q _https._tcp.kubernetes.default.svc.cluster.local SRV)
  srv_is "$srv" 443 kubernetes.default.svc.cluster.local. && ok "SRV for the named port https: $srv" ||
    bad "SRV _https._tcp.kubernetes.default: '$srv'"
  ptr=$(q -x 10.96.0.1)
  [ "$ptr" = "kubernetes.default.svc.cluster.local." ] && ok "PTR 10.96.0.1 -> $ptr" || bad "PTR of 10.96.0.1: '$ptr'"
  v=$(q dns-version.cluster.local TXT)
  [ "$v" = '"1.1.0"' ] && ok "dns-version.cluster.local TXT $v" || bad "dns-version: '$v'"

  kc create namespace shop >/dev/null
  # A pod needs its namespace's default ServiceAccount; where no controller-manager runs,
  # nothing else makes it (where one runs, this may find it made already).
  kc create serviceaccount default -n shop >/dev/null 2>&1
  kc apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Service
metadata: {name: db, namespace: shop}
spec:
  clusterIP: None
  ports: [{name: pg, port: 5432, protocol: TCP}]
---
apiVersion: $DNS_SLICE_API
kind: EndpointSlice
metadata:
  name: db-1
  namespace: shop
  labels: {kubernetes.io/service-name: db}
addressType: IPv4
ports: [{name: pg, port: 5432, protocol: TCP}]
endpoints:
- addresses: [10.244.1.5]
  hostname: db-0
  conditions: {ready: true}
- addresses: [10.244.2.7]
  conditions: {ready: true}
- addresses: [10.244.2.9]
  conditions: {ready: false}
---
apiVersion: v1
kind: Service
metadata: {name: mail, namespace: shop}
spec:
  type: ExternalName
  externalName: smtp.example.org
---
apiVersion: v1
kind: Pod
metadata: {name: web-1, namespace: shop}
spec:
  automountServiceAccountToken: false  # no controller-manager may run to make the token it would wait for
  containers: [{name: c, image: localhost/sprout/busybox:1.35}]
EOF
  # The pod has no kubelet here: its address is what a kubelet would report.
  dns_set_pod_ip shop web-1 10.244.1.9 >/dev/null || bad "could not set the pod web-1's status.podIP"
  if wait_for 20 answers 10.244.1.5 db-0.db.shop.svc.cluster.local A; then
    ok "headless pod record: db-0.db.shop.svc.cluster.local -> $(q db-0.db.shop.svc.cluster.local A)"
  else
    bad "no A record for db-0.db.shop.svc.cluster.local"
  fi
  all=$(q db.shop.svc.cluster.local A | sort | tr '\n' ' ')
  [ "$all" = "10.244.1.5 10.244.2.7 " ] && ok "headless Service: its ready endpoints only: $all" ||
    bad "headless Service db answers '$all', not the two ready endpoints"
  srv=$(q _pg._tcp.db.shop.svc.cluster.local SRV | sort)
  srv_is "$srv" 5432 10-244-2-7.db.shop.svc.cluster.local. db-0.db.shop.svc.cluster.local. &&
    ok "SRV of a headless Service: one per endpoint: $(tr '\n' ' ' <<<"$srv")" ||
    bad "SRV _pg._tcp.db: '$(tr '\n' ' ' <<<"$srv")'"
  ptr=$(q -x 10.244.1.5)
  [ "$ptr" = "db-0.db.shop.svc.cluster.local." ] && ok "PTR 10.244.1.5 -> $ptr" || bad "PTR of 10.244.1.5: '$ptr'"
  cname=$(q mail.shop.svc.cluster.local CNAME)
  [ "$cname" = "smtp.example.org." ] && ok "ExternalName: mail.shop.svc.cluster.local CNAME $cname" ||
    bad "ExternalName CNAME: '$cname'"
  wait_for 20 answers 10.244.1.9 10-244-1-9.shop.pod.cluster.local A &&
    ok "pod record: 10-244-1-9.shop.pod.cluster.local -> 10.244.1.9" || bad "no pod record for web-1"
  s=$(status_of nothing.shop.svc.cluster.local A)
  [ "$s" = NXDOMAIN ] && ok "a name that does not exist is NXDOMAIN" || bad "a missing name answered '$s'"
}

dns_records_delete_timing() {
  local t0 ms
  kc create service clusterip gone -n shop --tcp=80:80 >/dev/null
  wait_for 20 has_answer gone.shop.svc.cluster.local A || bad "a new Service got no A record"
  t0=$(date +%s%N)
  kc delete service gone -n shop >/dev/null
  if wait_for 20 is_status NXDOMAIN gone.shop.svc.cluster.local A; then
    ms=$((($(date +%s%N) - t0) / 1000000))
    ok "a deleted Service is NXDOMAIN $ms ms after kubectl delete returned (figure: delete-to-NXDOMAIN ${ms} ms)"
  else
    bad "a deleted Service still answers after 20 s"
  fi
}
