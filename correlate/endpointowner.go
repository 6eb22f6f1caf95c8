package correlate

import (
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
)

// owner is a service port as attribution knows it.
type owner struct {
	servicePort, protocol string
	evidence              Evidence
}

// endpointLookups are what attributing an endpoint chain may need of its
// table, each built on first need.
type endpointLookups struct {
	parentsOf  func(chain string) []jumpRef
	ownerOf    func(chain string) *ChainOwner
	candidates func() []owner
	// legacy maps pre-1.19 endpoint hashes to their endpoints; pre119:
	// some service chain of the table has its pre-1.19 name.
	legacy func() map[string]endpointRef
	pre119 bool
}

// legacyEndpoints indexes the endpoints of the service ports whose service
// chains kube-proxy named before 1.19 by the endpoint chain names it gave
// them then ("ns/name:" + protocol + endpoint): only there do such names
// belong, so the index costs nothing where there are none.
func (idx *index) legacyEndpoints(sps []*ServicePort) func() map[string]endpointRef {
	var m map[string]endpointRef
	return func() map[string]endpointRef {
		if m == nil {
			m = map[string]endpointRef{}
			for _, sp := range sps {
				for _, ep := range sp.Endpoints {
					s := ep.String()
					m[LegacyEndpointHash(sp.Namespace, sp.Name, sp.Proto(), s)] = endpointRef{sp, s}
				}
			}
		}
		return m
	}
}

// endpointOwner attributes a KUBE-SEP chain: by its hash (the current
// form, then the pre-1.19 one of an unnamed port), else, stale, by
// hashing its DNAT target with the service port of a chain that jumps to
// it, of a comment, or any known one.
func (idx *index) endpointOwner(o *ChainOwner, c *inspect.IPChain, haveObjects bool, lk endpointLookups) {
	hash := chainHash(c.Name)
	if ref, ok := idx.byEndpoint[hash]; ok {
		o.ServicePort, o.Protocol, o.Endpoint = ref.sp.String(), string(ref.sp.Protocol), ref.endpoint
		o.Evidence = EvidenceHash
		return
	}
	if ref, ok := lk.legacy()[hash]; ok {
		o.ServicePort, o.Protocol, o.Endpoint = ref.sp.String(), string(ref.sp.Protocol), ref.endpoint
		o.Evidence = EvidenceLegacyHash
		return
	}
	o.Stale = haveObjects
	proto := ruleProtocol(c)
	o.Protocol = strings.ToUpper(proto)
	if o.Endpoint == "" {
		return // no DNAT target to hash (nft lists some ip6 DNATs without it)
	}
	// try hashes the DNAT target with a service port, in the current form
	// or the pre-1.19 one of an unnamed port ("ns/name:").
	try := func(spn, p string, ev Evidence, pre119 bool) bool {
		if proto != "" && !strings.EqualFold(p, proto) {
			return false
		}
		form := spn
		if pre119 {
			if strings.Contains(spn[strings.IndexByte(spn, '/')+1:], ":") {
				return false // a named port's name is the same in both
			}
			form, ev = spn+":", ev|EvidenceLegacyHash
		}
		if EndpointHash(form, p, o.Endpoint) != hash {
			return false
		}
		o.ServicePort, o.Protocol, o.Evidence = spn, strings.ToUpper(p), ev|EvidenceDNAT
		return true
	}
	// The service port of a chain that jumps here; the pre-1.19 form where
	// that chain, or another of the table, has that era's name.
	for _, j := range lk.parentsOf(o.Chain) {
		if po := lk.ownerOf(j.chain); po != nil && po.ServicePort != "" && (try(po.ServicePort, po.Protocol, EvidenceJump, false) ||
			(lk.pre119 || po.Evidence&EvidenceLegacyHash != 0) && try(po.ServicePort, po.Protocol, EvidenceJump, true)) {
			return
		}
	}
	// A comment in the chain or on a jump to it: "ns/name:" is the
	// pre-1.19 form of an unnamed port.
	rules := append([]*inspect.IPRule{}, c.Rules...)
	for _, j := range lk.parentsOf(o.Chain) {
		rules = append(rules, j.rule)
	}
	for _, r := range rules {
		if spn, ok := commentServicePort(r.Comment); ok {
			name, pre119 := strings.CutSuffix(spn, ":")
			if tryProtocols(name, proto, func(spn, p string) bool { return try(spn, p, EvidenceComment, pre119) }) {
				return
			}
		}
	}
	// Any service port known from the objects or the table: the endpoint
	// is gone, the Service (or its chains) not.
	for _, ow := range lk.candidates() {
		if try(ow.servicePort, ow.protocol, 0, false) || lk.pre119 && try(ow.servicePort, ow.protocol, 0, true) {
			return
		}
	}
}
