package correlate_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/inspect/ipvs"
	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
)

// ipvsForms are small-v1.37's IPVS table as kube-proxy v1.37.2's IPVS
// proxier programmed it (hack/fixturegen), in each form, with the line
// kube-proxy's startup probe server takes in that form.
var ipvsForms = []struct {
	file, probe string
	format      ipvs.Format
}{
	{"proc-net-ip_vs.txt", "TCP  C6336400:4E20 wlc\n", ipvs.FormatProc},
	{"ipvsadm-Ln.txt", "TCP  198.51.100.0:20000 wlc\n", ipvs.FormatList},
	{"ipvsadm-Sn.txt", "-A -t 198.51.100.0:20000 -s wlc\n", ipvs.FormatSave},
}

// removeEndpoint drops the endpoint with address ip from the slices of
// Service ns/name.
func removeEndpoint(ns, name, ip string) func(*correlate.Objects) {
	return func(o *correlate.Objects) {
		for _, s := range o.EndpointSlices {
			if s.Namespace == ns && s.Labels["kubernetes.io/service-name"] == name {
				s.Endpoints = slices.DeleteFunc(s.Endpoints, func(e discoveryv1.Endpoint) bool {
					return slices.Contains(e.Addresses, ip)
				})
			}
		}
	}
}

func TestFindIPVS(t *testing.T) {
	// small-v1.37: 33 virtual servers, 54 real servers
	all := correlate.IPVSCounts{VirtualServers: 33, Attributed: 33, RealServers: 54, Endpoints: 54}
	cases := []struct {
		name   string
		mutate []func(*correlate.Objects)
		probe  bool
		want   correlate.IPVSCounts
		// virtual servers ("TCP 10.96.10.4:8080") by kind, and real
		// servers that are not endpoints ("TCP 10.96.10.1:80 -> ip:port")
		unattributed, probes, notEndpoints []string
		// frontends counts the attributed Service frontends by kind.
		frontends map[string]int
	}{{
		name: "as kube-proxy programmed it", want: all,
		frontends: map[string]int{correlate.FrontendClusterIP: 22, correlate.FrontendExternalIP: 1,
			correlate.FrontendLoadBalancerIP: 3, correlate.FrontendNodePort: 7},
	}, {
		name: "with kube-proxy's startup probe left over", probe: true,
		want:   correlate.IPVSCounts{VirtualServers: 34, Attributed: 34, Probes: 1, RealServers: 54, Endpoints: 54},
		probes: []string{"TCP 198.51.100.0:20000"},
	}, {
		name: "a deleted Service", mutate: []func(*correlate.Objects){deleteService("shop", "legacy-gw")},
		want:         correlate.IPVSCounts{VirtualServers: 33, Attributed: 31, Unattributed: 2, RealServers: 54, Endpoints: 52},
		unattributed: []string{"TCP 10.96.10.4:8080", "TCP 203.0.113.50:8080"},
	}, {
		name: "a real server that is no endpoint", mutate: []func(*correlate.Objects){removeEndpoint("shop", "web", "10.244.2.11")},
		want:         correlate.IPVSCounts{VirtualServers: 33, Attributed: 33, RealServers: 54, Endpoints: 53, NotEndpoints: 1},
		notEndpoints: []string{"TCP 10.96.10.1:80 -> 10.244.2.11:8080"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var first *correlate.IPVSFacts
			for _, form := range ipvsForms {
				f := findIPVS(t, form.file, form.format, tc.probe, form.probe, smallObjects(t, tc.mutate...))
				withoutConns(f) // -Sn shows none, the others 0
				checkIPVS(t, form.file, f, tc.want, tc.unattributed, tc.probes, tc.notEndpoints, tc.frontends)
				if first == nil {
					first = f
				} else if !reflect.DeepEqual(f, first) {
					t.Errorf("%s is attributed otherwise than %s:\n%+v\n%+v", form.file, ipvsForms[0].file, f, first)
				}
			}
		})
	}
}

func findIPVS(t *testing.T, file string, format ipvs.Format, probe bool, probeLine string, objs *correlate.Objects) *correlate.IPVSFacts {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixture.Root, "small-v1.37", "ipvs", file))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if probe {
		text += probeLine
	}
	tab, err := ipvs.Read(strings.NewReader(text), ipvs.DefaultLimits())
	if err != nil || tab.Format != format || len(tab.Warnings) > 0 || tab.Truncated.Incomplete {
		t.Fatalf("%s: read as %s, %v %q %+v", file, tab.Format, err, tab.Warnings, tab.Truncated)
	}
	return correlate.FindIPVS(correlate.IPVSInput{Objects: objs, NodeIPs: nodeA, Table: tab})
}

func checkIPVS(t *testing.T, file string, f *correlate.IPVSFacts, want correlate.IPVSCounts, unattributed, probes, notEndpoints []string, frontends map[string]int) {
	t.Helper()
	if f.Counts != want {
		t.Errorf("%s: counts %+v, want %+v", file, f.Counts, want)
	}
	var gotUn, gotProbes, gotNotEP []string
	gotFE := map[string]int{}
	for _, vs := range f.VirtualServers {
		name := vs.Protocol + " " + vs.Addr.String()
		switch vs.Kind {
		case correlate.VirtualServiceUnattributed:
			gotUn = append(gotUn, name)
		case correlate.VirtualServiceProbe:
			gotProbes = append(gotProbes, name)
		case correlate.VirtualServiceServicePort:
			gotFE[vs.Frontend]++
			if vs.ServicePort == "" || vs.Frontend == "" {
				t.Errorf("%s: %s attributed to %q %q", file, name, vs.ServicePort, vs.Frontend)
			}
			// kube-proxy programs ClientIP affinity as the persistence
			if int64(vs.Persistence) != int64(vs.AffinitySeconds) {
				t.Errorf("%s: %s persistent %d, the Service's affinity %d s", file, name, vs.Persistence, vs.AffinitySeconds)
			}
			for _, rs := range vs.RealServers {
				if !rs.Endpoint {
					gotNotEP = append(gotNotEP, name+" -> "+rs.Addr.String())
				}
			}
		}
	}
	for _, c := range []struct {
		what      string
		got, want []string
	}{{"unattributed", gotUn, unattributed}, {"probes", gotProbes, probes}, {"not endpoints", gotNotEP, notEndpoints}} {
		slices.Sort(c.got)
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("%s: %s %q, want %q", file, c.what, c.got, c.want)
		}
	}
	if frontends != nil && !reflect.DeepEqual(gotFE, frontends) {
		t.Errorf("%s: frontends %v, want %v", file, gotFE, frontends)
	}
}

// TestFindIPVSNamesFrontends pins a virtual server of each frontend kind to
// its Service port (small-v1.37, node-a).
func TestFindIPVSNamesFrontends(t *testing.T) {
	f := findIPVS(t, "ipvsadm-Ln.txt", ipvs.FormatList, false, "", smallObjects(t))
	got := map[string]string{}
	for _, vs := range f.VirtualServers {
		got[vs.Protocol+" "+vs.Addr.String()] = fmt.Sprintf("%s %s %s persistent %d", vs.ServicePort, vs.Frontend, vs.Scheduler, vs.Persistence)
	}
	for vs, want := range map[string]string{
		"TCP 10.96.0.1:443":        "default/kubernetes:https clusterIP rr persistent 0",
		"UDP 10.96.0.10:53":        "kube-system/kube-dns:dns clusterIP rr persistent 0",
		"TCP 10.96.0.10:53":        "kube-system/kube-dns:dns-tcp clusterIP rr persistent 0",
		"TCP 10.96.10.7:80":        "shop/cart:http clusterIP rr persistent 10800",
		"TCP 203.0.113.50:8080":    "shop/legacy-gw:http externalIP rr persistent 0",
		"TCP 198.51.100.11:443":    "shop/ingress:https loadBalancerIP rr persistent 0",
		"TCP 10.0.0.10:31443":      "shop/ingress:https nodePort rr persistent 0",
		"TCP [fd00::10]:30081":     "shop/dual:http nodePort rr persistent 0",
		"TCP [fd00:10:96::c]:9090": "shop/v6-only:grpc clusterIP rr persistent 0",
		"SCTP 10.96.40.1:3868":     "telco/diameter:diameter clusterIP rr persistent 0",
		"TCP 10.96.10.8:8080":      "shop/unnamed clusterIP rr persistent 0",
		"TCP 10.96.10.9:80":        "shop/empty:http clusterIP rr persistent 0",
		"TCP [fd00:10:96::b]:80":   "shop/dual:http clusterIP rr persistent 0",
		"TCP 10.0.0.10:30443":      "shop/frontend:https nodePort rr persistent 0",
		"TCP 198.51.100.10:443":    "shop/frontend:https loadBalancerIP rr persistent 0",
		"UDP 10.96.30.1:514":       "infra/logs:syslog clusterIP rr persistent 0",
		"TCP 10.96.20.1:9100":      "monitoring/node-agent:metrics clusterIP rr persistent 0",
		"TCP 10.0.0.10:31081":      "shop/reports:http nodePort rr persistent 0",
		"TCP 198.51.100.11:80":     "shop/ingress:http loadBalancerIP rr persistent 0",
		"TCP 10.96.10.10:80":       "shop/draining:http clusterIP rr persistent 0",
		"TCP 10.0.0.10:30080":      "shop/api:http nodePort rr persistent 0",
		"TCP 10.96.10.11:80":       "shop/dual:http clusterIP rr persistent 0",
		"TCP 10.96.0.10:9153":      "kube-system/kube-dns:metrics clusterIP rr persistent 0",
		"TCP 10.96.10.1:80":        "shop/web:http clusterIP rr persistent 0",
		"TCP 10.0.0.10:30081":      "shop/dual:http nodePort rr persistent 0",
		"TCP 10.0.0.10:31080":      "shop/ingress:http nodePort rr persistent 0",
		"TCP 10.96.10.2:80":        "shop/api:http clusterIP rr persistent 0",
		"TCP 10.96.10.3:443":       "shop/frontend:https clusterIP rr persistent 0",
		"TCP 10.96.10.4:8080":      "shop/legacy-gw:http clusterIP rr persistent 0",
		"TCP 10.96.10.5:80":        "shop/ingress:http clusterIP rr persistent 0",
		"TCP 10.96.10.5:443":       "shop/ingress:https clusterIP rr persistent 0",
		"TCP 10.96.10.6:80":        "shop/reports:http clusterIP rr persistent 0",
		"TCP 10.96.30.1:80":        "infra/logs:http clusterIP rr persistent 0",
	} {
		if got[vs] != want {
			t.Errorf("%s: %q, want %q", vs, got[vs], want)
		}
	}
	if len(got) != 33 {
		t.Errorf("%d virtual servers, want 33", len(got))
	}
}

func withoutConns(f *correlate.IPVSFacts) {
	for i := range f.VirtualServers {
		for j := range f.VirtualServers[i].RealServers {
			rs := &f.VirtualServers[i].RealServers[j]
			rs.ActiveConn, rs.InActConn = 0, 0
		}
	}
}
