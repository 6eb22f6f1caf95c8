# End-to-end suite: a real cluster on this machine (etcd, kube-apiserver, two
# network-namespace nodes with real kube-proxy in iptables and nftables mode,
# kwok as the kubelet, and in scale mode 100 fake nodes sharing a third
# namespace with one kwok and one kube-proxy) and the plugin run against it.
# See hack/e2e/ and e2e/. Included from the Makefile; GO comes from there.
# Only one cluster runs on a machine at a time: the suite takes a machine-wide
# lock (/run/kubectl-proxyrules-e2e.lock) and waits for another run; the
# leftovers of a run that was killed (no teardown) are torn down from the
# records it kept in /run/kubectl-proxyrules-e2e/.
#
#   make e2e        bring a cluster up, run the suite, tear it down (root; skips with one line otherwise);
#                   the sweep tests run on the fake nodes (E2E_SCALE_NODES, default 100; 0: none, they skip)
#   make e2e-sweep  the same, only the sweep tests (and the scenario they read)
#   make e2e-up     bring the cluster up and leave it running (KUBECONFIG=.cache/e2e/run/admin.kubeconfig)
#   make e2e-down   tear it down
#   make bench-live the live benchmark (issue 33): a cluster with 5,000 Services x 20 endpoints, each
#                   live command timed per phase (--timings) next to the node's own read; table in
#                   .cache/e2e/bench-live.md (E2E_LIVE_BENCH_ROUNDS, default 3)
#   make e2e-build  only build the cluster parts into .cache/e2e/bin (cached by version)

E2E_TIMEOUT ?= 45m

.PHONY: bench-live e2e e2e-sweep e2e-deps e2e-build e2e-up e2e-down

e2e-deps:
	@bash hack/e2e/deps.sh

e2e-build:
	bash hack/e2e/build.sh

e2e-up: e2e-deps
	bash hack/e2e/up.sh

e2e-down:
	bash hack/e2e/down.sh

e2e: e2e-deps
	$(GO) vet -tags e2e ./e2e
	$(GO) test -tags e2e -v -count=1 -timeout $(E2E_TIMEOUT) ./e2e

e2e-sweep: e2e-deps
	$(GO) test -tags e2e -v -count=1 -timeout $(E2E_TIMEOUT) -run 'TestMapLiveNodes|TestScaleNodes|TestSweep' ./e2e

bench-live: e2e-deps
	E2E_SCALE_NODES=0 E2E_LIVE_BENCH=1 $(GO) test -tags e2e -v -count=1 -timeout 90m -run 'TestLiveBench$$' ./e2e
