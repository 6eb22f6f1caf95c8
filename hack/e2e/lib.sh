# Shared by hack/e2e/up.sh and hack/e2e/down.sh (sourced, not run).
#
# Everything the cluster creates is recorded in $RUN/created (one "kind name"
# a line) and every process it starts in $RUN/pids/NAME.pid (pid and start
# time, so a recycled pid is never signalled). Teardown reads those files and
# touches nothing else.

# kube-proxy execs iptables/nft from PATH; root's sbin directories may be missing from it.
export PATH="/usr/local/sbin:/usr/sbin:/sbin:$PATH"

E2E_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
E2E_CACHE="${E2E_CACHE:-$E2E_ROOT/.cache/e2e}"
RUN="${E2E_RUN_DIR:-$E2E_CACHE/run}" # state of the running cluster: pki, kubeconfigs, configs, pids, etcd data
LOGS="$E2E_CACHE/logs" # logs of the last bring-up, kept after teardown

# The private test subnet (a /24, given as its first three octets). 192.0.2.0/24
# is the uplink of the machines this runs on and is refused outright.
E2E_SUBNET="${E2E_SUBNET:-172.31.255}"
BRIDGE="${E2E_BRIDGE:-prbr0}"
BRIDGE_IP="$E2E_SUBNET.1"
NODES=(node-a node-b)
declare -A NODE_IP=([node-a]="$E2E_SUBNET.11" [node-b]="$E2E_SUBNET.12")
declare -A NODE_POD_CIDR=([node-a]=10.244.1.0/24 [node-b]=10.244.2.0/24)
declare -A NODE_VETH=([node-a]=pr-node-a [node-b]=pr-node-b)
CLUSTER_CIDR=10.244.0.0/16
SERVICE_CIDR=10.96.0.0/16
ETCD_CLIENT="127.0.0.1:23790"
ETCD_PEER="127.0.0.1:23800"
APISERVER_PORT=6443
K8S_IMAGE_TAG=v1.37.2

# Scale mode: E2E_SCALE_NODES fake nodes (scale-000, scale-001, ...), all
# managed by ONE kwok whose exec and port-forward land in ONE shared network
# namespace with a real kube-proxy of its own (iptables mode): every fake
# node has real rules and real metrics. 0 turns the mode off.
E2E_SCALE_NODES="${E2E_SCALE_NODES:-100}"
SCALE_NETNS=pr-scale
SCALE_VETH=pr-scale
SCALE_IP="$E2E_SUBNET.13"
SCALE_PREFIX=scale-
SCALE_POOL_LABEL=proxyrules.e2e/pool   # = scale on every fake node
SCALE_GROUP_LABEL=proxyrules.e2e/group # = i % 10: each value selects a tenth of them
SCALE_KWOK_ANNOTATION=proxyrules.e2e/kwok # = scale: what the shared kwok manages
# scale_node I: the name of fake node I.
scale_node() { printf '%s%03d' "$SCALE_PREFIX" "$1"; }
# scale_pod_cidr I: a /26 of the cluster CIDR's upper half (10.244.128.0/17)
# for fake node I, clear of node-a's, node-b's and the suite's endpoint IPs.
scale_pod_cidr() { echo "10.244.$((128 + $1 / 4)).$((64 * ($1 % 4)))/26"; }
# The shared kube-proxy's hostnameOverride: a fake node with no endpoints, so
# its Local-policy chains point at no node and every fake node reads as itself.
SCALE_PROXY_NODE=$(scale_node 0)

# One cluster per machine: the names, the subnet and the ports above are
# machine-wide. up.sh records which state directory owns them in $OWNER (and
# whether a test harness started it); down.sh removes the record. The Go
# harness (e2e/main_test.go) holds $MACHINE_LOCK from bring-up to teardown,
# so a second run on the same machine waits, and a record left by a harness
# that died (SIGKILL: no teardown ran) can be reclaimed safely.
MACHINE_STATE=/run/kubectl-proxyrules-e2e
OWNER="$MACHINE_STATE/owner"
MACHINE_LOCK="$MACHINE_STATE.lock"
# A copy of the records (created list, pid files) outside the checkout, so
# that leftovers can be torn down even when the dead run's checkout is gone.
RECORDS="$MACHINE_STATE/records"

log() { echo "e2e: $*" >&2; }
die() { echo "e2e: $*" >&2; exit 1; }

record() {
	echo "$*" >>"$RUN/created"
	[[ $RUN == "$RECORDS" ]] || echo "$*" >>"$RECORDS/created"
}

# proc_start PID: the process start time (field 22 of /proc/PID/stat); fails
# when there is no such process or it has exited (a zombie not reaped yet).
proc_start() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	stat=${stat##*) } # fields after the command name, which may hold spaces
	set -- $stat
	[[ $1 != Z && $1 != X ]] || return 1
	echo "${20}"
}

# start_daemon NAME LOG CMD...: runs CMD in a session of its own (no terminal
# signal reaches it), records its pid and start time.
start_daemon() {
	local name=$1 logf=$2; shift 2
	setsid "$@" </dev/null >>"$logf" 2>&1 3>&- &
	local pid=$!
	local st
	st=$(proc_start "$pid") || st=0
	mkdir -p "$RUN/pids"
	echo "$pid $st" >"$RUN/pids/$name.pid"
	if [[ $RUN != "$RECORDS" ]]; then
		mkdir -p "$RECORDS/pids"
		echo "$pid $st" >"$RECORDS/pids/$name.pid"
	fi
	echo "$pid"
}

# alive_pid NAME: the recorded pid of NAME if that very process still runs.
alive_pid() {
	local f="$RUN/pids/$1.pid" pid st cur
	[[ -f $f ]] || return 1
	read -r pid st <"$f"
	cur=$(proc_start "$pid") || return 1
	[[ $cur == "$st" ]] || return 1
	echo "$pid"
}

# stop_daemon NAME: SIGTERM, then SIGKILL after 10 s; only the recorded process.
stop_daemon() {
	local name=$1 pid i
	pid=$(alive_pid "$name") || { rm -f "$RUN/pids/$name.pid"; return 0; }
	local t0=$SECONDS
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 100; i++)); do
		alive_pid "$name" >/dev/null || break
		sleep 0.1
	done
	if alive_pid "$name" >/dev/null; then
		log "$name (pid $pid) ignored SIGTERM; killing it"
		kill -KILL "$pid" 2>/dev/null || true
		for ((i = 0; i < 50; i++)); do
			alive_pid "$name" >/dev/null || break
			sleep 0.1
		done
	fi
	rm -f "$RUN/pids/$name.pid"
	((SECONDS - t0 < 3)) || log "$name took $((SECONDS - t0))s to stop"
}

# write_if_changed FILE: stdin to FILE, only when the content differs
# (kube-proxy exits when its config file is rewritten, even unchanged).
write_if_changed() {
	local f=$1 tmp
	tmp=$(mktemp "$f.XXXXXX")
	cat >"$tmp"
	if [[ -f $f ]] && cmp -s "$tmp" "$f"; then
		rm -f "$tmp"
	else
		mv "$tmp" "$f"
	fi
}
