#!/usr/bin/env bash
# Brings up the end-to-end cluster on this machine (root, network namespaces):
#
#  host netns                                   netns node-a               netns node-b
#  etcd 127.0.0.1:23790                         eth0 172.31.255.11/24      eth0 172.31.255.12/24
#  kube-apiserver 172.31.255.1:6443 -- prbr0 -- veth                       veth
#                                               kube-proxy mode=iptables   kube-proxy mode=nftables
#                                               kwok (kubelet) :10250      kwok (kubelet) :10250
#                                               metrics 127.0.0.1:10249    metrics 127.0.0.1:10249
#
# and, in scale mode (E2E_SCALE_NODES fake nodes, default 100; 0: none), one
# more namespace pr-scale (eth0 172.31.255.13) shared by the fake nodes
# scale-000 ...: ONE kwok manages them all (exec and port-forward land there)
# and ONE real kube-proxy (iptables mode) programs the rules they all show.
#
# The parts are built first when missing (hack/e2e/build.sh). On success it
# prints the path of an env file (KUBECONFIG, E2E_K8S_BIN, ...) and the cluster
# keeps running until hack/e2e/down.sh. On failure it tears down what it made.
#
# Environment: E2E_SUBNET (default 172.31.255, a /24 that must not be routed
# yet), E2E_CACHE (default .cache/e2e), E2E_SCALE_NODES (default 100).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

T0=$SECONDS
[[ $(id -u) -eq 0 ]] || die "needs root (network namespaces, a bridge, iptables)"
for tool in ip ss nft iptables iptables-save ip6tables openssl curl unshare setsid flock; do
	command -v "$tool" >/dev/null 2>&1 || die "$tool not found (hack/e2e/deps.sh installs it)"
done
[[ $E2E_SUBNET =~ ^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})$ ]] || die "E2E_SUBNET must be three octets, got $E2E_SUBNET"
[[ $E2E_SUBNET != 192.0.2 ]] || die "192.0.2.0/24 is this machine's uplink: choose another E2E_SUBNET"
[[ $E2E_SCALE_NODES =~ ^(0|[1-9][0-9]*)$ ]] && ((E2E_SCALE_NODES <= 500)) ||
	die "E2E_SCALE_NODES must be a number of fake nodes from 0 to 500, got $E2E_SCALE_NODES"
# The network namespaces made here: the nodes', then the fake nodes' shared one.
NETNS=("${NODES[@]}")
declare -A NETNS_IP NETNS_VETH
for n in "${NODES[@]}"; do NETNS_IP[$n]=${NODE_IP[$n]} NETNS_VETH[$n]=${NODE_VETH[$n]}; done
if ((E2E_SCALE_NODES > 0)); then
	NETNS+=("$SCALE_NETNS")
	NETNS_IP[$SCALE_NETNS]=$SCALE_IP NETNS_VETH[$SCALE_NETNS]=$SCALE_VETH
fi

# --- leftovers of an interrupted run --------------------------------------------
# The harness holds the machine lock (E2E_MACHINE_LOCKED=1), so a cluster
# recorded by another harness is a dead one's: tear it down from its own
# records (pid files with start times, the created list), then go on. A
# cluster brought up by hand (make e2e-up) is never touched.
reclaim() {
	[[ -f $OWNER ]] || return 0
	local other by
	read -r other by <"$OWNER" || true
	if [[ ${E2E_MACHINE_LOCKED:-} == 1 && $by == harness ]]; then
		log "reclaiming the leftovers of an interrupted run (recorded in $other)"
		E2E_RUN_DIR=$RECORDS "$E2E_ROOT/hack/e2e/down.sh" || die "could not tear down the interrupted run's leftovers ($RECORDS)"
		rm -rf "$other" "$OWNER"
		return 0
	fi
	die "another cluster runs on this machine (state in $other): E2E_RUN_DIR=$other hack/e2e/down.sh tears it down"
}
reclaim
if [[ -e $RUN/created || -d $RUN/pids ]]; then
	die "a cluster (or its leftovers) is recorded in $RUN: run hack/e2e/down.sh first"
fi

# --- the subnet must be free -------------------------------------------------
subnet_check() {
	local addrs def got
	addrs=$(ip -o -4 addr show | awk '{print $4}' | grep -E "^${E2E_SUBNET//./\\.}\." || true)
	[[ -z $addrs ]] || die "refusing to start: $E2E_SUBNET.0/24 is in use here (address $addrs); set E2E_SUBNET"
	if [[ -n $(ip -4 route show table all root "$E2E_SUBNET.0/24" 2>/dev/null) ]]; then
		die "refusing to start: a route inside $E2E_SUBNET.0/24 exists: $(ip -4 route show table all root "$E2E_SUBNET.0/24" | head -1)"
	fi
	# Any address of the /24 may only be reached through the default route.
	def=$(ip -4 route show default | awk '{for (i = 1; i < NF; i++) if ($i == "via") print $(i+1); exit}')
	for host in 1 11 12 13 254; do
		got=$(ip -4 -o route get "$E2E_SUBNET.$host" 2>/dev/null | head -1) || continue # unreachable: free
		if [[ -z $def || $got != "$E2E_SUBNET.$host via $def "* ]]; then
			die "refusing to start: $E2E_SUBNET.0/24 is already routed here ($got); set E2E_SUBNET"
		fi
	done
	ip link show "$BRIDGE" >/dev/null 2>&1 && die "refusing to start: link $BRIDGE exists"
	for n in "${NETNS[@]}"; do
		ip netns list | awk '{print $1}' | grep -qx "$n" && die "refusing to start: network namespace $n exists"
		ip link show "${NETNS_VETH[$n]}" >/dev/null 2>&1 && die "refusing to start: link ${NETNS_VETH[$n]} exists"
	done
	for port in 23790 23800; do
		ss -Hltn "sport = :$port" | grep -q . && die "refusing to start: port $port is taken on this machine"
	done
	return 0
}
subnet_check

# --- build (cached) ------------------------------------------------------------
"$E2E_ROOT/hack/e2e/build.sh"
mapfile -t dirs < <("$E2E_ROOT/hack/e2e/build.sh" --print)
K8S_BIN=${dirs[0]} ETCD_BIN=${dirs[1]} KWOK_BIN=${dirs[2]}
T_BUILT=$SECONDS

mkdir -p "$RUN" "$LOGS" "$MACHINE_STATE"
rm -rf "$RECORDS"
mkdir -p "$RECORDS"
echo "$RUN $( [[ ${E2E_MACHINE_LOCKED:-} == 1 ]] && echo harness || echo hand)" >"$OWNER"
rm -f "$LOGS"/{etcd,kube-apiserver,openssl}.log "$LOGS"/kube-proxy-*.log "$LOGS"/kwok-*.log
: >"$RUN/created"
failed=1
exec 3>&2 # the original stderr: a trap may run while a command's 2>/dev/null is in force
on_exit() {
	exec 2>&3
	if [[ $failed -eq 1 ]]; then
		log "bring-up failed; logs in $LOGS; tearing down"
		"$E2E_ROOT/hack/e2e/down.sh" >&2 || true
	fi
}
trap on_exit EXIT
trap 'exit 130' INT TERM

KUBECTL="$K8S_BIN/kubectl"
PKI="$RUN/pki"
ADMIN_KUBECONFIG="$RUN/admin.kubeconfig"
SERVER="https://$BRIDGE_IP:$APISERVER_PORT"

# --- certificates ---------------------------------------------------------------
mkdir -p "$PKI"
ossl() { openssl "$@" >/dev/null 2>>"$LOGS/openssl.log"; }
ossl req -x509 -newkey rsa:2048 -nodes -keyout "$PKI/ca.key" -out "$PKI/ca.crt" -days 2 -subj "/CN=proxyrules-e2e-ca"
# cert NAME SUBJECT [SAN]: a key and a certificate signed by the CA
cert() {
	local name=$1 subj=$2 san=${3:-} ext="$PKI/$1.ext"
	{
		echo "basicConstraints=CA:FALSE"
		echo "keyUsage=critical,digitalSignature,keyEncipherment"
		if [[ -n $san ]]; then
			echo "extendedKeyUsage=serverAuth"
			echo "subjectAltName=$san"
		else
			echo "extendedKeyUsage=clientAuth"
		fi
	} >"$ext"
	ossl req -newkey rsa:2048 -nodes -keyout "$PKI/$name.key" -out "$PKI/$name.csr" -subj "$subj"
	ossl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
		-out "$PKI/$name.crt" -days 2 -extfile "$ext"
}
cert apiserver "/CN=kube-apiserver" \
	"IP:$BRIDGE_IP,IP:10.96.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
cert admin "/O=system:masters/CN=kubernetes-admin"
cert kube-proxy "/CN=system:kube-proxy"
cert kwok "/O=system:masters/CN=kwok"
cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
san="DNS:localhost"
for n in "${NETNS[@]}"; do san+=",DNS:$n,IP:${NETNS_IP[$n]}"; done
cert kubelet "/CN=kwok-kubelet" "$san"
ossl genrsa -out "$PKI/sa.key" 2048
ossl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub"
chmod 600 "$PKI"/*.key

kubeconfig() { # kubeconfig FILE USER
	cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority: $PKI/ca.crt
    server: $SERVER
  name: proxyrules-e2e
contexts:
- context:
    cluster: proxyrules-e2e
    user: $2
  name: $2@proxyrules-e2e
current-context: $2@proxyrules-e2e
users:
- name: $2
  user:
    client-certificate: $PKI/$2.crt
    client-key: $PKI/$2.key
EOF
	chmod 600 "$1"
	record kubeconfig "$1"
}
kubeconfig "$ADMIN_KUBECONFIG" admin
kubeconfig "$RUN/kube-proxy.kubeconfig" kube-proxy
kubeconfig "$RUN/kwok.kubeconfig" kwok
kc() { "$KUBECTL" --kubeconfig "$ADMIN_KUBECONFIG" "$@"; }

# --- network: a bridge on the host, one namespace + veth per node -----------------
ip link add "$BRIDGE" type bridge
record link "$BRIDGE"
ip addr add "$BRIDGE_IP/24" dev "$BRIDGE"
ip link set "$BRIDGE" up
for n in "${NETNS[@]}"; do
	ip netns add "$n"
	record netns "$n"
	ip link add "${NETNS_VETH[$n]}" type veth peer name eth0 netns "$n"
	record link "${NETNS_VETH[$n]}"
	ip link set "${NETNS_VETH[$n]}" master "$BRIDGE" up
	ip -n "$n" addr add "${NETNS_IP[$n]}/24" dev eth0
	ip -n "$n" link set lo up
	ip -n "$n" link set eth0 up
	# Forwarding on, as every real node has it (Services to pods need it;
	# the plugin's triage reads it and would call it off).
	ip netns exec "$n" sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
done
# No default route in the namespaces: nothing they send can leave the /24.

# --- etcd and kube-apiserver on the host --------------------------------------------
# Admission: PodSecurity and ValidatingAdmissionPolicy (GA since 1.30, on by
# default; named here because the suite depends on them) enforce deploy/'s
# namespace label and policies, which the suite applies and tests.
mkdir -p "$RUN/etcd"
start_daemon etcd "$LOGS/etcd.log" "$ETCD_BIN/etcd" --name e2e --data-dir "$RUN/etcd" \
	--listen-client-urls "http://$ETCD_CLIENT" --advertise-client-urls "http://$ETCD_CLIENT" \
	--listen-peer-urls "http://$ETCD_PEER" --initial-advertise-peer-urls "http://$ETCD_PEER" \
	--initial-cluster "e2e=http://$ETCD_PEER" --unsafe-no-fsync --log-level warn >/dev/null
for ((i = 0; i < 300; i++)); do
	curl -fsS "http://$ETCD_CLIENT/health" >/dev/null 2>&1 && break
	alive_pid etcd >/dev/null || die "etcd exited: $(tail -5 "$LOGS/etcd.log")"
	sleep 0.1
done
curl -fsS "http://$ETCD_CLIENT/health" >/dev/null || die "etcd not healthy after 30 s"

start_daemon kube-apiserver "$LOGS/kube-apiserver.log" "$K8S_BIN/kube-apiserver" \
	--etcd-servers "http://$ETCD_CLIENT" \
	--bind-address "$BRIDGE_IP" --advertise-address "$BRIDGE_IP" --secure-port "$APISERVER_PORT" \
	--service-cluster-ip-range "$SERVICE_CIDR" \
	--client-ca-file "$PKI/ca.crt" --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
	--service-account-issuer https://kubernetes.default.svc.cluster.local \
	--service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
	--authorization-mode Node,RBAC --allow-privileged=true \
	--enable-admission-plugins NamespaceLifecycle,ServiceAccount,PodSecurity,ValidatingAdmissionPolicy \
	--kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
	--kubelet-certificate-authority "$PKI/ca.crt" \
	--kubelet-preferred-address-types InternalIP,Hostname \
	--cert-dir "$RUN/apiserver-certs" --profiling=false --v=1 >/dev/null
for ((i = 0; i < 1200; i++)); do
	kc get --raw /readyz >/dev/null 2>&1 && break
	alive_pid kube-apiserver >/dev/null || die "kube-apiserver exited: $(tail -5 "$LOGS/kube-apiserver.log")"
	sleep 0.1
done
kc get --raw /readyz >/dev/null 2>&1 || die "kube-apiserver not ready after 120 s"
T_APISERVER=$SECONDS

# --- cluster objects a real cluster would have --------------------------------------
# No controller-manager runs: service accounts are created by hand.
for ns in default kube-system; do
	kc -n "$ns" create serviceaccount default >/dev/null 2>&1 || true
done
kc -n kube-system create serviceaccount kube-proxy >/dev/null

KERNEL_VERSION=$(uname -r)
OS_IMAGE=$(. /etc/os-release 2>/dev/null && echo "\"$PRETTY_NAME\"" || echo linux)
# node_manifest NAME IP PODCIDR [LABELS [ANNOTATIONS]]: as a kubelet registers
# itself, plus kwok's annotation and, for a fake node, more labels and
# annotations (lines indented for metadata.labels/annotations).
node_manifest() {
	local n=$1 ip=$2 cidr=$3 extra_labels=${4:-} extra_annotations=${5:-}
	cat <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $n
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
    volumes.kubernetes.io/controller-managed-attach-detach: "true"$extra_annotations
  labels:
    beta.kubernetes.io/arch: amd64
    beta.kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    kubernetes.io/hostname: $n
    kubernetes.io/os: linux$extra_labels
spec:
  podCIDR: $cidr
  podCIDRs: [$cidr]
status:
  addresses:
  - {type: InternalIP, address: $ip}
  - {type: Hostname, address: $n}
  nodeInfo:
    architecture: amd64
    operatingSystem: linux
    kernelVersion: $KERNEL_VERSION
    osImage: $OS_IMAGE
    containerRuntimeVersion: kwok://v0.8.0
    kubeletVersion: $K8S_IMAGE_TAG
    kubeProxyVersion: $K8S_IMAGE_TAG
    bootID: ""
    machineID: ""
    systemUUID: ""
EOF
}
# scale_node_manifest I: fake node I, in the pool and in a group of a tenth,
# at the shared namespace's address, for the shared kwok (its annotation).
scale_node_manifest() {
	node_manifest "$(scale_node "$1")" "$SCALE_IP" "$(scale_pod_cidr "$1")" "
    $SCALE_POOL_LABEL: scale
    $SCALE_GROUP_LABEL: \"$(($1 % 10))\"" "
    $SCALE_KWOK_ANNOTATION: scale"
}

# kube-proxy's configuration, as kubeadm writes it into the kube-system/kube-proxy
# ConfigMap (key config.conf); the processes get the same with their own
# kubeconfig and hostnameOverride. conntrack values of 0 leave the host's
# conntrack sysctls alone. node-a's syncPeriod is long so that, in large-cluster
# mode, the chains of deleted Services and endpoints linger deterministically
# (kube-proxy cleans them up at most once per syncPeriod in that mode).
proxy_config() { # proxy_config MODE KUBECONFIG HOSTNAME SYNCPERIOD
	cat <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
bindAddress: 0.0.0.0
clientConnection:
  kubeconfig: $2
clusterCIDR: $CLUSTER_CIDR
conntrack:
  maxPerCore: 0
  min: 0
  tcpCloseWaitTimeout: 0s
  tcpEstablishedTimeout: 0s
detectLocalMode: ClusterCIDR
healthzBindAddress: 127.0.0.1:10256
hostnameOverride: "$3"
metricsBindAddress: 127.0.0.1:10249
mode: $1
$1:
  minSyncPeriod: 1s
  syncPeriod: $4
EOF
}
# The fake nodes' kube-proxy is a node pool of its own: ConfigMap and DaemonSet
# kube-proxy-scale, iptables mode, syncPeriod 1h as node-a (the suite's stale
# chains linger there for the whole run, the same on every fake node).
declare -A SYNC_PERIOD=([node-a]=1h [node-b]=30s [$SCALE_NETNS]=1h)
declare -A PROXY_CM=([node-a]=kube-proxy [node-b]=kube-proxy-nftables [$SCALE_NETNS]=kube-proxy-scale)
declare -A PROXY_MODE=([node-a]=iptables [node-b]=nftables [$SCALE_NETNS]=iptables)
# The label that sets each DaemonSet's pods apart (its selector: with
# k8s-app=kube-proxy) and the nodes it runs on.
declare -A PROXY_POD_LABEL=([node-a]="proxyrules.e2e/proxy-mode: iptables" [node-b]="proxyrules.e2e/proxy-mode: nftables"
	[$SCALE_NETNS]="proxyrules.e2e/proxy-pool: scale")
declare -A PROXY_NODES=([node-a]="kubernetes.io/hostname: node-a" [node-b]="kubernetes.io/hostname: node-b"
	[$SCALE_NETNS]="$SCALE_POOL_LABEL: scale")
# proxy_objects NETNS: the ConfigMap + DaemonSet of the kube-proxy in NETNS,
# as kubeadm writes them (nftables and the fake nodes: a set of their own).
proxy_objects() {
	local netns=$1 mode=${PROXY_MODE[$1]} cm=${PROXY_CM[$1]}
	cat <<EOF
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: $cm
  namespace: kube-system
  labels:
    app: kube-proxy
data:
  kubeconfig.conf: |-
    apiVersion: v1
    kind: Config
    clusters:
    - cluster:
        certificate-authority: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt
        server: $SERVER
      name: default
    contexts:
    - context:
        cluster: default
        namespace: default
        user: default
      name: default
    current-context: default
    users:
    - name: default
      user:
        tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
  config.conf: |-
$(proxy_config "$mode" /var/lib/kube-proxy/kubeconfig.conf "" "${SYNC_PERIOD[$netns]}" | sed 's/^/    /')
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  labels:
    k8s-app: kube-proxy
  name: $cm
  namespace: kube-system
spec:
  selector:
    matchLabels:
      k8s-app: kube-proxy
      ${PROXY_POD_LABEL[$netns]}
  updateStrategy:
    type: RollingUpdate
  template:
    metadata:
      labels:
        k8s-app: kube-proxy
        ${PROXY_POD_LABEL[$netns]}
    spec:
$(proxy_pod_spec "$cm" | sed 's/^/      /')
      nodeSelector:
        kubernetes.io/os: linux
        ${PROXY_NODES[$netns]}
EOF
}
proxy_pod_spec() {
	cat <<EOF
priorityClassName: system-node-critical
containers:
- name: kube-proxy
  image: registry.k8s.io/kube-proxy:$K8S_IMAGE_TAG
  imagePullPolicy: IfNotPresent
  command:
  - /usr/local/bin/kube-proxy
  - --config=/var/lib/kube-proxy/config.conf
  - --hostname-override=\$(NODE_NAME)
  securityContext:
    privileged: true
  volumeMounts:
  - mountPath: /var/lib/kube-proxy
    name: kube-proxy
  - mountPath: /run/xtables.lock
    name: xtables-lock
    readOnly: false
  - mountPath: /lib/modules
    name: lib-modules
    readOnly: true
  env:
  - name: NODE_NAME
    valueFrom:
      fieldRef:
        fieldPath: spec.nodeName
hostNetwork: true
serviceAccountName: kube-proxy
volumes:
- name: kube-proxy
  configMap:
    name: $1
- name: xtables-lock
  hostPath:
    path: /run/xtables.lock
    type: FileOrCreate
- name: lib-modules
  hostPath:
    path: /lib/modules
tolerations:
- operator: Exists
EOF
}

kubeadm_rbac() { # what kubeadm grants kube-proxy (phases/addons/proxy)
	cat <<EOF
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: kubeadm:node-proxier
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: system:node-proxier
subjects:
- kind: ServiceAccount
  name: kube-proxy
  namespace: kube-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: kube-proxy
  namespace: kube-system
rules:
- apiGroups: [""]
  resources: [configmaps]
  resourceNames: [kube-proxy]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: kube-proxy
  namespace: kube-system
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: kube-proxy
subjects:
- kind: Group
  name: system:bootstrappers:kubeadm:default-node-token
EOF
}

# create_parallel FILE...: `kubectl create` of each file at once (the fake
# nodes' hundreds of objects go in a few lists, created side by side).
create_parallel() {
	local f pids=() rc=0
	for f in "$@"; do
		kc create -f "$f" >/dev/null 2>"$f.err" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || rc=1; done
	((rc == 0)) || die "creating objects failed: $(cat "${@/%/.err}" | head -5)"
	for f in "$@"; do rm -f "$f.err"; done
}
SCALE_LISTS=4 # lists per kind of the fake nodes' objects: fake node i goes in list i % 4
{
	for n in "${NODES[@]}"; do echo "---"; node_manifest "$n" "${NODE_IP[$n]}" "${NODE_POD_CIDR[$n]}"; done
	for n in "${NETNS[@]}"; do proxy_objects "$n"; done
	kubeadm_rbac
} >"$RUN/cluster-objects.yaml"
lists=("$RUN/cluster-objects.yaml")
for ((l = 0; l < SCALE_LISTS && l < E2E_SCALE_NODES; l++)); do
	for ((i = l; i < E2E_SCALE_NODES; i += SCALE_LISTS)); do echo "---"; scale_node_manifest "$i"; done >"$RUN/scale-nodes-$l.yaml"
	lists+=("$RUN/scale-nodes-$l.yaml")
done
create_parallel "${lists[@]}"

# The DaemonSets' pods, as the (absent) DaemonSet controller would create them:
# kube_proxy_pods NETNS NODE...: one pod of NETNS's DaemonSet on each NODE.
kube_proxy_pods() {
	local netns=$1 cm=${PROXY_CM[$1]} uid spec n
	shift
	uid=$(kc -n kube-system get daemonset "$cm" -o 'jsonpath={.metadata.uid}')
	spec=$(proxy_pod_spec "$cm" | sed 's/^/  /')
	for n in "$@"; do
		cat <<EOF
---
apiVersion: v1
kind: Pod
metadata:
  generateName: kube-proxy-
  namespace: kube-system
  labels:
    k8s-app: kube-proxy
    controller-revision-hash: 6b8f5c7d9
    pod-template-generation: "1"
    ${PROXY_POD_LABEL[$netns]}
  ownerReferences:
  - apiVersion: apps/v1
    kind: DaemonSet
    name: $cm
    uid: $uid
    controller: true
    blockOwnerDeletion: true
spec:
  nodeName: $n
$spec
EOF
	done
}
for n in "${NODES[@]}"; do kube_proxy_pods "$n" "$n"; done >"$RUN/kube-proxy-pods.yaml"
pod_lists=("$RUN/kube-proxy-pods.yaml")
for ((l = 0; l < SCALE_LISTS && l < E2E_SCALE_NODES; l++)); do
	names=()
	for ((i = l; i < E2E_SCALE_NODES; i += SCALE_LISTS)); do names+=("$(scale_node "$i")"); done
	kube_proxy_pods "$SCALE_NETNS" "${names[@]}" >"$RUN/scale-pods-$l.yaml"
	pod_lists+=("$RUN/scale-pods-$l.yaml")
done

# --- kwok, the kubelet: one per node, inside the node's network namespace and its
# own UTS namespace (hostname = node name), so exec and port-forward land there.
cat >"$RUN/kwok-exec.yaml" <<EOF
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterExec
metadata:
  name: node-network
spec:
  execs:
  - local:
      workDir: /
      envs:
      - name: PATH
        value: /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterPortForward
metadata:
  name: kube-proxy-ports
spec:
  forwards:
  - ports: [10249]
    target: {port: 10249, address: 127.0.0.1}
  - ports: [10256]
    target: {port: 10256, address: 127.0.0.1}
EOF
for n in "${NODES[@]}"; do
	start_daemon "kwok-$n" "$LOGS/kwok-$n.log" ip netns exec "$n" unshare --uts -- \
		sh -c 'hostname "$0" && exec "$@"' "$n" \
		"$KWOK_BIN/kwok" --kubeconfig "$RUN/kwok.kubeconfig" \
		--config "$E2E_ROOT/hack/e2e/kwok/stages.yaml" --config "$RUN/kwok-exec.yaml" \
		--manage-single-node "$n" --node-name "$n" --node-ip "${NODE_IP[$n]}" --node-port 10250 \
		--server-address "${NODE_IP[$n]}:10250" \
		--tls-cert-file "$PKI/kubelet.crt" --tls-private-key-file "$PKI/kubelet.key" >/dev/null
done
# The fake nodes' kwok: all of them (by annotation), in the shared namespace;
# its hostname names the pool, not one node.
if ((E2E_SCALE_NODES > 0)); then
	start_daemon kwok-scale "$LOGS/kwok-scale.log" ip netns exec "$SCALE_NETNS" unshare --uts -- \
		sh -c 'hostname "$0" && exec "$@"' "$SCALE_NETNS" \
		"$KWOK_BIN/kwok" --kubeconfig "$RUN/kwok.kubeconfig" \
		--config "$E2E_ROOT/hack/e2e/kwok/stages.yaml" --config "$RUN/kwok-exec.yaml" \
		--manage-nodes-with-annotation-selector "$SCALE_KWOK_ANNOTATION=scale" \
		--node-ip "$SCALE_IP" --node-port 10250 --server-address "$SCALE_IP:10250" \
		--tls-cert-file "$PKI/kubelet.crt" --tls-private-key-file "$PKI/kubelet.key" >/dev/null
fi
# ready_nodes SELECTOR: how many nodes SELECTOR matches are Ready.
ready_nodes() {
	kc get nodes -l "$1" -o 'jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' 2>/dev/null |
		grep -cx True || true
}
for n in "${NODES[@]}"; do
	for ((i = 0; i < 600; i++)); do
		[[ $(ready_nodes "kubernetes.io/hostname=$n") == 1 ]] && break
		alive_pid "kwok-$n" >/dev/null || die "kwok on $n exited: $(tail -5 "$LOGS/kwok-$n.log")"
		sleep 0.1
	done
	[[ $(ready_nodes "kubernetes.io/hostname=$n") == 1 ]] || die "node $n not Ready after 60 s (kwok log: $LOGS/kwok-$n.log)"
done
if ((E2E_SCALE_NODES > 0)); then
	for ((i = 0; i < 600; i++)); do
		ready=$(ready_nodes "$SCALE_POOL_LABEL=scale")
		((ready == E2E_SCALE_NODES)) && break
		alive_pid kwok-scale >/dev/null || die "kwok of the fake nodes exited: $(tail -5 "$LOGS/kwok-scale.log")"
		sleep 0.2
	done
	((ready == E2E_SCALE_NODES)) || die "$ready of $E2E_SCALE_NODES fake nodes Ready after 120 s (kwok log: $LOGS/kwok-scale.log)"
fi
create_parallel "${pod_lists[@]}"
# ... and the status that controller would report.
for n in "${NETNS[@]}"; do
	count=1
	[[ $n != "$SCALE_NETNS" ]] || count=$E2E_SCALE_NODES
	kc -n kube-system patch daemonset "${PROXY_CM[$n]}" --subresource=status --type=merge -p "{\"status\":{\"currentNumberScheduled\":$count,\"desiredNumberScheduled\":$count,\"numberAvailable\":$count,\"numberMisscheduled\":0,\"numberReady\":$count,\"updatedNumberScheduled\":$count,\"observedGeneration\":1}}" >/dev/null
done

# --- kube-proxy on each node (and one for all the fake nodes) -------------------
# Its hostnameOverride and the name of its process (kube-proxy-NAME, log too).
declare -A PROXY_HOST=([node-a]=node-a [node-b]=node-b [$SCALE_NETNS]=$SCALE_PROXY_NODE)
declare -A PROXY_NAME=([node-a]=node-a [node-b]=node-b [$SCALE_NETNS]=scale)
for n in "${NETNS[@]}"; do
	mkdir -p "$RUN/$n"
	proxy_config "${PROXY_MODE[$n]}" "$RUN/kube-proxy.kubeconfig" "${PROXY_HOST[$n]}" "${SYNC_PERIOD[$n]}" |
		write_if_changed "$RUN/$n/kube-proxy.yaml"
	start_daemon "kube-proxy-${PROXY_NAME[$n]}" "$LOGS/kube-proxy-${PROXY_NAME[$n]}.log" \
		ip netns exec "$n" "$K8S_BIN/kube-proxy" --config "$RUN/$n/kube-proxy.yaml" --v=2 >/dev/null
done
metric() { # metric NETNS NAME: the value of the IPv4 sample of NAME, or nothing
	ip netns exec "$1" curl -fsS --max-time 2 http://127.0.0.1:10249/metrics 2>/dev/null |
		awk -v m="$2" '$1 ~ "^"m"\\{" && $1 ~ /ip_family="IPv4"/ { print $2; exit }' || true
}
for n in "${NETNS[@]}"; do
	name=kube-proxy-${PROXY_NAME[$n]}
	for ((i = 0; i < 600; i++)); do
		ts=$(metric "$n" kubeproxy_sync_proxy_rules_last_timestamp_seconds)
		[[ -n $ts && $ts != 0 ]] && break
		alive_pid "$name" >/dev/null || die "kube-proxy in $n exited: $(tail -5 "$LOGS/$name.log")"
		sleep 0.1
	done
	[[ -n $ts && $ts != 0 ]] || die "kube-proxy in $n did not sync within 60 s ($LOGS/$name.log)"
done

cat >"$RUN/env" <<EOF
KUBECONFIG=$ADMIN_KUBECONFIG
E2E_K8S_BIN=$K8S_BIN
E2E_ETCD_BIN=$ETCD_BIN
E2E_KWOK_BIN=$KWOK_BIN
E2E_RUN=$RUN
E2E_LOGS=$LOGS
E2E_SUBNET=$E2E_SUBNET
E2E_BRIDGE=$BRIDGE
E2E_APISERVER=$SERVER
E2E_NODES=${NODES[*]}
E2E_SCALE_NODES=$E2E_SCALE_NODES
E2E_SCALE_NETNS=$( ((E2E_SCALE_NODES == 0)) || echo "$SCALE_NETNS")
E2E_SCALE_SELECTOR=$SCALE_POOL_LABEL=scale
E2E_SCALE_GROUP_LABEL=$SCALE_GROUP_LABEL
E2E_SCALE_PREFIX=$SCALE_PREFIX
E2E_SCALE_PROXY_NODE=$SCALE_PROXY_NODE
EOF
failed=0
scale=""
((E2E_SCALE_NODES == 0)) || scale=" with $E2E_SCALE_NODES fake nodes in $SCALE_NETNS"
log "cluster up$scale in $((SECONDS - T0))s (build/cache check $((T_BUILT - T0))s, apiserver ready at $((T_APISERVER - T0))s); KUBECONFIG=$ADMIN_KUBECONFIG"
echo "$RUN/env"
