#!/bin/bash
# Regenerates the real-tool outputs in this directory from the hand-written
# inputs (*.knft: knftables/kube-proxy "add …" syntax; *.rules:
# iptables-restore input; foreign.nft: native nft). Each scenario is loaded
# into a throw-away network namespace (no traffic is sent) with nft 1.0.6 /
# iptables 1.8.9 and listed back with the real tools. Run as root.
set -euo pipefail
cd "$(dirname "$0")"

ns=pr-nfttest-$$
cleanup() { ip netns del "$ns" 2>/dev/null || true; }
trap cleanup EXIT

# knftables dumps list objects in any order; nft -f wants objects before the
# rules and elements that use them.
phases() {
	for f in "$@"; do grep -E '^add (table) ' "$f" || true; done
	for f in "$@"; do grep -E '^add (chain|set|map|counter|flowtable) ' "$f" || true; done
	for f in "$@"; do grep -E '^add rule ' "$f" || true; done
	for f in "$@"; do grep -E '^add element ' "$f" || true; done
}

nftscenario() { # name files...
	local name=$1; shift
	ip netns add "$ns"
	phases "$@" >"/tmp/$ns.nft"
	ip netns exec "$ns" nft -f "/tmp/$ns.nft"
	rm -f "/tmp/$ns.nft"
	if [ "$name" = kp137 ]; then ip netns exec "$ns" nft -f foreign.nft; fi
	ip netns exec "$ns" nft list ruleset >"$name.nft.txt"
	ip netns exec "$ns" nft -j list ruleset >"$name.nft.json"
	if [ "$name" = kp137 ]; then
		ip netns exec "$ns" nft -a list table ip kube-proxy >"$name-handles.nft.txt"
		ip netns exec "$ns" nft list table ip6 kube-proxy >"$name-ipv6-table.nft.txt"
	fi
	ip netns del "$ns"
}

nftscenario kp137 kp137-ipv4.knft kp137-ipv6.knft
nftscenario kp136 kp136-ipv4.knft
nftscenario kp134 kp134-ipv4.knft

ip netns add "$ns"
ip netns exec "$ns" iptables-nft-restore -c <kp137-iptables-nft-ipv4.rules
ip netns exec "$ns" ip6tables-nft-restore -c <kp137-iptables-nft-ipv6.rules
# timestamps dropped so that the files are reproducible
ip netns exec "$ns" iptables-nft-save -c | sed 's/ on .*//' >iptables-nft-ipv4.save.txt
ip netns exec "$ns" ip6tables-nft-save -c | sed 's/ on .*//' >iptables-nft-ipv6.save.txt
ip netns exec "$ns" nft list ruleset >iptables-nft.nft.txt 2>&1
ip netns exec "$ns" nft -j list ruleset >iptables-nft.nft.json
ip netns del "$ns"
