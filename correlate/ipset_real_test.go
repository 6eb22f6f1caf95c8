package correlate_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/internal/netnstest"
)

// ipsetSpellingObjects: a dual-stack LoadBalancer with external policy
// Local, source ranges of a single address and unmasked ones, an SCTP
// NodePort, and an IPv6 endpoint on node-a written in full: the spellings
// the fixtures do not hold.
const ipsetSpellingObjects = `{"kind":"List","apiVersion":"v1","items":[
{"apiVersion":"v1","kind":"Service","metadata":{"namespace":"t","name":"lb"},
 "spec":{"type":"LoadBalancer","externalTrafficPolicy":"Local","healthCheckNodePort":32500,
  "ipFamilies":["IPv4","IPv6"],"clusterIP":"10.96.50.1","clusterIPs":["10.96.50.1","fd00:10:96::50"],
  "loadBalancerSourceRanges":["10.0.0.1/32","10.1.2.3/8","fd00::5/128","fd00:0:0:1::7/64"],
  "ports":[{"name":"https","protocol":"TCP","port":443,"nodePort":30500},
           {"name":"diameter","protocol":"SCTP","port":3868,"nodePort":30501}]},
 "status":{"loadBalancer":{"ingress":[{"ip":"198.51.100.20"},{"ip":"2001:db8::20"}]}}},
{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"namespace":"t","name":"lb-v6",
  "labels":{"kubernetes.io/service-name":"lb"}},"addressType":"IPv6",
 "endpoints":[{"addresses":["fd00:10:244:0:0:0:0:99"],"nodeName":"node-a"}],
 "ports":[{"name":"diameter","protocol":"SCTP","port":3868}]}]}`

// ipsetSpellingEntries are the entries kube-proxy's proxier hands ipset for
// those objects, as its Entry.String writes them (Go's spellings: source
// ranges as net.IPNet.String of the masked range), by set.
var ipsetSpellingEntries = map[string]struct {
	typ, family string
	entries     []string
}{
	"KUBE-LOAD-BALANCER-SOURCE-CIDR": {"hash:ip,port,net", "inet", []string{"198.51.100.20,tcp:443,10.0.0.1/32",
		"198.51.100.20,tcp:443,10.0.0.0/8", "198.51.100.20,sctp:3868,10.0.0.1/32", "198.51.100.20,sctp:3868,10.0.0.0/8"}},
	"KUBE-6-LOAD-BALANCER-SOURCE-CID": {"hash:ip,port,net", "inet6", []string{"2001:db8::20,tcp:443,fd00::5/128",
		"2001:db8::20,tcp:443,fd00:0:0:1::/64", "2001:db8::20,sctp:3868,fd00::5/128", "2001:db8::20,sctp:3868,fd00:0:0:1::/64"}},
	"KUBE-LOAD-BALANCER-SOURCE-IP": {"hash:ip,port,ip", "inet", []string{"198.51.100.20,tcp:443,198.51.100.20",
		"198.51.100.20,sctp:3868,198.51.100.20"}},
	"KUBE-6-LOAD-BALANCER-SOURCE-IP": {"hash:ip,port,ip", "inet6", nil}, // no IPv6 range holds fd00::10
	"KUBE-NODE-PORT-SCTP-HASH":       {"hash:ip,port", "inet", []string{"10.0.0.10,sctp:30501"}},
	"KUBE-NODE-PORT-LOCAL-SCTP-HASH": {"hash:ip,port", "inet", []string{"10.0.0.10,sctp:30501"}},
	"KUBE-6-NODE-PORT-SCTP-HASH":     {"hash:ip,port", "inet6", []string{"fd00::10,sctp:30501"}},
	"KUBE-6-LOOP-BACK":               {"hash:ip,port,ip", "inet6", []string{"fd00:10:244::99,sctp:3868,fd00:10:244::99"}},
	"KUBE-6-IPVS-IPS":                {"hash:ip", "inet6", []string{"fd00:10:96::50", "2001:db8::20"}},
	"KUBE-HEALTH-CHECK-NODE-PORT":    {"bitmap:port range 0-65535", "", []string{"32500"}},
}

// TestIPSetSpellingRealIPSet: the real ipset tool, given kube-proxy's
// entries in a throw-away network namespace, saves members that are
// exactly ExpectedIPSets' (a single-address range loses its /32 or /128).
func TestIPSetSpellingRealIPSet(t *testing.T) {
	ns := netnstest.New(t, "ipset")
	var in strings.Builder
	for name, s := range ipsetSpellingEntries {
		fam := ""
		if s.family != "" {
			fam = " family " + s.family
		}
		fmt.Fprintf(&in, "create %s %s%s\n", name, s.typ, fam)
		for _, e := range s.entries {
			fmt.Fprintf(&in, "add %s %s\n", name, e)
		}
	}
	if out, err := ns.Run([]byte(in.String()), "ipset", "restore"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	out, err := ns.Run(nil, "ipset", "save")
	if err != nil {
		t.Fatal(err)
	}
	saved := ipsetSaveText(t, "ipset save", string(out))
	objs, err := correlate.ReadObjects(strings.NewReader(ipsetSpellingObjects), "objects")
	if err != nil {
		t.Fatal(err)
	}
	nodeIPs := []netip.Addr{netip.MustParseAddr("10.0.0.10"), netip.MustParseAddr("fd00::10"), netip.MustParseAddr("fe80::1")}
	f := correlate.ClassifyIPSets(correlate.ExpectedIPSets(correlate.IPSetInput{Objects: objs, Node: "node-a", NodeIPs: nodeIPs}), saved)
	checked := 0
	for _, s := range f.Sets {
		if _, ok := ipsetSpellingEntries[s.Name]; !ok {
			continue
		}
		checked++
		if len(s.Unattributed) > 0 || len(s.Missing) > 0 || s.Counts.Members != len(ipsetSpellingEntries[s.Name].entries) {
			t.Errorf("%s: saved %q: unattributed %+v, missing %+v", s.Name, saved[s.Name], s.Unattributed, s.Missing)
		}
	}
	if checked != len(ipsetSpellingEntries) {
		t.Errorf("%d sets checked, want %d", checked, len(ipsetSpellingEntries))
	}
}
