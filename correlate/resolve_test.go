package correlate

import (
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func services(names ...string) *Objects {
	objs := &Objects{}
	for _, n := range names {
		ns, name, _ := strings.Cut(n, "/")
		objs.Services = append(objs.Services, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}})
	}
	return objs
}

func TestResolveService(t *testing.T) {
	objs := services("shop/frontend", "shop/web", "shop/web-canary", "staging/web", "prod/checkout", "kube-system/kube-dns")
	for _, tc := range []struct {
		ns, name  string
		found     string
		elsewhere []string
		similar   []string
		ambiguous []string
	}{
		{ns: "shop", name: "frontend", found: "shop/frontend"},
		{ns: "", name: "frontend", found: "shop/frontend"},
		{ns: "", name: "web", ambiguous: []string{"shop", "staging"}},
		{ns: "default", name: "web", elsewhere: []string{"shop", "staging"}},
		{ns: "default", name: "checkout", elsewhere: []string{"prod"}},
		{ns: "shop", name: "frontnd", similar: []string{"shop/frontend"}},
		{ns: "shop", name: "fronted", similar: []string{"shop/frontend"}},
		// The namespace asked ranks first; prefixes count.
		{ns: "shop", name: "we", similar: []string{"shop/web", "shop/web-canary", "staging/web"}},
		{ns: "prod", name: "checkot", similar: []string{"prod/checkout"}},
		{ns: "shop", name: "zzz"},
		{ns: "", name: "kube-dnss", similar: []string{"kube-system/kube-dns"}},
	} {
		svc, err := ResolveService(objs, tc.ns, tc.name)
		if tc.found != "" {
			if err != nil || svc.Namespace+"/"+svc.Name != tc.found {
				t.Errorf("%s/%s: %v %v, want %s", tc.ns, tc.name, svc, err, tc.found)
			}
			continue
		}
		var amb *AmbiguousServiceError
		var nf *ServiceNotFoundError
		switch {
		case tc.ambiguous != nil:
			if !errors.As(err, &amb) || !slices.Equal(amb.Namespaces, tc.ambiguous) {
				t.Errorf("%s/%s: %v, want ambiguous in %v", tc.ns, tc.name, err, tc.ambiguous)
			}
		case !errors.As(err, &nf):
			t.Errorf("%s/%s: %v, want not found", tc.ns, tc.name, err)
		case !slices.Equal(nf.Elsewhere, tc.elsewhere) || !slices.Equal(nf.Similar, tc.similar):
			t.Errorf("%s/%s: elsewhere %v similar %v, want %v %v (%v)", tc.ns, tc.name, nf.Elsewhere, nf.Similar, tc.elsewhere, tc.similar, err)
		}
	}
}

func TestServiceOfChain(t *testing.T) {
	owner := func(chain, spn string, stale bool) Lookup {
		return Lookup{Query: chain, ChainOwner: ChainOwner{Chain: chain, ServicePort: spn, Stale: stale}}
	}
	for _, tc := range []struct {
		found          []Lookup
		ns, name, port string
		err            string
	}{
		{[]Lookup{owner("KUBE-SEP-X", "shop/web:http", false)}, "shop", "web", "http", ""},
		{[]Lookup{owner("KUBE-SVC-X", "shop/unnamed", false), owner("KUBE-EXT-X", "shop/unnamed", false)}, "shop", "unnamed", "", ""},
		{[]Lookup{owner("KUBE-SVC-X", "shop/a:http", false), owner("KUBE-SVC-X", "shop/b:http", false)}, "", "", "", "matches chains of several Service ports (shop/a:http, shop/b:http)"},
		{[]Lookup{owner("KUBE-SEP-X", "shop/gone:http", true)}, "", "", "", "KUBE-SEP-X is stale: no current Service port or endpoint owns it (it belonged to shop/gone:http)"},
		{[]Lookup{owner("KUBE-SEP-X", "", false)}, "", "", "", "no Service could be found"},
	} {
		ns, name, port, err := ServiceOfChain("X", tc.found)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: err %v, want %q", tc.found, err, tc.err)
			}
			continue
		}
		if err != nil || ns != tc.ns || name != tc.name || port != tc.port {
			t.Errorf("%v: %s/%s:%s %v", tc.found, ns, name, port, err)
		}
	}
}
