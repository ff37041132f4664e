#!/bin/bash
# Black-box tests of `sprout-firstboot run` outside formation: the node config touches
# the host (hostname, static address) only with --apply-system, which the systemd unit
# passes and tests do not; settings that cannot be used end the run with exit 2 and
# name the setting. The runs that read a node config do so in their own mount and UTS
# namespaces, with a made-up /proc/cmdline and fresh /run and /var/lib, so even a
# wrong result stays off this host.
set -uo pipefail
name=firstboot_cli_test
FIRSTBOOT=$(readlink -f "${SPROUT_FIRSTBOOT:?set SPROUT_FIRSTBOOT to the sprout-firstboot binary}")
src=${SPROUT_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
work=$(mktemp -d /tmp/sprout-firstboot-cli.XXXXXX)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0
check() {  # check NAME ACTUAL EXPECTED-REGEX
  if [[ "$2" =~ $3 ]]; then echo "ok   $1"; passed=$((passed + 1));
  else echo "FAIL $1: got '$2', want /$3/"; failed=$((failed + 1)); fi
}

# --- the unit is the one place that applies the node config to the system
check "the systemd unit runs with --apply-system" \
  "$(grep '^ExecStart=' "$src/firstboot/sprout-firstboot.service")" '^ExecStart=/usr/lib/sprout/sprout-firstboot run --apply-system$'
check "the netns tests never pass --apply-system" \
  "$(grep -h -- '--apply-system' "$src"/tests/formation*_test.sh "$src"/tests/formation/*.sh | grep -v '^ *#')" '^$'

# --- settings that cannot be used: exit 2, every one named with its source
echo "s3cret" >"$work/secret"
out=$("$FIRSTBOOT" run --state-dir "$work/bad" --secret-file "$work/secret" --listen 127.0.0.1 --role boss --port 0 \
  --cluster-file /dev/null 2>&1); rc=$?
check "bad role and port: exit 2" "$rc" '^2$'
check "bad role: named with its flag and the fix" "$out" "role: 'boss' is neither 'control-plane' nor 'worker' \(from --role\); set it to control-plane or worker"
check "bad port: named with its flag and the fix" "$out" "port: 0 is not a UDP port \(from --port\); give a port from 1 to 65535"
check "bad settings: the boot is still counted" "$(grep -o '"boots": [0-9]*' "$work/bad/state.json")" '^"boots": 1$'
out=$("$FIRSTBOOT" run --state-dir "$work/nosecret" --secret-file "$work/missing" --cluster-file /dev/null 2>&1); rc=$?
check "unreadable secret file: exit 2" "$rc" '^2$'
check "unreadable secret file: named with the fix" "$out" "secret: .*$work/missing.* \(from --secret-file $work/missing\); fix the path"

# --- the node config reaches the host only with --apply-system
if [ "$(id -u)" -ne 0 ] || ! command -v unshare >/dev/null; then
  echo "$name: --apply-system part skipped: needs root and unshare for a private mount and UTS namespace"
else
  echo "BOOT_IMAGE=/vmlinuz sprout.hostname=sprt-cli-node sprout.address=198.18.0.10/24" >"$work/cmdline"
  # node STATE-DIR [FLAGS...]: one idle run (no secret) in private namespaces, then
  # what it left on the "host": key=value lines.
  node() {
    SPROUT_FIRSTBOOT=$FIRSTBOOT WORK=$work unshare --mount --uts --propagation private bash -c '
      mount -t tmpfs none /run && mount -t tmpfs none /var/lib && mount --bind "$WORK/cmdline" /proc/cmdline || exit 9
      state=$1; shift
      "$SPROUT_FIRSTBOOT" run --state-dir "$state" --cluster-file /dev/null "$@" >"$state.log" 2>&1 &
      pid=$!
      for _ in $(seq 100); do grep -qs "\"phase\": \"disabled\"" "$state/state.json" && break; sleep 0.1; done
      sleep 0.3
      while kill -TERM "$pid" 2>/dev/null; do sleep 0.5; done
      wait "$pid"; echo "rc=$?"
      echo "hostname=$(hostname)"
      echo "state-hostname=$(cat "$state/hostname" 2>/dev/null)"
      echo "network=$(grep -s "^Address=" /run/systemd/network/10-sprout-static.network)"' node "$@"
  }
  host=$(hostname)
  out=$(node "$work/test-node")
  check "without --apply-system: the run idles and stops cleanly" "$(grep '^rc=' <<<"$out")" '^rc=0$'
  check "without --apply-system: the hostname is left alone" "$(grep '^hostname=' <<<"$out")" "^hostname=$host$"
  check "without --apply-system: no hostname in the state" "$(grep '^state-hostname=' <<<"$out")" '^state-hostname=$'
  check "without --apply-system: no network unit" "$(grep '^network=' <<<"$out")" '^network=$'
  check "without --apply-system: the node config was still read" "$(cat "$work/test-node.log")" 'hostname set by the kernel command line'
  mkdir -p "$work/real-node"  # systemd makes the state directory first (StateDirectory=sprout)
  out=$(node "$work/real-node" --apply-system)
  check "with --apply-system: the run idles and stops cleanly" "$(grep '^rc=' <<<"$out")" '^rc=0$'
  check "with --apply-system: the hostname is set" "$(grep '^hostname=' <<<"$out")" '^hostname=sprt-cli-node$'
  check "with --apply-system: the hostname is kept for the next boot" "$(grep '^state-hostname=' <<<"$out")" '^state-hostname=sprt-cli-node$'
  check "with --apply-system: the static address goes to systemd-networkd" "$(grep '^network=' <<<"$out")" '^network=Address=198.18.0.10/24$'
  check "this host's own hostname never changed" "$(hostname)" "^$host$"
fi

echo "$name: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
