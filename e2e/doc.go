// Package e2e runs kubectl proxyrules against a real (small) cluster on this
// machine: etcd and kube-apiserver on the host, two nodes as network
// namespaces, real kube-proxy in iptables mode (node-a) and nftables mode
// (node-b), kwok as the kubelet; and, in scale mode (E2E_SCALE_NODES, default
// 100), as many fake nodes managed by one kwok in one more namespace with its
// own kube-proxy, for the sweeps over many nodes. See hack/e2e/up.sh.
//
//	make e2e   # or:
//	go test -tags e2e -v -count=1 -timeout 45m ./e2e
//
// The test binary supervises itself: the first process brings the cluster up
// (building the parts the first time), builds the plugin, runs the tests in a
// child process and tears the cluster down whatever happens to the child
// (failure, panic, timeout, SIGINT/SIGTERM), then checks that nothing is left.
// Where the machine cannot run it (not root, no network namespaces, the parts
// cannot be built) it skips with one line; E2E_REQUIRED=1 makes that a failure.
package e2e
