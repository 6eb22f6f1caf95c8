package plugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/plugin/collect"
)

// IPVS mode in map, stale, counts, diff and the sweeps: the tables are
// what kube-proxy v1.37.2's IPVS proxier wrote (testdata/fixtures/*/ipvs),
// faults injected into their text.

const smallIPVS = smallFixture + "ipvs/"

const loopbackFixture = "../testdata/fixtures/ipvs-loopback-v1.37/"
const loopbackIPVS = loopbackFixture + "ipvs/"

// The faults the tests inject into small-v1.37's ipvsadm -Ln: a port
// removed from shop/web (its cluster IP, another port), a re-created
// shop/web (another address, its endpoints), a virtual server nothing
// tells the owner of, and kube-proxy's startup probe left behind.
const ipvsStaleServers = `TCP  10.96.10.1:8443 rr
  -> 10.244.0.11:8443             Masq    1      0          0
TCP  10.96.99.9:80 rr
  -> 10.244.0.11:8080             Masq    1      3          0
  -> 10.244.1.11:8080             Masq    1      0          0
  -> 10.244.2.11:8080             Masq    1      0          0
TCP  10.96.77.7:80 rr
  -> 10.244.5.5:8080              Masq    1      0          0
TCP  198.51.100.0:20000 rr
`

// ipvsListing writes small-v1.37's ipvsadm -Ln, changed by edit, to a
// temporary file and returns its path.
func ipvsListing(t *testing.T, edit func(string) string) string {
	t.Helper()
	b, err := os.ReadFile(smallIPVS + "ipvsadm-Ln.txt")
	if err != nil {
		t.Fatal(err)
	}
	s := edit(string(b))
	if s == string(b) {
		t.Fatal("the edit changed nothing")
	}
	p := filepath.Join(t.TempDir(), "ipvsadm-Ln.txt")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// withoutVirtualServer removes the virtual server whose line is vs, with
// its real servers, from an ipvsadm -Ln listing.
func withoutVirtualServer(s, vs string) string {
	var out []string
	skip := false
	for _, line := range strings.SplitAfter(s, "\n") {
		if !strings.HasPrefix(line, "  ->") {
			skip = strings.TrimSpace(line) == vs
		}
		if !skip {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}

// withStaleServers adds ipvsStaleServers, and a real server that is no
// endpoint to shop/web's cluster IP.
func withStaleServers(s string) string {
	s = strings.Replace(s, "TCP  10.96.10.1:80 rr\n", "TCP  10.96.10.1:80 rr\n  -> 10.244.3.99:8080             Masq    1      0          0\n", 1)
	return s + ipvsStaleServers
}

func TestIPVSMapStaleGolden(t *testing.T) {
	faulty := ipvsListing(t, withStaleServers)
	objs := smallFixture + "objects.json"
	tests := []struct {
		golden   string
		args     []string
		wantExit int
	}{
		{"map-ipvs-small.txt", []string{"map", "--from-dump", faulty, "--from-dump", smallIPVS + "iptables-save-nft-ipv4.txt", "--from-objects", objs, "--node", "node-a"}, ExitHealthy},
		{"map-ipvs-small-wide.txt", []string{"map", "--from-dump", faulty, "--from-objects", objs, "--node", "node-a", "-o", "wide"}, ExitHealthy},
		{"map-ipvs-no-objects.txt", []string{"map", "--from-dump", smallIPVS + "ipvsadm-Sn.txt"}, ExitHealthy},
		{"stale-ipvs.txt", []string{"stale", "--from-dump", faulty, "--from-objects", objs, "--node", "node-a"}, ExitProblems},
		// kube-proxy v1.37.2 with an older version's NodePorts on loopback
		// left: listed apart, harmless.
		{"map-ipvs-loopback.txt", []string{"map", "--from-dump", loopbackIPVS + "proc-net-ip_vs.txt", "--from-objects", loopbackFixture + "objects.json", "--node", "node-a"}, ExitHealthy},
		{"stale-ipvs-loopback.txt", []string{"stale", "--from-dump", loopbackIPVS + "ipvsadm-Ln.txt", "--from-objects", loopbackFixture + "objects.json", "--node", "node-a"}, ExitHealthy},
		{"stale-ipvs-healthy.txt", []string{"stale", "--from-dump", smallIPVS + "proc-net-ip_vs.txt", "--from-dump", smallIPVS + "iptables-save-nft-ipv4.txt", "--from-objects", objs, "--node", "node-a"}, ExitHealthy},
	}
	for _, tc := range tests {
		t.Run(tc.golden, func(t *testing.T) {
			out, errOut, err := runCmd(t, nil, tc.args...)
			if code := exitOf(t, err, errOut); code != tc.wantExit {
				t.Errorf("exit status %d, want %d", code, tc.wantExit)
			}
			if strings.Contains(out, "0 kube-proxy chains") {
				t.Error("the map says 0 chains of an IPVS table")
			}
			checkGolden(t, tc.golden, []byte(out))
		})
	}
}

func TestIPVSMapJSON(t *testing.T) {
	faulty := ipvsListing(t, withStaleServers)
	out, errOut, err := runCmd(t, nil, "map", "--from-dump", faulty, "--from-objects", smallFixture+"objects.json", "--node", "node-a", "-o", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	var m struct {
		Summary struct {
			IPVS *struct {
				VirtualServers, Attributed, Probes, Unattributed, RealServers, Endpoints, NotEndpoints int
			}
		}
		Chains         []json.RawMessage
		VirtualServers []struct {
			VirtualServer, Protocol, Addr, Kind, ServicePort, Frontend, Family, Unowned string
			RealServers                                                                 []struct {
				Addr     string
				Weight   int
				Endpoint bool
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	// 33 virtual servers of the fixture's Service ports, 3 stale, the probe;
	// 54 real servers + 1 injected into shop/web + 5 of the stale ones.
	if s := m.Summary.IPVS; s == nil || s.VirtualServers != 37 || s.Attributed != 34 || s.Probes != 1 || s.Unattributed != 3 ||
		s.RealServers != 60 || s.Endpoints != 54 || s.NotEndpoints != 1 || len(m.VirtualServers) != 37 || m.Chains == nil {
		t.Fatalf("summary %+v, %d virtual servers, chains %v", m.Summary.IPVS, len(m.VirtualServers), m.Chains)
	}
	byName := map[string]int{}
	for i, vs := range m.VirtualServers {
		byName[vs.VirtualServer] = i
	}
	web := m.VirtualServers[byName["TCP 10.96.10.1:80 rr"]]
	if web.ServicePort != "shop/web:http" || web.Frontend != "clusterIP" || web.Family != "IPv4" || len(web.RealServers) != 4 {
		t.Fatalf("shop/web: %+v", web)
	}
	for _, rs := range web.RealServers {
		if want := rs.Addr != "10.244.3.99:8080"; rs.Endpoint != want || rs.Weight != 1 {
			t.Errorf("shop/web real server %+v: endpoint should be %v", rs, want)
		}
	}
	if np := m.VirtualServers[byName["TCP 10.0.0.10:30080 rr"]]; np.ServicePort != "shop/api:http" || np.Frontend != "nodePort" {
		t.Errorf("a NodePort: %+v", np)
	}
	if p := m.VirtualServers[byName["TCP 198.51.100.0:20000 rr"]]; p.Kind != "kubeProxyProbe" || p.ServicePort != "" || p.Unowned != "probe" {
		t.Errorf("the probe: %+v", p)
	}
	if s := m.VirtualServers[byName["TCP 10.96.77.7:80 rr"]]; s.Kind != "unattributed" || s.ServicePort != "" || s.Unowned != "stale" {
		t.Errorf("a stale one: %+v", s)
	}
	// iptables mode's map has none, and no IPVS summary.
	ipt, _, err := runCmd(t, nil, "map", "--from-dump", smallFixture+"iptables/save-nft-ipv4.txt", "--from-objects", smallFixture+"objects.json", "-o", "json")
	if err != nil || !strings.Contains(ipt, `"virtualServers": []`) || strings.Contains(ipt, `"ipvs"`) {
		t.Errorf("iptables mode's map: %v, %.200q", err, ipt)
	}
}

func TestIPVSStaleJSON(t *testing.T) {
	faulty := ipvsListing(t, withStaleServers)
	tests := []struct {
		name       string
		args       []string
		wantExit   int
		wantOwners map[string]string // virtual server → former owner
	}{
		{"faults", []string{"--from-dump", faulty, "--from-objects", smallFixture + "objects.json", "--node", "node-a"}, ExitProblems,
			map[string]string{"TCP 10.96.10.1:8443 rr": "shop/web", "TCP 10.96.99.9:80 rr": "shop/web:http", "TCP 10.96.77.7:80 rr": "unknown", "TCP 198.51.100.0:20000 rr": "kube-proxy's startup probe"}},
		// -n keeps the Services selected: the leftovers known to be theirs.
		{"selected", []string{"--from-dump", faulty, "--from-objects", smallFixture + "objects.json", "-n", "shop"}, ExitProblems,
			map[string]string{"TCP 10.96.10.1:8443 rr": "shop/web", "TCP 10.96.99.9:80 rr": "shop/web:http"}},
		{"other namespace", []string{"--from-dump", faulty, "--from-objects", smallFixture + "objects.json", "-n", "infra"}, ExitHealthy, map[string]string{}},
		{"healthy", []string{"--from-dump", smallIPVS + "proc-net-ip_vs.txt", "--from-objects", smallFixture + "objects.json"}, ExitHealthy, map[string]string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, err := runCmd(t, nil, append([]string{"stale", "-o", "json"}, tc.args...)...)
			if code := exitOf(t, err, errOut); code != tc.wantExit {
				t.Errorf("exit status %d, want %d", code, tc.wantExit)
			}
			var rep struct {
				Status         string
				VirtualServers *[]struct {
					VirtualServer, What, Severity, FormerOwner, OwnerEvidence, Addr string
					RealServerAddrs                                                 []string
				}
			}
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatal(err)
			}
			if rep.VirtualServers == nil {
				t.Fatalf("no virtualServers: %.300s", out)
			}
			got := map[string]string{}
			for _, v := range *rep.VirtualServers {
				got[v.VirtualServer] = v.FormerOwner
				if v.What == "stale" && (v.Severity != "warning" || v.RealServerAddrs == nil || v.Addr == "") {
					t.Errorf("%+v", v)
				}
				if v.FormerOwner != "unknown" && v.What == "stale" && v.OwnerEvidence == "" {
					t.Errorf("%s: an owner without evidence", v.VirtualServer)
				}
			}
			if len(got) != len(tc.wantOwners) {
				t.Errorf("virtual servers %v, want %v", got, tc.wantOwners)
			}
			for vs, want := range tc.wantOwners {
				if got[vs] != want {
					t.Errorf("%s: former owner %q, want %q", vs, got[vs], want)
				}
			}
		})
	}
}

// ipvsMetrics writes small-v1.37's kube-proxy metrics as IPVS mode serves
// them: without what only the iptables proxier registers (iptables_total
// and _last, the full and partial sync histograms, partial restore
// failures, the nfacct collectors; kube-proxy-facts §6), changed by edit.
func ipvsMetrics(t *testing.T, edit func(string) string) string {
	t.Helper()
	b, err := os.ReadFile(smallFixture + "metrics-iptables.txt")
	if err != nil {
		t.Fatal(err)
	}
	var keep []string
	for _, line := range strings.SplitAfter(string(b), "\n") {
		iptablesOnly := false
		for _, name := range []string{"iptables_total", "iptables_last", "full_proxy_rules", "partial_proxy_rules", "partial_restore", "ct_state_invalid", "localhost_nodeports"} {
			iptablesOnly = iptablesOnly || strings.Contains(line, name)
		}
		if !iptablesOnly {
			keep = append(keep, line)
		}
	}
	p := filepath.Join(t.TempDir(), "metrics.txt")
	if err := os.WriteFile(p, []byte(edit(strings.Join(keep, ""))), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// failingRestores: IPv4's restores fail (the counter at 4) and a sync was
// queued 160 s after the last that succeeded (with --at 1795939400, 98 s
// ago: past 2 × syncPeriod, hung).
func failingRestores(s string) string {
	s = strings.Replace(s, `kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds{ip_family="IPv4"} 1.795939142084349e+09`,
		`kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds{ip_family="IPv4"} 1.795939302e+09`, 1)
	return s + "# TYPE kubeproxy_sync_proxy_rules_iptables_restore_failures_total counter\n" +
		`kubeproxy_sync_proxy_rules_iptables_restore_failures_total{ip_family="IPv4"} 4` + "\n"
}

func TestIPVSCounts(t *testing.T) {
	faulty := ipvsListing(t, withStaleServers)
	healthyMetrics := ipvsMetrics(t, func(s string) string { return s })
	failing := ipvsMetrics(t, failingRestores)
	objs, ipt := smallFixture+"objects.json", smallIPVS+"iptables-save-nft-ipv4.txt"
	tests := []struct {
		name, golden string
		args         []string
		wantExit     int
		want         diagnose.IPVSCountsReport
		wantFailing  bool
	}{
		{"healthy", "counts-ipvs-healthy.txt", []string{"--from-dump", smallIPVS + "proc-net-ip_vs.txt", "--from-dump", ipt, "--from-metrics", healthyMetrics, "--from-objects", objs, "--node", "node-a"}, ExitHealthy,
			diagnose.IPVSCountsReport{VirtualServers: 33, Expected: 33, Present: 33, RealServers: 54, ExpectedRealServers: 54, Compared: true, Agree: true}, false},
		{"stale and failing", "counts-ipvs-stale.txt", []string{"--from-dump", faulty, "--from-dump", ipt, "--from-metrics", failing, "--from-objects", objs, "--node", "node-a", "--at", "1795939400"}, ExitProblems,
			diagnose.IPVSCountsReport{VirtualServers: 37, Expected: 33, Present: 33, Stale: 3, Probes: 1, RealServers: 60, ExpectedRealServers: 54, Compared: true}, true},
		// A virtual server gone: a frontend without one.
		{"missing", "", []string{"--from-dump", ipvsListing(t, func(s string) string {
			return withoutVirtualServer(s, "TCP  10.96.10.6:80 rr")
		}), "--from-metrics", healthyMetrics, "--from-objects", objs, "--node", "node-a"}, ExitProblems,
			diagnose.IPVSCountsReport{VirtualServers: 32, Expected: 33, Present: 32, Missing: 1, RealServers: 53, ExpectedRealServers: 53, Compared: true}, false},
		{"no objects", "", []string{"--from-dump", smallIPVS + "proc-net-ip_vs.txt", "--from-metrics", healthyMetrics}, ExitIncomplete,
			diagnose.IPVSCountsReport{VirtualServers: 33, Unattributed: 33, RealServers: 54}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.golden != "" {
				out, errOut, err := runCmd(t, nil, append([]string{"counts"}, tc.args...)...)
				if code := exitOf(t, err, errOut); code != tc.wantExit {
					t.Errorf("exit status %d, want %d", code, tc.wantExit)
				}
				checkGolden(t, tc.golden, []byte(out))
			}
			out, errOut, err := runCmd(t, nil, append([]string{"counts", "-o", "json"}, tc.args...)...)
			if code := exitOf(t, err, errOut); code != tc.wantExit {
				t.Errorf("json: exit status %d, want %d", code, tc.wantExit)
			}
			var rep struct {
				Mode     string
				IPVS     *diagnose.IPVSCountsReport
				Failures []diagnose.FailureCount
			}
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatal(err)
			}
			if rep.IPVS == nil || rep.Mode != "ipvs" {
				t.Fatalf("mode %q, ipvs %v", rep.Mode, rep.IPVS)
			}
			got := *rep.IPVS
			if (got.Difference == nil) == tc.want.Compared || got.Reason == "" && !got.Agree && got.Compared || got.NotCompared == "" && !got.Compared {
				t.Errorf("difference %v, reason %q, notCompared %q", got.Difference, got.Reason, got.NotCompared)
			}
			got.Difference, got.Reason, got.NotCompared = nil, "", ""
			if got != tc.want {
				t.Errorf("ipvs counts\n got %+v\nwant %+v", got, tc.want)
			}
			failingNow := false
			for _, f := range rep.Failures {
				failingNow = failingNow || f.Metric == "kubeproxy_sync_proxy_rules_iptables_restore_failures_total" && f.Now == diagnose.FailingNow && strings.Contains(f.Meaning, "virtual servers")
			}
			if failingNow != tc.wantFailing {
				t.Errorf("restore failures failing now: %v, want %v (%+v)", failingNow, tc.wantFailing, rep.Failures)
			}
			if tc.wantFailing && !strings.Contains(rep.IPVS.Reason, "iptables-restore is failing") {
				t.Errorf("reason %q does not name the failing restores", rep.IPVS.Reason)
			}
		})
	}
}

// nodeB is small-v1.37's table as another node holds it: its own address
// (10.0.0.11) for the NodePorts, shop/web's 10.244.1.11:8080 removed and
// shop/cart's 10.244.2.81:8080 at weight 0.
func nodeB(s string) string {
	s = strings.ReplaceAll(s, "TCP  10.0.0.10:", "TCP  10.0.0.11:")
	s = strings.Replace(s, "  -> 10.244.1.11:8080             Masq    1      0          0         \n", "", 1)
	return strings.Replace(s, "  -> 10.244.2.81:8080             Masq    1", "  -> 10.244.2.81:8080             Masq    0", 1)
}

func TestIPVSDiff(t *testing.T) {
	b := ipvsListing(t, nodeB)
	moved := ipvsListing(t, func(s string) string { return strings.ReplaceAll(s, "TCP  10.0.0.10:", "TCP  10.0.0.11:") })
	objs := smallFixture + "objects.json"
	ipt := smallFixture + "iptables/save-nft-ipv4.txt"
	tests := []struct {
		name, golden string
		a, b         string
		wantExit     int
		want         []string // in the text
	}{
		{"two IPVS nodes", "diff-ipvs.txt", smallIPVS + "ipvsadm-Ln.txt", b, ExitProblems, []string{
			"! clusterIP TCP 10.96.10.1:80: A sends to 3 real servers, B to 2: B lacks\n    10.244.1.11:8080\n- endpoint 10.244.1.11:8080\n",
			"! clusterIP TCP 10.96.10.7:80: A sends to 2 real servers, B to 1:\n    10.244.2.81:8080 weight 1 on A, 0 on B\n"}},
		// Their own addresses for the NodePorts, and two forms of one table.
		{"alike", "", smallIPVS + "proc-net-ip_vs.txt", moved, ExitHealthy, []string{"no difference: 22 Service ports alike"}},
		{"iptables and IPVS", "diff-iptables-ipvs.txt", ipt, b, ExitProblems, []string{
			"@@ shop/web:http TCP IPv4\n- endpoint 10.244.1.11:8080 (KUBE-SEP-EPVTA2RHFPHQF37H)\n", "A is in iptables mode, B in ipvs mode: compared by the endpoints"}},
		{"iptables and IPVS alike", "", ipt, smallIPVS + "proc-net-ip_vs.txt", ExitHealthy, []string{"no difference: 19 Service ports alike"}},
		// Virtual servers no Service port has, on B only: where they send
		// connections is no Service port's, but B sends them.
		{"stale on one side", "", smallIPVS + "ipvsadm-Ln.txt", ipvsListing(t, func(s string) string { return s + ipvsStaleServers }), ExitProblems, []string{
			"+ IPVS virtual server without a Service port TCP 10.96.77.7:80 rr\n",
			"+ IPVS virtual server without a Service port TCP 10.96.99.9:80 rr\n",
			"the virtual servers without a Service port differ, 22 Service ports alike"}},
		// Without the objects: by address (B's NodePorts are on its own).
		{"no objects", "", smallIPVS + "ipvsadm-Ln.txt", b, ExitProblems, []string{
			"@@ (no Service objects)  IPv4\n", "! virtual server TCP 10.0.0.11:30080: only B has this virtual server (sends to 2\n",
			"! virtual server TCP 10.96.10.1:80: A sends to 3 real servers, B to 2: B lacks\n    10.244.1.11:8080\n",
			"compared by\naddress, not by Service"}},
		{"no objects, alike", "", smallIPVS + "ipvsadm-Ln.txt", smallIPVS + "proc-net-ip_vs.txt", ExitHealthy, []string{"no difference: 2 Service ports alike"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"diff", tc.a, tc.b, "--from-objects", objs}
			if strings.HasPrefix(tc.name, "no objects") {
				args = args[:3]
			}
			out, errOut, err := runCmd(t, nil, args...)
			if code := exitOf(t, err, errOut); code != tc.wantExit {
				t.Errorf("exit status %d, want %d\n%s", code, tc.wantExit, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("lacks %q:\n%s", w, out)
				}
			}
			fits80(t, out)
			if tc.golden != "" {
				checkGolden(t, tc.golden, []byte(strings.ReplaceAll(out, filepath.Dir(b)+string(filepath.Separator), "")))
			}
		})
	}
	// As JSON: each side's real servers and weights.
	js, errOut, err := runCmd(t, nil, "diff", smallIPVS+"ipvsadm-Ln.txt", b, "--from-objects", objs, "-o", "json")
	if code := exitOf(t, err, errOut); code != ExitProblems {
		t.Fatalf("exit %d", code)
	}
	var d struct {
		ServicePorts []struct {
			ServicePort, Family string
			OnlyA, OnlyB        []struct{ What, Detail string }
			VirtualServers      []diagnose.IPVSVirtualServerDiff
		}
		UnownedVirtualServers *struct{ OnlyA, OnlyB []string }
		Status                string
	}
	if err := json.Unmarshal([]byte(js), &d); err != nil {
		t.Fatal(err)
	}
	got := map[string]diagnose.IPVSVirtualServerDiff{}
	for _, sp := range d.ServicePorts {
		for _, v := range sp.VirtualServers {
			got[sp.ServicePort+" "+v.VirtualServer] = v
		}
	}
	web, cart := got["shop/web:http TCP 10.96.10.1:80"], got["shop/cart:http TCP 10.96.10.7:80"]
	if len(got) != 2 || len(web.A) != 3 || len(web.B) != 2 || web.Frontend != "clusterIP" ||
		len(cart.B) != 2 || cart.B[1] != (diagnose.IPVSWeight{Addr: "10.244.2.81:8080", Weight: 0}) || d.Status != "problems" ||
		d.UnownedVirtualServers == nil || len(d.UnownedVirtualServers.OnlyA)+len(d.UnownedVirtualServers.OnlyB) != 0 {
		t.Errorf("virtual servers %+v\n%s", got, js)
	}
}

// ipvsSweepFolder is a sweep folder of three IPVS nodes with small-v1.37's
// table and iptables rules: node-a as kube-proxy wrote it, node-b and
// node-c with the stale virtual servers of withStaleServers.
func ipvsSweepFolder(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "sweep")
	w, err := collect.NewSweepWriter(dir, time.Unix(1795939150, 0))
	if err != nil {
		t.Fatal(err)
	}
	read := func(p string) []byte {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	if err := w.Objects(read(smallFixture + "objects.json")); err != nil {
		t.Fatal(err)
	}
	healthy := read(smallIPVS + "ipvsadm-Ln.txt")
	metrics := read(ipvsMetrics(t, func(s string) string { return s }))
	for _, name := range []string{"node-a", "node-b", "node-c"} {
		table := healthy
		if name != "node-a" {
			table = []byte(withStaleServers(string(healthy)))
		}
		nd := w.NodeDir(name)
		if err := os.MkdirAll(nd, 0o700); err != nil {
			t.Fatal(err)
		}
		m := &collect.Manifest{Node: name, CollectedAt: time.Unix(1795939150, 0).UTC(), Via: "debug-pod", ProxyMode: "ipvs", Scope: "full"}
		for _, f := range []struct {
			base, kind string
			data       []byte
		}{{"ipvsadm-Ln.txt", "ruleset", table}, {"iptables-save.txt", "ruleset", read(smallIPVS + "iptables-save-nft-ipv4.txt")}, {"metrics.txt", collect.KindMetrics, metrics}} {
			if err := os.WriteFile(filepath.Join(nd, f.base), f.data, 0o600); err != nil {
				t.Fatal(err)
			}
			m.Files = append(m.Files, collect.BundleFile{Path: f.base, Kind: f.kind, Bytes: int64(len(f.data))})
		}
		if err := collect.WriteManifest(nd, m); err != nil {
			t.Fatal(err)
		}
		w.Node(name, nil, "")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// durations are what differs between two runs of a sweep.
var durations = regexp.MustCompile(`\d+(\.\d+)?(ms|µs|s)\b`)

func TestIPVSSweep(t *testing.T) {
	dir := ipvsSweepFolder(t)
	for _, tc := range []struct {
		cmd, golden     string
		wantExit        int
		stale, harmful  []int // per node a, b, c; nil: not a column of the command
		drift           []int
		wantCause       string
		wantCauseSevere string
	}{
		{"stale", "sweep-stale-ipvs.txt", ExitProblems, []int{0, 3, 3}, []int{0, 3, 3}, nil, "stale: IPVS virtual servers of shop/web, which no current Service port has", "warning"},
		{"counts", "sweep-counts-ipvs.txt", ExitProblems, nil, nil, []int{0, 1, 1}, "IPVS: virtual servers no current Service port has", "warning"},
		{"triage", "", ExitProblems, []int{0, 3, 3}, []int{0, 3, 3}, []int{0, 1, 1}, "", ""},
	} {
		t.Run(tc.cmd, func(t *testing.T) {
			out, errOut, err := runCmd(t, nil, tc.cmd, "--from-bundle", dir, "-o", "json")
			if code := exitOf(t, err, errOut); code != tc.wantExit {
				t.Errorf("exit %d, want %d", code, tc.wantExit)
			}
			var l struct {
				Summary diagnose.SweepSummary `json:"summary"`
			}
			if err := json.Unmarshal([]byte(out), &l); err != nil {
				t.Fatal(err)
			}
			rows := map[string]diagnose.SweepRow{}
			for _, r := range l.Summary.Rows {
				rows[r.Node] = r
			}
			for i, node := range []string{"node-a", "node-b", "node-c"} {
				r := rows[node]
				check := func(what string, got *int, want []int) {
					if want != nil && (got == nil || *got != want[i]) {
						t.Errorf("%s %s = %v, want %d", node, what, got, want[i])
					}
				}
				check("stale", r.Stale, tc.stale)
				check("harmful", r.Harmful, tc.harmful)
				check("drift", r.Drift, tc.drift)
				if r.Mode != "ipvs" {
					t.Errorf("%s mode %q", node, r.Mode)
				}
			}
			if tc.wantCause != "" {
				found := false
				for _, c := range l.Summary.Causes {
					found = found || c.Title == tc.wantCause && string(c.Severity) == tc.wantCauseSevere && slices.Equal(c.Nodes, []string{"node-b", "node-c"})
				}
				if !found {
					t.Errorf("no cause %q on node-b and node-c: %+v", tc.wantCause, l.Summary.Causes)
				}
			}
			if tc.golden == "" {
				return
			}
			text, errOut, err := runCmd(t, nil, tc.cmd, "--from-bundle", dir)
			if code := exitOf(t, err, errOut); code != tc.wantExit {
				t.Errorf("text: exit %d, want %d", code, tc.wantExit)
			}
			checkGolden(t, tc.golden, []byte(durations.ReplaceAllString(text, "T")))
		})
	}
}

// A frontend's virtual server on one side only: said so, its lists [].
func TestIPVSDiffOneSided(t *testing.T) {
	b := ipvsListing(t, func(s string) string { return withoutVirtualServer(s, "TCP  10.96.10.6:80 rr") })
	js, errOut, err := runCmd(t, nil, "diff", smallIPVS+"ipvsadm-Ln.txt", b, "--from-objects", smallFixture+"objects.json", "-o", "json")
	if code := exitOf(t, err, errOut); code != ExitProblems {
		t.Fatalf("exit %d", code)
	}
	if strings.Contains(js, `"a": null`) || strings.Contains(js, `"b": null`) {
		t.Errorf("null lists:\n%s", js)
	}
	var d struct {
		ServicePorts []struct {
			ServicePort    string
			VirtualServers []diagnose.IPVSVirtualServerDiff
		}
	}
	if err := json.Unmarshal([]byte(js), &d); err != nil {
		t.Fatal(err)
	}
	if len(d.ServicePorts) != 1 || d.ServicePorts[0].ServicePort != "shop/reports:http" || len(d.ServicePorts[0].VirtualServers) != 1 {
		t.Fatalf("%s", js)
	}
	if v := d.ServicePorts[0].VirtualServers[0]; v.OnlyIn != "A" || len(v.A) != 1 || v.B == nil || len(v.B) != 0 || !strings.Contains(v.Summary, "only A has this virtual server") {
		t.Errorf("%+v", v)
	}
}

// The table kube-proxy v1.37.2 wrote before load/gone was deleted, read
// against the objects after: its virtual servers are stale, and what their
// addresses are tells a deleted Service's cluster IP and NodePort.
func TestIPVSStaleDeletedService(t *testing.T) {
	const churn = "../testdata/fixtures/nft-churn-v1.37/"
	out, errOut, err := runCmd(t, nil, "stale", "--from-dump", churn+"ipvs/proc-net-ip_vs.sync1.txt", "--from-objects", churn+"objects.json", "--node", "node-a", "-o", "json")
	if code := exitOf(t, err, errOut); code != ExitProblems {
		t.Errorf("exit %d, want %d", code, ExitProblems)
	}
	var rep struct {
		VirtualServers []diagnose.StaleVirtualServer
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"TCP 10.96.50.3:80 rr persistent 10800":    "a deleted Service's cluster IP",
		"TCP 10.0.0.10:30900 rr persistent 10800":  "10.0.0.10 is the node's address: a NodePort (TCP 30900)",
		"TCP [fd00::10]:30900 rr persistent 10800": "fd00::10 is the node's address",
		// the known IPv6 cluster IPs span too little to hold it: not said
		"TCP [fd00:10:96::32]:80 rr persistent 10800": "",
	}
	if len(rep.VirtualServers) != len(want) {
		t.Fatalf("%d stale virtual servers, want %d: %+v", len(rep.VirtualServers), len(want), rep.VirtualServers)
	}
	for _, v := range rep.VirtualServers {
		w, ok := want[v.VirtualServer]
		if !ok || v.What != diagnose.UnownedStale || v.FormerOwner != "unknown" || !strings.Contains(v.OwnerEvidence, w) || (w == "") != (v.OwnerEvidence == "") || len(v.RealServerAddrs) != 2 {
			t.Errorf("%+v: want evidence %q", v, w)
		}
	}
}

// The IPVS parts of map, stale, counts and diff on small-v1.37's table:
// each joins the table with the objects again (diagnose.IPVS).
func BenchmarkIPVSReports(b *testing.B) {
	l, err := loadRequest(Request{Files: InputFiles{Dumps: []string{smallIPVS + "ipvsadm-Ln.txt", smallIPVS + "iptables-save-nft-ipv4.txt"}, Objects: []string{smallFixture + "objects.json"}}})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		run  func()
	}{
		{"map", func() { diagnose.MapChains(l.Node) }},
		{"stale", func() { diagnose.Stale(l.Node, diagnose.StaleOptions{}) }},
		{"counts", func() { diagnose.Counts(l.Node) }},
		{"diff", func() { diagnose.Diff(diagnose.DiffSides{A: l.Node, B: l.Node}) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bc.run()
			}
		})
	}
}

// A table read only in part (a cap): stale and counts say what they could
// not check.
func TestIPVSPartialTable(t *testing.T) {
	for _, partial := range []bool{false, true} {
		// a Node per diagnosis: its reports are built once from its inputs
		l, err := loadRequest(Request{Files: InputFiles{Dumps: []string{smallIPVS + "proc-net-ip_vs.txt"}, Objects: []string{smallFixture + "objects.json"}}})
		if err != nil {
			t.Fatal(err)
		}
		l.Node.Ruleset.IPVS.Table.Truncated.Incomplete = partial
		st := diagnose.Stale(l.Node, diagnose.StaleOptions{})
		ct := diagnose.Counts(l.Node)
		gap := func(gaps []diagnose.Gap) bool {
			return slices.ContainsFunc(gaps, func(g diagnose.Gap) bool { return strings.Contains(g.Reason, "IPVS table was read only in part") })
		}
		if gap(st.NotChecked) != partial || gap(ct.NotChecked) != partial || ct.IPVS.Incomplete != partial {
			t.Errorf("partial %v: stale gaps %+v, counts gaps %+v", partial, st.NotChecked, ct.NotChecked)
		}
		if partial && st.Status != diagnose.StatusIncomplete {
			t.Errorf("stale status %s", st.Status)
		}
	}
	// A frontend's virtual server past the cap is not called missing.
	listing := ipvsListing(t, func(s string) string { return withoutVirtualServer(s, "TCP  10.96.10.6:80 rr") })
	for _, partial := range []bool{false, true} {
		l, err := loadRequest(Request{Files: InputFiles{Dumps: []string{listing}, Objects: []string{smallFixture + "objects.json"}}})
		if err != nil {
			t.Fatal(err)
		}
		l.Node.Ruleset.IPVS.Table.Truncated.Incomplete = partial
		if ct := diagnose.Counts(l.Node); ct.IPVS.Missing != 1 || (ct.Status == diagnose.StatusProblems) == partial {
			t.Errorf("partial %v: missing %d, status %s", partial, ct.IPVS.Missing, ct.Status)
		}
	}
}
