#!/usr/bin/env bash
# Regenerates the table-pressure fixtures of plugin/testdata/conntrack/
# (pressure-*.txt) from the real kernel (issue 31, item 5): a conntrack table
# filled until it is full, so that the kernel itself counts early_drop and
# drop in /proc/net/stat/nf_conntrack and nf_conntrack_count reaches
# nf_conntrack_max. Nothing in those files is hand-written.
#
#   hack/gen-conntrack-pressure.sh        (root; CT_PRESSURE_OUT: another folder)
#
# Needs: ip, nft, conntrack, go, flock, nsenter, taskset.
#
# nf_conntrack_max is global (writable only in the init namespace) while
# nf_conntrack_count is per namespace, and the kernel compares the one with
# the other (__nf_conntrack_alloc). So the script lowers max (to
# CT_PRESSURE_MAX, default 8192, doubled until it is over twice the count
# of every other namespace: no other table fills, none reaches the 95 %
# at which the garbage collector evicts) only while it holds the machine
# lock the e2e suite takes (/run/kubectl-proxyrules-e2e.lock: no cluster
# runs meanwhile), and restores it on every exit path.
#
# In one throw-away namespace with only loopback, conntrack hooked by an
# nft `ct state` rule, hack/ctpressure making the flows:
#   1. unassured UDP entries (datagrams to closed ports over lo) up to 92 %
#      of max                          -> pressure-sysctls-near.txt,
#                                         pressure-stats-1.txt
#   2. more up to max (count = max)    -> pressure-sysctls-full.txt
#   3. new flows at full, from CPU 0 and the last CPU: each evicts an
#      unassured entry (early_drop) or, when none is near its hash bucket,
#      is dropped (drop; the sender sees EPERM); 3 s later
#                                      -> pressure-stats-2.txt
#   4. the UDP entries deleted (conntrack -D), the table filled with
#      established TCP connections over lo (ASSURED: nothing evictable)
#                                      -> pressure-stats-3.txt
#      then new flows from both CPUs: every one dropped, no early_drop;
#      3 s later                        -> pressure-stats-4.txt
# Sysctls as conntrack.BundleCommand (`grep -H . FILES`) prints them with
# stderr kept, stats as `cat /proc/net/stat/nf_conntrack`.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${CT_PRESSURE_OUT:-$ROOT/plugin/testdata/conntrack}
LOCK=/run/kubectl-proxyrules-e2e.lock
MAXFILE=/proc/sys/net/netfilter/nf_conntrack_max
COUNTFILE=/proc/sys/net/netfilter/nf_conntrack_count

die() {
	echo "gen-conntrack-pressure: $*" >&2
	exit 1
}
say() { echo "gen-conntrack-pressure: $*" >&2; }

[[ $(id -u) -eq 0 ]] || die "must run as root (a network namespace, the global nf_conntrack_max)"
for tool in ip nft conntrack go flock nsenter taskset; do
	command -v "$tool" >/dev/null 2>&1 || die "$tool not found"
done

# the machine lock, held by flock(1) for the rest of the run
if [[ ${CT_PRESSURE_LOCKED:-} != "$LOCK" ]]; then
	say "taking $LOCK (waits while an e2e run holds it)"
	exec env CT_PRESSURE_LOCKED="$LOCK" flock "$LOCK" bash "$0" "$@"
fi

modprobe nf_conntrack 2>/dev/null || true
BIN=$(mktemp -d)/ctpressure
(cd "$ROOT" && go build -o "$BIN" ./hack/ctpressure)
# the sysctls are read with conntrack.BundleCommand, as on a node
mapfile -t BUNDLE < <("$BIN" bundle)
((${#BUNDLE[@]} > 3)) || die "ctpressure bundle printed no command"

NS="ct31pressure-$$"
ORIG=""
TCPH_PID=""
cleanup() {
	# the global setting first: it is what other namespaces feel
	if [[ -n $ORIG ]]; then
		echo "$ORIG" >"$MAXFILE" && say "nf_conntrack_max restored to $(cat "$MAXFILE")"
		ORIG=""
	fi
	if [[ -n $TCPH_PID ]]; then
		kill "$TCPH_PID" 2>/dev/null || true
		wait "$TCPH_PID" 2>/dev/null || true
		TCPH_PID=""
	fi
	ip netns del "$NS" 2>/dev/null || true
	rm -rf "$(dirname "$BIN")"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

ip netns add "$NS"
in_ns() { ip netns exec "$NS" "$@"; }
in_ns ip link set lo up
in_ns nft 'table inet ct31 { chain out { type filter hook output priority 0; policy accept; ct state new counter; }; }'

# every other namespace's count: by the processes' namespaces and the
# named ones (/run/netns)
others_max() {
	local best=0 seen=" " ns c p f
	for p in /proc/[0-9]*; do
		ns=$(readlink "$p/ns/net" 2>/dev/null) || continue
		[[ $seen == *" $ns "* ]] && continue
		seen+="$ns "
		c=$(nsenter -t "${p#/proc/}" -n cat "$COUNTFILE" 2>/dev/null) || continue
		((c > best)) && best=$c
	done
	for f in /run/netns/*; do
		[[ -e $f ]] || continue
		c=$(nsenter --net="$f" cat "$COUNTFILE" 2>/dev/null) || continue
		((c > best)) && best=$c
	done
	echo "$best"
}

M=${CT_PRESSURE_MAX:-8192}
others=$(others_max)
while ((M <= 2 * others)); do M=$((M * 2)); done
cur=$(cat "$MAXFILE")
((M < cur)) || die "nf_conntrack_max is $cur, not above the $M needed (other namespaces hold up to $others)"
ORIG=$cur
echo "$M" >"$MAXFILE"
say "nf_conntrack_max $ORIG -> $M (other namespaces hold at most $others entries)"

count() { in_ns cat "$COUNTFILE"; }
stats() { in_ns cat /proc/net/stat/nf_conntrack >"$OUT/$1"; }
# the command the plugin runs on a node, stderr kept: a file the kernel
# lacks is grep's own line
sysctls() { in_ns "${BUNDLE[@]}" >"$OUT/$1" 2>&1 || true; }
# udp CPU N: N fresh destinations, sent from one CPU (the kernel counts
# per CPU, the reader sums)
NEXT=0
udp() {
	local line
	line=$(taskset -c "$1" ip netns exec "$NS" "$BIN" udp -n "$2" -from "$NEXT")
	NEXT=$((NEXT + $2))
	say "cpu $1: $line"
}
FIRST=0
LAST=$(($(nproc) - 1))

# 1-2: unassured entries to near-full, then full
NEAR=$(((M * 92 + 99) / 100))
udp "$FIRST" $((NEAR - $(count)))
sysctls pressure-sysctls-near.txt
stats pressure-stats-1.txt
for _ in 1 2 3; do
	left=$((M - $(count)))
	((left > 0)) || break
	udp "$FIRST" "$left"
done
(($(count) == M)) || die "count $(count), not $M, after filling"
sysctls pressure-sysctls-full.txt

# 3: new flows at full: early_drop or drop
udp "$FIRST" 600
udp "$LAST" 400
sleep 3
stats pressure-stats-2.txt

# 4: only assured entries: nothing to evict, every new flow dropped
in_ns conntrack -D -p udp >/dev/null 2>&1 || true
coproc TCPH { ip netns exec "$NS" "$BIN" tcp; }
echo "until $M" >&"${TCPH[1]}"
read -r -t 120 line <&"${TCPH[0]}" || die "the TCP holder did not answer"
say "$line"
(($(count) == M)) || die "count $(count), not $M, after the TCP fill"
stats pressure-stats-3.txt
udp "$FIRST" 300
udp "$LAST" 200
sleep 3
stats pressure-stats-4.txt
say "count $(count) of max $M at the end"

cleanup
say "wrote $OUT/pressure-*.txt"
