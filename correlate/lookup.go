package correlate

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// Lookup is what a chain name, asked for by itself, turns out to be.
type Lookup struct {
	// Query is the name as asked: a full chain name, or its hash part (16
	// characters for iptables, 8 for nftables).
	Query string `json:"query"`
	ChainOwner
	// InDump: the chain is in the ruleset; false when only the objects
	// (recomputing kube-proxy's names) say whose it would be.
	InDump bool `json:"inDump"`
	// ReferencedBy are the chains (and nftables maps) that jump to it.
	ReferencedBy []string `json:"referencedBy,omitempty"`
}

var (
	iptablesChainName = regexp.MustCompile(`^KUBE-(SVC|SVL|EXT|FW|SEP|XLB)-([A-Z2-7]{16})$`)
	iptablesHash      = regexp.MustCompile(`^[A-Z2-7]{16}$`)
	nftHash           = regexp.MustCompile(`^[A-Z2-7]{8}$`)
)

// LooksLikeChain reports whether s is a kube-proxy per-service chain name
// (iptables or nftables) or the hash part of one.
func LooksLikeChain(s string) bool {
	if iptablesChainName.MatchString(s) || iptablesHash.MatchString(s) || nftHash.MatchString(s) {
		return true
	}
	_, ok := ParseNFTName(s)
	return ok
}

// LookupChains answers for each name which kube-proxy chain it is: from the
// ruleset's attribution when the chain is there (res from Attribute on rs),
// else from the objects alone by recomputing kube-proxy's names. A name
// nothing matches is returned in unknown.
func LookupChains(names []string, rs *inspect.Ruleset, res *Result, objs *Objects) (found []Lookup, unknown []string) {
	var idx *nameIndex
	for _, q := range names {
		var hits []Lookup
		if res != nil {
			for _, c := range res.Chains {
				if chainMatches(q, c.Chain) {
					hits = append(hits, Lookup{Query: q, ChainOwner: c, InDump: true})
				}
			}
		}
		if len(hits) == 0 && objs != nil {
			if idx == nil {
				idx = newNameIndex(objs)
			}
			hits = idx.lookup(q)
		}
		if len(hits) == 0 {
			unknown = append(unknown, q)
			continue
		}
		for i := range hits {
			if hits[i].InDump {
				hits[i].ReferencedBy = referrers(rs, hits[i].ChainOwner)
			}
		}
		found = append(found, hits...)
	}
	return found, unknown
}

// chainMatches: the full name, or its hash part.
func chainMatches(q, chain string) bool {
	if q == chain {
		return true
	}
	if m := iptablesChainName.FindStringSubmatch(chain); m != nil {
		return q == m[2]
	}
	if n, ok := ParseNFTName(chain); ok {
		return q == n.Hash
	}
	return false
}

// nameIndex maps every chain name kube-proxy would write for the objects
// (both modes) to its owner.
type nameIndex struct {
	byName map[string][]ChainOwner
	byHash map[string][]ChainOwner
}

func newNameIndex(objs *Objects) *nameIndex {
	idx := &nameIndex{byName: map[string][]ChainOwner{}, byHash: map[string][]ChainOwner{}}
	add := func(name, hash string, o ChainOwner) {
		o.Chain = name
		idx.byName[name] = append(idx.byName[name], o)
		idx.byHash[hash] = append(idx.byHash[hash], o)
	}
	for _, sp := range objs.ServicePorts() {
		if !sp.Proxied {
			continue
		}
		spn, proto := sp.String(), sp.Proto()
		owner := ChainOwner{ServicePort: spn, Protocol: string(sp.Protocol), Evidence: EvidenceHash}
		ipt := &TableRef{Mode: string(kubeproxy.ModeIPTables), Table: kubeproxy.TableNAT}
		nft := &TableRef{Mode: string(kubeproxy.ModeNFTables), Table: kubeproxy.NFTTable}
		h := PortProtoHash(spn, proto)
		base := NFTServiceBase(sp.Namespace, sp.Name, proto, sp.PortName)
		for _, k := range []struct {
			prefix, nftPrefix string
			kind              kubeproxy.ChainKind
		}{
			{kubeproxy.PrefixService, kubeproxy.NFTPrefixService, kubeproxy.KindService},
			{kubeproxy.PrefixLocal, kubeproxy.NFTPrefixLocal, kubeproxy.KindLocal},
			{kubeproxy.PrefixExternal, kubeproxy.NFTPrefixExternal, kubeproxy.KindExternal},
			{kubeproxy.PrefixFirewall, kubeproxy.NFTPrefixFirewall, kubeproxy.KindFirewall},
		} {
			if !sp.usesChain(k.kind) {
				continue
			}
			o := owner
			o.TableRef, o.Kind = ipt, k.kind
			add(k.prefix+h, h, o)
			o.TableRef = nft
			add(k.nftPrefix+base, base[:8], o)
		}
		for _, ep := range sp.Endpoints {
			s := ep.String()
			o := owner
			o.Endpoint, o.Kind = s, kubeproxy.KindEndpoint
			o.TableRef = ipt
			eh := EndpointHash(spn, proto, s)
			add(kubeproxy.PrefixEndpoint+eh, eh, o)
			o.TableRef = nft
			eb := NFTEndpointBase(sp.Namespace, sp.Name, proto, sp.PortName, s)
			add(kubeproxy.NFTPrefixEndpoint+eb, eb[:8], o)
		}
	}
	return idx
}

func (idx *nameIndex) lookup(q string) []Lookup {
	owners := idx.byName[q]
	if len(owners) == 0 {
		hash := q
		if m := iptablesChainName.FindStringSubmatch(q); m != nil {
			hash = m[2]
		} else if n, ok := ParseNFTName(q); ok {
			hash = n.Hash
		}
		if iptablesChainName.MatchString(q) {
			// KUBE-SVC-X asked, KUBE-EXT-X known: same hash, other kind.
			prefix := q[:len(q)-16]
			for _, o := range idx.byHash[hash] {
				if strings.HasPrefix(o.Chain, prefix) {
					owners = append(owners, o)
				}
			}
		} else if _, nft := ParseNFTName(q); !nft {
			owners = idx.byHash[hash]
		}
	}
	out := make([]Lookup, 0, len(owners))
	for _, o := range owners {
		out = append(out, Lookup{Query: q, ChainOwner: o})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Chain < out[j].Chain })
	return out
}

// referrers lists the chains of the chain's table that jump or go to it,
// and the nftables maps whose elements do.
func referrers(rs *inspect.Ruleset, c ChainOwner) []string {
	var out []string
	seen := map[string]bool{}
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	if rs == nil || c.TableRef == nil {
		return nil
	}
	for _, t := range rs.IPTables {
		if c.Mode != string(kubeproxy.ModeIPTables) || string(t.Family) != c.Family || t.Name != c.Table {
			continue
		}
		for _, ch := range t.Chains {
			for _, r := range ch.Rules {
				if r.Target == c.Chain {
					add(ch.Name)
				}
			}
		}
	}
	for _, t := range rs.NFTables {
		if c.Mode != string(kubeproxy.ModeNFTables) || string(t.IPFamily()) != c.Family || t.Name != c.Table {
			continue
		}
		for _, ch := range t.Chains {
			for _, r := range ch.Rules {
				for _, to := range append(append([]string{}, r.Info.Jumps...), r.Info.Gotos...) {
					if to == c.Chain {
						add(ch.Name)
					}
				}
				for _, to := range r.Info.NumgenTargets {
					if to == c.Chain && to != "" {
						add(ch.Name)
					}
				}
			}
		}
		for _, m := range t.Maps {
			for _, el := range m.Elements {
				if verdictTarget(el) == c.Chain {
					add("map " + m.Name)
					break
				}
			}
		}
	}
	return out
}

// UnknownChainError says a chain name matched nothing, and why that can be.
func UnknownChainError(names []string, haveDump, haveObjects bool) error {
	why := "no chain of the dump and no Service port or endpoint of the objects has that name"
	switch {
	case !haveDump && haveObjects:
		why = "no Service port or endpoint of the objects hashes to it (deleted? a bundle collected before then knows it)"
	case haveDump && !haveObjects:
		why = "the dump has no such chain (pass --from-objects to recompute the names of chains the dump lacks)"
	}
	return fmt.Errorf("unknown chain %s: %s", strings.Join(names, ", "), why)
}

// ServiceOfChain says which Service the chain lookups of one name point to,
// for explaining it: its namespace, name and port name. It fails when the
// chain is stale (its Service or endpoint is gone), unattributed, or shared
// by the hash part of several Service ports.
func ServiceOfChain(query string, found []Lookup) (namespace, name, port string, err error) {
	owners := map[string]bool{}
	var stale []string
	for _, l := range found {
		switch {
		case l.Stale:
			stale = append(stale, l.Chain)
		case l.ServicePort != "":
			owners[l.ServicePort] = true
		}
	}
	switch {
	case len(owners) == 1:
		for spn := range owners {
			namespace, name, port, _ = ParseServicePortName(spn)
		}
		return namespace, name, port, nil
	case len(owners) > 1:
		list := make([]string, 0, len(owners))
		for spn := range owners {
			list = append(list, spn)
		}
		sort.Strings(list)
		return "", "", "", fmt.Errorf("%s matches chains of several Service ports (%s): pass the full chain name", query, strings.Join(list, ", "))
	case len(stale) > 0:
		belonged := ""
		for _, l := range found {
			if l.ServicePort != "" {
				belonged = " (it belonged to " + l.ServicePort + ")"
				break
			}
		}
		return "", "", "", &NoCurrentServiceError{fmt.Sprintf("%s is stale: no current Service port or endpoint owns it%s; see `stale` for why it is still there", strings.Join(stale, ", "), belonged)}
	}
	return "", "", "", fmt.Errorf("%s is a kube-proxy chain no Service could be found for: `map %s` shows what is known of it", query, query)
}

// usesChain says whether kube-proxy writes the per-service chain of that
// kind for the port, from its traffic policies and type (both modes, as
// the proxiers decide: usesClusterPolicyChain, usesLocalPolicyChain,
// usesExternalTrafficChain, usesFWChain), leaving endpoints aside: which
// are local depends on the node.
func (sp *ServicePort) usesChain(kind kubeproxy.ChainKind) bool {
	external := sp.NodePort > 0 || len(sp.ExternalIPs) > 0 || len(sp.LoadBalancerIPs) > 0
	switch kind {
	case kubeproxy.KindService:
		return !sp.InternalLocal || external && !sp.ExternalLocal
	case kubeproxy.KindLocal:
		return sp.InternalLocal || external && sp.ExternalLocal
	case kubeproxy.KindExternal:
		return external
	case kubeproxy.KindFirewall:
		return len(sp.LoadBalancerIPs) > 0 && len(sp.SourceRanges) > 0
	}
	return true
}
