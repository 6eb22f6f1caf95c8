package correlate

import (
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// FormerServiceMatch says which deleted Service to rebuild: by namespace
// and name, by one of its addresses (IP, and port when not 0), or by one
// of its chains.
type FormerServiceMatch struct {
	Namespace, Name string
	Address         string
	Port            int
	Chain           string
}

// FormerService rebuilds, from the stale chains kube-proxy still has, a
// Service the API objects no longer hold: its ports, cluster and external
// IPs as the dispatch rules match them, and no endpoints (its
// EndpointSlices went with it). Explaining it shows the path the rules
// still give its connections. nil when no stale chain matches.
func FormerService(st *Stale, m FormerServiceMatch) *corev1.Service {
	owner := ""
	for _, c := range st.Chains {
		if c.ServicePort != "" && m.matches(c) {
			ns, name, _, _ := ParseServicePortName(c.ServicePort)
			owner = ns + "/" + name
			break
		}
	}
	if owner == "" {
		return nil
	}
	ns, name, _ := strings.Cut(owner, "/")
	svc := &corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP}}
	ports := map[string]corev1.ServicePort{}
	for _, c := range st.Chains {
		cns, cname, port, _ := ParseServicePortName(c.ServicePort)
		if cns != ns || cname != name {
			continue
		}
		for _, e := range c.Entries {
			host, p, err := net.SplitHostPort(e)
			num, _ := strconv.Atoi(p)
			if err != nil || num <= 0 || num > 65535 {
				continue
			}
			switch c.Kind {
			case kubeproxy.KindService:
				svc.Spec.ClusterIPs = appendUnique(svc.Spec.ClusterIPs, host)
			case kubeproxy.KindExternal:
				svc.Spec.ExternalIPs = appendUnique(svc.Spec.ExternalIPs, host)
			default:
				continue
			}
			proto := corev1.Protocol(strings.ToUpper(c.Protocol))
			if proto == "" {
				proto = corev1.ProtocolTCP
			}
			ports[port+"/"+string(proto)] = corev1.ServicePort{Name: port, Protocol: proto, Port: int32(num)}
		}
	}
	if len(svc.Spec.ClusterIPs) == 0 || len(ports) == 0 {
		return nil // only endpoint chains left: nothing routes to it
	}
	svc.Spec.ClusterIP = svc.Spec.ClusterIPs[0]
	for _, p := range ports {
		svc.Spec.Ports = append(svc.Spec.Ports, p)
	}
	sort.Slice(svc.Spec.Ports, func(i, j int) bool { return svc.Spec.Ports[i].Name < svc.Spec.Ports[j].Name })
	return svc
}

func (m FormerServiceMatch) matches(c StaleChain) bool {
	switch {
	case m.Chain != "":
		return c.Chain == m.Chain
	case m.Address != "":
		for _, e := range c.Entries {
			host, p, _ := net.SplitHostPort(e)
			if host == m.Address && (m.Port == 0 || p == strconv.Itoa(m.Port)) {
				return true
			}
		}
		return false
	default:
		ns, name, _, _ := ParseServicePortName(c.ServicePort)
		return name == m.Name && (m.Namespace == "" || ns == m.Namespace)
	}
}

func appendUnique(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}
