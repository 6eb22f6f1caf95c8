package plugin

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"regexp"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/inspect/input"
)

// sniffSize is how much of an input is kept to say, when it fails to
// read, what it is instead.
const sniffSize = 64 << 10

// headRecorder keeps the first sniffSize bytes read through it.
type headRecorder struct {
	r    io.Reader
	head []byte
}

func (h *headRecorder) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	if room := sniffSize - len(h.head); room > 0 {
		h.head = append(h.head, p[:min(n, room)]...)
	}
	return n, err
}

// readInput opens name, passes it to read and, when read fails, says
// whether the file is another kind of input given to the wrong flag.
func (o *InputOptions) readInput(flag, name string, read func(r io.Reader, source string) error) error {
	if st, err := os.Stat(name); err == nil && st.IsDir() {
		return fmt.Errorf("%s is a directory: pass a bundle directory with --from-bundle, and files with %s", name, flag)
	}
	rc, src, err := o.open(name)
	if err != nil {
		return err
	}
	defer rc.Close()
	rec := &headRecorder{r: rc}
	if err := read(rec, src); err != nil {
		if len(rec.head) < sniffSize {
			// The parser stopped early: read a little more to tell.
			_, _ = io.CopyN(io.Discard, rec, int64(sniffSize-len(rec.head)))
		}
		return misplaced(flag, src, rec.head, err)
	}
	return nil
}

var (
	jsonKind = regexp.MustCompile(`"kind"\s*:\s*"([A-Za-z]+)"`)
	yamlKind = regexp.MustCompile(`(?m)^kind:\s*([A-Za-z]+)\s*$`)
)

// sniffKind says what an input holds, from its first bytes, and which flag
// reads it; flag is "" when it cannot tell.
func sniffKind(head []byte) (what, flag string) {
	if bytes.HasPrefix(head, []byte{0x1f, 0x8b}) {
		return "a gzip archive (a bundle written by `collect`?)", "--from-bundle"
	}
	if bytes.IndexByte(head, 0) >= 0 {
		return "", ""
	}
	if bytes.Contains(head, []byte(`"collectedAt"`)) && bytes.Contains(head, []byte(`"files"`)) {
		return "a bundle's manifest", "--from-bundle (the bundle's directory)"
	}
	if bytes.Contains(head, []byte("kubeproxy.config.k8s.io")) && !bytes.Contains(head, []byte(`"nftables"`)) {
		if m := kindOf(head); m == "ConfigMap" || m == "KubeProxyConfiguration" || m == "" {
			return "kube-proxy's configuration", "--from-config"
		}
	}
	switch k := kindOf(head); k {
	case "":
	case "KubeProxyConfiguration":
		return "a KubeProxyConfiguration", "--from-config"
	case "ConfigMap", "ConfigMapList":
		if bytes.Contains(head, []byte("kube-proxy")) {
			return "the kube-proxy ConfigMap", "--from-config"
		}
		return "Kubernetes objects", "--from-objects"
	default:
		if !bytes.Contains(head, []byte(`"nftables"`)) {
			return "Kubernetes objects", "--from-objects"
		}
	}
	format, err := input.Detect(head)
	if err != nil {
		return "", ""
	}
	switch format {
	case inspect.FormatMetrics:
		return "kube-proxy's metrics", "--from-metrics"
	case inspect.FormatIPTablesSave:
		return "an iptables-save dump", "--from-dump"
	case inspect.FormatIPTablesRestore:
		return "iptables rules (kube-proxy's restore input or an excerpt)", "--from-dump"
	case inspect.FormatNFTJSON:
		return "an `nft -j list ruleset` dump", "--from-dump"
	case inspect.FormatNFTText:
		return "an `nft list ruleset` dump", "--from-dump"
	case inspect.FormatKnftablesDump:
		return "a knftables dump", "--from-dump"
	}
	return "a ruleset (" + string(format) + ")", "--from-dump"
}

func kindOf(head []byte) string {
	if m := jsonKind.FindSubmatch(head); m != nil {
		return string(m[1])
	}
	if m := yamlKind.FindSubmatch(head); m != nil {
		return string(m[1])
	}
	return ""
}

// misplaced replaces a reader's error by "this file is X: pass it with
// --flag" when the file is another kind of input than flag reads.
func misplaced(flag, source string, head []byte, err error) error {
	what, right := sniffKind(head)
	if right == "" || right == flag {
		return err
	}
	if flag == "--from-dump" && right == "--from-metrics" {
		return err // --from-dump reads metrics too: the error is real
	}
	return fmt.Errorf("%s is %s: pass it with %s, not %s", source, what, right, flag)
}

// misplacedBundle explains a --from-bundle that is another kind of file.
func misplacedBundle(name string, err error) error {
	st, statErr := os.Stat(name)
	if statErr != nil || st.IsDir() {
		return err
	}
	f, openErr := os.Open(name)
	if openErr != nil {
		return err
	}
	defer f.Close()
	head := make([]byte, sniffSize)
	n, _ := io.ReadFull(f, head)
	return misplaced("--from-bundle", name, head[:n], err)
}
