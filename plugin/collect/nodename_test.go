package collect

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hostileNodeNames are node names no cluster holds, each refused where a
// file hands one over: bundle.json (a folder or an archive) and sweep.json.
var hostileNodeNames = []struct{ name, node string }{
	{"dotdot", "../x"},
	{"newline", "a\nb"},
	{"300 chars", strings.Repeat("a", 300)},
	{"SGR", "\x1b[31mnode-a"},
	{"forged line", "node-a\ntriage node-b OK"},
	{"upper case", "Node-A"},
	{"slash", "a/b"},
}

// noRawControl: an error quotes the name escaped, never raw.
func noRawControl(t *testing.T, what string, err error) {
	t.Helper()
	if msg := err.Error(); strings.ContainsAny(msg, "\n\x1b") {
		t.Errorf("%s: error quotes the name raw: %q", what, msg)
	}
}

func TestBundleRefusesHostileNodeName(t *testing.T) {
	for _, tc := range hostileNodeNames {
		m := map[string]any{"apiVersion": BundleAPIVersion, "kind": "Bundle", "node": tc.node, "via": "debug-pod", "scope": "full",
			"files": []map[string]any{{"path": "rules.txt", "kind": "ruleset", "bytes": 1}}}
		data, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		folder := t.TempDir()
		for name, body := range map[string]string{ManifestFile: string(data), "rules.txt": "x"} {
			if err := os.WriteFile(filepath.Join(folder, name), []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		archive := filepath.Join(t.TempDir(), "node.tar.gz")
		writeTarGz(t, archive, tarEntry{name: "node/" + ManifestFile, body: string(data)}, tarEntry{name: "node/rules.txt", body: "x"})
		for _, b := range []string{folder, archive} {
			isolateTemp(t)
			bundle, err := OpenBundle(context.Background(), b, DefaultLimits)
			if err == nil {
				bundle.Close()
				t.Errorf("%s: %s opened, node %q", tc.name, b, bundle.Manifest.Node)
				continue
			}
			if msg := err.Error(); !strings.Contains(msg, ManifestFile) || !strings.Contains(msg, "not a valid node name") {
				t.Errorf("%s: %s: %v, want the file and why", tc.name, b, err)
			}
			noRawControl(t, tc.name, err)
		}
	}
}

func TestSweepRefusesHostileNodeName(t *testing.T) {
	for _, tc := range hostileNodeNames {
		// A node not read (no folder): its name still reaches the output.
		m := SweepManifest{Kind: "Sweep", Nodes: []SweepNode{{Name: "node-a", Dir: "nodes/node-a"}, {Name: tc.node, Error: "not Ready", Reason: "NotReady"}}}
		data, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "nodes", "node-a"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, SweepManifestFile), data, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err = ReadSweepManifest(dir)
		if err == nil || !strings.Contains(err.Error(), SweepManifestFile) || !strings.Contains(err.Error(), "not a valid node name") {
			t.Errorf("%s: %v, want the file and why", tc.name, err)
			continue
		}
		noRawControl(t, tc.name, err)
	}
}

func TestCheckNodeName(t *testing.T) {
	for _, tc := range []struct {
		node string
		ok   bool
	}{
		{"node-a", true},
		{"ip-10-0-1-7.eu-west-1.compute.internal", true},
		{"10.0.0.10", true},
		{strings.Repeat("a", 253), true},
		{strings.Repeat("a", 254), false},
		{"", false},
		{"../x", false},
		{"a b", false},
		{"a\tb", false},
	} {
		if err := CheckNodeName(tc.node); (err == nil) != tc.ok {
			t.Errorf("CheckNodeName(%q) = %v, want ok %v", tc.node, err, tc.ok)
		}
	}
}
