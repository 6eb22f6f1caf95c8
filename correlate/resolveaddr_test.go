package correlate

import "testing"

func TestServiceDNSName(t *testing.T) {
	for _, tc := range []struct {
		in, ns, name string
		ok           bool
	}{
		{"web.shop", "shop", "web", true},
		{"web.shop.svc", "shop", "web", true},
		{"web.shop.svc.cluster.local", "shop", "web", true},
		{"web.shop.svc.cluster.local.", "shop", "web", true},
		{"web", "", "", false},                        // a plain name: -n says the namespace
		{"web.shop.pod.cluster.local", "", "", false}, // not a Service's name
		{".shop", "", "", false},
		{"web.", "", "", false},
	} {
		ns, name, ok := ServiceDNSName(tc.in)
		if ns != tc.ns || name != tc.name || ok != tc.ok {
			t.Errorf("ServiceDNSName(%q) = %q, %q, %v; want %q, %q, %v", tc.in, ns, name, ok, tc.ns, tc.name, tc.ok)
		}
	}
}
