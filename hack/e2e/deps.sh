#!/usr/bin/env bash
# Installs what the end-to-end cluster needs on the host when it is missing
# (Debian packages: iptables nftables iproute2 conntrack openssl curl, and
# util-linux for unshare/flock). Without root or apt-get it says so in one line
# and exits 0: the e2e suite then skips with one line of its own.
set -euo pipefail
declare -A pkg_of=(
	[iptables-nft-save]=iptables [iptables-legacy-save]=iptables [nft]=nftables [ip]=iproute2
	[conntrack]=conntrack [openssl]=openssl [curl]=curl [unshare]=util-linux [flock]=util-linux
)
need=()
for tool in "${!pkg_of[@]}"; do
	command -v "$tool" >/dev/null 2>&1 || need+=("${pkg_of[$tool]}")
done
[ ${#need[@]} -eq 0 ] && exit 0
mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	echo "e2e deps: missing ${need[*]} and cannot install them (not root or no apt-get): the e2e suite will be skipped"
	exit 0
fi
echo "e2e deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
