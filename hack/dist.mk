# Release artefacts, included by the Makefile (uses its GO, CACHE and BIN).
#
#   make dist         cross-build linux/darwin/windows x amd64/arm64 into dist/:
#                     one archive per platform, checksums.txt, and the krew
#                     manifest krew/proxyrules.yaml rendered from its template
#   make krew-tools   build krew and validate-krew-manifest (pinned in
#                     hack/tools/go.mod) into .cache/bin, once
#   make krew-check   validate the rendered manifest and install it with krew
#                     from the local archive into a throw-away KREW_ROOT
#
# Variables: VERSION (default: git describe, else v0.1.0), PLATFORMS, DIST,
# KREW_MANIFEST, RELEASE_URL. A release:
#   git tag v0.1.0 && make dist && upload dist/*.tar.gz dist/*.zip dist/checksums.txt
#   then submit krew/proxyrules.yaml to krew-index (first release by hand).

DIST          ?= $(CURDIR)/dist
PLATFORMS     ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64
KREW_TEMPLATE ?= $(CURDIR)/krew/proxyrules.yaml.tmpl
KREW_MANIFEST ?= $(CURDIR)/krew/proxyrules.yaml
RELEASE_URL   ?= https://github.com/proxyrules/kubectl-proxyrules/releases/download

# VERSION is the tag (v-prefixed semver, as krew requires); an untagged or
# commit-less tree is v0.1.0. Commit and date come from git, so that two
# builds of one commit are byte-identical; the date is the commit's.
ifeq ($(origin VERSION),undefined)
VERSION := $(shell v=$$(git describe --tags --always --dirty 2>/dev/null); case "$$v" in (v[0-9]*) echo "$$v";; (*) echo v0.1.0;; esac)
endif
ifeq ($(origin COMMIT),undefined)
COMMIT := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
endif
ifeq ($(origin DATE),undefined)
DATE := $(shell TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null || date -u +%Y-%m-%dT%H:%M:%SZ)
endif

VERSION_PKG   := github.com/proxyrules/kubectl-proxyrules/plugin
DIST_LDFLAGS  := -s -w -X $(VERSION_PKG).Version=$(VERSION) -X $(VERSION_PKG).Commit=$(COMMIT) -X $(VERSION_PKG).Date=$(DATE)
DIST_STAGE    := $(DIST)/build

KREW          := $(BIN)/krew
VALIDATE_KREW := $(BIN)/validate-krew-manifest
DISTPACK      := $(BIN)/distpack
TOOLS_MOD     := $(CURDIR)/hack/tools/go.mod $(CURDIR)/hack/tools/go.sum

.PHONY: dist dist-build dist-clean krew-tools krew-check

dist: dist-build $(DISTPACK)
	$(DISTPACK) -version $(VERSION) -stage $(DIST_STAGE) -dist $(DIST) -platforms "$(PLATFORMS)" \
		-mtime $(DATE) \
		-files $(CURDIR)/LICENSE,$(CURDIR)/hack/dist/kubectl_complete-proxyrules \
		-windows-files $(CURDIR)/LICENSE,$(CURDIR)/hack/dist/kubectl_complete-proxyrules.cmd \
		-uri-base $(RELEASE_URL)/$(VERSION) \
		-template $(KREW_TEMPLATE) -manifest $(KREW_MANIFEST)

# One go build per platform; CGO off, paths trimmed, no VCS stamp (the
# commit is in the ldflags), so the binaries are reproducible.
dist-build:
	@rm -rf $(DIST_STAGE) $(DIST)/kubectl-proxyrules_*.tar.gz $(DIST)/kubectl-proxyrules_*.zip $(DIST)/checksums.txt
	@set -e; for p in $(PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; ext=; [ "$$os" = windows ] && ext=.exe; \
		echo "go build $$os/$$arch $(VERSION)"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -buildvcs=false -ldflags "$(DIST_LDFLAGS)" \
			-o $(DIST_STAGE)/$${os}_$${arch}/kubectl-proxyrules$$ext ./cmd/kubectl-proxyrules; \
	done

dist-clean:
	rm -rf $(DIST)

# The tools are cached in $(BIN): built once, again only when
# hack/tools/go.mod changes.
krew-tools: $(KREW) $(VALIDATE_KREW)

$(KREW): $(TOOLS_MOD)
	@mkdir -p $(BIN)
	$(GO) build -C hack/tools -trimpath -o $@ sigs.k8s.io/krew/cmd/krew

$(VALIDATE_KREW): $(TOOLS_MOD)
	@mkdir -p $(BIN)
	$(GO) build -C hack/tools -trimpath -o $@ sigs.k8s.io/krew/cmd/validate-krew-manifest

$(DISTPACK): $(TOOLS_MOD) $(wildcard $(CURDIR)/hack/tools/distpack/*.go)
	@mkdir -p $(BIN)
	$(GO) build -C hack/tools -trimpath -o $@ ./distpack

# Validates the manifest `make dist` rendered and installs the host's
# archive with krew into a temporary KREW_ROOT (no network).
krew-check: krew-tools
	$(VALIDATE_KREW) -manifest $(KREW_MANIFEST) -skip-install
	@set -e; root=$$(mktemp -d); trap 'rm -rf "$$root"' EXIT; \
		os=$$($(GO) env GOOS); arch=$$($(GO) env GOARCH); ext=.tar.gz; [ "$$os" = windows ] && ext=.zip; \
		KREW_ROOT=$$root KREW_NO_UPGRADE_CHECK=1 $(KREW) install --manifest=$(KREW_MANIFEST) \
			--archive=$(DIST)/kubectl-proxyrules_$(VERSION)_$${os}_$${arch}$$ext; \
		$$root/bin/kubectl-proxyrules version
