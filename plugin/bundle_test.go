package plugin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/plugin/collect"
)

// writeBundle makes a bundle of fixture files as collect would.
func writeBundle(t *testing.T, dir string, files [][2]string) {
	t.Helper()
	m := &collect.Manifest{Node: "node-a", CollectedAt: time.Unix(1795939150, 0).UTC(), Via: "debug-pod", ProxyMode: "iptables", Backend: "nf_tables", Scope: "full"}
	for _, f := range files {
		name, kind := f[0], f[1]
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		base := filepath.Base(name)
		if err := os.WriteFile(filepath.Join(dir, base), data, 0o644); err != nil {
			t.Fatal(err)
		}
		m.Files = append(m.Files, collect.BundleFile{Path: base, Kind: kind, Bytes: int64(len(data))})
	}
	if err := collect.WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
}

// A bundle (folder or .tar.gz) reads back exactly like the files it holds.
func TestFromBundleEqualsFromDump(t *testing.T) {
	dir := t.TempDir()
	writeBundle(t, dir, [][2]string{
		{churnFixture + "iptables/save-nft-ipv4.txt", collect.KindRuleset},
		{churnFixture + "iptables/save-nft-ipv6.txt", collect.KindRuleset},
		{churnFixture + "objects.json", collect.KindObjects},
		{churnFixture + "metrics-iptables.txt", collect.KindMetrics},
	})
	archive := filepath.Join(t.TempDir(), "node-a.tar.gz")
	if err := collect.WriteTarGz(dir, archive); err != nil {
		t.Fatal(err)
	}
	direct := []string{"--from-dump", churnFixture + "iptables/save-nft-ipv4.txt", "--from-dump", churnFixture + "iptables/save-nft-ipv6.txt",
		"--from-objects", churnFixture + "objects.json", "--from-metrics", churnFixture + "metrics-iptables.txt", "--node", "node-a"}
	for _, cmd := range [][]string{{"map"}, {"stale"}, {"counts", "--at", "1795939150"}, {"triage", "--at", "1795939150"}, {"explain", "svc/svc-001", "-n", "load"}} {
		want, _, wantErr := runCmd(t, nil, append(cmd, direct...)...)
		for _, b := range []string{dir, archive} {
			got, errOut, err := runCmd(t, nil, append(cmd, "--from-bundle", b)...)
			if (err == nil) != (wantErr == nil) {
				t.Errorf("%s --from-bundle %s: err %v, from the files: %v\n%s", cmd[0], b, err, wantErr, errOut)
			}
			if got != want {
				t.Errorf("%s --from-bundle %s differs from the files it holds:\n--- bundle\n%s\n--- files\n%s", cmd[0], b, got, want)
			}
		}
	}
	// -o json says where the data came from.
	out, _, err := runCmd(t, nil, "map", "-o", "json", "--from-bundle", dir)
	if err != nil || !strings.Contains(out, `"collection": {`) || !strings.Contains(out, `"via": "debug-pod"`) {
		t.Errorf("map -o json --from-bundle: %v\n%.400s", err, out)
	}
}

func TestFromBundleErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"map", "--from-bundle", "does-not-exist"}, "no such file"},
		{[]string{"map", "--from-bundle", "testdata", "--from-dump", smallFixture + "iptables/save-nft-ipv4.txt"}, "do not mix"},
		{[]string{"map", "--from-bundle", "testdata"}, "not a bundle"},
		{[]string{"map"}, "which node?"},
		{[]string{"map", "--node", "n", "--via", "ssh"}, "--via must be"},
		{[]string{"map", "--node", "n", "--reader", "fast"}, "--reader must be"},
		{[]string{"collect", "--node", "n"}, "-d DIR"},
		{[]string{"collect", "-d", "x"}, "pass --node"},
		{[]string{"collect", "--node", "n", "-d", "testdata"}, "not empty"},
		{[]string{"map", "--node", "n", "--pod-deadline", "2h"}, "--pod-deadline must be between 30s and 1h0m0s"},
		{[]string{"collect", "--node", "n", "-d", "x", "--pod-deadline", "10s"}, "--pod-deadline must be between"},
	}
	for _, tt := range tests {
		_, _, err := runCmd(t, nil, tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: err %v, want it to mention %q", tt.args, err, tt.want)
		}
	}
}

// Metrics hours older than the bundle that holds them: the bundle's
// collectedAt, not the wall clock, is when the evidence was taken, and
// kube-proxy had stopped syncing by then: exit 2, said first.
func TestFromBundleOldMetrics(t *testing.T) {
	for _, tc := range []struct {
		collectedAt time.Time
		wantExit    int
	}{
		{time.Unix(1795939150, 0).UTC(), ExitHealthy},         // seconds after the last sync
		{time.Unix(1795939150+3*3600, 0).UTC(), ExitProblems}, // three hours later
	} {
		dir := t.TempDir()
		writeBundle(t, dir, [][2]string{
			{churnFixture + "iptables/save-nft-ipv4.txt", collect.KindRuleset},
			{churnFixture + "iptables/save-nft-ipv6.txt", collect.KindRuleset},
			{churnFixture + "objects.json", collect.KindObjects},
			{churnFixture + "metrics-iptables.txt", collect.KindMetrics},
			{churnFixture + "kube-proxy-configmap-iptables.yaml", collect.KindConfig},
			// the kernel state as collect reads it: nothing wrong there
			{"testdata/conntrack/empty-table.txt", collect.KindConntrack},
			{"testdata/conntrack/stats-1.txt", collect.KindConntrackStats},
			{"testdata/conntrack/stats-2.txt", collect.KindConntrackStats},
			{"testdata/conntrack/sysctls-healthy.txt", collect.KindSysctls},
		})
		b, err := collect.OpenBundle(context.Background(), dir, collect.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		m := b.Manifest
		b.Close()
		m.CollectedAt = tc.collectedAt
		if err := collect.WriteManifest(dir, &m); err != nil {
			t.Fatal(err)
		}
		out, errOut, err := runCmd(t, nil, "triage", "--from-bundle", dir, "-o", "json")
		if code := exitOf(t, err, errOut); code != tc.wantExit {
			t.Errorf("collected at %v: exit %d, want %d\n%s", tc.collectedAt, code, tc.wantExit, out)
		}
		var rep diagnose.TriageReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		if tc.wantExit == ExitProblems && (len(rep.Findings) == 0 || rep.Findings[0].Title != "kube-proxy is not syncing") {
			t.Errorf("first finding is not the not-syncing cause: %+v", rep.Findings)
		}
		if rep.EvidenceTimeSource != "the bundle's collectedAt" || !rep.EvidenceTime.Equal(tc.collectedAt) {
			t.Errorf("evidence time %v (%s), want the bundle's %v", rep.EvidenceTime, rep.EvidenceTimeSource, tc.collectedAt)
		}
	}
}

// collect -d into the user's own empty folder: a failure leaves the folder,
// and collect never writes through an archive that appeared meanwhile.
func TestCollectKeepsUsersFolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "incident")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	nowhere := filepath.Join(t.TempDir(), "nowhere.kubeconfig")
	os.WriteFile(nowhere, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\nusers: [{name: u, user: {token: x}}]\n"), 0o600)
	_, _, err := runCmd(t, nil, "collect", "--node", "n", "-d", dir, "--kubeconfig", nowhere, "--request-timeout", "2s")
	if err == nil {
		t.Fatal("collect against no cluster succeeded")
	}
	if st, serr := os.Stat(dir); serr != nil || !st.IsDir() {
		t.Errorf("a failed collect removed the user's own folder %s (%v)", dir, serr)
	}
}
