package plugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// IPVS mode in map, stale, counts, diff and the sweeps: the tables are
// what kube-proxy v1.37.2's IPVS proxier wrote (testdata/fixtures/*/ipvs),
// faults injected into their text.

const smallIPVS = smallFixture + "ipvs/"

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
		{"map-ipvs-small-wide.txt", []string{"map", "--from-dump", smallIPVS + "proc-net-ip_vs.txt", "--from-objects", objs, "--node", "node-a", "-o", "wide"}, ExitHealthy},
		{"map-ipvs-no-objects.txt", []string{"map", "--from-dump", smallIPVS + "ipvsadm-Sn.txt"}, ExitHealthy},
		{"stale-ipvs.txt", []string{"stale", "--from-dump", faulty, "--from-objects", objs, "--node", "node-a"}, ExitProblems},
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
			VirtualServer, Protocol, Addr, Kind, ServicePort, Frontend, Family string
			RealServers                                                        []struct {
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
	if p := m.VirtualServers[byName["TCP 198.51.100.0:20000 rr"]]; p.Kind != "kubeProxyProbe" || p.ServicePort != "" {
		t.Errorf("the probe: %+v", p)
	}
	if s := m.VirtualServers[byName["TCP 10.96.77.7:80 rr"]]; s.Kind != "unattributed" || s.ServicePort != "" {
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
