#!/usr/bin/env bash
# Generates testdata/fixtures/<scenario>/ipvs/ from kube-proxy v1.37.2's real
# IPVS proxier against kube-proxy's fakes (hack/fixturegen/ipvs*.go), and loads
# the fakes' ipset/iptables state into the real ipset/iptables-nft tools in a
# throw-away network namespace per scenario (ipset save, ipset list,
# iptables-nft-save), with kube-ipvs0's addresses on a stand-in link there
# (ip addr show kube-ipvs0).
#
#   hack/gen-fixtures-ipvs.sh                    # every IPVS scenario, into testdata/fixtures
#   hack/gen-fixtures-ipvs.sh /tmp/x             # into /tmp/x/<scenario>/ (to compare)
#   hack/gen-fixtures-ipvs.sh /tmp/x small-v1.37 # only these scenarios
#
# The scenarios the IPVS generator owns (ipvs-*) also get objects.json and
# meta.json (with its "ipvs" section) from this build.
#
# Separate from gen-fixtures.sh: the IPVS mode is only in the -tags kpipvs
# build, so the other fixtures and their binaries stay as they are.
# Needs: root, go, ip, ipset (7.17), iptables-nft-restore/-save.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN="$ROOT/.cache/bin"
OUT=${1:-$ROOT/testdata/fixtures}
shift || true
# hack/fixturegen/ipvs_scenarios.go ipvsScenarios
SCENARIOS=("$@")
[[ ${#SCENARIOS[@]} -gt 0 ]] || SCENARIOS=(small-v1.37 topology-v1.37 nft-churn-v1.37 masq-bit15-v1.37 outage-v1.37 ipvs-drain-v1.37 ipvs-loopback-v1.37)

if [[ $(id -u) -ne 0 ]]; then
	echo "gen-fixtures-ipvs: must run as root (it creates a network namespace)" >&2
	exit 1
fi
for tool in go ip ipset iptables-nft-restore iptables-nft-save ip6tables-nft-restore ip6tables-nft-save; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "gen-fixtures-ipvs: $tool not found (Debian: apt-get install -y ipset iptables iproute2)" >&2
		exit 1
	fi
done

mkdir -p "$BIN"
[[ -f "$ROOT/.cache/.gitignore" ]] || echo '*' >"$ROOT/.cache/.gitignore"
(cd "$ROOT/hack/fixturegen" && go build -trimpath -tags kpipvs -o "$BIN/fixturegen-v1.37-ipvs" .)

NS=""
trap '[[ -z "$NS" ]] || ip netns del "$NS" 2>/dev/null || true' EXIT
trap 'exit 130' INT TERM
for sc in "${SCENARIOS[@]}"; do
	NS="kpfx-ipvs-$$-$sc"
	ip netns add "$NS"
	ip -n "$NS" link set lo up
	ip -n "$NS" addr add 10.0.0.10/32 dev lo
	ip -n "$NS" -6 addr add fd00::10/128 dev lo nodad

	dir="$OUT/$sc"
	rm -rf "$dir/ipvs"
	if [[ $sc == ipvs-* ]]; then
		"$BIN/fixturegen-v1.37-ipvs" objects -scenario "$sc" -out "$dir"
	fi
	ip netns exec "$NS" "$BIN/fixturegen-v1.37-ipvs" ipvs -scenario "$sc" -out "$dir"
	ip netns del "$NS"
	NS=""
	ls -l "$dir/ipvs"
done
