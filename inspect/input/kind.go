package input

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"regexp"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
)

// Kind is what an input holds, which decides the flag it is passed with.
type Kind string

const (
	KindUnknown Kind = ""
	// KindRuleset: iptables or nftables rules in any form (--from-dump).
	KindRuleset Kind = "ruleset"
	// KindMetrics: kube-proxy's /metrics (--from-metrics; --from-dump too).
	KindMetrics Kind = "metrics"
	// KindObjects: Kubernetes objects, Services and EndpointSlices (and
	// Nodes) as kubectl get -o json|yaml prints them (--from-objects).
	KindObjects Kind = "objects"
	// KindConfig: kube-proxy's configuration: a KubeProxyConfiguration, its
	// /configz, or the kube-proxy ConfigMap (--from-config).
	KindConfig Kind = "config"
	// KindBundle: what `collect` writes: a .tar.gz or its bundle.json
	// (--from-bundle).
	KindBundle Kind = "bundle"
)

// Flag is the command-line flag that reads inputs of the kind.
func (k Kind) Flag() string {
	switch k {
	case KindRuleset:
		return "--from-dump"
	case KindMetrics:
		return "--from-metrics"
	case KindObjects:
		return "--from-objects"
	case KindConfig:
		return "--from-config"
	case KindBundle:
		return "--from-bundle"
	}
	return ""
}

// Identity is what Identify found.
type Identity struct {
	Kind Kind
	// What names it for a message: "an iptables dump (iptables-save)",
	// "kube-proxy's metrics", "Kubernetes objects (Service, EndpointSlice)".
	What string
	// Format is the ruleset or metrics format, when Kind is one of those.
	Format inspect.Format
	// Object: a Kubernetes API object (a List, a ConfigMap …), which
	// --from-objects reads even when it is kube-proxy's ConfigMap.
	Object bool
	// HoldsConfig: objects that include kube-proxy's configuration (its
	// ConfigMap in a List), which --from-config reads too.
	HoldsConfig bool
}

var (
	kindValue   = regexp.MustCompile(`(?m)(?:"kind"\s*:\s*"|^\s*-?\s*kind:\s*["']?)([A-Za-z]+)`)
	objectKinds = map[string]bool{"Service": true, "EndpointSlice": true, "Endpoints": true, "Node": true, "Pod": true, "ConfigMap": true, "Namespace": true, "DaemonSet": true, "Deployment": true}
	gzipMagic   = []byte{0x1f, 0x8b}
	configzKey  = regexp.MustCompile(`^\{\s*"kubeproxy\.config\.k8s\.io"\s*:`)
)

// Identify names what an input's first bytes hold: a ruleset or metrics
// (as Detect sees them), Kubernetes objects, kube-proxy's configuration, a
// bundle; KindUnknown when none of those.
func Identify(head []byte) Identity {
	switch {
	case bytes.HasPrefix(head, gzipMagic):
		return Identity{Kind: KindBundle, What: "a gzip archive (a bundle written by collect?)"}
	case len(head) > 262 && bytes.Equal(head[257:262], []byte("ustar")):
		return Identity{Kind: KindBundle, What: "a tar archive (a bundle written by collect?)"}
	case bytes.IndexByte(head, 0) >= 0:
		return Identity{}
	}
	if f, err := Detect(head); err == nil {
		if f == inspect.FormatMetrics {
			return Identity{Kind: KindMetrics, What: "kube-proxy's metrics", Format: f}
		}
		return Identity{Kind: KindRuleset, What: rulesetWhat[f], Format: f}
	}
	if configzKey.Match(bytes.TrimLeft(head, " \t\r\n\ufeff")) {
		return Identity{Kind: KindConfig, What: "kube-proxy's /configz"}
	}
	if bytes.Contains(head, []byte(`"collectedAt"`)) && bytes.Contains(head, []byte(`"files"`)) {
		return Identity{Kind: KindBundle, What: "a bundle's bundle.json (pass its folder)"}
	}
	kinds := map[string]bool{}
	var first string
	for _, m := range kindValue.FindAllSubmatch(head, 64) {
		k := string(m[1])
		if first == "" {
			first = k
		}
		kinds[k] = true
	}
	holdsConfig := bytes.Contains(head, []byte("config.conf")) || kinds["KubeProxyConfiguration"]
	switch {
	case first == "KubeProxyConfiguration":
		return Identity{Kind: KindConfig, What: "kube-proxy's configuration (KubeProxyConfiguration)", HoldsConfig: true}
	case first == "ConfigMap" && holdsConfig:
		return Identity{Kind: KindConfig, What: "kube-proxy's ConfigMap", Object: true, HoldsConfig: true}
	}
	var named []string
	for _, k := range []string{"Service", "EndpointSlice", "Node", "ConfigMap"} {
		if kinds[k] || kinds[k+"List"] {
			named = append(named, k)
		}
	}
	if len(named) > 0 || kinds["List"] || objectKinds[first] || (len(first) > 4 && objectKinds[first[:len(first)-4]]) {
		what := "Kubernetes objects"
		if len(named) > 0 {
			what += " (" + joinWords(named) + ")"
		}
		return Identity{Kind: KindObjects, What: what, Object: true, HoldsConfig: holdsConfig}
	}
	return Identity{}
}

var rulesetWhat = map[inspect.Format]string{
	inspect.FormatIPTablesSave:    "an iptables dump (iptables-save)",
	inspect.FormatIPTablesRestore: "an iptables dump (iptables-restore input)",
	inspect.FormatIPTablesRules:   "an iptables dump (iptables -S)",
	inspect.FormatIPTablesExcerpt: "an iptables dump (rule lines)",
	inspect.FormatIPTablesList:    "an iptables listing (iptables -L)",
	inspect.FormatNFTJSON:         "an nftables dump (nft -j list ruleset)",
	inspect.FormatNFTText:         "an nftables dump (nft list ruleset)",
	inspect.FormatKnftablesDump:   "an nftables dump (knftables)",
	inspect.FormatIPVS:            "an IPVS table (/proc/net/ip_vs or ipvsadm)",
	inspect.FormatIPSet:           "ipsets (ipset save or list)",
	inspect.FormatIPAddr:          "interface addresses (ip addr)",
	inspect.FormatFIBTrie:         "local addresses (/proc/net/fib_trie)",
	inspect.FormatIfInet6:         "IPv6 addresses (/proc/net/if_inet6)",
}

func joinWords(w []string) string {
	var b bytes.Buffer
	for i, s := range w {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(s)
	}
	return b.String()
}

// accepts reports whether a flag for want reads an input of id.
func accepts(want Kind, id Identity) bool {
	switch id.Kind {
	case KindUnknown, want:
		return true
	case KindMetrics:
		return want == KindRuleset // --from-dump reads metrics too
	case KindConfig:
		return want == KindObjects && id.Object
	case KindObjects:
		return want == KindConfig && id.HoldsConfig
	}
	return false
}

// misplaced is the error for an input of another kind than want, or nil.
func misplaced(source string, head []byte, want Kind) error {
	id := Identify(head)
	if accepts(want, id) {
		return nil
	}
	return fmt.Errorf("%s: this file is %s: pass it with %s", source, id.What, id.Kind.Flag())
}

// Expect checks that r holds what a flag for want reads, before its reader
// sees it: an iptables dump passed to --from-objects gives "objects.json: this
// file is an iptables dump (iptables-save): pass it with --from-dump" rather
// than a YAML error. It returns a reader that yields all of r (the bytes it
// looked at included). Input it cannot tell is let through to the reader.
func Expect(r io.Reader, source string, want Kind) (io.Reader, error) {
	br := bufio.NewReaderSize(r, sniffSize)
	head, err := br.Peek(sniffSize)
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	if err := misplaced(source, head, want); err != nil {
		return nil, err
	}
	if size := inspect.InputSize(r); size > 0 {
		return sizedReader{br, size}, nil
	}
	return br, nil
}

// sizedReader passes on the size of what it buffers.
type sizedReader struct {
	*bufio.Reader
	size int64
}

func (r sizedReader) SizeHint() int64 { return r.size }
