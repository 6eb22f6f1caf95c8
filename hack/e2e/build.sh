#!/usr/bin/env bash
# Builds the parts of the end-to-end cluster from the Go module proxy, once per
# version, into the git-ignored cache:
#
#   .cache/e2e/bin/kubernetes-v1.37.2/{kube-apiserver,kube-proxy,kubectl}
#   .cache/e2e/bin/etcd-v3.7.0/etcd
#   .cache/e2e/bin/kwok-v0.8.0/kwok
#
# Versions come from hack/e2e/tools/go.mod (kubernetes, etcd) and
# hack/e2e/tools/kwok/go.mod. A directory is rebuilt only when missing or when
# its stamp (a hash of the module files and the build flags) changed, so a
# warm run builds nothing. Prints nothing but errors and one line per build.
#
#   hack/e2e/build.sh            build what is missing
#   hack/e2e/build.sh --print    print the three bin directories, one a line
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TOOLS="$ROOT/hack/e2e/tools"
BIN="${E2E_BIN_CACHE:-$ROOT/.cache/e2e/bin}"
GO=${GO:-go}

modver() { # modver MODFILE MODULE -> the version required
	awk -v m="$2" '$1 == m && $2 ~ /^v/ { print $2; exit } $1 == "require" && $2 == m { print $3; exit }' "$1"
}
K8S_VERSION=$(modver "$TOOLS/go.mod" k8s.io/kubernetes)
ETCD_VERSION=$(modver "$TOOLS/go.mod" go.etcd.io/etcd/server/v3)
KWOK_VERSION=$(modver "$TOOLS/kwok/go.mod" sigs.k8s.io/kwok)
for v in K8S_VERSION ETCD_VERSION KWOK_VERSION; do
	[[ -n ${!v} ]] || { echo "e2e build: cannot read $v from hack/e2e/tools" >&2; exit 1; }
done

K8S_DIR="$BIN/kubernetes-$K8S_VERSION"
ETCD_DIR="$BIN/etcd-$ETCD_VERSION"
KWOK_DIR="$BIN/kwok-$KWOK_VERSION"
if [[ ${1:-} == --print ]]; then
	printf '%s\n' "$K8S_DIR" "$ETCD_DIR" "$KWOK_DIR"
	exit 0
fi

# The version the binaries report (they would say v0.0.0-master otherwise),
# with the release date of the module as build date.
k8s_ldflags() {
	local v=$K8S_VERSION major minor date p flags="-s -w"
	major=${v#v}; major=${major%%.*}
	minor=${v#v*.}; minor=${minor%%.*}
	date=$(cd "$TOOLS" && $GO list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes 2>/dev/null || echo 1970-01-01T00:00:00Z)
	for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		flags+=" -X $p.gitVersion=$v -X $p.gitMajor=$major -X $p.gitMinor=$minor"
		flags+=" -X $p.gitTreeState=clean -X $p.buildDate=$date"
	done
	echo "$flags"
}

stamp_of() { # stamp_of FLAGS FILES... -> hash of the inputs of one build
	local flags=$1; shift
	{ $GO version; echo "$flags"; cat "$@"; } | sha256sum | cut -c1-16
}

# build DIR STAMP CMD... runs CMD with $OUTDIR set to a fresh directory and
# moves it to DIR when it succeeds, so that DIR is either complete or absent.
build() {
	local dir=$1 stamp=$2; shift 2
	if [[ -f $dir/.stamp && $(cat "$dir/.stamp") == "$stamp" ]]; then
		return 0
	fi
	local start=$SECONDS
	OUTDIR="$dir.tmp.$$"
	rm -rf "$OUTDIR"; mkdir -p "$OUTDIR"
	echo "e2e build: $(basename "$dir") (first build only: minutes) ..." >&2
	if ! "$@"; then
		rm -rf "$OUTDIR"
		echo "e2e build failed: $(basename "$dir")" >&2
		return 1
	fi
	echo "$stamp" >"$OUTDIR/.stamp"
	rm -rf "$dir"; mv "$OUTDIR" "$dir"
	echo "e2e build: $(basename "$dir") built in $((SECONDS - start))s" >&2
}

mkdir -p "$BIN"
exec 9>"$BIN/.lock"
flock 9 # one build at a time (make e2e-up and the suite may race)

export CGO_ENABLED=0
K8S_FLAGS=$(k8s_ldflags)

build_k8s() {
	(cd "$TOOLS" && $GO build -trimpath -ldflags "$K8S_FLAGS" -o "$OUTDIR/" \
		k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kubectl)
}
build_etcd() {
	(cd "$TOOLS" && $GO build -trimpath -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$ETCD_VERSION" \
		-o "$OUTDIR/etcd" go.etcd.io/etcd/server/v3)
}
build_kwok() {
	(cd "$TOOLS/kwok" && $GO build -trimpath -ldflags "-s -w" -o "$OUTDIR/kwok" sigs.k8s.io/kwok/cmd/kwok)
}

build "$ETCD_DIR" "$(stamp_of etcd "$TOOLS/go.mod" "$TOOLS/go.sum")" build_etcd
build "$KWOK_DIR" "$(stamp_of kwok "$TOOLS/kwok/go.mod" "$TOOLS/kwok/go.sum")" build_kwok
build "$K8S_DIR" "$(stamp_of "$K8S_FLAGS" "$TOOLS/go.mod" "$TOOLS/go.sum")" build_k8s
