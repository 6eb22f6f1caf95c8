package plugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/charmbracelet/lipgloss"

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
	if !strings.Contains(out, "@@ shop/web:http TCP IPv4\n! cluster IP 10.96.10.1:80 from a pod: A 33.3% each to 3 endpoints; B 50% to\n") ||
		!strings.Contains(out, "10.244.0.11:8080 gets none\n- endpoint 10.244.0.11:8080 (KUBE-SEP-GXKVICYM64SODBWJ)\n") || !strings.Contains(out, "1 Service port differs") {
		t.Errorf("diff:\n%s", out)
	}
}

// Two dumps, given as --from-dump A --from-dump B or as the arguments (a
// file that is a ruleset, not a bundle), through the command: kube-proxy's
// rules for small-v1.37 against the same with one endpoint chain of
// shop/web emptied and the masquerade bit 15.
func TestDiffDumps(t *testing.T) {
	const small = "../testdata/fixtures/small-v1.37/"
	text, err := os.ReadFile(small + "iptables/save-legacy-ipv4.txt")
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, line := range strings.Split(string(text), "\n") {
		// The endpoint chain of shop/web:http 10.244.1.11:8080.
		if strings.HasPrefix(line, "-A KUBE-SEP-EPVTA2RHFPHQF37H ") {
			continue
		}
		kept = append(kept, line)
	}
	dir := t.TempDir()
	a, b := small+"iptables/save-legacy-ipv4.txt", filepath.Join(dir, "b.txt")
	if err := os.WriteFile(b, []byte(strings.ReplaceAll(strings.Join(kept, "\n"), "0x4000", "0x8000")), 0o600); err != nil {
		t.Fatal(err)
	}
	objects := small + "objects.json"
	out, errOut, err := runCmd(t, nil, "diff", "--from-dump", a, "--from-dump", b, "--from-objects", objects)
	if code := exitOf(t, err, errOut); code != ExitProblems {
		t.Fatalf("exit %d, want %d\n%s", code, ExitProblems, errOut)
	}
	for _, want := range []string{
		"@@ shop/web:http TCP IPv4\n! cluster IP 10.96.10.1:80 from a pod: A 33.3% each to 3 endpoints; B 33.3% to\n    10.244.0.11:8080, 66.7% to 10.244.2.11:8080, 10.244.1.11:8080 gets none\n- endpoint 10.244.1.11:8080 (KUBE-SEP-EPVTA2RHFPHQF37H)\n",
		"@@ fixed rules IPv4\n! masquerade mark: A bit 14 (0x00004000), B bit 15 (0x00008000)",
		"1 Service port and the fixed rules differ, 19 Service ports alike\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
	fits80(t, out)
	// FILE FILE: the same.
	args, _, _ := runCmd(t, nil, "diff", a, b, "--from-objects", objects)
	if args != out {
		t.Errorf("diff FILE FILE differs from two --from-dump:\n%s", args)
	}
	// The README shows it.
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), text, 0o600); err != nil {
		t.Fatal(err)
	}
	shown, _, _ := runCmd(t, nil, "diff", filepath.Join(dir, "a.txt"), b, "--from-objects", objects)
	shown = "$ kubectl proxyrules diff a.txt b.txt --from-objects objects.json\n" + strings.ReplaceAll(shown, dir+string(filepath.Separator), "")
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "<!-- diff-example -->\n```console\n"+shown+"```\n") {
		t.Errorf("README.md's diff example is not what diff prints:\n%s", shown)
	}
	// As JSON: the shares of each side; YAML too.
	js, _, _ := runCmd(t, nil, "diff", a, b, "--from-objects", objects, "-o", "json")
	var d struct {
		ServicePorts []struct {
			ServicePort string
			Routes      []struct {
				Entry, From string
				Differs     []string
				A, B        struct {
					Endpoints []struct {
						Endpoint string
						Share    float64
					}
				}
			}
		}
		FixedRules []struct{ Family, What, A, B string }
		Status     string
	}
	if err := json.Unmarshal([]byte(js), &d); err != nil {
		t.Fatal(err)
	}
	if len(d.ServicePorts) != 1 || len(d.ServicePorts[0].Routes) != 1 || len(d.ServicePorts[0].Routes[0].B.Endpoints) != 2 ||
		d.ServicePorts[0].Routes[0].B.Endpoints[1].Endpoint != "10.244.2.11:8080" || d.ServicePorts[0].Routes[0].B.Endpoints[1].Share < 0.666 ||
		len(d.FixedRules) != 1 || d.FixedRules[0].B != "bit 15 (0x00008000)" || d.Status != "problems" {
		t.Errorf("json: %+v\n%s", d, js)
	}
	if y, errOut, err := runCmd(t, nil, "diff", a, b, "--from-objects", objects, "-o", "yaml"); exitOf(t, err, errOut) != ExitProblems || !strings.Contains(y, "fixedRules:") || !strings.Contains(y, "shareSum:") {
		t.Errorf("yaml:\n%s", y)
	}
	// A dump and itself (through stdin), a bundle and a dump.
	if out, errOut, err := runCmd(t, text, "diff", "-", a, "--from-objects", objects); exitOf(t, err, errOut) != ExitHealthy || !strings.Contains(out, "no difference: 20 Service ports alike") {
		t.Errorf("a dump and itself: %s\n%s", out, errOut)
	}
	bundle := filepath.Join(dir, "bundle")
	if err := os.MkdirAll(bundle, 0o700); err != nil {
		t.Fatal(err)
	}
	writeBundle(t, bundle, [][2]string{{a, collect.KindRuleset}, {objects, collect.KindObjects}})
	archive := filepath.Join(dir, "a.tar.gz")
	if err := collect.WriteTarGz(bundle, archive); err != nil {
		t.Fatal(err)
	}
	for _, side := range []string{bundle, archive, filepath.Join(bundle, collect.ManifestFile)} {
		out, errOut, err := runCmd(t, nil, "diff", side, b)
		if exitOf(t, err, errOut) != ExitProblems || !strings.Contains(out, "--- A "+side) || !strings.Contains(out, "(node node-a,") || !strings.Contains(out, "19 Service ports alike") {
			t.Errorf("%s as a bundle against a dump:\n%s%s", side, out, errOut)
		}
	}
	if out, errOut, err := runCmd(t, nil, "diff", "--from-bundle", bundle, "--from-bundle", archive); exitOf(t, err, errOut) != ExitHealthy || !strings.Contains(out, "--- A "+bundle) || !strings.Contains(out, "no difference: 20 Service ports alike") {
		t.Errorf("two --from-bundle, the same bundle:\n%s%s", out, errOut)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"diff", "--from-dump", a}, "pass them as the two arguments, or as two --from-dump"},
		{[]string{"diff", "--from-dump", a, "--from-bundle", bundle}, "pass them as the two arguments"},
		{[]string{"diff", "--from-dump", a, "--from-dump", a}, "A and B are both"},
		{[]string{"diff"}, "pass them as the two arguments"},
		{[]string{"diff", objects, a}, "pass it with --from-objects"},
	} {
		if _, _, err := runCmd(t, nil, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}

// What a side is: a node name, a bundle (a folder, a .tar.gz or any gzip,
// a bundle.json), or a dump.
func TestDiffSideKinds(t *testing.T) {
	dir := t.TempDir()
	files := map[string][]byte{
		"save.txt":    []byte("*nat\n:PREROUTING ACCEPT [0:0]\nCOMMIT\n"),
		"bundle.gz":   {0x1f, 0x8b, 8, 0},
		"bundle.json": []byte(`{"collectedAt": "x", "files": []}`),
		"b.tar.gz":    []byte("not even gzip"),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for arg, want := range map[string]sideKind{
		"node-3":                          sideNode,
		"-":                               sideDump,
		dir:                               sideBundle,
		filepath.Join(dir, "save.txt"):    sideDump,
		filepath.Join(dir, "bundle.gz"):   sideBundle,
		filepath.Join(dir, "bundle.json"): sideBundle,
		filepath.Join(dir, "b.tar.gz"):    sideBundle,
		filepath.Join(dir, "missing.txt"): sideNode,
	} {
		if got := kindOfSide(arg); got != want {
			t.Errorf("%s: %d, want %d", arg, got, want)
		}
	}
}

// fits80 fails on a line wider than 80 columns.
func fits80(t *testing.T, out string) {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if w := lipgloss.Width(line); w > 80 {
			t.Errorf("%d columns: %s", w, line)
		}
	}
}
