# kubectl-proxyrules
#
#   make demo      build and run the main job on a bundled example (no cluster)
#   make test      install test dependencies when missing, vet, unit + real-tool tests, brief fuzzing,
#                  then the end-to-end suite on a real cluster on this machine (hack/e2e.mk)
#   make fixtures  regenerate testdata/fixtures from kube-proxy's own code (root, network namespaces)
#   make bench     benchmarks: whole commands on generated nodes of 1,250-5,000 Services,
#                  parsers, object decoding, attribution (BENCH=regexp COUNT=n)
#   make dist      release archives for 6 platforms, checksums and the krew manifest (hack/dist.mk)

GO        ?= go
CACHE     := $(CURDIR)/.cache
BIN       := $(CACHE)/bin
PLUGIN    := $(BIN)/kubectl-proxyrules
FUZZTIME  ?= 10s
DEMO_DIR  := testdata/fixtures/large-churn-v1.37

.PHONY: all build demo test test-deps vet unit fuzz fixtures bench clean

all: build

build:
	@mkdir -p $(BIN)
	$(GO) build -trimpath -o $(PLUGIN) ./cmd/kubectl-proxyrules

# The bundled example: a node in large-cluster mode right after a Service was
# deleted and two were rescaled (kube-proxy v1.37.2's own rules, read back by
# iptables-nft-save), with its metrics. --at is when the metrics were taken.
demo: build
	$(PLUGIN) triage --from-dump $(DEMO_DIR)/iptables/save-nft-ipv4.txt --from-dump $(DEMO_DIR)/iptables/save-nft-ipv6.txt \
		--from-objects $(DEMO_DIR)/objects.json --from-metrics $(DEMO_DIR)/metrics-iptables.txt \
		--from-config $(DEMO_DIR)/kube-proxy-configmap-iptables.yaml --node node-a --at 1795939150
	@echo
	$(PLUGIN) stale --from-dump $(DEMO_DIR)/iptables/save-nft-ipv4.txt --from-objects $(DEMO_DIR)/objects.json --node node-a | tail -8

test: test-deps vet unit fuzz e2e

test-deps:
	@bash hack/test-deps.sh

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' | grep -v '^hack/'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go' | grep -v '^hack/'); exit 1; }
	$(GO) vet ./...

unit:
	$(GO) test -count=1 ./...

fuzz:
	@bash hack/fuzz.sh $(FUZZTIME)

fixtures:
	bash hack/gen-fixtures.sh

BENCH ?= .
COUNT ?= 1
bench:
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -count $(COUNT) -timeout 2h ./inspect/... ./correlate ./diagnose ./plugin

clean:
	rm -rf $(CACHE)
include hack/dist.mk
include hack/e2e.mk
