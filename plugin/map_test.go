package plugin

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/proxyrules/kubectl-proxyrules/diagnose"
)

const smallFixture = "../testdata/fixtures/small-v1.37/"
const churnFixture = "../testdata/fixtures/large-churn-v1.37/"

func TestMapGolden(t *testing.T) {
	tests := []struct {
		golden string
		args   []string
	}{
		{"map-small-iptables.txt", []string{"map", "--from-dump", smallFixture + "iptables/save-nft-ipv4.txt", "--from-dump", smallFixture + "iptables/save-nft-ipv6.txt", "--from-objects", smallFixture + "objects.json", "--node", "node-a"}},
		{"map-small-iptables-wide.txt", []string{"map", "--from-dump", smallFixture + "iptables/save-nft-ipv4.txt", "--from-objects", smallFixture + "objects.json", "-o", "wide"}},
		{"map-small-nftables.txt", []string{"map", "--from-dump", smallFixture + "nftables/ruleset.json", "--from-objects", smallFixture + "objects.json"}},
		{"map-churn-no-objects.txt", []string{"map", "--from-dump", churnFixture + "iptables/save-legacy-ipv4.txt"}},
	}
	for _, tc := range tests {
		t.Run(tc.golden, func(t *testing.T) {
			out, errOut, err := runCmd(t, nil, tc.args...)
			if err != nil {
				t.Fatalf("%v\n%s", err, errOut)
			}
			if strings.Contains(out, "\x1b[") {
				t.Error("escape codes in output to a non-terminal")
			}
			checkGolden(t, tc.golden, []byte(out))
		})
	}
}

// On a terminal the map is grouped by service port and fits 80 columns.
func TestMapGroupedOnTerminal(t *testing.T) {
	l := loadFixture(t, smallFixture+"iptables/save-nft-ipv4.txt", smallFixture+"iptables/save-nft-ipv6.txt")
	l.Node.Name = "node-a"
	m := diagnose.MapChains(l.Node)
	var out bytes.Buffer
	r := lipgloss.NewRenderer(&out)
	r.SetColorProfile(termenv.Ascii)
	if err := renderChainMap(&out, &Terminal{Rich: true, Width: 80, Renderer: r}, m, false); err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(out.String(), "\n") {
		if w := lipgloss.Width(line); w > 80 {
			t.Errorf("line %d is %d columns wide: %q", i+1, w, line)
		}
	}
	checkGolden(t, "map-small-iptables-terminal.txt", out.Bytes())
}

func loadFixture(t *testing.T, dumps ...string) *Loaded {
	t.Helper()
	l, err := loadRequest(Request{Files: InputFiles{Dumps: dumps, Objects: []string{smallFixture + "objects.json"}}})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestMapJSONSchema(t *testing.T) {
	dump, err := os.ReadFile(churnFixture + "iptables/nft-list.txt")
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runCmd(t, dump, "map", "--from-dump", "-", "--from-objects", churnFixture+"objects.json", "-o", "json", "--node", "node-a")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	var m struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Node       string `json:"node"`
		Sources    []struct {
			Source, Format string
		} `json:"sources"`
		Summary diagnose.MapSummary `json:"summary"`
		Chains  []json.RawMessage   `json:"chains"`
	}
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	if m.APIVersion != APIVersion || m.Kind != "ChainMap" || m.Node != "node-a" || m.Sources[0].Source != "<stdin>" || m.Sources[0].Format != "nft-text" {
		t.Errorf("header = %+v", m)
	}
	if m.Summary.Stale != 31 || m.Summary.Chains != len(m.Chains) {
		t.Errorf("summary = %+v (%d chains)", m.Summary, len(m.Chains))
	}
	// Every entry has the documented fields, with their documented types.
	for _, raw := range m.Chains {
		var c map[string]any
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Fatal(err)
		}
		for field, kind := range map[string]string{"mode": "string", "family": "string", "table": "string", "chain": "string", "kind": "string",
			"servicePort": "string", "evidence": "list", "stale": "bool", "rules": "number"} {
			v, ok := c[field]
			if !ok {
				t.Fatalf("chain %v lacks %q", c["chain"], field)
			}
			switch v.(type) {
			case string:
				ok = kind == "string"
			case []any:
				ok = kind == "list"
			case bool:
				ok = kind == "bool"
			case float64:
				ok = kind == "number"
			}
			if !ok {
				t.Errorf("chain %v: %s is %T, want %s", c["chain"], field, v, kind)
			}
		}
	}
	// The same report as YAML.
	yout, _, err := runCmd(t, dump, "map", "--from-dump", "-", "--from-objects", churnFixture+"objects.json", "-o", "yaml")
	if err != nil || !strings.HasPrefix(yout, "apiVersion: "+APIVersion+"\n") {
		t.Errorf("yaml: %v %.80q", err, yout)
	}
}

func TestMapErrors(t *testing.T) {
	tests := []struct {
		name  string
		stdin string
		args  []string
		want  string
	}{
		{"no dump", "", []string{"map"}, "which node?"},
		{"bad output", "", []string{"map", "--from-dump", smallFixture + "iptables/save-nft-ipv4.txt", "-o", "xml"}, "-o must be one of"},
		{"bad color", "", []string{"map", "--from-dump", smallFixture + "iptables/save-nft-ipv4.txt", "--color", "blue"}, "--color must be one of"},
		{"missing file", "", []string{"map", "--from-dump", "/nonexistent/dump"}, "no such file"},
		{"garbage", "this is not a ruleset\n", []string{"map", "--from-dump", "-"}, "unrecognised input"},
		{"metrics only", "# HELP x y\n# TYPE x gauge\nx 1\n", []string{"map", "--from-dump", "-"}, "hold no ruleset"},
		{"objects are not objects", "", []string{"map", "--from-dump", smallFixture + "iptables/save-nft-ipv4.txt", "--from-objects", smallFixture + "iptables/save-nft-ipv4.txt"}, "this file is an iptables dump (iptables-save): pass it with --from-dump"},
		{"two stdins", "", []string{"map", "--from-dump", "-", "--from-objects", "-"}, "only one input"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runCmd(t, []byte(tc.stdin), tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// A truncated dump still maps what it holds, and says so on stderr.
func TestMapTruncatedDumpWarns(t *testing.T) {
	data, err := os.ReadFile(smallFixture + "iptables/save-nft-ipv4.txt")
	if err != nil {
		t.Fatal(err)
	}
	cut := data[:len(data)*2/3]
	out, errOut, err := runCmd(t, cut, "map", "--from-dump", "-", "--from-objects", smallFixture+"objects.json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errOut, "truncated") || !strings.Contains(out, "kube-proxy chains") {
		t.Errorf("stderr %q\nstdout %.200q", errOut, out)
	}
}
