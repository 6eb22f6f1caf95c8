package correlate_test

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/inspect/ipvs"
	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
)

// Every IPVS fixture (testdata/fixtures/*/ipvs, the tables kube-proxy's own
// IPVS proxier programmed, hack/gen-fixtures-ipvs.sh) is attributed
// whole: each virtual server to a Service port, each real server to an
// endpoint of it, except what the scenario's meta.json "ipvs" section says
// is not (loopback NodePorts of kube-proxy <= v1.21, a draining weight-0
// server whose endpoint is gone).

// ipvsFixture is a scenario with an IPVS table and what its meta.json says.
type ipvsFixture struct {
	dir     string
	nodeIPs []netip.Addr
	// unattributed: "TCP 127.0.0.1:30080"; notEndpoints: "TCP
	// 10.96.60.10:53 -> 10.244.1.60:5353" (the draining ones).
	unattributed, notEndpoints []string
}

func ipvsFixtures(t *testing.T) []ipvsFixture {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(fixture.Root, "*", "ipvs"))
	if len(dirs) < 5 {
		t.Fatalf("IPVS fixtures: %v (run hack/gen-fixtures-ipvs.sh)", dirs)
	}
	var out []ipvsFixture
	for _, d := range dirs {
		out = append(out, readIPVSFixture(t, filepath.Dir(d)))
	}
	return out
}

func readIPVSFixture(t *testing.T, dir string) ipvsFixture {
	t.Helper()
	var m struct {
		Node    string   `json:"node"`
		NodeIPs []string `json:"nodeIPs"`
		IPVS    *struct {
			Unattributed []struct{ Protocol, Addr string } `json:"unattributedVirtualServers"`
			Draining     []struct {
				Protocol, VirtualServer, RealServer string
				Weight                              int
			} `json:"drainingRealServers"`
		} `json:"ipvs"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil || m.Node == "" || len(m.NodeIPs) == 0 {
		t.Fatalf("%s/meta.json: %v %+v", dir, err, m)
	}
	fx := ipvsFixture{dir: dir}
	for _, ip := range m.NodeIPs {
		fx.nodeIPs = append(fx.nodeIPs, netip.MustParseAddr(ip))
	}
	if m.IPVS != nil {
		for _, v := range m.IPVS.Unattributed {
			fx.unattributed = append(fx.unattributed, v.Protocol+" "+v.Addr)
		}
		for _, r := range m.IPVS.Draining {
			if r.Weight != 0 {
				t.Fatalf("%s: draining %+v has weight %d", dir, r, r.Weight)
			}
			fx.notEndpoints = append(fx.notEndpoints, r.Protocol+" "+r.VirtualServer+" -> "+r.RealServer)
		}
	}
	slices.Sort(fx.unattributed)
	slices.Sort(fx.notEndpoints)
	return fx
}

func (fx ipvsFixture) find(t *testing.T, file string, format ipvs.Format, objs *correlate.Objects) (*correlate.IPVSFacts, *ipvs.Table) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fx.dir, "ipvs", file))
	if err != nil {
		t.Fatal(err)
	}
	tab, err := ipvs.Read(strings.NewReader(string(b)), ipvs.DefaultLimits())
	if err != nil || tab.Format != format || len(tab.Warnings) > 0 || tab.Truncated.Incomplete || len(tab.Services) == 0 {
		t.Fatalf("%s: read as %s, %v %q %+v", file, tab.Format, err, tab.Warnings, tab.Truncated)
	}
	return correlate.FindIPVS(correlate.IPVSInput{Objects: objs, NodeIPs: fx.nodeIPs, Table: tab}), tab
}

// problems lists where the facts differ from "all attributed but what
// meta.json names".
func (fx ipvsFixture) problems(f *correlate.IPVSFacts, tab *ipvs.Table) []string {
	var p []string
	var un, notEP, weight0 []string
	unRS := 0
	for _, vs := range f.VirtualServers {
		name := vs.Protocol + " " + vs.Addr.String()
		if vs.Kind != correlate.VirtualServiceServicePort {
			un = append(un, name)
			unRS += len(vs.RealServers)
		}
		for _, rs := range vs.RealServers {
			rsName := name + " -> " + rs.Addr.String()
			if vs.Kind == correlate.VirtualServiceServicePort && !rs.Endpoint {
				notEP = append(notEP, rsName)
			}
			if rs.Weight == 0 {
				weight0 = append(weight0, rsName)
			}
		}
	}
	for _, c := range []struct {
		what      string
		got, want []string
	}{{"unattributed virtual servers", un, fx.unattributed}, {"real servers not endpoints", notEP, fx.notEndpoints},
		{"weight-0 real servers", weight0, fx.notEndpoints}} {
		slices.Sort(c.got)
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			p = append(p, fmt.Sprintf("%s %q, meta.json says %q", c.what, c.got, c.want))
		}
	}
	rs := 0
	for _, s := range tab.Services {
		rs += len(s.RealServers)
	}
	c := f.Counts
	want := correlate.IPVSCounts{VirtualServers: len(tab.Services), Attributed: len(tab.Services) - len(fx.unattributed),
		Unattributed: len(fx.unattributed), RealServers: rs, Endpoints: rs - unRS - len(fx.notEndpoints), NotEndpoints: len(fx.notEndpoints)}
	if c != want {
		p = append(p, fmt.Sprintf("counts %+v, want %+v", c, want))
	}
	return p
}

func TestIPVSFixturesAttributed(t *testing.T) {
	for _, fx := range ipvsFixtures(t) {
		objs := fixture.Objects(t, fx.dir)
		for _, form := range ipvsForms {
			t.Run(filepath.Base(fx.dir)+"/"+form.file, func(t *testing.T) {
				f, tab := fx.find(t, form.file, form.format, objs)
				for _, p := range fx.problems(f, tab) {
					t.Error(p)
				}
			})
		}
	}
}

// Without one of its Services, each fixture's check fails: the test can
// tell a table that is not the objects' from one that is.
func TestIPVSFixturesMissServiceFails(t *testing.T) {
	for _, fx := range ipvsFixtures(t) {
		t.Run(filepath.Base(fx.dir), func(t *testing.T) {
			f, _ := fx.find(t, "ipvsadm-Ln.txt", ipvs.FormatList, fixture.Objects(t, fx.dir))
			var drop string
			for _, vs := range f.VirtualServers {
				if vs.Kind == correlate.VirtualServiceServicePort {
					drop, _, _ = strings.Cut(vs.ServicePort, ":")
					break
				}
			}
			ns, name, _ := strings.Cut(drop, "/")
			objs := fixture.Objects(t, fx.dir)
			n := len(objs.Services)
			deleteService(ns, name)(objs)
			if len(objs.Services) != n-1 {
				t.Fatalf("%s not deleted from %d Services", drop, n)
			}
			f, tab := fx.find(t, "ipvsadm-Ln.txt", ipvs.FormatList, objs)
			if p := fx.problems(f, tab); len(p) == 0 {
				t.Errorf("without %s: no problem found", drop)
			}
		})
	}
}
