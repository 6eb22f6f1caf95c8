package correlate_test

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/inspect/ipset"
	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
)

// ipsetSave reads the sets and members of an `ipset save` listing: a
// "create SET …" line per set, an "add SET MEMBER" line per member.
func ipsetSave(t *testing.T, path string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return ipsetSaveText(t, path, string(b))
}

func ipsetSaveText(t *testing.T, source, text string) map[string][]string {
	t.Helper()
	sets := map[string][]string{}
	for _, line := range strings.Split(text, "\n") {
		fields := strings.Fields(line)
		switch {
		case len(fields) >= 2 && fields[0] == "create":
			sets[fields[1]] = sets[fields[1]][:0:0]
		case len(fields) == 3 && fields[0] == "add":
			sets[fields[1]] = append(sets[fields[1]], fields[2])
		case len(fields) > 0:
			t.Fatalf("%s: unexpected line %q", source, line)
		}
	}
	return sets
}

// ipsetNode is the node a fixture's kube-proxy ran on (meta.json).
func ipsetNode(t *testing.T, dir string) (string, []netip.Addr) {
	t.Helper()
	var m struct {
		Node    string       `json:"node"`
		NodeIPs []netip.Addr `json:"nodeIPs"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil || m.Node == "" || len(m.NodeIPs) == 0 {
		t.Fatalf("%s/meta.json: %v %+v", dir, err, m)
	}
	return m.Node, m.NodeIPs
}

// TestIPSetsMatchKubeProxy: every member kube-proxy v1.37.2's IPVS proxier
// wrote into its sets, as the real ipset tool saved them, is attributed,
// and every member expected is there, in every fixture with an IPVS
// listing.
func TestIPSetsMatchKubeProxy(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join(fixture.Root, "*", "ipvs", "ipset-save.txt"))
	if len(dirs) == 0 {
		t.Fatal("no fixture has ipvs/ipset-save.txt")
	}
	for _, p := range dirs {
		dir := filepath.Dir(filepath.Dir(p))
		t.Run(filepath.Base(dir), func(t *testing.T) {
			node, ips := ipsetNode(t, dir)
			present := ipsetSave(t, p)
			exp := correlate.ExpectedIPSets(correlate.IPSetInput{Objects: fixture.Objects(t, dir), Node: node, NodeIPs: ips})
			f := correlate.ClassifyIPSets(exp, present)
			for _, s := range f.Sets {
				if !s.Exists || len(s.Unattributed) > 0 || len(s.Missing) > 0 || s.Undecided != "" {
					t.Errorf("%s: exists %v, unattributed %+v, missing %+v, undecided %q", s.Name, s.Exists, s.Unattributed, s.Missing, s.Undecided)
				}
				if s.Counts.Members != len(present[s.Name]) {
					t.Errorf("%s: %d members counted, the listing has %d", s.Name, s.Counts.Members, len(present[s.Name]))
				}
			}
			c := f.Counts
			if c.Members == 0 || c.Attributed != c.Members || c.Present != c.Expected || len(f.OtherSets) > 0 {
				t.Errorf("counts %+v, other sets %q", c, f.OtherSets)
			}
			t.Logf("%d members in %d sets, %d attributed, %d expected, %d present", c.Members, len(f.Sets), c.Attributed, c.Expected, c.Present)
		})
	}
}

// TestIPSetsMatchKubeProxyThroughReader: the same through inspect/ipset's
// reader, from both listings the fixtures hold (save and list).
func TestIPSetsMatchKubeProxyThroughReader(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(fixture.Root, "*", "ipvs", "ipset-*.txt"))
	n := 0
	for _, p := range files {
		if filepath.Base(p) == "ipset-restore.txt" {
			continue // kube-proxy's own input, not a listing
		}
		n++
		dir := filepath.Dir(filepath.Dir(p))
		t.Run(filepath.Base(dir)+"/"+filepath.Base(p), func(t *testing.T) {
			node, ips := ipsetNode(t, dir)
			r, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			sets, err := ipset.Read(r, ipset.DefaultLimits())
			if err != nil || len(sets.Warnings) > 0 || sets.Truncated.Incomplete {
				t.Fatalf("%v %q %+v", err, sets.Warnings, sets.Truncated)
			}
			present := map[string][]string{}
			for _, s := range sets.Sets {
				present[s.Name] = []string{}
				for _, m := range s.Members {
					present[s.Name] = append(present[s.Name], m.Raw)
				}
			}
			exp := correlate.ExpectedIPSets(correlate.IPSetInput{Objects: fixture.Objects(t, dir), Node: node, NodeIPs: ips})
			c := correlate.ClassifyIPSets(exp, present).Counts
			if c.Members != sets.Members() || c.Members == 0 || c.Attributed != c.Members || c.Missing > 0 {
				t.Errorf("counts %+v, %d members read", c, sets.Members())
			}
		})
	}
	if n == 0 {
		t.Fatal("no ipset listing in the fixtures")
	}
}

// TestExpectedIPSetsOwners: what put some of small-v1.37's members there.
func TestExpectedIPSetsOwners(t *testing.T) {
	exp := correlate.ExpectedIPSets(correlate.IPSetInput{Objects: smallObjects(t), Node: "node-a", NodeIPs: nodeA})
	cases := []struct {
		set, member string
		want        []correlate.IPSetOwner
	}{
		// a terminating, not ready endpoint on node-a: hairpin all the same
		{"KUBE-LOOP-BACK", "10.244.0.131,tcp:8080,10.244.0.131", []correlate.IPSetOwner{{ServicePort: "shop/draining:http", Endpoint: "10.244.0.131:8080"}}},
		{"KUBE-6-LOOP-BACK", "fd00:10:244::141,tcp:8080,fd00:10:244::141", []correlate.IPSetOwner{{ServicePort: "shop/dual:http", Endpoint: "[fd00:10:244::141]:8080"}}},
		// spelled otherwise: upper-case protocol, IPv6 in full
		{"KUBE-6-CLUSTER-IP", "FD00:10:96:0:0:0:0:B,TCP:80", []correlate.IPSetOwner{{ServicePort: "shop/dual:http", Frontend: correlate.FrontendClusterIP}}},
		{"KUBE-IPVS-IPS", "10.96.0.10", []correlate.IPSetOwner{
			{ServicePort: "kube-system/kube-dns:dns", Frontend: correlate.FrontendClusterIP},
			{ServicePort: "kube-system/kube-dns:dns-tcp", Frontend: correlate.FrontendClusterIP},
			{ServicePort: "kube-system/kube-dns:metrics", Frontend: correlate.FrontendClusterIP}}},
		{"KUBE-EXTERNAL-IP", "203.0.113.50,tcp:8080", []correlate.IPSetOwner{{ServicePort: "shop/legacy-gw:http", Frontend: correlate.FrontendExternalIP}}},
		{"KUBE-LOAD-BALANCER-SOURCE-CIDR", "198.51.100.10,tcp:443,10.0.0.0/8", []correlate.IPSetOwner{{ServicePort: "shop/frontend:https", Frontend: correlate.FrontendLoadBalancerIP}}},
		// 10.0.0.0/8 holds the node IP
		{"KUBE-LOAD-BALANCER-SOURCE-IP", "198.51.100.10,tcp:443,198.51.100.10", []correlate.IPSetOwner{{ServicePort: "shop/frontend:https", Frontend: correlate.FrontendLoadBalancerIP}}},
		{"KUBE-NODE-PORT-LOCAL-TCP", "31081", []correlate.IPSetOwner{{ServicePort: "shop/reports:http", Frontend: correlate.FrontendNodePort}}},
		{"KUBE-HEALTH-CHECK-NODE-PORT", "32001", []correlate.IPSetOwner{{ServicePort: "shop/ingress:http", Frontend: correlate.FrontendHealthCheckNodePort},
			{ServicePort: "shop/ingress:https", Frontend: correlate.FrontendHealthCheckNodePort}}},
		// shop/reports is a NodePort Service: its healthCheckNodePort is no health check (NeedsHealthCheck)
		{"KUBE-HEALTH-CHECK-NODE-PORT", "32002", nil},
		// single-stack IPv4: no IPv6 NodePort
		{"KUBE-6-NODE-PORT-TCP", "30080", nil},
	}
	for _, tc := range cases {
		got, ok := exp.AttributeIPSetMember(tc.set, tc.member)
		if ok != (tc.want != nil) || !slices.Equal(got, tc.want) {
			t.Errorf("%s %s: %+v %v, want %+v", tc.set, tc.member, got, ok, tc.want)
		}
	}
}

// addLocalEndpoint adds a ready endpoint on node-a to Service ns/name's
// IPv4 slice.
func addLocalEndpoint(ns, name, ip string) func(*correlate.Objects) {
	return func(o *correlate.Objects) {
		node := "node-a"
		for _, s := range o.EndpointSlices {
			if s.Namespace == ns && s.Labels[discoveryv1.LabelServiceName] == name && s.AddressType == discoveryv1.AddressTypeIPv4 {
				s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, NodeName: &node})
				return
			}
		}
	}
}

// changeService changes Service ns/name.
func changeService(ns, name string, change func(*corev1.ServiceSpec)) func(*correlate.Objects) {
	return func(o *correlate.Objects) {
		for _, s := range o.Services {
			if s.Namespace == ns && s.Name == name {
				change(&s.Spec)
			}
		}
	}
}

// proxyMode sets the ipMode of Service ns/name's load-balancer IPs to Proxy.
func proxyMode(ns, name string) func(*correlate.Objects) {
	return func(o *correlate.Objects) {
		for _, s := range o.Services {
			if s.Namespace == ns && s.Name == name {
				for i := range s.Status.LoadBalancer.Ingress {
					s.Status.LoadBalancer.Ingress[i].IPMode = ptr.To(corev1.LoadBalancerIPModeProxy)
				}
			}
		}
	}
}

func externalPolicy(p corev1.ServiceExternalTrafficPolicy) func(*corev1.ServiceSpec) {
	return func(s *corev1.ServiceSpec) { s.ExternalTrafficPolicy = p }
}

// TestIPSetFaults: small-v1.37's sets as kube-proxy wrote them, classified
// against objects with a fault injected, or with less known of the node.
func TestIPSetFaults(t *testing.T) {
	present := ipsetSave(t, filepath.Join(fixture.Root, "small-v1.37", "ipvs", "ipset-save.txt"))
	cases := []struct {
		name              string
		mutate            []func(*correlate.Objects)
		node              string
		nodeIPs           []netip.Addr
		nodePortAddresses []string
		// unattributed and missing are "SET MEMBER"; undecided the sets
		// left undecided.
		unattributed, missing, undecided []string
	}{{
		name: "as kube-proxy wrote them", node: "node-a", nodeIPs: nodeA,
	}, {
		name: "a deleted load-balancer Service", node: "node-a", nodeIPs: nodeA,
		mutate: []func(*correlate.Objects){deleteService("shop", "frontend")},
		unattributed: []string{"KUBE-CLUSTER-IP 10.96.10.3,tcp:443", "KUBE-IPVS-IPS 198.51.100.10", "KUBE-IPVS-IPS 10.96.10.3",
			"KUBE-LOAD-BALANCER 198.51.100.10,tcp:443", "KUBE-LOAD-BALANCER-FW 198.51.100.10,tcp:443",
			"KUBE-LOAD-BALANCER-SOURCE-CIDR 198.51.100.10,tcp:443,10.0.0.0/8",
			"KUBE-LOAD-BALANCER-SOURCE-CIDR 198.51.100.10,tcp:443,203.0.113.0/25",
			"KUBE-LOAD-BALANCER-SOURCE-IP 198.51.100.10,tcp:443,198.51.100.10",
			"KUBE-LOOP-BACK 10.244.0.31,tcp:8443,10.244.0.31", "KUBE-NODE-PORT-TCP 30443"},
	}, {
		name: "a deleted Service with an external IP", node: "node-a", nodeIPs: nodeA,
		mutate: []func(*correlate.Objects){deleteService("shop", "legacy-gw")},
		unattributed: []string{"KUBE-CLUSTER-IP 10.96.10.4,tcp:8080", "KUBE-EXTERNAL-IP 203.0.113.50,tcp:8080",
			"KUBE-IPVS-IPS 203.0.113.50", "KUBE-IPVS-IPS 10.96.10.4"},
	}, {
		name: "a new endpoint on the node", node: "node-a", nodeIPs: nodeA,
		mutate:  []func(*correlate.Objects){addLocalEndpoint("shop", "web", "10.244.0.12")},
		missing: []string{"KUBE-LOOP-BACK 10.244.0.12,tcp:8080,10.244.0.12"},
	}, {
		name: "external policy Cluster now", node: "node-a", nodeIPs: nodeA,
		mutate: []func(*correlate.Objects){changeService("shop", "ingress", externalPolicy(corev1.ServiceExternalTrafficPolicyCluster))},
		unattributed: []string{"KUBE-HEALTH-CHECK-NODE-PORT 32001 (shop/ingress:http healthCheckNodePort)",
			"KUBE-LOAD-BALANCER-LOCAL 198.51.100.11,tcp:443 (shop/ingress:https loadBalancerIP)",
			"KUBE-LOAD-BALANCER-LOCAL 198.51.100.11,tcp:80 (shop/ingress:http loadBalancerIP)",
			"KUBE-NODE-PORT-LOCAL-TCP 31080 (shop/ingress:http nodePort)",
			"KUBE-NODE-PORT-LOCAL-TCP 31443 (shop/ingress:https nodePort)"},
	}, {
		name: "external policy Local now on an external IP", node: "node-a", nodeIPs: nodeA,
		mutate:       []func(*correlate.Objects){changeService("shop", "legacy-gw", externalPolicy(corev1.ServiceExternalTrafficPolicyLocal))},
		unattributed: []string{"KUBE-EXTERNAL-IP 203.0.113.50,tcp:8080 (shop/legacy-gw:http externalIP)"},
		missing:      []string{"KUBE-EXTERNAL-IP-LOCAL 203.0.113.50,tcp:8080"},
	}, {
		// a range allowing every address is no source range (serviceport.go:216-219)
		name: "a source range allowing all", node: "node-a", nodeIPs: nodeA,
		mutate: []func(*correlate.Objects){changeService("shop", "frontend", func(s *corev1.ServiceSpec) {
			s.LoadBalancerSourceRanges = append(s.LoadBalancerSourceRanges, "0.0.0.0/0")
		})},
		unattributed: []string{"KUBE-LOAD-BALANCER-FW 198.51.100.10,tcp:443 (shop/frontend:https loadBalancerIP)",
			"KUBE-LOAD-BALANCER-SOURCE-CIDR 198.51.100.10,tcp:443,10.0.0.0/8 (shop/frontend:https loadBalancerIP)",
			"KUBE-LOAD-BALANCER-SOURCE-CIDR 198.51.100.10,tcp:443,203.0.113.0/25 (shop/frontend:https loadBalancerIP)",
			"KUBE-LOAD-BALANCER-SOURCE-IP 198.51.100.10,tcp:443,198.51.100.10 (shop/frontend:https loadBalancerIP)"},
	}, {
		// kube-proxy programs only VIP-mode load-balancer IPs (proxyutil.IsVIPMode)
		name: "a load balancer in Proxy mode", node: "node-a", nodeIPs: nodeA,
		mutate: []func(*correlate.Objects){proxyMode("shop", "frontend")},
		unattributed: []string{"KUBE-IPVS-IPS 198.51.100.10", "KUBE-LOAD-BALANCER 198.51.100.10,tcp:443",
			"KUBE-LOAD-BALANCER-FW 198.51.100.10,tcp:443",
			"KUBE-LOAD-BALANCER-SOURCE-CIDR 198.51.100.10,tcp:443,10.0.0.0/8",
			"KUBE-LOAD-BALANCER-SOURCE-CIDR 198.51.100.10,tcp:443,203.0.113.0/25",
			"KUBE-LOAD-BALANCER-SOURCE-IP 198.51.100.10,tcp:443,198.51.100.10"},
	}, {
		name: "another node's sets", node: "node-b", nodeIPs: nodeA,
		unattributed: []string{"KUBE-6-LOOP-BACK fd00:10:244::141,tcp:8080,fd00:10:244::141 (shop/dual:http endpoint [fd00:10:244::141]:8080)",
			"KUBE-6-LOOP-BACK fd00:10:244::151,tcp:9090,fd00:10:244::151 (shop/v6-only:grpc endpoint [fd00:10:244::151]:9090)",
			"KUBE-LOOP-BACK 10.244.0.101,tcp:8080,10.244.0.101 (infra/logs:http endpoint 10.244.0.101:8080)",
			"KUBE-LOOP-BACK 10.244.0.101,udp:5514,10.244.0.101 (infra/logs:syslog endpoint 10.244.0.101:5514)",
			"KUBE-LOOP-BACK 10.244.0.11,tcp:8080,10.244.0.11 (shop/web:http endpoint 10.244.0.11:8080)",
			"KUBE-LOOP-BACK 10.244.0.131,tcp:8080,10.244.0.131 (shop/draining:http endpoint 10.244.0.131:8080)",
			"KUBE-LOOP-BACK 10.244.0.141,tcp:8080,10.244.0.141 (shop/dual:http endpoint 10.244.0.141:8080)",
			"KUBE-LOOP-BACK 10.244.0.2,tcp:53,10.244.0.2 (kube-system/kube-dns:dns-tcp endpoint 10.244.0.2:53)",
			"KUBE-LOOP-BACK 10.244.0.2,tcp:9153,10.244.0.2 (kube-system/kube-dns:metrics endpoint 10.244.0.2:9153)",
			"KUBE-LOOP-BACK 10.244.0.2,udp:53,10.244.0.2 (kube-system/kube-dns:dns endpoint 10.244.0.2:53)",
			"KUBE-LOOP-BACK 10.244.0.31,tcp:8443,10.244.0.31 (shop/frontend:https endpoint 10.244.0.31:8443)",
			"KUBE-LOOP-BACK 10.244.0.51,tcp:8080,10.244.0.51 (shop/ingress:http endpoint 10.244.0.51:8080)",
			"KUBE-LOOP-BACK 10.244.0.51,tcp:8443,10.244.0.51 (shop/ingress:https endpoint 10.244.0.51:8443)",
			"KUBE-LOOP-BACK 10.244.0.71,tcp:9100,10.244.0.71 (monitoring/node-agent:metrics endpoint 10.244.0.71:9100)",
			"KUBE-LOOP-BACK 10.244.0.81,tcp:8080,10.244.0.81 (shop/cart:http endpoint 10.244.0.81:8080)",
			"KUBE-LOOP-BACK 10.244.0.91,tcp:80,10.244.0.91 (shop/unnamed endpoint 10.244.0.91:80)"},
		missing: ipsetNodeBLoopBack,
	}, {
		name: "NodePorts on localhost only", node: "node-a", nodeIPs: nodeA, nodePortAddresses: []string{"localhost"},
		// no NodePort address: the NodePort and health-check members are skipped
		unattributed: []string{"KUBE-6-NODE-PORT-TCP 30081 (shop/dual:http nodePort)",
			"KUBE-HEALTH-CHECK-NODE-PORT 32001 (shop/ingress:http healthCheckNodePort)",
			"KUBE-NODE-PORT-LOCAL-TCP 31080 (shop/ingress:http nodePort)",
			"KUBE-NODE-PORT-LOCAL-TCP 31081 (shop/reports:http nodePort)",
			"KUBE-NODE-PORT-LOCAL-TCP 31443 (shop/ingress:https nodePort)",
			"KUBE-NODE-PORT-TCP 30080 (shop/api:http nodePort)",
			"KUBE-NODE-PORT-TCP 30081 (shop/dual:http nodePort)",
			"KUBE-NODE-PORT-TCP 30443 (shop/frontend:https nodePort)",
			"KUBE-NODE-PORT-TCP 31080 (shop/ingress:http nodePort)",
			"KUBE-NODE-PORT-TCP 31081 (shop/reports:http nodePort)",
			"KUBE-NODE-PORT-TCP 31443 (shop/ingress:https nodePort)"},
	}, {
		// IPv6 has a CIDR, holding no node address: no IPv6 NodePort
		name: "NodePorts on a CIDR per family", node: "node-a", nodeIPs: nodeA, nodePortAddresses: []string{"10.0.0.0/24", "fd00:1::/64"},
		unattributed: []string{"KUBE-6-NODE-PORT-TCP 30081 (shop/dual:http nodePort)"},
	}, {
		// no IPv6 CIDR: IPv6 NodePorts on every address (NewNodePortAddresses)
		name: "NodePorts on an IPv4 CIDR", node: "node-a", nodeIPs: nodeA, nodePortAddresses: []string{"10.0.0.0/24"},
	}, {
		name: "NodePorts on the node IPs", node: "node-a", nodeIPs: nodeA, nodePortAddresses: []string{"primary"},
	}, {
		// the node has the external IP: kube-proxy does not bind it to kube-ipvs0
		name: "the external IP a node address", node: "node-a", nodeIPs: append(slices.Clone(nodeA), netip.MustParseAddr("203.0.113.50")),
		unattributed: []string{"KUBE-IPVS-IPS 203.0.113.50 (shop/legacy-gw:http externalIP)"},
	}, {
		name: "the node not known", nodeIPs: nodeA,
		undecided: []string{"KUBE-6-LOOP-BACK", "KUBE-LOOP-BACK"},
	}, {
		name: "the node's addresses not known", node: "node-a",
		undecided: ipsetAddressSets,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			exp := correlate.ExpectedIPSets(correlate.IPSetInput{Objects: smallObjects(t, tc.mutate...), Node: tc.node,
				NodeIPs: tc.nodeIPs, NodePortAddresses: tc.nodePortAddresses})
			f := correlate.ClassifyIPSets(exp, present)
			var un, miss, undecided []string
			for _, s := range f.Sets {
				for _, x := range s.Unattributed {
					un = append(un, extraText(s.Name, x))
				}
				for _, m := range s.Missing {
					miss = append(miss, s.Name+" "+m.Member)
				}
				if s.Undecided != "" {
					undecided = append(undecided, s.Name)
				}
			}
			for _, l := range [][]string{un, miss, undecided, tc.unattributed, tc.missing, tc.undecided} {
				slices.Sort(l)
			}
			if !slices.Equal(un, tc.unattributed) || !slices.Equal(miss, tc.missing) || !slices.Equal(undecided, tc.undecided) {
				t.Errorf("unattributed %q\nwant %q\nmissing %q\nwant %q\nundecided %q\nwant %q", un, tc.unattributed, miss, tc.missing, undecided, tc.undecided)
			}
			if c := f.Counts; c.Attributed+c.Unattributed != c.Members || c.Members != 80 || c.Missing != len(tc.missing) {
				t.Errorf("counts %+v", c)
			}
		})
	}
}

// extraText is "SET MEMBER", and what current Service port it names, if
// any: "(ns/name:port frontend)" or "(ns/name:port endpoint ip:port)".
func extraText(set string, x correlate.IPSetExtra) string {
	s := set + " " + x.Member
	switch {
	case x.Endpoint != "":
		s += " (" + x.ServicePort + " endpoint " + x.Endpoint + ")"
	case x.ServicePort != "":
		s += " (" + x.ServicePort + " " + x.Frontend + ")"
	}
	return s
}

// ipsetNodeBLoopBack are the hairpin members node-b would have.
var ipsetNodeBLoopBack = []string{"KUBE-6-LOOP-BACK fd00:10:244:1::141,tcp:8080,fd00:10:244:1::141",
	"KUBE-LOOP-BACK 10.244.1.11,tcp:8080,10.244.1.11", "KUBE-LOOP-BACK 10.244.1.111,sctp:3868,10.244.1.111",
	"KUBE-LOOP-BACK 10.244.1.131,tcp:8080,10.244.1.131", "KUBE-LOOP-BACK 10.244.1.141,tcp:8080,10.244.1.141",
	"KUBE-LOOP-BACK 10.244.1.2,tcp:53,10.244.1.2", "KUBE-LOOP-BACK 10.244.1.2,tcp:9153,10.244.1.2",
	"KUBE-LOOP-BACK 10.244.1.2,udp:53,10.244.1.2", "KUBE-LOOP-BACK 10.244.1.21,tcp:8080,10.244.1.21",
	"KUBE-LOOP-BACK 10.244.1.31,tcp:8443,10.244.1.31", "KUBE-LOOP-BACK 10.244.1.51,tcp:8080,10.244.1.51",
	"KUBE-LOOP-BACK 10.244.1.51,tcp:8443,10.244.1.51", "KUBE-LOOP-BACK 10.244.1.61,tcp:8080,10.244.1.61",
	"KUBE-LOOP-BACK 10.244.1.71,tcp:9100,10.244.1.71", "KUBE-LOOP-BACK 10.244.1.91,tcp:80,10.244.1.91"}

// ipsetAddressSets are the sets that depend on the node's addresses.
var ipsetAddressSets = []string{"KUBE-6-HEALTH-CHECK-NODE-PORT", "KUBE-6-IPVS-IPS", "KUBE-6-LOAD-BALANCER-SOURCE-IP",
	"KUBE-6-NODE-PORT-LOCAL-SCTP-HAS", "KUBE-6-NODE-PORT-LOCAL-TCP", "KUBE-6-NODE-PORT-LOCAL-UDP", "KUBE-6-NODE-PORT-SCTP-HASH",
	"KUBE-6-NODE-PORT-TCP", "KUBE-6-NODE-PORT-UDP", "KUBE-HEALTH-CHECK-NODE-PORT", "KUBE-IPVS-IPS", "KUBE-LOAD-BALANCER-SOURCE-IP",
	"KUBE-NODE-PORT-LOCAL-SCTP-HASH", "KUBE-NODE-PORT-LOCAL-TCP", "KUBE-NODE-PORT-LOCAL-UDP", "KUBE-NODE-PORT-SCTP-HASH",
	"KUBE-NODE-PORT-TCP", "KUBE-NODE-PORT-UDP"}
