#!/usr/bin/env bash
# The Debian package as an operator meets it (CI runs this after ./test.sh,
# on its own machine; needs root, else SKIPPED):
#   build it (scripts/build-deb.sh, from the debug binary ./test.sh built
#   when there is one: no second build), lintian; dpkg -i; earlybird
#   --version; earlybird with no arguments; the Grafana dashboard shipped;
#   man -l on every page;
#   systemd-analyze verify and security --offline=true on the installed
#   unit; a live capture from a veth in a network namespace as the user
#   earlybird with only the unit's capabilities (setpriv) and its
#   LimitMEMLOCK, every packet of a replayed capture in its records; the
#   logrotate snippet checked by logrotate; dpkg --purge leaves no file,
#   user, group or folder behind.
#
#   scripts/test-deb.sh [--binary PATH]
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

if [ "$(id -u)" != 0 ]; then
  echo "SKIPPED: scripts/test-deb.sh installs a package and needs root"
  exit 0
fi
binary="${CARGO_TARGET_DIR:-$ROOT/target}/debug/earlybird"
if [ "${1:-}" = --binary ]; then binary=$2; fi

step() { echo "== test-deb: $*"; }
fail() { echo "test-deb: FAILED: $*" >&2; exit 1; }
for tool in dpkg-deb dpkg-shlibdeps lintian man systemd-analyze ip setpriv prlimit logrotate; do
  command -v $tool >/dev/null || fail "$tool is missing (.ci/run installs it)"
done

work=$(mktemp -d)
tag="ebd$$"
ns_a="${tag}a" ns_b="${tag}b" dev_a="${tag}x" dev_b="${tag}y"
cleanup() {
  ip netns del "$ns_a" 2>/dev/null || true
  ip netns del "$ns_b" 2>/dev/null || true
  if dpkg -s earlybird >/dev/null 2>&1; then dpkg --purge earlybird >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

if dpkg -s earlybird >/dev/null 2>&1; then
  fail "a package earlybird is installed already; this test would remove it"
fi

step "build"
if [ -x "$binary" ]; then
  deb=$(scripts/build-deb.sh --binary "$binary" --out "$work" | tail -n 1)
else
  deb=$(scripts/build-deb.sh --out "$work" | tail -n 1)
fi
dpkg-deb --info "$deb" | sed -n 's/^ \(Depends\|Installed-Size\):/  \1:/p'

step "dpkg -i"
dpkg -i "$deb" >/dev/null
getent passwd earlybird >/dev/null || fail "no user earlybird after install"
[ "$(stat -c %U "/var/lib/earlybird")" = earlybird ] || fail "/var/lib/earlybird not owned by earlybird"
[ "$(stat -c %U "/var/log/earlybird")" = earlybird ] || fail "/var/log/earlybird not owned by earlybird"

step "earlybird --version; earlybird alone"
/usr/bin/earlybird --version | grep -q "^earlybird " || fail "earlybird --version"
set +e
/usr/bin/earlybird >"$work/alone.out" 2>"$work/alone.err"
code=$?
set -e
[ "$code" = 2 ] || fail "earlybird with no arguments: exit code $code, not 2"
grep -q '^Examples:' "$work/alone.err" || fail "earlybird with no arguments printed no examples"
/usr/bin/earlybird flows --config /etc/earlybird/example.toml --check-config >/dev/null 2>&1 ||
  fail "the packaged example.toml does not check"

step "the Grafana dashboard"
cmp -s /usr/share/earlybird/grafana/earlybird.json packaging/grafana/earlybird.json ||
  fail "/usr/share/earlybird/grafana/earlybird.json is not packaging/grafana/earlybird.json"

step "man -l on every page"
pages=0
for page in /usr/share/man/man1/earlybird*.1.gz; do
  # --warnings: groff's complaints about the page (lintian's check too).
  warn=$(LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 man --warnings -E UTF-8 -l "$page" 2>&1 >"$work/page.txt")
  [ -z "$warn" ] || fail "$page: $warn"
  grep -q EXAMPLES "$work/page.txt" || fail "$page has no EXAMPLES section"
  pages=$((pages + 1))
done
echo "  $pages pages"
[ -f /usr/share/bash-completion/completions/earlybird ] || fail "no bash completion"
bash -c 'source /usr/share/bash-completion/completions/earlybird && complete -p earlybird' >/dev/null ||
  fail "the bash completion does not load"

step "systemd-analyze verify, security"
unit=/lib/systemd/system/earlybird@.service
# An instance of the template: verify reads the unit's file and checks its
# directives and the binaries it runs.
cp /etc/earlybird/example.toml /etc/earlybird/ci.toml
cp "$unit" "$work/earlybird@ci.service"
if ! systemd-analyze verify "$work/earlybird@ci.service" 2>"$work/verify.err"; then
  cat "$work/verify.err" >&2
  fail "systemd-analyze verify"
fi
# Messages about units the container lacks are not the unit's.
if grep -v -e 'multi-user.target' -e 'network-online.target' "$work/verify.err" | grep -q .; then
  cat "$work/verify.err" >&2
  fail "systemd-analyze verify warned"
fi
systemd-analyze security --offline=true --no-pager "$work/earlybird@ci.service" >"$work/security.txt" 2>&1 || true
score=$(grep -o 'Overall exposure level for .*' "$work/security.txt" || true)
[ -n "$score" ] || { cat "$work/security.txt" >&2; fail "systemd-analyze security gave no score"; }
echo "  $score"
rm /etc/earlybird/ci.toml

step "live capture as earlybird with the unit's capabilities"
ip netns add "$ns_a"
ip netns add "$ns_b"
ip -n "$ns_a" link add "$dev_a" type veth peer name "$dev_b" netns "$ns_b"
for pair in "$ns_a $dev_a" "$ns_b $dev_b"; do
  set -- $pair
  ip netns exec "$1" sysctl -qw "net.ipv6.conf.$2.disable_ipv6=1"
  ip -n "$1" link set "$2" mtu 9000 up
done
pcap=testdata/pcap/ndpi__iphone.pcap
/usr/bin/earlybird flows --no-model -q -o "$work/file.csv" "$pcap"
# The unit's capabilities (AmbientCapabilities=), its locked-memory limit,
# NoNewPrivileges; the records go where the unit may write.
caps=$(sed -n 's/^AmbientCapabilities=//p' "$unit" | tr 'A-Z' 'a-z' | sed -e 's/cap_/+/g' -e 's/ /,/g')
live=/var/log/earlybird/ci-live.csv
memlock=(prlimit --memlock=unlimited:unlimited)
if ! prlimit --memlock=unlimited:unlimited true 2>/dev/null; then
  # A container's root may lack CAP_SYS_RESOURCE: the capture runs with
  # the limit it has (packet sockets lock no memory).
  echo "  LimitMEMLOCK=infinity not applied: root here cannot raise the hard limit ($(ulimit -Hl) KiB)"
  memlock=()
fi
# The same without the capabilities is refused: the user itself may not
# capture, so the records below are the capabilities' doing.
if ip netns exec "$ns_a" setpriv --reuid earlybird --regid earlybird --init-groups --no-new-privs \
  --inh-caps=-all --ambient-caps=-all --bounding-set=-all \
  /usr/bin/earlybird flows -i "$dev_a" --duration 1 --no-model -q -o /dev/null 2>"$work/nocaps.err"; then
  fail "the user earlybird captured without capabilities"
fi
grep -qi "not permitted" "$work/nocaps.err" || { cat "$work/nocaps.err" >&2; fail "no permission error without capabilities"; }
ip netns exec "$ns_a" "${memlock[@]}" \
  setpriv --reuid earlybird --regid earlybird --init-groups --no-new-privs \
  --inh-caps="-all,$caps" --ambient-caps="-all,$caps" --bounding-set="-all,$caps" \
  /usr/bin/earlybird flows -i "$dev_a" --no-model -o "$live" 2>"$work/live.err" &
cap_pid=$!
for _ in $(seq 1 200); do
  grep -q "capturing on" "$work/live.err" 2>/dev/null && break
  kill -0 "$cap_pid" 2>/dev/null || break
  sleep 0.1
done
grep -q "capturing on" "$work/live.err" || { cat "$work/live.err" >&2; fail "the capture did not start"; }
ip netns exec "$ns_b" /usr/bin/earlybird replay -i "$dev_b" "$pcap" >/dev/null 2>&1
sleep 0.5
kill -INT "$cap_pid"
set +e
wait "$cap_pid"
code=$?
set -e
[ "$code" = 130 ] || { cat "$work/live.err" >&2; fail "capture exit code $code, not 130"; }
[ "$(stat -c %U "$live")" = earlybird ] || fail "$live was not written by earlybird"
packets() { # fwd_packets + bwd_packets over a CSV of records
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
           { n += $c["fwd_packets"] + $c["bwd_packets"] } END { print n + 0 }' "$1"
}
want=$(packets "$work/file.csv")
got=$(packets "$live")
echo "  $got packets in the live records, $want in the file's"
[ "$want" -gt 400 ] && [ "$got" = "$want" ] || { cat "$work/live.err" >&2; fail "live capture: $got packets, want $want"; }

step "logrotate"
logrotate -d /etc/logrotate.d/earlybird >"$work/logrotate.txt" 2>&1 ||
  { cat "$work/logrotate.txt" >&2; fail "logrotate rejects the snippet"; }
grep -q "ci-live.csv" "$work/logrotate.txt" || { cat "$work/logrotate.txt" >&2; fail "logrotate does not consider the records"; }

step "dpkg --purge"
files=$(dpkg -L earlybird | while read -r f; do [ -f "$f" ] && echo "$f"; done)
dpkg --purge earlybird >/dev/null
left=""
for f in $files /etc/earlybird /var/lib/earlybird /var/log/earlybird; do
  if [ -e "$f" ]; then left="$left $f"; fi
done
[ -z "$left" ] || fail "left after purge:$left"
getent passwd earlybird >/dev/null && fail "user earlybird left after purge"
getent group earlybird >/dev/null && fail "group earlybird left after purge"
echo "test-deb: OK"
