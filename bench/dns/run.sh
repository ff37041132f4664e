#!/bin/bash
# bench/dns: the DNS servers considered for the cluster DNS (docs/dns.md), each serving
# the same data set of N Services (an A record svcI.nsJ.svc.cluster.local in 10.96.0.0/12,
# an SRV _http._tcp.svcI.nsJ.svc.cluster.local and a PTR for each): knotd (zone files, as
# sprout runs it), BIND 9 (the same zone files), unbound (local-data) and dnsmasq (a hosts
# file and srv-host lines), on 127.0.0.1 ports 5301-5304, from a private temporary folder,
# with one worker thread where the server has that setting. Measured for each: resident
# memory (VmRSS) once the data is served; the time of a full reload after one A record
# changed, from writing the data to the first answer with the new address (median of
# ROUNDS); latency p50/p99 of A queries for existing names, one at a time, the servers
# asked in turn (median of 3 passes of 1,000). Prints a table and ratios against knotd.
# Needs root; installs Debian's knot, bind9, unbound, dnsmasq-base, dnsutils if missing.
# Usage: bench/dns/run.sh [N] [ROUNDS]   (default N=1000 Services, 5 reload rounds)
set -euo pipefail
N=${1:-1000} ROUNDS=${2:-5} QUERIES=1000 PASSES=3
[ "$(id -u)" -eq 0 ] || { echo "bench/dns: needs root"; exit 1; }
# Everything (servers, client, control tools) runs on CPU 0, where knotd pins one of its
# threads by itself anyway, so that all servers and the client share one placement.
[ -n "${BENCH_DNS_ON_CPU0:-}" ] || exec env BENCH_DNS_ON_CPU0=1 taskset -c 0 bash "$0" "$@"
[ "$N" -ge 1 ] && [ "$N" -le 1000000 ] || { echo "bench/dns: N must be 1..1000000 (10.96.0.0/12 holds them)"; exit 1; }
missing=$(for tp in knotd:knot knotc:knot named:bind9 rndc:bind9-utils rndc-confgen:bind9-utils unbound:unbound \
  unbound-control:unbound dnsmasq:dnsmasq-base dig:dnsutils python3:python3; do
  command -v "${tp%%:*}" >/dev/null || echo "${tp#*:}"; done | sort -u | tr '\n' ' ')
[ -z "$missing" ] || { echo "bench/dns: installing $missing"; apt-get install -y --no-install-recommends $missing >/dev/null; }
for port in 5301 5302 5303 5304 5312; do
  ! ss -Hlntu "sport = :$port" | grep . >/dev/null || { echo "bench/dns: port $port is in use; stop what uses it"; exit 1; }
done

W=$(mktemp -d /tmp/sprout-bench-dns.XXXXXX)  # mode 0700: private to root
declare -A PID  # the servers this script started (dnsmasq's own is in its pid file)
cleanup() {  # every server this script started, then its folder
  set +e; [ -s "$W/dnsmasq/dnsmasq.pid" ] && kill "$(cat "$W/dnsmasq/dnsmasq.pid")" 2>/dev/null
  for pid in "${PID[@]}"; do kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done; rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
mkdir -p "$W"/{gen,knot/zones,knot/db,bind,unbound,dnsmasq}

# dnsq.py: makes the data set and asks the servers (UDP, one query at a time).
cat >"$W/dnsq.py" <<'PY'
import os, random, socket, struct, subprocess, sys, time
def ip_of(i): v = (10 << 24 | 96 << 16) + 10 + i; return socket.inet_ntoa(struct.pack("!I", v))
def name_of(i): return f"svc{i}.ns{i % 10}.svc.cluster.local"
ALT = "10.111.255.254"  # svc0's address after the change; no other Service has it
def gen(n, d, serial, alt):
    hdr = ("$ORIGIN {z}.\n$TTL 5\n@ SOA ns.dns.cluster.local. hostmaster.cluster.local. "
           f"{serial} 60 10 3600 5\n@ NS ns.dns.cluster.local.\n")
    zones = {"cluster.local": [hdr.format(z="cluster.local"), 'ns.dns A 127.0.0.1\ndns-version TXT "1.1.0"\n']}
    for o in range(96, 112): zones[f"{o}.10.in-addr.arpa"] = [hdr.format(z=f"{o}.10.in-addr.arpa")]
    ub, hosts, srv = [], [], []
    for i in range(n):
        name, ip = name_of(i), ip_of(i)
        a, o = ALT if (alt and i == 0) else ip, ip.split(".")
        zones["cluster.local"].append(f"{name}. A {a}\n_http._tcp.{name}. SRV 0 100 80 {name}.\n")
        zones[f"{o[1]}.10.in-addr.arpa"].append(f"{o[3]}.{o[2]} PTR {name}.\n")
        ub.append(f'local-data: "{name}. 5 IN A {a}"\nlocal-data: "_http._tcp.{name}. 5 IN SRV 0 100 80 {name}."\n'
                  f'local-data: "{o[3]}.{o[2]}.{o[1]}.10.in-addr.arpa. 5 IN PTR {name}."\n')
        hosts.append(f"{a} {name}\n"); srv.append(f"srv-host=_http._tcp.{name},{name},80,0,100\n")
    os.makedirs(d, exist_ok=True)
    files = {f"{z}.zone": lines for z, lines in zones.items()}
    files.update({"unbound-data.conf": ub, "hosts": hosts, "srv.conf": srv})
    for f, lines in files.items(): open(f"{d}/{f}", "w").write("".join(lines))
def ask(sock, name):
    """One A query; returns (rcode, [A addresses]) or None on timeout or error."""
    qid = random.getrandbits(16)
    q = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0\0\1\0\1"
    try:
        sock.send(q); r = sock.recv(4096)
        while len(r) < 12 or struct.unpack("!H", r[:2])[0] != qid: r = sock.recv(4096)
    except OSError: return None
    qd, an = struct.unpack("!HH", r[4:8])
    def skip(off):
        while True:
            l = r[off]
            if l == 0: return off + 1
            if l & 0xC0 == 0xC0: return off + 2
            off += l + 1
    off, addrs = 12, []
    for _ in range(qd): off = skip(off) + 4
    for _ in range(an):
        off = skip(off)
        t, _c, _ttl, rdlen = struct.unpack("!HHIH", r[off:off + 10])
        if t == 1 and rdlen == 4: addrs.append(socket.inet_ntoa(r[off + 10:off + 14]))
        off += 10 + rdlen
    return r[3] & 0xF, addrs
def sock_to(port, timeout):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect(("127.0.0.1", port)); s.settimeout(timeout)
    return s
def wait(port, name, want, limit=30.0):
    """Polls every millisecond until NAME answers WANT; False after LIMIT seconds."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        s = sock_to(port, 0.05); a = ask(s, name); s.close()
        if a and a[0] == 0 and want in a[1]: return True
        time.sleep(0.001)
    return False
mode = sys.argv[1]
if mode == "ip": print(ip_of(int(sys.argv[2])))
elif mode == "gen": gen(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5] == "1")
elif mode == "wait": sys.exit(0 if wait(int(sys.argv[2]), sys.argv[3], sys.argv[4]) else 1)
elif mode == "reload":  # reload PORT NAME WANT SHELL-COMMAND: ms from the command's start to the new answer
    port, name, want, cmd = int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
    t0 = time.perf_counter_ns()
    subprocess.run(cmd, shell=True, check=True)
    if not wait(port, name, want): print("fail"); sys.exit(0)
    print(f"{(time.perf_counter_ns() - t0) / 1e6:.1f}")
elif mode == "lat":  # lat N COUNT PASSES PORT...: per port the median over passes of "p50-us p99-us", failures
    n, count, passes, ports = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), [int(p) for p in sys.argv[5:]]
    socks, rnd = [sock_to(p, 1.0) for p in ports], random.Random(42)
    for _ in range(100):  # warm-up, not counted
        for s in socks: ask(s, name_of(rnd.randrange(n)))
    res, fails = [[] for _ in ports], [0] * len(ports)
    for pas in range(passes):
        times = [[] for _ in ports]
        for _ in range(count):
            i = rnd.randrange(1, n) if n > 1 else 0  # svc0 may have the changed address
            for j in range(len(ports)):  # each query goes to the servers in a rotated order
                k = (i + j) % len(ports); t0 = time.perf_counter_ns(); a = ask(socks[k], name_of(i))
                t = time.perf_counter_ns() - t0
                if a is None or a[0] != 0 or not a[1]: fails[k] += 1
                else: times[k].append(t / 1000)
        for k in range(len(ports)):
            ts = sorted(times[k]) or [float("nan")]
            res[k].append([ts[max(0, -(-len(ts) * q // 100) - 1)] for q in (50, 99)])
        print(f"  pass {pas + 1}, p50/p99 us:", "  ".join(f"{r[-1][0]:.0f}/{r[-1][1]:.0f}" for r in res), file=sys.stderr)
    for k in range(len(ports)):
        med = lambda j: sorted(x[j] for x in res[k])[(passes - 1) // 2]
        print(f"{med(0):.0f} {med(1):.0f} {fails[k]}")
PY
dnsq() { python3 "$W/dnsq.py" "$@"; }
REVERSE=$(seq 96 111 | sed 's/$/.10.in-addr.arpa/')

echo "== data set: $N Services ($((3 * N)) records: A, SRV, PTR), zone files for 17 zones"
dnsq gen "$N" "$W/gen/0" 1 0
cp "$W"/gen/0/*.zone "$W/knot/zones/" && cp "$W"/gen/0/*.zone "$W/bind/"
cp "$W/gen/0/unbound-data.conf" "$W/unbound/data.conf" && cp "$W/gen/0/hosts" "$W/gen/0/srv.conf" "$W/dnsmasq/"

# knotd: the configuration sprout bakes (lib/dns/zone.cc KnotConfig), on 127.0.0.1@5301.
{ printf 'server:\n    rundir: %s\n    listen: 127.0.0.1@5301\n    udp-workers: 1\n    tcp-workers: 1\n' "$W/knot"
  printf '    background-workers: 1\ncontrol:\n    listen: knot.sock\ndatabase:\n    storage: %s\n' "$W/knot/db"
  printf 'log:\n  - target: stderr\n    any: notice\ntemplate:\n  - id: default\n    storage: %s\n' "$W/knot/zones"
  printf '    file: "%%s.zone"\n    zonefile-sync: -1\n    zonefile-load: whole\n    journal-content: none\n'
  printf '    semantic-checks: off\nzone:\n'
  for z in cluster.local $REVERSE; do printf '  - domain: %s\n' "$z"; done; } >"$W/knot/knot.conf"
knotd -c "$W/knot/knot.conf" >"$W/knot/log" 2>&1 &
PID[knotd]=$!

# BIND: authoritative only, one worker (-n 1), rndc on 127.0.0.1:5312 with a key made here.
rndc-confgen -a -A hmac-sha256 -k bench-key -c "$W/bind/rndc.key" >/dev/null 2>&1
{ printf 'include "%s/bind/rndc.key";\n' "$W"
  printf 'options { directory "%s/bind"; pid-file "%s/bind/named.pid"; session-keyfile "%s/bind/session.key";\n' "$W" "$W" "$W"
  printf '  listen-on port 5302 { 127.0.0.1; }; listen-on-v6 { none; }; recursion no; dnssec-validation no; notify no; };\n'
  printf 'controls { inet 127.0.0.1 port 5312 allow { 127.0.0.1; } keys { "bench-key"; }; };\n'
  for z in cluster.local $REVERSE; do printf 'zone "%s" { type primary; file "%s.zone"; };\n' "$z" "$z"; done; } >"$W/bind/named.conf"
named -4 -g -n 1 -c "$W/bind/named.conf" >"$W/bind/log" 2>&1 &
PID[named]=$!
RNDC="rndc -k $W/bind/rndc.key -s 127.0.0.1 -p 5312"

# unbound: local-data in an included file, control over a local socket (no certificates).
{ printf 'server:\n  interface: 127.0.0.1\n  port: 5303\n  do-ip6: no\n  num-threads: 1\n  chroot: ""\n  username: ""\n'
  printf '  directory: "%s/unbound"\n  pidfile: "%s/unbound/unbound.pid"\n  use-syslog: no\n  logfile: ""\n' "$W" "$W"
  printf '  module-config: "iterator"\n  do-daemonize: no\n'
  for z in cluster.local $REVERSE; do printf '  local-zone: "%s." static\n' "$z"; done
  printf '  include: "%s/unbound/data.conf"\nremote-control:\n  control-enable: yes\n' "$W"
  printf '  control-interface: "%s/unbound/control.sock"\n' "$W"; } >"$W/unbound/unbound.conf"
unbound -d -c "$W/unbound/unbound.conf" >"$W/unbound/log" 2>&1 &
PID[unbound]=$!

# dnsmasq: names from a hosts file (PTR follows from it), SRV from srv-host lines; no
# upstream. It has no worker-thread setting (one process, one thread).
{ printf 'port=5304\nlisten-address=127.0.0.1\nbind-interfaces\nno-resolv\nno-hosts\nuser=root\nlocal-ttl=5\n'
  printf 'addn-hosts=%s/dnsmasq/hosts\nconf-file=%s/dnsmasq/srv.conf\npid-file=%s/dnsmasq/dnsmasq.pid\n' "$W" "$W" "$W"
  for z in cluster.local $REVERSE; do printf 'local=/%s/\n' "$z"; done; } >"$W/dnsmasq/dnsmasq.conf"
DNSMASQ_START="dnsmasq --conf-file=$W/dnsmasq/dnsmasq.conf --log-facility=$W/dnsmasq/log"
$DNSMASQ_START
dnsmasq_pid() { cat "$W/dnsmasq/dnsmasq.pid"; }

NAMES=(knotd named unbound dnsmasq)
PORTS=(5301 5302 5303 5304)
LOGS=(knot bind unbound dnsmasq)
last=$((N - 1))
last_name="svc$last.ns$((last % 10)).svc.cluster.local"
last_ip=$(dnsq ip "$last")
declare -A RSS THREADS RELOAD P50 P99 FAILS
for k in 0 1 2 3; do
  dnsq wait "${PORTS[$k]}" "$last_name" "$last_ip" ||
    { echo "${NAMES[$k]} does not answer $last_name within 30 s; its log:"; tail -n 20 "$W/${LOGS[$k]}/log"; exit 1; }
done
for k in 0 1 2 3; do
  s=${NAMES[$k]} p=${PORTS[$k]}; pid=${PID[$s]:-$(dnsmasq_pid)}
  THREADS[$s]=$(find "/proc/$pid/task" -mindepth 1 -maxdepth 1 | wc -l)
  RSS[$s]=$(awk '/^VmRSS:/ { printf "%.1f", $2 / 1024 }' "/proc/$pid/status")
  srv=$(dig +short +tries=1 +time=1 -p "$p" @127.0.0.1 "_http._tcp.svc1.ns1.svc.cluster.local" SRV)
  ptr=$(dig +short +tries=1 +time=1 -p "$p" @127.0.0.1 -x 10.96.0.11)
  nx=$(dig +tries=1 +time=1 -p "$p" @127.0.0.1 "nosuch.ns1.svc.cluster.local" A | grep -o 'status: [A-Z]*' || true)
  printf '%-8s answers: SRV "%s", PTR "%s", missing name %s\n' "$s" "$srv" "$ptr" "$nx"
done

# Reloads: round r gives svc0 the changed address (odd r) or its own (even r), with a
# higher serial. The timed command writes the new data (fresh file, then rename, as the
# controller does) and asks for the reload; the clock stops at the first new answer.
echo "== reloads: $ROUNDS rounds each, one A record changed per round"
put() { echo "cat $1 >$2.new && mv $2.new $2"; }  # shell text: write SRC to DST atomically
median() { sort -n | awk '{ a[NR] = $1 } END { if (NR == 0) print "fail"; else print a[int((NR + 1) / 2)] }'; }
declare -A T
timed() {  # timed KEY PORT SHELL-TEXT: runs it, adds the ms until svc0 answers $want to T[KEY]
  T[$1]+="$(dnsq reload "$2" svc0.ns0.svc.cluster.local "$want" "$3") "
}
for r in $(seq 1 "$ROUNDS"); do
  g=$W/gen/$r; want=10.96.0.10; [ $((r % 2)) -eq 1 ] && want=10.111.255.254
  dnsq gen "$N" "$g" $((1 + r)) $((r % 2))
  timed knotd 5301 "$(put "$g/cluster.local.zone" "$W/knot/zones/cluster.local.zone") && knotc -s $W/knot/knot.sock zone-reload >/dev/null"
  timed named 5302 "$(put "$g/cluster.local.zone" "$W/bind/cluster.local.zone") && $RNDC reload >/dev/null"
  timed unbound 5303 "$(put "$g/unbound-data.conf" "$W/unbound/data.conf") && unbound-control -c $W/unbound/unbound.conf reload >/dev/null"
  timed dnsmasq 5304 "$(put "$g/hosts" "$W/dnsmasq/hosts") && kill -HUP $(dnsmasq_pid)"
  sleep 0.5
done
# dnsmasq re-reads only hosts files on SIGHUP: a changed SRV (srv-host) needs a restart.
for r in $(seq 1 "$ROUNDS"); do
  g=$W/gen/$r; want=10.96.0.10; [ $((r % 2)) -eq 1 ] && want=10.111.255.254; old=$(dnsmasq_pid)
  timed dnsmasq-restart 5304 "$(put "$g/hosts" "$W/dnsmasq/hosts") && $(put "$g/srv.conf" "$W/dnsmasq/srv.conf") &&
    kill $old && while grep -qs '^State:[[:space:]]*[^Z[:space:]]' /proc/$old/status; do sleep 0.005; done && $DNSMASQ_START"
  sleep 0.5
done
for s in "${NAMES[@]}" dnsmasq-restart; do RELOAD[$s]=$(echo "${T[$s]}" | tr ' ' '\n' | grep -Ev '^$|fail' | median); done
fails=$(printf '%s\n' "${T[@]}" | tr ' ' '\n' | grep -c fail || true)
[ "$fails" -eq 0 ] || echo "reloads that did not serve the new answer within 30 s: $fails"

echo "== latency: $PASSES passes of $QUERIES A queries for existing names, one at a time, the servers in turn"
echo "  (knotd, named, unbound, dnsmasq; all on CPU 0; load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc --all) CPUs)"
i=0
while read -r p50 p99 f; do
  s=${NAMES[$i]}; P50[$s]=$p50; P99[$s]=$p99; FAILS[$s]=$f; i=$((i + 1))
done < <(dnsq lat "$N" "$QUERIES" "$PASSES" "${PORTS[@]}")

ver() { case $1 in knotd) knotd --version | awk '{ print $NF }' ;; named) named -v | awk '{ sub(/-.*/, "", $2); print $2 }' ;;
  unbound) unbound -V | awk '/^Version/ { print $2 }' ;; dnsmasq) dnsmasq --version | awk 'NR == 1 { print $3 }' ;; esac; }
echo
printf 'N=%s Services; reload: median of %s rounds; latency: median of %s passes of %s queries (UDP,\n' "$N" "$ROUNDS" "$PASSES" "$QUERIES"
echo "client in python3); threads: the server process's threads once the data is loaded"
printf '%-16s %-8s %8s %8s %10s %7s %7s %6s\n' server version threads "RSS MiB" "reload ms" "p50 us" "p99 us" fails
for s in "${NAMES[@]}"; do
  printf '%-16s %-8s %8s %8s %10s %7s %7s %6s\n' "$s" "$(ver "$s")" "${THREADS[$s]}" "${RSS[$s]}" "${RELOAD[$s]}" \
    "${P50[$s]}" "${P99[$s]}" "${FAILS[$s]}"
done
printf '%-16s %-8s %8s %8s %10s\n' "dnsmasq restart" "" "" "" "${RELOAD[dnsmasq-restart]}"
echo
echo "ratios against knotd (above 1: more memory, slower):"
printf '%-16s %8s %8s %8s %8s\n' server memory reload p50 p99
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 > 0 && a ~ /^[0-9.]+$/) printf "%.2f", a / b; else print "-" }'; }
for s in "${NAMES[@]}" dnsmasq-restart; do
  printf '%-16s %8s %8s %8s %8s\n' "${s/-/ }" "$(ratio "${RSS[$s]:-}" "${RSS[knotd]}")" \
    "$(ratio "${RELOAD[$s]}" "${RELOAD[knotd]}")" "$(ratio "${P50[$s]:-}" "${P50[knotd]}")" "$(ratio "${P99[$s]:-}" "${P99[knotd]}")"
done
echo "(unbound reloads with unbound-control reload over a local socket; dnsmasq reloads the hosts"
echo " file on SIGHUP, and its restart row is what a changed SRV record costs)"
