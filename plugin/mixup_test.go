package plugin

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// A file given to the wrong flag says what it is and which flag reads it,
// for every kind of input.
func TestWrongFlagSaysWhichFlag(t *testing.T) {
	const small = "../testdata/fixtures/small-v1.37/"
	dump := small + "iptables/save-legacy-ipv4.txt"
	dir := t.TempDir()
	objectsJSON, err := os.ReadFile(small + "objects.json")
	if err != nil {
		t.Fatal(err)
	}
	objectsYAML, err := yaml.JSONToYAML(objectsJSON)
	if err != nil {
		t.Fatal(err)
	}
	yamlObjects := filepath.Join(dir, "objects.yaml")
	if err := os.WriteFile(yamlObjects, objectsYAML, 0o600); err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(dir, "bundle")
	if err := os.MkdirAll(bundle, 0o700); err != nil {
		t.Fatal(err)
	}
	gz := filepath.Join(dir, "bundle.tar.gz")
	if out, err := exec.Command("tar", "-czf", gz, "-C", small, "meta.json").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v %s", err, out)
	}
	for _, tc := range []struct {
		flag, file string
		want       string
	}{
		{"--from-dump", small + "objects.json", "this file is Kubernetes objects (Service, EndpointSlice): pass it with --from-objects"},
		{"--from-dump", yamlObjects, "this file is Kubernetes objects (Service, EndpointSlice): pass it with --from-objects"},
		{"--from-dump", small + "configz-iptables.json", "this file is kube-proxy's /configz: pass it with --from-config"},
		{"--from-dump", small + "kube-proxy-configmap-nftables.yaml", "this file is kube-proxy's ConfigMap: pass it with --from-config"},
		{"--from-dump", bundle, "is a directory: pass a bundle's folder with --from-bundle"},
		{"--from-dump", gz, "this file is a gzip archive (a bundle written by collect?): pass it with --from-bundle"},
		{"--from-objects", dump, "this file is an iptables dump (iptables-save): pass it with --from-dump"},
		{"--from-objects", small + "iptables/restore-ipv4.txt", "this file is an iptables dump (iptables-restore input): pass it with --from-dump"},
		{"--from-objects", small + "nftables/ruleset.json", "this file is an nftables dump (nft -j list ruleset): pass it with --from-dump"},
		{"--from-objects", small + "nftables/ruleset.txt", "this file is an nftables dump (nft list ruleset): pass it with --from-dump"},
		{"--from-objects", small + "nftables/knftables-ipv4.txt", "this file is an nftables dump (knftables): pass it with --from-dump"},
		{"--from-objects", small + "metrics-iptables.txt", "this file is kube-proxy's metrics: pass it with --from-metrics"},
		{"--from-objects", small + "configz-nftables.json", "this file is kube-proxy's /configz: pass it with --from-config"},
		{"--from-metrics", small + "objects.json", "this file is Kubernetes objects (Service, EndpointSlice): pass it with --from-objects"},
		{"--from-metrics", small + "nftables/ruleset.txt", "this file is an nftables dump (nft list ruleset): pass it with --from-dump"},
		{"--from-config", small + "objects.json", "this file is Kubernetes objects (Service, EndpointSlice): pass it with --from-objects"},
		{"--from-config", dump, "this file is an iptables dump (iptables-save): pass it with --from-dump"},
		{"--from-config", small + "metrics-nftables.txt", "this file is kube-proxy's metrics: pass it with --from-metrics"},
		{"--from-bundle", dump, "this file is an iptables dump (iptables-save): pass it with --from-dump"},
		{"--from-bundle", small + "objects.json", "this file is Kubernetes objects (Service, EndpointSlice): pass it with --from-objects"},
	} {
		args := []string{"map", tc.flag, tc.file}
		if tc.flag != "--from-dump" && tc.flag != "--from-bundle" {
			args = append(args, "--from-dump", dump)
		}
		_, _, err := runCmd(t, nil, args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: %v\nwant %q", tc.flag, filepath.Base(tc.file), err, tc.want)
		}
	}
	// stdin cannot be read twice: what was read of it tells.
	_, _, err = runCmd(t, objectsJSON, "map", "--from-dump", "-")
	if err == nil || !strings.Contains(err.Error(), "<stdin>: this file is Kubernetes objects (Service, EndpointSlice): pass it with --from-objects") {
		t.Errorf("objects on stdin: %v", err)
	}
	// Garbage stays the reader's own error.
	junk := filepath.Join(dir, "junk.txt")
	if err := os.WriteFile(junk, []byte("hello world\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err = runCmd(t, nil, "map", "--from-dump", junk)
	if err == nil || strings.Contains(err.Error(), "pass it with") || !strings.Contains(err.Error(), "unrecognised input") {
		t.Errorf("junk: %v", err)
	}
}

// --table names the table of pasted rules that do not say it, and is
// checked.
func TestTableFlag(t *testing.T) {
	dir := t.TempDir()
	// A KUBE-SERVICES excerpt whose targets do not tell the table.
	excerpt := filepath.Join(dir, "excerpt.txt")
	if err := os.WriteFile(excerpt, []byte("-A KUBE-SERVICES -d 10.96.0.1/32 -p tcp -m tcp --dport 443 -j ACCEPT\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tableOf := func(args ...string) string {
		t.Helper()
		out, errOut, err := runCmd(t, nil, append([]string{"map", "--from-dump", excerpt, "-o", "jsonpath={.items[*].table}"}, args...)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, errOut)
		}
		return out
	}
	if got := tableOf(); !strings.Contains(got, "filter") {
		t.Errorf("without --table: %q, want filter (iptables' default)", got)
	}
	if got := tableOf("--table", "nat"); !strings.Contains(got, "nat") || strings.Contains(got, "filter") {
		t.Errorf("--table nat: %q", got)
	}
	if _, _, err := runCmd(t, nil, "map", "--from-dump", excerpt, "--table", "natt"); err == nil || !strings.Contains(err.Error(), `unknown iptables table "natt"`) {
		t.Errorf("--table natt: %v", err)
	}
}
