#!/usr/bin/env bash
# Regenerates inspect/conntrack/testdata/ from the real kernel and the real
# conntrack tool (issue 31): every file there is what a tool printed, never
# hand-written.
#
#   hack/gen-conntrack-fixtures.sh
#
# Needs: root (a network namespace), ip (iproute2), nft, conntrack
# (conntrack-tools; hack/test-deps.sh installs it), bash (/dev/udp, /dev/tcp).
#
# In one throw-away namespace with only loopback (10.250.31.1/24 and
# fd00:31::1/64 on lo: nothing is routed off the machine):
#   1. /proc/net/stat/nf_conntrack before anything       -> stat-before.txt
#   2. a few real flows over lo (conntrack hooks taken by an nft `ct state`
#      rule, accounting on: packets=/bytes= show), then entries inserted with
#      `conntrack -I` (UDP/TCP/ICMP, IPv4 and IPv6, flags, mark, zone)
#   3. the table as /proc/net/nf_conntrack and as `conntrack -L` prints it,
#      default and `-o extended`, both families (stdout and stderr together:
#      the "N flow entries have been shown." trailer is part of the form)
#   4. /proc/net/stat/nf_conntrack again                 -> stat-after.txt
#   5. the sysctls as `grep -H . FILES 2>&1` prints them  -> sysctls.txt
# The namespace is deleted on exit, also on error.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT="$ROOT/inspect/conntrack/testdata"

if [[ $(id -u) -ne 0 ]]; then
	echo "gen-conntrack-fixtures: must run as root (it creates a network namespace)" >&2
	exit 1
fi
for tool in ip nft conntrack; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "gen-conntrack-fixtures: $tool not found (Debian: apt-get install -y iproute2 nftables conntrack)" >&2
		exit 1
	fi
done
# the subnet must not be routed on this machine: the flows stay on lo
if ip route show | grep -q '^10\.250\.31\.'; then
	echo "gen-conntrack-fixtures: 10.250.31.0/24 is routed here; pick another subnet" >&2
	exit 1
fi
modprobe nf_conntrack 2>/dev/null || true

NS="ct31gen-$$"
cleanup() { ip netns del "$NS" 2>/dev/null || true; }
trap cleanup EXIT
trap 'exit 130' INT TERM
ip netns add "$NS"
in_ns() { ip netns exec "$NS" "$@"; }
in_ns ip link set lo up
in_ns ip addr add 10.250.31.1/24 dev lo
in_ns ip -6 addr add fd00:31::1/64 dev lo nodad
if ! in_ns test -r /proc/net/nf_conntrack; then
	echo "gen-conntrack-fixtures: /proc/net/nf_conntrack is absent (no NF_CONNTRACK_PROCFS)" >&2
	exit 1
fi
# accounting is per namespace: packets=/bytes= appear for new entries
in_ns sysctl -q -w net.netfilter.nf_conntrack_acct=1

mkdir -p "$OUT"
in_ns cat /proc/net/stat/nf_conntrack >"$OUT/stat-before.txt"

# a rule that needs conntrack makes the kernel track this namespace's packets
in_ns nft -f - <<'EOF'
table inet ct31 {
	chain out {
		type filter hook output priority 0; policy accept;
		ct state new counter
	}
}
EOF
# real flows: UDP to closed ports (the ICMP error is RELATED, the entry
# stays [UNREPLIED]) and a refused TCP connect (CLOSE)
in_ns bash -c 'echo ping >/dev/udp/10.250.31.1/5353; echo ping >/dev/udp/fd00:31::1/5353; (exec 3<>/dev/tcp/10.250.31.1/9) 2>/dev/null || true'

ins() { in_ns conntrack -I "$@" >/dev/null 2>&1; }
# the stale-DNS shape: a client's entry to a Service IP, DNATed to an endpoint
ins -p udp -s 10.250.31.5 -d 10.250.31.10 --sport 40001 --dport 53 \
	-r 10.250.31.20 -q 10.250.31.5 --reply-port-src 53 --reply-port-dst 40001 -t 30
ins -p udp -s 10.250.31.6 -d 10.250.31.10 --sport 40005 --dport 53 \
	-r 10.250.31.21 -q 10.250.31.6 --reply-port-src 53 --reply-port-dst 40005 -t 120 -u SEEN_REPLY,ASSURED
ins -p tcp -s 10.250.31.5 -d 10.250.31.11 --sport 40002 --dport 80 \
	-r 10.250.31.22 -q 10.250.31.5 --reply-port-src 8080 --reply-port-dst 40002 \
	--state ESTABLISHED -t 86400 -u SEEN_REPLY,ASSURED -m 16384
ins -p icmp -s 10.250.31.5 -d 10.250.31.10 -r 10.250.31.10 -q 10.250.31.5 \
	--icmp-type 8 --icmp-code 0 --icmp-id 77 -t 30
ins -p udp -s fd00:31::5 -d fd00:31::a --sport 40003 --dport 53 \
	-r fd00:31::14 -q fd00:31::5 --reply-port-src 53 --reply-port-dst 40003 -t 30
ins -p tcp -s fd00:31::5 -d fd00:31::b --sport 40004 --dport 443 \
	-r fd00:31::15 -q fd00:31::5 --reply-port-src 8443 --reply-port-dst 40004 \
	--state SYN_SENT -t 120 --zone 3

in_ns cat /proc/net/nf_conntrack >"$OUT/proc-nf_conntrack.txt"
in_ns conntrack -L >"$OUT/conntrack-L.txt" 2>&1
in_ns conntrack -L -o extended >"$OUT/conntrack-L-extended.txt" 2>&1
in_ns conntrack -L -f ipv6 >"$OUT/conntrack-L-ipv6.txt" 2>&1
in_ns conntrack -L -f ipv6 -o extended >"$OUT/conntrack-L-extended-ipv6.txt" 2>&1
in_ns cat /proc/net/stat/nf_conntrack >"$OUT/stat-after.txt"

# what the kube-proxy image can run (grep, no sysctl): `path:value` lines;
# the files a kernel lacks (br_netfilter not loaded) print grep's error
in_ns sh -c 'grep -H . \
	/proc/sys/net/netfilter/nf_conntrack_count \
	/proc/sys/net/netfilter/nf_conntrack_max \
	/proc/sys/net/netfilter/nf_conntrack_buckets \
	/proc/sys/net/netfilter/nf_conntrack_udp_timeout \
	/proc/sys/net/netfilter/nf_conntrack_udp_timeout_stream \
	/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_established \
	/proc/sys/net/netfilter/nf_conntrack_tcp_be_liberal \
	/proc/sys/net/ipv4/ip_forward \
	/proc/sys/net/ipv6/conf/all/forwarding \
	/proc/sys/net/ipv4/conf/all/route_localnet \
	/proc/sys/net/bridge/bridge-nf-call-iptables \
	/proc/sys/net/bridge/bridge-nf-call-ip6tables \
	/proc/sys/net/ipv4/ip_local_port_range \
	/proc/sys/net/ipv4/ip_local_reserved_ports \
	/proc/sys/net/ipv4/conf/all/rp_filter \
	/proc/sys/net/ipv4/conf/default/rp_filter' >"$OUT/sysctls.txt" 2>&1 || true
# IPVS mode's settings, read after the others (they were added later): the
# files exist only while ip_vs is loaded, else grep's error is the line
in_ns sh -c 'grep -H . \
	/proc/sys/net/ipv4/vs/conntrack \
	/proc/sys/net/ipv4/vs/expire_nodest_conn \
	/proc/sys/net/ipv4/vs/expire_quiescent_template \
	/proc/sys/net/ipv4/vs/conn_reuse_mode' >>"$OUT/sysctls.txt" 2>&1 || true
echo "gen-conntrack-fixtures: wrote $OUT" >&2
