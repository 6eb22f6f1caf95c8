package correlate_test

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/inspect/conntrack"
	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// smallObjects are small-v1.37's objects (node-a, 10.0.0.10), changed by
// mutate before anything reads them.
func smallObjects(t *testing.T, mutate ...func(*correlate.Objects)) *correlate.Objects {
	t.Helper()
	objs := fixture.Objects(t, filepath.Join(fixture.Root, "small-v1.37"))
	for _, m := range mutate {
		m(objs)
	}
	return objs
}

// ctLine is one /proc/net/nf_conntrack line: proto, orig src:sport →
// dst:dport, answered by rsrc:rsport, timeout seconds left. IPv6 is
// written in full, as /proc does.
func ctLine(proto, src string, sport int, dst string, dport int, rsrc string, rsport, timeout int) string {
	fam, famNo := "ipv4", 2
	if strings.Contains(dst, ":") {
		fam, famNo = "ipv6", 10
	}
	protoNo, state := map[string]int{"udp": 17, "tcp": 6, "sctp": 132}[proto], ""
	if proto == "tcp" {
		state = "ESTABLISHED "
	}
	return fmt.Sprintf("%s     %d %s      %d %d %ssrc=%s dst=%s sport=%d dport=%d src=%s dst=%s sport=%d dport=%d [ASSURED] mark=0 zone=0 use=2",
		fam, famNo, proto, protoNo, timeout, state, full(src), full(dst), sport, dport, full(rsrc), full(src), rsport, sport)
}

// full spells an IPv6 address as /proc does.
func full(s string) string {
	a := netip.MustParseAddr(s)
	if a.Is4() {
		return s
	}
	b := a.As16()
	var parts []string
	for i := 0; i < 16; i += 2 {
		parts = append(parts, fmt.Sprintf("%02x%02x", b[i], b[i+1]))
	}
	return strings.Join(parts, ":")
}

func readCT(t *testing.T, lines ...string) *conntrack.Table {
	t.Helper()
	tab, err := conntrack.ReadTable(strings.NewReader(strings.Join(lines, "\n")+"\n"), conntrack.Limits{}, nil)
	if err != nil || len(tab.Warnings) > 0 || len(tab.Entries) != len(lines) {
		t.Fatalf("read %d of %d entries, %v %q", len(tab.Entries), len(lines), err, tab.Warnings)
	}
	return tab
}

var nodeA = []netip.Addr{netip.MustParseAddr("10.0.0.10"), netip.MustParseAddr("fd00::10")}

func findCT(t *testing.T, objs *correlate.Objects, mode kubeproxy.Mode, lines ...string) *correlate.ConntrackFacts {
	t.Helper()
	return correlate.FindConntrack(correlate.ConntrackInput{Objects: objs, NodeIPs: nodeA, Mode: mode, Table: readCT(t, lines...)})
}

// healthyLines are flows to small-v1.37's Services answered by their
// serving endpoints, and flows to no Service.
var healthyLines = []string{
	ctLine("udp", "10.244.0.5", 40001, "10.96.0.10", 53, "10.244.0.2", 53, 29),
	ctLine("udp", "10.244.0.6", 40002, "10.96.0.10", 53, "10.244.1.2", 53, 118),
	ctLine("tcp", "10.244.0.5", 40003, "10.96.0.10", 53, "10.244.1.2", 53, 86399),
	ctLine("tcp", "10.244.0.5", 40004, "10.96.10.1", 80, "10.244.2.11", 8080, 86399),
	ctLine("udp", "10.244.0.5", 40005, "10.96.30.1", 514, "10.244.2.101", 5514, 100),
	ctLine("tcp", "192.0.2.7", 40006, "10.0.0.10", 30080, "10.244.1.21", 8080, 86399),              // NodePort api
	ctLine("tcp", "192.0.2.7", 40007, "198.51.100.10", 443, "10.244.0.31", 8443, 86399),            // LB frontend
	ctLine("tcp", "192.0.2.7", 40008, "203.0.113.50", 8080, "10.244.2.41", 8080, 86399),            // externalIP legacy-gw
	ctLine("tcp", "fd00:10:244::5", 40009, "fd00:10:96::b", 80, "fd00:10:244:1::141", 8080, 86399), // dual, IPv6
	ctLine("udp", "10.244.0.5", 40010, "8.8.8.8", 53, "8.8.8.8", 53, 29),                           // no Service
	ctLine("tcp", "192.0.2.7", 40011, "10.0.0.10", 22, "10.0.0.10", 22, 86399),                     // sshd
	ctLine("tcp", "10.244.0.5", 40012, "10.96.10.10", 80, "10.244.1.131", 8080, 86399),             // draining: serving, terminating
}

func TestFindConntrackHealthy(t *testing.T) {
	for _, mode := range []kubeproxy.Mode{kubeproxy.ModeIPTables, kubeproxy.ModeNFTables} {
		f := findCT(t, smallObjects(t), mode, healthyLines...)
		if f.Read != len(healthyLines) || len(f.Entries) != len(healthyLines)-2 {
			t.Errorf("%s: read %d, %d entries to Services, want %d", mode, f.Read, len(f.Entries), len(healthyLines)-2)
		}
		for _, e := range f.Entries {
			if e.Stale || e.Reply != correlate.ReplyServing || e.Command != "" {
				t.Errorf("%s: %+v is stale", mode, e)
			}
		}
		for _, g := range f.Groups {
			if g.Stale != 0 || len(g.ByCause) != 0 {
				t.Errorf("%s: group %+v", mode, g)
			}
		}
		if want := "[10.96.0.0/18 fd00:10:96::8/125]"; fmt.Sprint(f.ServiceRange.Prefixes) != want || !strings.Contains(f.ServiceRange.Source, "known cluster IPs") {
			t.Errorf("%s: service range %+v, want %s from the known cluster IPs", mode, f.ServiceRange, want)
		}
	}
}

// Mutations of small-v1.37's objects.
func deleteService(ns, name string) func(*correlate.Objects) {
	return func(o *correlate.Objects) {
		for i, s := range o.Services {
			if s.Namespace == ns && s.Name == name {
				o.Services = append(o.Services[:i], o.Services[i+1:]...)
				break
			}
		}
		for i := 0; i < len(o.EndpointSlices); i++ {
			if s := o.EndpointSlices[i]; s.Namespace == ns && s.Labels["kubernetes.io/service-name"] == name {
				o.EndpointSlices = append(o.EndpointSlices[:i], o.EndpointSlices[i+1:]...)
				i--
			}
		}
	}
}

// scaleToZero leaves the Service's slices without endpoints.
func scaleToZero(ns, name string) func(*correlate.Objects) {
	return func(o *correlate.Objects) {
		for _, s := range o.EndpointSlices {
			if s.Namespace == ns && s.Labels["kubernetes.io/service-name"] == name {
				s.Endpoints = nil
			}
		}
	}
}

// logsNodePort makes infra/logs a NodePort Service, syslog (UDP) on 30514.
func logsNodePort(o *correlate.Objects) {
	for _, s := range o.Services {
		if s.Namespace == "infra" && s.Name == "logs" {
			s.Spec.Type = "NodePort"
			for i := range s.Spec.Ports {
				if s.Spec.Ports[i].Name == "syslog" {
					s.Spec.Ports[i].NodePort = 30514
				}
			}
		}
	}
}

// dnsEndpoint sets an endpoint of kube-dns serving (or not) and
// terminating (or not); ready only when serving and not terminating.
func dnsEndpoint(ip string, serving, terminating bool) func(*correlate.Objects) {
	return func(o *correlate.Objects) {
		for _, s := range o.EndpointSlices {
			for i, ep := range s.Endpoints {
				if s.Labels["kubernetes.io/service-name"] == "kube-dns" && ep.Addresses[0] == ip {
					ready := serving && !terminating
					s.Endpoints[i].Conditions.Ready = &ready
					s.Endpoints[i].Conditions.Serving = &serving
					s.Endpoints[i].Conditions.Terminating = &terminating
				}
			}
		}
	}
}

func serviceCIDR(cidr string) func(*correlate.Objects) {
	return func(o *correlate.Objects) {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
			"metadata": map[string]any{"name": "kubernetes"}, "spec": map[string]any{"cidrs": []any{cidr}}}}
		o.Other = append(o.Other, u)
	}
}

// One case per answer to "would kube-proxy v1.37.2 clean it?".
func TestFindConntrackCauses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mutate  []func(*correlate.Objects)
		mode    kubeproxy.Mode
		line    string
		stale   bool
		reply   string
		sp      string
		front   string
		cause   string
		cleans  bool
		why     string
		command string
	}{
		{name: "gone endpoint, no endpoint change since", line: ctLine("udp", "10.244.0.5", 40001, "10.96.0.10", 53, "10.244.0.99", 53, 117),
			stale: true, reply: correlate.ReplyNotEndpoint, sp: "kube-system/kube-dns:dns", front: correlate.FrontendClusterIP, cause: correlate.CauseNoEndpointChange, cleans: true,
			why: "no endpoint change since", command: "conntrack -D -p udp --orig-dst 10.96.0.10 --orig-port-dst 53 --reply-src 10.244.0.99"},
		{name: "endpoint not serving", mutate: []func(*correlate.Objects){dnsEndpoint("10.244.1.2", false, true)},
			line:  ctLine("udp", "10.244.0.5", 40001, "10.96.0.10", 53, "10.244.1.2", 53, 117),
			stale: true, reply: correlate.ReplyNotServing, sp: "kube-system/kube-dns:dns", front: correlate.FrontendClusterIP, cause: correlate.CauseNoEndpointChange, cleans: true,
			why: "no endpoint change since", command: "conntrack -D -p udp --orig-dst 10.96.0.10 --orig-port-dst 53 --reply-src 10.244.1.2"},
		{name: "terminating but serving: kept", mutate: []func(*correlate.Objects){dnsEndpoint("10.244.1.2", true, true)},
			line: ctLine("udp", "10.244.0.5", 40001, "10.96.0.10", 53, "10.244.1.2", 53, 117), reply: correlate.ReplyServing, sp: "kube-system/kube-dns:dns", front: correlate.FrontendClusterIP},
		{name: "not DNATed", line: ctLine("udp", "10.244.0.5", 40001, "10.96.0.10", 53, "10.96.0.10", 53, 29),
			stale: true, reply: correlate.ReplyNotDNATed, sp: "kube-system/kube-dns:dns", front: correlate.FrontendClusterIP, cause: correlate.CauseNoEndpointChange, cleans: true,
			why: "no endpoint change since", command: "conntrack -D -p udp --orig-dst 10.96.0.10 --orig-port-dst 53 --reply-src 10.96.0.10"},
		{name: "TCP", line: ctLine("tcp", "10.244.0.5", 40001, "10.96.10.1", 80, "10.244.0.99", 8080, 3000),
			stale: true, reply: correlate.ReplyNotEndpoint, sp: "shop/web:http", front: correlate.FrontendClusterIP, cause: correlate.CauseUDPOnly,
			why: "TCP: kube-proxy cleans UDP only", command: "conntrack -D -p tcp --orig-dst 10.96.10.1 --orig-port-dst 80 --reply-src 10.244.0.99"},
		{name: "TCP over IPv6", line: ctLine("tcp", "fd00:10:244::5", 40001, "fd00:10:96::b", 80, "fd00:10:244::99", 8080, 3000),
			stale: true, reply: correlate.ReplyNotEndpoint, sp: "shop/dual:http", front: correlate.FrontendClusterIP, cause: correlate.CauseUDPOnly,
			why: "TCP: kube-proxy cleans UDP only", command: "conntrack -D -f ipv6 -p tcp --orig-dst fd00:10:96::b --orig-port-dst 80 --reply-src fd00:10:244::99"},
		{name: "deleted Service", mutate: []func(*correlate.Objects){deleteService("infra", "logs")},
			line:  ctLine("udp", "10.244.0.5", 40001, "10.96.30.1", 514, "10.244.2.101", 5514, 118),
			stale: true, reply: correlate.ReplyNotEndpoint, front: correlate.FrontendClusterIP, cause: correlate.CauseDeletedService,
			why: "deleted Service: not cleaned before #141371", command: "conntrack -D -p udp --orig-dst 10.96.30.1 --orig-port-dst 514 --reply-src 10.244.2.101"},
		{name: "deleted Service in a ServiceCIDR", mutate: []func(*correlate.Objects){serviceCIDR("10.96.0.0/16")},
			line:  ctLine("udp", "10.244.0.5", 40001, "10.96.200.1", 53, "10.244.2.9", 53, 118),
			stale: true, reply: correlate.ReplyNotEndpoint, front: correlate.FrontendClusterIP, cause: correlate.CauseDeletedService,
			why: "deleted Service: not cleaned before #141371", command: "conntrack -D -p udp --orig-dst 10.96.200.1 --orig-port-dst 53 --reply-src 10.244.2.9"},
		{name: "outside the known cluster IPs' range: not found", line: ctLine("udp", "10.244.0.5", 40001, "10.96.200.1", 53, "10.244.2.9", 53, 118)},
		{name: "NodePort of a Service with no endpoints", mutate: []func(*correlate.Objects){logsNodePort, scaleToZero("infra", "logs")},
			line:  ctLine("udp", "192.0.2.7", 40001, "10.0.0.10", 30514, "10.244.2.101", 5514, 118),
			stale: true, reply: correlate.ReplyNotEndpoint, sp: "infra/logs:syslog", front: correlate.FrontendNodePort, cause: correlate.CauseNodePortNoEndpoints,
			why: "NodePort of a Service with no endpoints: skipped", command: "conntrack -D -p udp --orig-dst 10.0.0.10 --orig-port-dst 30514 --reply-src 10.244.2.101"},
		{name: "cluster IP of a Service with no endpoints: cleaned since v1.37.0", mutate: []func(*correlate.Objects){logsNodePort, scaleToZero("infra", "logs")},
			line:  ctLine("udp", "10.244.0.5", 40001, "10.96.30.1", 514, "10.244.2.101", 5514, 118),
			stale: true, reply: correlate.ReplyNotEndpoint, sp: "infra/logs:syslog", front: correlate.FrontendClusterIP, cause: correlate.CauseNoEndpointChange, cleans: true,
			why: "no endpoint change since", command: "conntrack -D -p udp --orig-dst 10.96.30.1 --orig-port-dst 514 --reply-src 10.244.2.101"},
		{name: "NodePort with endpoints", mutate: []func(*correlate.Objects){logsNodePort},
			line:  ctLine("udp", "192.0.2.7", 40001, "10.0.0.10", 30514, "10.244.2.99", 5514, 118),
			stale: true, reply: correlate.ReplyNotEndpoint, sp: "infra/logs:syslog", front: correlate.FrontendNodePort, cause: correlate.CauseNoEndpointChange, cleans: true,
			why: "no endpoint change since", command: "conntrack -D -p udp --orig-dst 10.0.0.10 --orig-port-dst 30514 --reply-src 10.244.2.99"},
		{name: "not a port of the Service", line: ctLine("udp", "10.244.0.5", 40001, "10.96.0.1", 443, "10.96.0.1", 443, 29),
			stale: true, reply: correlate.ReplyNotDNATed, sp: "default/kubernetes", front: correlate.FrontendClusterIP, cause: correlate.CauseNotServicePort,
			why: "not a port of the Service", command: "conntrack -D -p udp --orig-dst 10.96.0.1 --orig-port-dst 443 --reply-src 10.96.0.1"},
		{name: "localhost NodePort in iptables mode", mode: kubeproxy.ModeIPTables, line: ctLine("tcp", "127.0.0.1", 40001, "127.0.0.1", 30080, "10.244.1.21", 8080, 100),
			reply: correlate.ReplyServing, sp: "shop/api:http", front: correlate.FrontendNodePort},
		{name: "localhost in nftables mode: no NodePort", mode: kubeproxy.ModeNFTables, line: ctLine("tcp", "127.0.0.1", 40001, "127.0.0.1", 30080, "127.0.0.1", 30080, 100)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := findCT(t, smallObjects(t, tc.mutate...), tc.mode, tc.line)
			if tc.front == "" {
				if len(f.Entries) != 0 {
					t.Fatalf("found %+v, want none", f.Entries)
				}
				return
			}
			if len(f.Entries) != 1 {
				t.Fatalf("%d entries, want 1", len(f.Entries))
			}
			e := f.Entries[0]
			if e.Stale != tc.stale || e.Reply != tc.reply || e.ServicePort != tc.sp || e.Frontend != tc.front || e.Cause != tc.cause || e.KubeProxyCleans != tc.cleans || e.Command != tc.command {
				t.Errorf("got stale=%v reply=%q sp=%q frontend=%q cause=%q cleans=%v command=%q", e.Stale, e.Reply, e.ServicePort, e.Frontend, e.Cause, e.KubeProxyCleans, e.Command)
			}
			if !strings.HasPrefix(e.Why, tc.why) {
				t.Errorf("why %q, want %q…", e.Why, tc.why)
			}
			if e.Deleted != (tc.cause == correlate.CauseDeletedService) {
				t.Errorf("deleted = %v", e.Deleted)
			}
		})
	}
}

// Groups count a Service port's entries, the stale ones per cause, with
// the time left and one command per gone endpoint.
func TestFindConntrackGroups(t *testing.T) {
	f := findCT(t, smallObjects(t), kubeproxy.ModeIPTables,
		ctLine("udp", "10.244.0.5", 40001, "10.96.0.10", 53, "10.244.0.2", 53, 29),
		ctLine("udp", "10.244.0.5", 40002, "10.96.0.10", 53, "10.244.0.99", 53, 117),
		ctLine("udp", "10.244.0.6", 40003, "10.96.0.10", 53, "10.244.0.99", 53, 12),
		ctLine("udp", "10.244.0.7", 40004, "10.96.0.10", 53, "10.244.0.98", 53, 64),
		ctLine("tcp", "10.244.0.7", 40005, "10.96.0.10", 53, "10.244.0.98", 53, 300),
	)
	if len(f.Groups) != 2 {
		t.Fatalf("%d groups: %+v", len(f.Groups), f.Groups)
	}
	g := f.Groups[1]
	if g.ServicePort != "kube-system/kube-dns:dns" || g.Proto != "udp" || g.Entries != 4 || g.Stale != 3 || len(g.ByCause) != 1 {
		t.Fatalf("group %+v", g)
	}
	s := g.ByCause[0]
	if s.Entries != 3 || s.Longest != 117 || s.Shortest != 12 || !s.KubeProxyCleans || len(s.Commands) != 2 ||
		strings.Join(s.ReplySources, ",") != "10.244.0.98,10.244.0.99" {
		t.Errorf("stale %+v", s)
	}
	if tcp := f.Groups[0]; tcp.Proto != "tcp" || tcp.Stale != 1 || tcp.ByCause[0].Cause != correlate.CauseUDPOnly {
		t.Errorf("tcp group %+v", tcp)
	}
}
