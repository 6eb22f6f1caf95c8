package collect

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
)

// The Service range as grep patterns: each pattern spelled as /proc
// spells the addresses, together exactly the range (or, for a prefix
// finer than a group of IPv6, the group it is in).
func TestRangePatterns(t *testing.T) {
	for _, tc := range []struct {
		prefix      string
		n           int
		first, last string
	}{
		{"10.96.0.0/16", 1, "=10.96.", "=10.96."},
		{"10.96.0.0/12", 16, "=10.96.", "=10.111."},
		{"10.96.0.0/18", 64, "=10.96.0.", "=10.96.63."},
		{"10.96.255.0/23", 2, "=10.96.254.", "=10.96.255."},
		{"10.96.0.8/30", 4, "=10.96.0.8", "=10.96.0.11"},
		{"fd00:10:96::/112", 1, "=fd00:0010:0096:0000:0000:0000:0000:", "=fd00:0010:0096:0000:0000:0000:0000:"},
		{"fd00:10:96::8/125", 8, "=fd00:0010:0096:0000:0000:0000:0000:0008", "=fd00:0010:0096:0000:0000:0000:0000:000f"},
		{"fd00:10:96::/100", 1, "=fd00:0010:0096:0000:0000:0000:", "=fd00:0010:0096:0000:0000:0000:"},
		{"0.0.0.0/0", 0, "", ""},
		{"10.96.0.10/32", 0, "", ""}, // read exact, with -w
	} {
		got := rangePatterns([]netip.Prefix{netip.MustParsePrefix(tc.prefix)})
		if len(got) != tc.n || tc.n > 0 && (got[0] != tc.first || got[len(got)-1] != tc.last) {
			t.Errorf("%s: %d patterns %q…, want %d from %s to %s", tc.prefix, len(got), got[:min(len(got), 3)], tc.n, tc.first, tc.last)
		}
		for _, p := range got {
			if !conntrackPattern.MatchString(p) {
				t.Errorf("%s: pattern %q is not one the policy allows", tc.prefix, p)
			}
		}
		if len(got) > 1 && len(slices.Compact(slices.Clone(got))) != len(got) {
			t.Errorf("%s: repeated patterns %q", tc.prefix, got)
		}
	}
	// Every address of a range matches one of its patterns, as /proc spells it.
	pats := rangePatterns([]netip.Prefix{netip.MustParsePrefix("10.96.0.0/18")})
	for _, a := range []string{"10.96.0.1", "10.96.63.254", "10.96.17.3"} {
		line := "ipv4 2 udp 17 25 src=10.244.0.1 dst=" + a + " sport=1 dport=53"
		if !slices.ContainsFunc(pats, func(p string) bool { return strings.Contains(line, p) }) {
			t.Errorf("%s is in no pattern of 10.96.0.0/18", a)
		}
	}
}

// A deleted Service's address is no current Service's, but within the
// range the cluster IPs come from: its entries are read too.
func TestServiceFilterReadsDeletedServices(t *testing.T) {
	objs := &correlate.Objects{}
	for _, ip := range []string{"10.96.0.10", "10.96.10.1", "10.96.30.1"} {
		objs.Services = append(objs.Services, &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: ip, ClusterIPs: []string{ip}}})
	}
	f := ServiceConntrackFilter(objs)
	line := "ipv4 2 udp 17 110 src=10.244.1.21 dst=10.96.17.7 sport=40002 dport=53 src=10.244.9.98 dst=10.244.1.21 sport=53 dport=40002 [ASSURED] mark=0 zone=0 use=2"
	if f.Mode != "prefix" || slices.Contains(f.Argv(), "-w") || !slices.ContainsFunc(f.Patterns, func(p string) bool { return strings.Contains(line, p) }) {
		t.Errorf("filter %s %q does not select an entry to 10.96.17.7, in the Services' range", f.Mode, f.Patterns)
	}
	other := strings.Replace(line, "dst=10.96.17.7", "dst=10.200.1.1", 1)
	other = strings.Replace(other, "src=10.244.9.98", "src=10.200.1.1", 1)
	if slices.ContainsFunc(f.Patterns, func(p string) bool { return strings.Contains(other, p) }) {
		t.Errorf("filter %q selects an entry outside the Services' range", f.Patterns)
	}
}

// A live read for the conntrack checks keeps the ServiceCIDR objects, so
// that a deleted Service's address is known by the cluster's own range.
func TestCollectKeepsServiceCIDRs(t *testing.T) {
	cidr := &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.96.0.0/16", "fd00:10:96::/112"}}}
	for _, kernel := range []bool{false, true} {
		e := newEnv(t, append(defaultObjects(), cidr)...)
		c := e.collector(Options{Node: testNode, Via: ViaDebugPod, Kernel: kernel})
		if _, err := c.Collect(context.Background()); err != nil {
			t.Fatal(err)
		}
		rng := correlate.ClusterIPRange(c.Listed)
		got := fmt.Sprint(rng.Prefixes)
		if kernel && (rng.Source != "the ServiceCIDR objects" || got != "[10.96.0.0/16 fd00:10:96::/112]") {
			t.Errorf("Kernel: range %s from %q, want the ServiceCIDR's", got, rng.Source)
		}
		if !kernel && rng.Source == "the ServiceCIDR objects" {
			t.Errorf("without Kernel the ServiceCIDRs were listed: %s", got)
		}
	}
}
