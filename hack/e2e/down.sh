#!/usr/bin/env bash
# Tears down the end-to-end cluster that hack/e2e/up.sh recorded in
# .cache/e2e/run: stops only the processes it started (by pid file, checked
# against their start time), deletes the network namespaces, links and
# kubeconfigs it created, then the state directory. Logs stay in .cache/e2e/logs.
# Safe to run twice, and after a half-finished bring-up.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

T0=$SECONDS
if [[ ! -d $RUN ]]; then
	log "nothing to tear down"
	exit 0
fi
[[ $(id -u) -eq 0 ]] || die "needs root"

# Node processes first, together (they talk to the apiserver), then the
# control plane.
for name in kube-proxy-node-a kube-proxy-node-b kube-proxy-scale kwok-node-a kwok-node-b kwok-scale; do
	stop_daemon "$name" &
done
wait
for name in kube-apiserver etcd; do
	stop_daemon "$name"
done
# Anything else recorded (older layouts, renamed nodes).
if [[ -d $RUN/pids ]]; then
	for f in "$RUN"/pids/*.pid; do
		[[ -e $f ]] || continue
		stop_daemon "$(basename "$f" .pid)"
	done
fi

rc=0
if [[ -f $RUN/created ]]; then
	# Reverse order: veths before the bridge, namespaces after their processes.
	while read -r kind name; do
		case $kind in
		netns)
			if ip netns list | awk '{print $1}' | grep -qx "$name"; then
				left=$(ip netns pids "$name" 2>/dev/null | tr '\n' ' ')
				if [[ -n $left ]]; then
					log "network namespace $name still has processes not started by up.sh: $left (left alone)"
					rc=1
				fi
				ip netns del "$name" || rc=1
			fi
			;;
		link) ip link show "$name" >/dev/null 2>&1 && { ip link del "$name" || rc=1; } ;;
		kubeconfig) rm -f "$name" ;;
		esac
	done < <(tac "$RUN/created")
fi
rm -rf "$RUN"
if [[ -f $OWNER ]] && read -r owner _ <"$OWNER" && [[ $owner == "$RUN" ]]; then
	rm -rf "$OWNER" "$RECORDS"
fi
log "torn down in $((SECONDS - T0))s"
exit $rc
