package plugin

import (
	"encoding/json"
	"strings"
	"testing"
)

// A Service is named the way the failing client names it: its cluster,
// external or load-balancer IP, with a port or not, or its DNS name (its
// namespace then comes from the name, not from -n). Each reads the same
// Service (and, with a port, only that port) as svc/NAME -n NS does.
func TestExplainByAddressOrDNSName(t *testing.T) {
	in := []string{"--from-dump", smallFixture + "iptables/save-nft-ipv4.txt", "--from-objects", smallFixture + "objects.json", "--node", "node-a", "-o", "json"}
	type port struct{ ServicePort string }
	type explanation struct {
		Namespace, Name string
		Ports           []port
	}
	explain := func(args ...string) (explanation, string, error) {
		out, errOut, err := runCmd(t, nil, append(append([]string{"explain"}, args...), in...)...)
		var ex explanation
		if err == nil {
			if jerr := json.Unmarshal([]byte(out), &ex); jerr != nil {
				t.Fatalf("explain %v -o json: %v", args, jerr)
			}
		}
		return ex, errOut, err
	}
	for _, tc := range []struct {
		ref   []string
		want  string // ns/name
		ports int
	}{
		{[]string{"10.96.10.7"}, "shop/cart", 1},
		{[]string{"10.96.10.7:80"}, "shop/cart", 1},
		{[]string{"10.96.10.7", "-n", "kube-system"}, "shop/cart", 1}, // an IP is the cluster's
		{[]string{"198.51.100.10:443"}, "shop/frontend", 1},           // load-balancer IP
		{[]string{"cart.shop.svc.cluster.local", "-n", "default"}, "shop/cart", 1},
		{[]string{"svc/cart.shop.svc"}, "shop/cart", 1},
		{[]string{"cart.shop"}, "shop/cart", 1},
		{[]string{"svc/cart", "-n", "shop"}, "shop/cart", 1},
	} {
		ex, errOut, err := explain(tc.ref...)
		if err != nil || ex.Namespace+"/"+ex.Name != tc.want || len(ex.Ports) != tc.ports {
			t.Errorf("explain %v: %s/%s with %d ports (%v %s), want %s", tc.ref, ex.Namespace, ex.Name, len(ex.Ports), err, errOut, tc.want)
		}
	}
	for _, tc := range []struct{ ref, says string }{
		{"10.96.10.7:81", "no port 81 (its ports: http 80/TCP)"},
		{"10.96.99.99", "no Service has the address 10.96.99.99"},
	} {
		_, errOut, err := explain(tc.ref)
		if err == nil || !strings.Contains(err.Error()+errOut, tc.says) {
			t.Errorf("explain %s: %v %s, want an error saying %q", tc.ref, err, errOut, tc.says)
		}
	}
}
