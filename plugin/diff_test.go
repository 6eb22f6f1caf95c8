package plugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/plugin/collect"
)

// diff of two bundles of one node around churn (kube-proxy's own rules:
// large-v1.37 is the state before large-churn-v1.37): per Service port what
// went and came, the deleted Service named from the older bundle's objects.
func TestDiffBundles(t *testing.T) {
	before, after := filepath.Join(t.TempDir(), "before"), filepath.Join(t.TempDir(), "after")
	for dir, fx := range map[string]string{before: "large-v1.37", after: "large-churn-v1.37"} {
		p := "../testdata/fixtures/" + fx + "/"
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		writeBundle(t, dir, [][2]string{{p + "iptables/save-nft-ipv4.txt", "ruleset"}, {p + "objects.json", collect.KindObjects}})
	}
	out, errOut, err := runCmd(t, nil, "diff", before, after)
	if code := exitOf(t, err, errOut); code != ExitProblems {
		t.Fatalf("exit %d, want %d\n%s", code, ExitProblems, errOut)
	}
	golden := strings.NewReplacer(filepath.Dir(before), "BEFORE", filepath.Dir(after), "AFTER").Replace(out)
	checkGolden(t, "diff-churn.txt", []byte(golden))
	for _, want := range []string{"@@ load/svc-003:http TCP IPv4", "- clusterIP 10.96.100.4:80", "+ stale service chain (KUBE-SVC-24GJCDWLGUYYVFX5)", "+ stale endpoint chain 10.244.0.163:8080 (KUBE-SEP-H33CECGOHD5EG2XR)", "(the Service is in A's objects only: deleted between the two)", "3 Service ports differ"} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q", want)
		}
	}
	// The same, the other way round, as JSON; and -n keeps one namespace.
	out, _, _ = runCmd(t, nil, "diff", after, before, "-o", "json")
	var d struct {
		Kind         string
		ServicePorts []struct {
			ServicePort string
			OnlyA       []struct{ What string }
			OnlyB       []struct{ What string }
		}
		Status string
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatal(err)
	}
	if d.Kind != "NodeDiff" || len(d.ServicePorts) != 3 || d.Status != "problems" {
		t.Errorf("json: %+v", d)
	}
	for _, sp := range d.ServicePorts {
		if sp.ServicePort == "load/svc-002:http" && (len(sp.OnlyA) != 10 || len(sp.OnlyB) != 0) {
			t.Errorf("svc-002 reversed: %d only in A, %d only in B", len(sp.OnlyA), len(sp.OnlyB))
		}
	}
	out, errOut, err = runCmd(t, nil, "diff", before, after, "-n", "kube-system")
	if code := exitOf(t, err, errOut); code != ExitHealthy || !strings.Contains(out, "no difference") {
		t.Errorf("-n kube-system: exit %d\n%s", code, out)
	}
	// A bundle and itself: nothing differs.
	out, errOut, err = runCmd(t, nil, "diff", before, before+"/")
	if code := exitOf(t, err, errOut); code != ExitHealthy || !strings.Contains(out, "no difference: ") {
		t.Errorf("a bundle and itself: exit %d\n%s", code, out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"diff", before}, "accepts 2 arg(s)"},
		{[]string{"diff", before, before}, "A and B are both"},
		{[]string{"diff", before, after, "--from-dump", "x"}, "pass them as the two arguments"},
	} {
		if _, _, err := runCmd(t, nil, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}

// Two nodes of a sweep folder: node-a has an endpoint's jump removed.
func TestDiffSweepNodes(t *testing.T) {
	dir := sweepFolder(t)
	out, errOut, err := runCmd(t, nil, "diff", collect.NodeBundleDir(dir, "node-c"), collect.NodeBundleDir(dir, "node-a"))
	if code := exitOf(t, err, errOut); code != ExitProblems {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	if !strings.Contains(out, "@@ shop/web:http TCP IPv4\n- endpoint 10.244.0.11:8080 (KUBE-SEP-GXKVICYM64SODBWJ)\n") || !strings.Contains(out, "1 Service port differs") {
		t.Errorf("diff:\n%s", out)
	}
}
