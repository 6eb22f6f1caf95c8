# kubectl-proxyrules
#
#   make demo      build and run the main job on a bundled example (no cluster)
#   make test      install test dependencies when missing, vet, unit + real-tool tests, the race
#                  detector, brief fuzzing, then the end-to-end suite on a real cluster on this
#                  machine (hack/e2e.mk)
#   make race      the race detector (and checkptr) over the code with goroutines, pools and unsafe
#   make fixtures  regenerate testdata/fixtures from kube-proxy's own code (root, network namespaces)
#   make bench     benchmarks: whole commands on generated nodes of 1,250-5,000 Services,
#                  parsers, object decoding, attribution (BENCH=regexp COUNT=n)
#   make bench-process  the built command's map -o json as a process of its own, paired with
#                  sha256sum of its inputs (ROUNDS=n interleaved pairs, COUNT=n)
#   make dist      release archives for 6 platforms, checksums and the krew manifest (hack/dist.mk)

SHELL     := /bin/bash
GO        ?= go
CACHE     := $(CURDIR)/.cache
BIN       := $(CACHE)/bin
PLUGIN    := $(BIN)/kubectl-proxyrules
FUZZTIME  ?= 10s

.PHONY: all build demo test test-deps vet unit race fuzz fixtures bench bench-process clean

all: build

build:
	@mkdir -p $(BIN)
	$(GO) build -trimpath -o $(PLUGIN) ./cmd/kubectl-proxyrules

# The bundled example (kube-proxy v1.37.2's own rules for the situation,
# read back by iptables-nft-save): a node whose restores fail because a
# KUBE-XLB- chain left by kube-proxy 1.23 still jumps to an endpoint chain
# kube-proxy deletes (kubernetes/kubernetes#132516). triage finds the root
# cause and exits 2 (problems found: the demo fails if it does not); map
# answers "whose chain is this?" for the chain in an alert; explain shows
# the Service's path. The inputs are what `collect` saves from a node.
DEMO_FAULT := testdata/fixtures/sync-failure-v1.37
DEMO_IN    := --from-dump $(DEMO_FAULT)/iptables/save-nft-ipv4.txt --from-dump $(DEMO_FAULT)/iptables/save-nft-ipv6.txt \
	--from-objects $(DEMO_FAULT)/objects.json --from-metrics $(DEMO_FAULT)/metrics-iptables.txt \
	--from-config $(DEMO_FAULT)/kube-proxy-configmap-iptables.yaml --node node-a
demo: build
	@echo '$$ kubectl proxyrules triage --from-dump … --node node-a     # sync-failure fixture'
	@$(PLUGIN) triage $(DEMO_IN); rc=$$?; \
		echo "(exit $$rc: 2 = problems found)"; test $$rc -eq 2
	@echo
	@echo '$$ kubectl proxyrules map KUBE-SEP-J3CSYAOACR6KUZIC --from-dump …   # whose chain is this?'
	@$(PLUGIN) map KUBE-SEP-J3CSYAOACR6KUZIC $(DEMO_IN)
	@echo
	@echo '$$ kubectl proxyrules explain svc/ingress -n shop --port http --from-dump …'
	@$(PLUGIN) explain svc/ingress -n shop --port http $(DEMO_IN); test $$? -eq 2

test: test-deps vet unit race fuzz e2e

test-deps:
	@bash hack/test-deps.sh

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' | grep -v '^hack/'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go' | grep -v '^hack/'); exit 1; }
	$(GO) vet ./...

unit:
	$(GO) test -count=1 ./...

# The race detector, which also checks every unsafe.Pointer conversion
# (checkptr), over the packages that run goroutines, share sync.Pools or
# make strings with unsafe: the parsers (parallel nft readers, arena
# strings), correlate (parallel attribution), the collector (streams of a
# remote command) and cmd (Ctrl-C). Of plugin, the tests of what runs
# concurrently: loads (files read in parallel), sweeps (nodes in
# parallel, objects shared), the streamed output and bundles.
RACE_PKGS := ./inspect/... ./correlate ./plugin/collect ./cmd/...
RACE_PLUGIN := Parallel|Sweep|Load|Targeted|Streamed|Bundle|Collect
race:
	$(GO) test -count=1 -race $(RACE_PKGS)
	$(GO) test -count=1 -race -run '$(RACE_PLUGIN)' ./plugin

fuzz:
	@bash hack/fuzz.sh $(FUZZTIME)

fixtures:
	bash hack/gen-fixtures.sh

BENCH ?= .
COUNT ?= 1
bench:
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -count $(COUNT) -timeout 2h ./inspect/... ./correlate ./diagnose ./plugin

ROUNDS ?= 7
bench-process:
	$(GO) test -run '^$$' -bench MapProcess -benchtime $(ROUNDS)x -count $(COUNT) -timeout 30m ./cmd/kubectl-proxyrules

clean:
	rm -rf $(CACHE)
include hack/dist.mk
include hack/e2e.mk
