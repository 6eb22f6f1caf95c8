#!/usr/bin/env bash
# Installs what the real-tool tests need (iptables 1.8.x with both backends,
# nftables, iproute2, conntrack for internal/kernelprobe, ipset for the IPVS
# ipset spelling test) and what the race
# detector needs (cgo: gcc and the C library's headers) when it is missing. Without root or apt-get the tests that need these tools skip
# with one clear line; unit tests still run.
set -euo pipefail
need=()
for tool in iptables-nft-save iptables-legacy-save nft ip conntrack ipset gcc; do
  command -v "$tool" >/dev/null 2>&1 || need+=("$tool")
done
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "test-deps: missing ${need[*]} and cannot install them (not root or no apt-get): real-tool tests will be skipped"
  exit 0
fi
echo "test-deps: installing iptables nftables iproute2 conntrack ipset gcc libc6-dev (missing: ${need[*]})"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq iptables nftables iproute2 conntrack ipset gcc libc6-dev >/dev/null
