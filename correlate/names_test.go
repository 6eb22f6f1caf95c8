package correlate

import (
	"crypto/sha256"
	"encoding/base32"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/inspect/input"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// Vectors from kube-proxy v1.37.2 pkg/proxy/iptables/proxier_test.go
// (TestOverallIPTablesRules, TestSyncProxyRulesLargeClusterMode) and values
// seen in public dumps of unrelated clusters.
func TestIPTablesChainNames(t *testing.T) {
	tests := []struct {
		ns, name, port, proto, endpoint string
		want                            string
	}{
		{"ns1", "svc1", "p80", "tcp", "", "KUBE-SVC-XPGD46QRK7WJZT7O"},
		{"ns2", "svc2", "p80", "tcp", "", "KUBE-SVC-GNZBNJ2PO5MGZ6GT"},
		{"ns3", "svc3", "p80", "tcp", "", "KUBE-SVC-X27LE4BHSL4DOUIK"},
		{"ns4", "svc4", "p80", "tcp", "", "KUBE-SVC-4SW47YFZTEDKD3PK"},
		{"ns5", "svc5", "p80", "tcp", "", "KUBE-SVC-NUKIZ6OKUXPJNT4C"},
		{"ns2", "svc2", "p8080", "tcp", "", "KUBE-SVC-2VJB64SDSIJUP5T6"},
		{"ns4", "svc4", "p8082", "tcp", "", "KUBE-SVC-EBDQOQU5SJFXRIL3"},
		{"ns5", "svc5", "p80", "TCP", "", "KUBE-SVC-NUKIZ6OKUXPJNT4C"}, // protocol is lower-cased
		{"kube-system", "kube-dns", "dns", "udp", "", "KUBE-SVC-TCOU7JCQXEZGVUNU"},
		{"kube-system", "kube-dns", "dns-tcp", "tcp", "", "KUBE-SVC-ERIFXISQEP7F7OF4"},
		{"default", "kubernetes", "https", "tcp", "", "KUBE-SVC-NPX46M4PTMTKRN6Y"},
		{"default", "web", "", "tcp", "", "KUBE-SVC-LOLE4ISW44XBNF3G"}, // unnamed port: "default/webtcp"
		{"ns1", "svc1", "p80", "tcp", "10.180.0.1:80", "KUBE-SEP-SXIVWICOYRO3J4NJ"},
		{"ns2", "svc2", "p80", "tcp", "10.180.0.2:80", "KUBE-SEP-RS4RBKLTHTF2IUXJ"},
		{"ns3", "svc3", "p80", "tcp", "10.180.0.3:80", "KUBE-SEP-OYPFS5VJICHGATKP"},
		{"ns5", "svc5", "p80", "tcp", "10.180.0.3:80", "KUBE-SEP-I77PXRDZVX7PMWMN"},
		{"ns4", "svc4", "p80", "tcp", "10.180.0.4:80", "KUBE-SEP-UKSFD7AGPMPPLUHC"},
		{"ns4", "svc4", "p80", "tcp", "10.180.0.5:80", "KUBE-SEP-C6EBXVWJJZMIWKLZ"},
		{"ns1", "svc1", "p80", "tcp", "10.0.0.0:80", "KUBE-SEP-DKGQUZGBKLTPAR56"},
		{"ns3", "svc3", "p8081", "tcp", "203.0.113.4:8081", "KUBE-SEP-RUVVH7YV3PHQBDOS"},
		{"ns4", "svc4", "p8082", "tcp", "10.4.0.1:8082", "KUBE-SEP-SU5STNODRYEWJAUF"},
		{"ns2", "svc2", "p8080", "tcp", "10.0.2.1:8080", "KUBE-SEP-UHEGFW77JX3KXTOV"},
		{"ns3", "svc3", "p80", "tcp", "10.0.3.2:80", "KUBE-SEP-DKCFIS26GWF2WLWC"},
		{"ns3", "svc3", "p80", "tcp", "10.0.3.3:80", "KUBE-SEP-JVVZVJ7BSEPPRNBS"},
		{"ns1", "svc1", "p80", "tcp", "[fd00:10:180::1]:80", "KUBE-SEP-OGYCNMB4EMRUSJ6N"},
	}
	for _, tc := range tests {
		spn := ServicePortName(tc.ns, tc.name, tc.port)
		var got string
		if tc.endpoint == "" {
			got = ServiceChain(spn, tc.proto)
		} else {
			got = EndpointChain(spn, tc.proto, tc.endpoint)
		}
		if got != tc.want {
			t.Errorf("%s %s %s: got %s, want %s", spn, tc.proto, tc.endpoint, got, tc.want)
		}
	}
}

func TestServicePortNameAndLegacyHash(t *testing.T) {
	if got := ServicePortName("default", "web", ""); got != "default/web" {
		t.Errorf("unnamed port: %q", got)
	}
	if got := ServicePortName("ns1", "svc1", "p80"); got != "ns1/svc1:p80" {
		t.Errorf("named port: %q", got)
	}
	// Before 1.19 the unnamed port hashed as "ns/name:tcp".
	if LegacyPortProtoHash("default", "web", "TCP") != hash16("default/web:tcp", "", "") {
		t.Error("legacy hash does not hash ns/name:proto")
	}
	if LegacyPortProtoHash("default", "web", "tcp") == PortProtoHash("default/web", "tcp") {
		t.Error("legacy and current unnamed-port hashes must differ")
	}
}

func TestEndpointStringCanonical(t *testing.T) {
	tests := []struct {
		ip   string
		port int32
		want string
	}{
		{"10.180.0.1", 80, "10.180.0.1:80"},
		{"010.180.000.001", 80, "10.180.0.1:80"}, // ParseIPSloppy reads leading zeros as decimal
		{"fd00:10:180:0:0:0:0:1", 80, "[fd00:10:180::1]:80"},
		{"FD00:10:180::1", 8080, "[fd00:10:180::1]:8080"},
	}
	for _, tc := range tests {
		if got := EndpointString(tc.ip, tc.port); got != tc.want {
			t.Errorf("EndpointString(%q, %d) = %q, want %q", tc.ip, tc.port, got, tc.want)
		}
	}
}

// Vectors from kube-proxy v1.37.2 pkg/proxy/nftables/proxier_test.go
// (Test_servicePortChainNameBase, Test_servicePortEndpointChainNameBase)
// and the verified names of the facts file.
func TestNFTNames(t *testing.T) {
	const longNS = "very-long-namespace-name-abcdefghijklmnopqrstuvwxyz0123456789xx"
	const longName = "very-long-service-name-why-would-you-even-do-this-i-mean-really"
	const longPort = "port-443-providing-the-hypertext-transmission-protocol-with-tls"
	tests := []struct {
		ns, name, proto, port, endpoint string
		want                            string
	}{
		{"testing", "service", "tcp", "http", "", "P4ZYZVCF-testing/service/tcp/http"},
		{"testing", "service", "tcp", "https", "", "LZBRENCP-testing/service/tcp/https"},
		{longNS, longName, "sctp", longPort, "", "KR6NACJP-" + longNS + "/" + longName + "/sctp/" + longPort},
		{"ns1", "svc1", "tcp", "p80", "", "ULMVA6XW-ns1/svc1/tcp/p80"},
		{"ns4", "svc4", "tcp", "p80", "", "LAUZTJTB-ns4/svc4/tcp/p80"},
		{"testing", "service", "tcp", "http", "10.180.0.1:80", "JO2XBXZR-testing/service/tcp/http__10.180.0.1/80"},
		{"testing", "service", "tcp", "http", "10.180.0.2:80", "5S6H3H22-testing/service/tcp/http__10.180.0.2/80"},
		{"testing", "service", "tcp", "http", "[fd80:abcd:12::a1b2:c3d4:e5f6:9999]:80", "U7E2ET36-testing/service/tcp/http__fd80.abcd.12..a1b2.c3d4.e5f6.9999/80"},
		{longNS, longName, "sctp", longPort, "[1234:5678:9abc:def0::abc:1234]:443", "5YS7AFEA-" + longNS + "/" + longName + "/sctp/" + longPort + "__1234.5678.9abc.def0..abc.1234/443"},
		{longNS, longName, "sctp", longPort, "[1234:5678:9abc:def0::abcd:1234:5678]:443", "CI6C53Q3-" + longNS + "/" + longName + "/sctp/" + longPort + "__1234.5678.9abc.def0..abcd.1234..."},
		{longNS, longName, "sctp", longPort, "[1234:5678:9abc:def0::abcd:1234:8765]:443", "2FLXFK6X-" + longNS + "/" + longName + "/sctp/" + longPort + "__1234.5678.9abc.def0..abcd.1234..."},
		{"ns1", "svc1", "tcp", "p80", "10.180.0.1:80", "5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80"},
		{"ns5", "svc5", "tcp", "p80", "10.180.0.3:80", "GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80"},
		{"ns5", "svc5", "tcp", "p80", "[fd00:10:180::3]:80", "5HFFSBBM-ns5/svc5/tcp/p80__fd00.10.180..3/80"},
	}
	for _, tc := range tests {
		var got string
		if tc.endpoint == "" {
			got = NFTServiceBase(tc.ns, tc.name, tc.proto, tc.port)
		} else {
			got = NFTEndpointBase(tc.ns, tc.name, tc.proto, tc.port, tc.endpoint)
		}
		if got != tc.want {
			t.Errorf("%s/%s/%s/%s %s:\n got %s\nwant %s", tc.ns, tc.name, tc.proto, tc.port, tc.endpoint, got, tc.want)
			continue
		}
		prefix := kubeproxy.NFTPrefixService
		if tc.endpoint != "" {
			prefix = kubeproxy.NFTPrefixEndpoint
		}
		n, ok := ParseNFTName(prefix + got)
		if !ok {
			t.Errorf("ParseNFTName(%q) failed", prefix+got)
			continue
		}
		if n.Truncated {
			if n.HashOK {
				t.Errorf("%q: a truncated name cannot be verified by its hash", got)
			}
			continue
		}
		if !n.HashOK || n.Namespace != tc.ns || n.Name != tc.name || n.Protocol != tc.proto || n.PortName != tc.port || n.Endpoint != tc.endpoint {
			t.Errorf("ParseNFTName(%q) = %+v", prefix+got, n)
		}
	}
}

func TestParseNFTNameRejects(t *testing.T) {
	for _, name := range []string{"services", "nat-prerouting", "service-endpoints-check", "reject-chain", "service-", "endpoint-XXXX"} {
		if n, ok := ParseNFTName(name); ok {
			t.Errorf("ParseNFTName(%q) = %+v, want not a per-service name", name, n)
		}
	}
	// A readable part that does not match its hash is parsed but flagged.
	n, ok := ParseNFTName("service-AAAAAAAA-ns1/svc1/tcp/p80")
	if !ok || n.HashOK {
		t.Errorf("forged hash: ok=%v HashOK=%v", ok, n.HashOK)
	}
}

// pre119Hash is kube-proxy v1.18's portProtoHash / servicePortEndpointChainName
// hash, spelled out independently of hash16: base32std(sha256(s))[:16],
// where s is ServicePortName.String() (v1.18: fmt "%s:%s", so "ns/name:"
// for an unnamed port), the lower-case protocol and, for KUBE-SEP, the
// endpoint "ip:port".
func pre119Hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return base32.StdEncoding.EncodeToString(sum[:])[:16]
}

// A v1.18 node: the chains of a Service with an unnamed port, in the shape
// v1.18's syncProxyRules wrote them (pkg/proxy/iptables/proxier.go:
// "ns/name: cluster IP" on KUBE-SERVICES, the bare service port name on
// the KUBE-SVC and KUBE-SEP rules unless more than 1000 endpoint chains
// dropped those comments), and one endpoint the slices no longer list.
func TestPre119UnnamedPortEndpointChains(t *testing.T) {
	svc := "KUBE-SVC-" + pre119Hash("default/web:tcp")
	sep := func(ep string) string { return "KUBE-SEP-" + pre119Hash("default/web:tcp"+ep) }
	const objects = `{"apiVersion":"v1","kind":"List","items":[
{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":"default"},
 "spec":{"type":"ClusterIP","clusterIP":"10.96.0.50","clusterIPs":["10.96.0.50"],"ports":[{"port":80,"protocol":"TCP","targetPort":8080}]}},
{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"web-abcde","namespace":"default","labels":{"kubernetes.io/service-name":"web"}},
 "addressType":"IPv4","ports":[{"name":"","port":8080,"protocol":"TCP"}],
 "endpoints":[{"addresses":["10.244.1.5"],"conditions":{"ready":true}},{"addresses":["10.244.2.6"],"conditions":{"ready":true}}]}]}`
	objs, err := ReadObjects(strings.NewReader(objects), "objects.json")
	if err != nil {
		t.Fatal(err)
	}
	rules := func(comments bool) string {
		c := func(s string) string {
			if !comments {
				return ""
			}
			return " -m comment --comment " + s
		}
		var b strings.Builder
		b.WriteString("*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-MARK-MASQ - [0:0]\n:" + svc + " - [0:0]\n")
		eps := []string{"10.244.1.5:8080", "10.244.2.6:8080", "10.244.3.7:8080"}
		for _, ep := range eps {
			b.WriteString(":" + sep(ep) + " - [0:0]\n")
		}
		b.WriteString("-A KUBE-SERVICES -m comment --comment \"default/web: cluster IP\" -m tcp -p tcp -d 10.96.0.50/32 --dport 80 -j " + svc + "\n")
		for i, ep := range eps {
			prob := []string{" -m statistic --mode random --probability 0.3333333333", " -m statistic --mode random --probability 0.5000000000", ""}[i]
			b.WriteString("-A " + svc + c("default/web:") + prob + " -j " + sep(ep) + "\n")
			ip, _, _ := strings.Cut(ep, ":")
			b.WriteString("-A " + sep(ep) + c("default/web:") + " -s " + ip + "/32 -j KUBE-MARK-MASQ\n")
			b.WriteString("-A " + sep(ep) + c("default/web:") + " -m tcp -p tcp -j DNAT --to-destination " + ep + "\n")
		}
		b.WriteString("COMMIT\n")
		return b.String()
	}
	for _, tc := range []struct {
		name     string
		comments bool
	}{{"small cluster (comments)", true}, {"over 1000 endpoint chains (no comments)", false}} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := input.Read(strings.NewReader(rules(tc.comments)), "restore.txt")
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]ChainOwner{}
			for _, o := range Attribute(in.Ruleset, objs).Chains {
				got[o.Chain] = o
			}
			for _, want := range []struct {
				chain, endpoint string
				stale           bool
			}{
				{svc, "", false},
				{sep("10.244.1.5:8080"), "10.244.1.5:8080", false},
				{sep("10.244.2.6:8080"), "10.244.2.6:8080", false},
				{sep("10.244.3.7:8080"), "10.244.3.7:8080", true}, // gone from the slices: stale, its owner known
			} {
				o := got[want.chain]
				if o.ServicePort != "default/web" || o.Endpoint != want.endpoint || o.Stale != want.stale || o.Evidence&EvidenceLegacyHash == 0 {
					t.Errorf("%s: owner %q endpoint %q stale %v evidence %s; want default/web %q stale %v hash-pre-1.19",
						want.chain, o.ServicePort, o.Endpoint, o.Stale, o.Evidence, want.endpoint, want.stale)
				}
			}
		})
	}
}
