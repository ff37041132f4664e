#!/bin/bash
# Votes, PKI and state survive a power cut, and a settled node does not wear its disk: every file sprout-firstboot renames into
# place is followed by an fsync of its directory, so the new name is on disk before the
# node acts on it (a vote promised, a CA handed out). One node founds a one-member etcd
# in a network namespace under strace; the test then reads the trace: for the
# formation state, the CA keys and state.json, the rename must be followed, in the same
# thread, by an open of the file's directory and an fsync of that descriptor. Traffic
# stays inside the namespace (198.18.0.41 on a veth pair whose both ends are inside).
# Also: a settled node rewrites state.json never, not every second; and a corrupt
# state.json is moved aside instead of stopping the node from starting.
set -u
name=durable_writes_test
if [ "$(id -u)" -ne 0 ]; then
  echo "$name: skipped: needs root to create a network namespace"
  exit 0
fi
for tool in ip etcd strace /usr/bin/python3; do
  if ! command -v "$tool" >/dev/null; then
    echo "$name: skipped: '$tool' not found (scripts/install-deps installs iproute2, etcd-server, strace, python3)"
    exit 0
  fi
done
FIRSTBOOT=$(readlink -f "${SPROUT_FIRSTBOOT:?set SPROUT_FIRSTBOOT to the sprout-firstboot binary}")
NS=sprt-dw
WORK=$(mktemp -d /tmp/sprt-dw.XXXXXX)
failed=1
cleanup() {
  [ -n "${PID:-}" ] && kill "$PID" 2>/dev/null
  sleep 1
  for p in $(ip netns pids "$NS" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  ip netns del "$NS" 2>/dev/null
  if [ "$failed" -eq 0 ]; then rm -rf "$WORK"; else echo "$name: kept $WORK"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

ip netns del "$NS" 2>/dev/null
ip netns add "$NS"
ip -n "$NS" link set lo up
ip -n "$NS" link add eth0 type veth peer name eth1
ip -n "$NS" link set eth1 up
ip -n "$NS" addr add 198.18.0.41/24 dev eth0
ip -n "$NS" link set eth0 up
head -c 32 /dev/urandom | base64 >"$WORK/secret"
# No --apply-system: the node config stays off this host.
ip netns exec "$NS" strace -f -qq -o "$WORK/trace" -e trace=openat,fsync,rename \
  "$FIRSTBOOT" run --state-dir "$WORK/state" --name dw-1 --listen 198.18.0.41 --expected 1 --max-control-planes 1 --group "" \
  --secret-file "$WORK/secret" --etcd-launch process --etcd-data-dir "$WORK/etcd" --pki-dir "$WORK/pki" \
  --cluster-file /nonexistent >"$WORK/firstboot.log" 2>&1 &
PID=$!
deadline=$(($(date +%s) + 90))
until grep -q '"phase": *"founding member"' "$WORK/state/state.json" 2>/dev/null; do
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "FAIL: the node did not become a founding member in 90 s"
    tail -n 5 "$WORK/firstboot.log"
    exit 1
  fi
  sleep 0.5
done
sleep 2
# A settled node writes no status: count state.json renames over 5 quiet seconds.
before=$(grep -c 'rename(.*state\.json"' "$WORK/trace")
sleep 5
after=$(grep -c 'rename(.*state\.json"' "$WORK/trace")
quiet=0
if [ "$before" -eq "$after" ]; then
  echo "ok: a settled node wrote state.json 0 times in 5 s"
else
  echo "FAIL: a settled node wrote state.json $((after - before)) times in 5 s (flash wears)"
  quiet=1
fi
/usr/bin/python3 - "$WORK/trace" "$WORK" <<'EOF'
import os, re, sys
trace, work = sys.argv[1], sys.argv[2]
lines = [l.rstrip("\n") for l in open(trace)]
call = re.compile(r'^(\d+)\s+(\w+)\((.*)\)\s+=\s+(-?\d+)')
# With several threads, strace splits a call another thread interrupts into
# "fsync(5 <unfinished ...>" and "<... fsync resumed>) = 0"; join the halves.
unfinished = re.compile(r'^(\d+)\s+(\w+)\((.*) <unfinished \.\.\.>$')
resumed = re.compile(r'^(\d+)\s+<\.\.\. (\w+) resumed>(.*)\)\s+=\s+(-?\d+)')
pending = {}
events = []
for l in lines:
    m = call.match(l)
    if m:
        events.append((int(m.group(1)), m.group(2), m.group(3), int(m.group(4))))
        continue
    m = unfinished.match(l)
    if m:
        pending[int(m.group(1))] = m.group(3)
        continue
    m = resumed.match(l)
    if m:
        pid = int(m.group(1))
        events.append((pid, m.group(2), pending.pop(pid, "") + m.group(3), int(m.group(4))))
wanted = {"formation.state": f"{work}/state/formation.state", "state.json": f"{work}/state/state.json",
          "Kubernetes CA key": f"{work}/pki/ca.key", "etcd CA key": f"{work}/pki/etcd/ca.key"}
failed = 0
for label, path in wanted.items():
    renames = [i for i, e in enumerate(events) if e[1] == "rename" and e[3] == 0 and e[2].endswith(f'"{path}"')]
    if not renames:
        print(f"FAIL: no rename into {path} in the trace"); failed += 1; continue
    bad = 0
    for i in renames:
        pid = events[i][0]
        d = os.path.dirname(path)
        fd = None
        ok = False
        for e in events[i + 1:]:
            if e[0] != pid: continue
            if fd is None and e[1] == "openat" and f'"{d}"' in e[2] and e[3] >= 0: fd = e[3]; continue
            if fd is not None and e[1] == "fsync" and e[2].strip() == str(fd) and e[3] == 0: ok = True; break
            if e[1] == "rename": break
        bad += not ok
    if bad: print(f"FAIL: {bad} of {len(renames)} renames into {label} are not followed by an fsync of {os.path.dirname(path)}"); failed += 1
    else: print(f"ok: every rename into {label} ({len(renames)}) is followed by an fsync of its directory")
sys.exit(1 if failed else 0)
EOF
failed=$?
[ "$quiet" -eq 0 ] || failed=1

# A corrupt status file does not keep the node from starting: it is moved aside.
# Stop every process of the namespace (strace, firstboot, etcd), bounded.
for p in $(ip netns pids "$NS" 2>/dev/null); do kill "$p" 2>/dev/null; done
for _ in $(seq 1 20); do [ -z "$(ip netns pids "$NS" 2>/dev/null)" ] && break; sleep 0.5; done
for p in $(ip netns pids "$NS" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
sleep 1
echo '{"phase": "founding mem' >"$WORK/state/state.json"
ip netns exec "$NS" "$FIRSTBOOT" run --state-dir "$WORK/state" --name dw-1 --listen 198.18.0.41 --expected 1 \
  --max-control-planes 1 --group "" --secret-file "$WORK/secret" --etcd-launch process --etcd-data-dir "$WORK/etcd" --pki-dir "$WORK/pki" \
  --cluster-file /nonexistent >>"$WORK/firstboot.log" 2>&1 &
PID=$!
deadline=$(($(date +%s) + 60))
until grep -q '"phase": *"founding member"' "$WORK/state/state.json" 2>/dev/null; do
  [ "$(date +%s)" -ge "$deadline" ] && break
  sleep 0.5
done
if grep -q '"phase": *"founding member"' "$WORK/state/state.json" 2>/dev/null &&
  [ "$(cat "$WORK/state/state.json.corrupt" 2>/dev/null)" = '{"phase": "founding mem' ]; then
  echo "ok: after a corrupt state.json the node started, kept the bad file as state.json.corrupt and is a member again"
else
  echo "FAIL: a corrupt state.json kept the node from starting"
  tail -n 3 "$WORK/firstboot.log"
  failed=1
fi
[ "$failed" -eq 0 ] && echo "$name: passed" || echo "$name: FAILED"
exit "$failed"
