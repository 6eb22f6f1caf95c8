package correlate

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// IPSetExtra is a member no current Service port puts in its set.
type IPSetExtra struct {
	Member string `json:"member"`
	// ServicePort is a current Service port the member names, though
	// kube-proxy does not put it in this set (its policy, family, type or
	// endpoint's node says otherwise): through its Frontend (Frontend*),
	// or in KUBE-LOOP-BACK its Endpoint. "" when none does: a deleted
	// Service's member, or not kube-proxy's.
	ServicePort string `json:"servicePort,omitempty"`
	Frontend    string `json:"frontend,omitempty"`
	Endpoint    string `json:"endpoint,omitempty"`
}

// ipsetRelated answers for members no Service port puts in their set:
// the conntrack and IPVS joins' index of frontends, NodePorts and
// endpoints.
type ipsetRelated struct {
	ix  *conntrackIndex
	sps []*ServicePort
}

func newIPSetRelated(in IPSetInput) *ipsetRelated {
	r := &ipsetRelated{ix: newConntrackIndex(ConntrackInput{Objects: in.Objects, NodeIPs: in.NodeIPs, Mode: kubeproxy.ModeIPVS})}
	if in.Objects != nil {
		r.sps = in.Objects.ServicePorts()
	}
	return r
}

// ipsetBase is the IPSet* constant a set name is of, "" for none.
func ipsetBase(name string) string {
	for _, b := range ipsetBases {
		if name == b || name == IPSetName(b, true) {
			return b
		}
	}
	return ""
}

// extra says which current Service port member names, if any.
func (r *ipsetRelated) extra(set, member string) IPSetExtra {
	x := IPSetExtra{Member: member}
	if r == nil {
		return x
	}
	c := CanonicalIPSetMember(member)
	parts := strings.Split(c, ",")
	base := ipsetBase(set)
	var sp *ServicePort
	switch {
	case len(parts) == 1 && base == IPSetIPVSIPs:
		if a, err := netip.ParseAddr(c); err == nil && len(r.ix.byAddr[a]) > 0 {
			sp, x.Frontend = r.ix.byAddr[a][0].sp, r.ix.byAddr[a][0].kind
		}
	case len(parts) == 1:
		sp, x.Frontend = r.portOwner(base, c)
	case base == IPSetLoopBack:
		sp, x.Endpoint = r.endpointOwner(parts)
	default:
		a, err := netip.ParseAddr(parts[0])
		proto, port, _ := strings.Cut(parts[1], ":")
		if n, perr := strconv.ParseUint(port, 10, 16); err == nil && perr == nil {
			sp, x.Frontend = r.ix.ipvsFrontend(proto, netip.AddrPortFrom(a, uint16(n)))
		}
	}
	if sp != nil {
		x.ServicePort = sp.String()
	}
	return x
}

// portOwner is the Service port whose NodePort (or health-check node
// port) a bitmap:port member is.
func (r *ipsetRelated) portOwner(base, port string) (*ServicePort, string) {
	proto := ""
	switch base {
	case IPSetNodePortTCP, IPSetNodePortLocalTCP:
		proto = "tcp"
	case IPSetNodePortUDP, IPSetNodePortLocalUDP:
		proto = "udp"
	case IPSetHealthCheckNodePort:
		for _, sp := range r.sps {
			if sp.Proxied && strconv.Itoa(int(sp.HealthCheckNodePort)) == port {
				return sp, FrontendHealthCheckNodePort
			}
		}
	}
	if sp := r.ix.nodePorts[proto+"/"+port]; sp != nil {
		return sp, FrontendNodePort
	}
	return nil, ""
}

// endpointOwner is the first Service port (in ServicePorts' order) with
// the endpoint "ip,proto:port,ip" names.
func (r *ipsetRelated) endpointOwner(parts []string) (*ServicePort, string) {
	proto, port, _ := strings.Cut(parts[1], ":")
	for _, sp := range r.sps {
		if !sp.Proxied || sp.Proto() != proto {
			continue
		}
		for i := range sp.Endpoints {
			if ep := &sp.Endpoints[i]; ep.IP == parts[0] && strconv.Itoa(int(ep.Port)) == port {
				return sp, ep.String()
			}
		}
	}
	return nil, ""
}
