# kubectl-proxyrules
#
#   make demo      build and run the main job on a bundled example (no cluster)
#   make test      install test dependencies when missing, vet, unit + real-tool tests, brief fuzzing
#   make fixtures  regenerate testdata/fixtures from kube-proxy's own code (root, network namespaces)
#   make bench     parser and attribution benchmarks on a large generated dump

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

demo: build
	$(PLUGIN) map --from-dump $(DEMO_DIR)/iptables/save-nft-ipv4.txt --from-dump $(DEMO_DIR)/iptables/save-nft-ipv6.txt \
		--from-objects $(DEMO_DIR)/objects.json --node node-a

test: test-deps vet unit fuzz

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

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./inspect ./correlate

clean:
	rm -rf $(CACHE)
include hack/dist.mk
