package input_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/inspect/input"
	"github.com/proxyrules/kubectl-proxyrules/inspect/iptables"
	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

func fixtureFile(t *testing.T, rel string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixture.Root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func formFile(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "iptables", "testdata", "forms", "small-v1.37", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func gzipped(t *testing.T) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte("bundle.json"))
	zw.Close()
	return b.Bytes()
}

// Every input the plugin reads, and the kind and flag Identify gives it.
func TestIdentify(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		kind input.Kind
		what string
	}{
		{"iptables-save", fixtureFile(t, "small-v1.37/iptables/save-nft-ipv4.txt"), input.KindRuleset, "iptables dump (iptables-save)"},
		{"kube-proxy's restore input", fixtureFile(t, "small-v1.37/iptables/restore-ipv4.txt"), input.KindRuleset, "iptables dump"},
		{"iptables -S", formFile(t, "ipv4-S-nat.txt"), input.KindRuleset, "iptables -S"},
		{"iptables -L", formFile(t, "ipv4-Lvx-nat.txt"), input.KindRuleset, "iptables -L"},
		{"iptables-nft seen by nft", fixtureFile(t, "small-v1.37/iptables/nft-list.txt"), input.KindRuleset, "nft list ruleset"},
		{"nft -j", fixtureFile(t, "small-v1.37/nftables/ruleset.json"), input.KindRuleset, "nft -j list ruleset"},
		{"knftables dump", fixtureFile(t, "small-v1.37/nftables/knftables-ipv4.txt"), input.KindRuleset, "knftables"},
		{"metrics", fixtureFile(t, "small-v1.37/metrics-iptables.txt"), input.KindMetrics, "metrics"},
		{"objects JSON", fixtureFile(t, "small-v1.37/objects.json"), input.KindObjects, "Kubernetes objects (Service, EndpointSlice)"},
		{"nodes JSON", fixtureFile(t, "topology-v1.37/nodes.json"), input.KindObjects, "Kubernetes objects (Node)"},
		{"objects YAML", []byte("apiVersion: v1\nitems:\n- apiVersion: v1\n  kind: Service\n  metadata:\n    name: web\nkind: List\n"), input.KindObjects, "Service"},
		{"kube-proxy ConfigMap", fixtureFile(t, "small-v1.37/kube-proxy-configmap-iptables.yaml"), input.KindConfig, "ConfigMap"},
		{"configz", fixtureFile(t, "small-v1.37/configz-iptables.json"), input.KindConfig, "/configz"},
		{"KubeProxyConfiguration", []byte("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: iptables\n"), input.KindConfig, "KubeProxyConfiguration"},
		{"bundle archive", gzipped(t), input.KindBundle, "gzip archive"},
		{"bundle.json", []byte(`{"node":"node-a","collectedAt":"2026-11-29T09:43:46Z","files":[]}`), input.KindBundle, "bundle.json"},
		{"prose", []byte("hello world\n"), input.KindUnknown, ""},
	}
	for _, tc := range tests {
		id := input.Identify(tc.data[:min(len(tc.data), 64<<10)])
		if id.Kind != tc.kind || !strings.Contains(id.What, tc.what) {
			t.Errorf("%s: %+v, want %s %q", tc.name, id, tc.kind, tc.what)
		}
	}
}

// Expect refuses an input of another kind with the flag it belongs to, and
// hands the rest to the reader unchanged.
func TestExpect(t *testing.T) {
	save := fixtureFile(t, "small-v1.37/iptables/save-nft-ipv4.txt")
	objects := fixtureFile(t, "small-v1.37/objects.json")
	configMap := fixtureFile(t, "small-v1.37/kube-proxy-configmap-iptables.yaml")
	metrics := fixtureFile(t, "small-v1.37/metrics-iptables.txt")
	listing := formFile(t, "ipv4-L-nat.txt")
	tests := []struct {
		name string
		data []byte
		want input.Kind
		err  string // "" when accepted
	}{
		{"dump as objects", save, input.KindObjects, "save-nft-ipv4.txt: this file is an iptables dump (iptables-save): pass it with --from-dump"},
		{"listing as objects", listing, input.KindObjects, "this file is an iptables listing (iptables -L): pass it with --from-dump"},
		{"dump as config", save, input.KindConfig, "pass it with --from-dump"},
		{"dump as metrics", save, input.KindMetrics, "pass it with --from-dump"},
		{"objects as metrics", objects, input.KindMetrics, "this file is Kubernetes objects (Service, EndpointSlice): pass it with --from-objects"},
		{"objects as config", objects, input.KindConfig, "pass it with --from-objects"},
		{"metrics as objects", metrics, input.KindObjects, "this file is kube-proxy's metrics: pass it with --from-metrics"},
		{"config as metrics", configMap, input.KindMetrics, "this file is kube-proxy's ConfigMap: pass it with --from-config"},
		{"bundle as objects", gzipped(t), input.KindObjects, "pass it with --from-bundle"},
		{"objects", objects, input.KindObjects, ""},
		{"ConfigMap as objects", configMap, input.KindObjects, ""},
		{"ConfigMap as config", configMap, input.KindConfig, ""},
		{"metrics as dump", metrics, input.KindRuleset, ""},
		{"prose as objects (the reader says what is wrong)", []byte("hello\n"), input.KindObjects, ""},
	}
	for _, tc := range tests {
		r, err := input.Expect(bytes.NewReader(tc.data), "save-nft-ipv4.txt", tc.want)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
		case err == nil:
			if all, _ := io.ReadAll(r); !bytes.Equal(all, tc.data) {
				t.Errorf("%s: the reader lost bytes: %d of %d", tc.name, len(all), len(tc.data))
			}
		}
	}
}

// An input of another kind passed where a dump belongs says where it goes.
func TestReadMisplaced(t *testing.T) {
	for name, data := range map[string][]byte{
		"objects.json": fixtureFile(t, "small-v1.37/objects.json"),
		"cm.yaml":      fixtureFile(t, "small-v1.37/kube-proxy-configmap-iptables.yaml"),
		"configz.json": fixtureFile(t, "small-v1.37/configz-iptables.json"),
	} {
		_, err := input.Read(bytes.NewReader(data), name)
		if err == nil || !strings.Contains(err.Error(), name+": this file is") || strings.Contains(err.Error(), "--from-dump") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// The new iptables forms are detected, past prompts and text.
func TestDetectIPTablesForms(t *testing.T) {
	tests := []struct {
		head string
		want inspect.Format
	}{
		{"-P INPUT ACCEPT\n-N KUBE-FORWARD\n", inspect.FormatIPTablesRules},
		{"-N KUBE-SVC-X\n-A KUBE-SVC-X -j KUBE-SEP-Y\n", inspect.FormatIPTablesRules},
		{"-A KUBE-SERVICES -j KUBE-NODEPORTS\n", inspect.FormatIPTablesExcerpt},
		{":KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -j X\n", inspect.FormatIPTablesExcerpt},
		{"-A X -j Y\n*nat\n:X - [0:0]\nCOMMIT\n", inspect.FormatIPTablesRestore},
		{"Chain KUBE-SERVICES (2 references)\ntarget     prot opt source               destination\n", inspect.FormatIPTablesList},
		{"Chain INPUT (policy ACCEPT 0 packets, 0 bytes)\n", inspect.FormatIPTablesList},
		{"root@node-a:~# iptables -t nat -L -n\r\nChain PREROUTING (policy ACCEPT)\r\n", inspect.FormatIPTablesList},
		{"$ sudo iptables -t nat -S | grep KUBE-SVC\n-A KUBE-SERVICES -j KUBE-SVC-X\n", inspect.FormatIPTablesExcerpt},
		{"Output of the node below.\nWe see this:\n\n    -N KUBE-SVC-X\n", inspect.FormatIPTablesRules},
		{"# iptables-save\n# Generated by iptables-save v1.8.9 on x\n*nat\n", inspect.FormatIPTablesSave},
	}
	for _, tc := range tests {
		if got, err := input.Detect([]byte(tc.head)); err != nil || got != tc.want {
			t.Errorf("Detect(%.50q) = %s, %v; want %s", tc.head, got, err, tc.want)
		}
	}
	for _, bad := range []string{"hello world\nand more\n", "apiVersion: v1\nkind: List\nitems: []\n"} {
		if got, err := input.Detect([]byte(bad)); err == nil {
			t.Errorf("Detect(%q) = %s, want an error", bad, got)
		}
	}
}

// Options.Read passes the table of headerless rules to the reader.
func TestReadOptions(t *testing.T) {
	in, err := input.Options{IPTables: iptables.Options{Table: "nat"}}.Read(strings.NewReader("-A OUTPUT -j KUBE-SERVICES\n"), "x")
	if err != nil || in.Ruleset.IPTable(kubeproxy.IPv4, "nat") == nil || in.Format != inspect.FormatIPTablesExcerpt {
		t.Fatalf("%+v, %v", in, err)
	}
	if _, err := (input.Options{IPTables: iptables.Options{Table: "nta"}}).Read(strings.NewReader("-N X\n"), "x"); err == nil {
		t.Error("a bad table was accepted")
	}
}
