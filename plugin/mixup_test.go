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
		{"--from-dump", small + "objects.json", "is Kubernetes objects: pass it with --from-objects, not --from-dump"},
		{"--from-dump", yamlObjects, "is Kubernetes objects: pass it with --from-objects, not --from-dump"},
		{"--from-dump", small + "configz-iptables.json", "pass it with --from-config, not --from-dump"},
		{"--from-dump", small + "kube-proxy-configmap-nftables.yaml", "is kube-proxy's configuration: pass it with --from-config"},
		{"--from-dump", bundle, "is a directory: pass a bundle directory with --from-bundle"},
		{"--from-dump", gz, "is a gzip archive (a bundle written by `collect`?): pass it with --from-bundle"},
		{"--from-objects", dump, "is an iptables-save dump: pass it with --from-dump, not --from-objects"},
		{"--from-objects", small + "iptables/restore-ipv4.txt", "pass it with --from-dump, not --from-objects"},
		{"--from-objects", small + "nftables/ruleset.json", "is an `nft -j list ruleset` dump: pass it with --from-dump"},
		{"--from-objects", small + "nftables/ruleset.txt", "is an `nft list ruleset` dump: pass it with --from-dump"},
		{"--from-objects", small + "nftables/knftables-ipv4.txt", "is a knftables dump: pass it with --from-dump"},
		{"--from-objects", small + "metrics-iptables.txt", "is kube-proxy's metrics: pass it with --from-metrics, not --from-objects"},
		{"--from-objects", small + "configz-nftables.json", "pass it with --from-config, not --from-objects"},
		{"--from-metrics", small + "objects.json", "pass it with --from-objects, not --from-metrics"},
		{"--from-metrics", small + "nftables/ruleset.txt", "pass it with --from-dump, not --from-metrics"},
		{"--from-config", small + "objects.json", "pass it with --from-objects, not --from-config"},
		{"--from-config", dump, "pass it with --from-dump, not --from-config"},
		{"--from-config", small + "metrics-nftables.txt", "pass it with --from-metrics, not --from-config"},
		{"--from-bundle", dump, "is an iptables-save dump: pass it with --from-dump, not --from-bundle"},
		{"--from-bundle", small + "objects.json", "pass it with --from-objects, not --from-bundle"},
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
	if err == nil || !strings.Contains(err.Error(), "<stdin> is Kubernetes objects: pass it with --from-objects") {
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
