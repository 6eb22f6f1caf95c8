package correlate

import (
	"net/netip"
	"sort"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// Firewall is a load balancer's source-range filter as programmed
// (loadBalancerSourceRanges), against what the Service asks for.
type Firewall struct {
	// Chain holds the filter: KUBE-FW-… (iptables), firewall-… (nftables);
	// "" when kube-proxy wrote none.
	Chain string `json:"chain,omitempty"`
	// Allowed are the sources the chain lets through; Expected those the
	// Service's loadBalancerSourceRanges of this family ask for, plus its
	// load-balancer IPs when a range holds the node's IP (kube-proxy lets
	// the node reach its own VIP).
	Allowed  []string `json:"allowed"`
	Expected []string `json:"expected"`
	Missing  []string `json:"missing,omitempty"`
	Extra    []string `json:"extra,omitempty"`
}

// firewall compares the programmed source ranges with the Service's.
// kube-proxy writes the filter only for load-balancer IPs with ranges (and,
// in iptables mode, only while the service has endpoints).
func firewall(sp *ServicePort, fam kubeproxy.Family, nv NodeView, chain string, allowed []string) *Firewall {
	var ranges, vips []string
	for _, r := range sp.SourceRanges {
		if p, ok := canonicalPrefix(r); ok && kubeproxy.FamilyOfIP(p) == fam {
			ranges = append(ranges, p)
		}
	}
	for _, ip := range sp.LoadBalancerIPs {
		if p, ok := canonicalPrefix(ip); ok && kubeproxy.FamilyOfIP(p) == fam {
			vips = append(vips, p)
		}
	}
	if len(ranges) == 0 || len(vips) == 0 {
		return nil
	}
	fw := &Firewall{Chain: chain, Allowed: []string{}, Expected: append([]string{}, ranges...)}
	// allowFromNode: a range holding the node's IP lets the VIPs in too.
	nodeIPKnown, allowFromNode := false, false
	for _, ip := range nv.IPs {
		a, err := netip.ParseAddr(ip)
		if err != nil || kubeproxy.FamilyOfIP(ip) != fam {
			continue
		}
		nodeIPKnown = true
		for _, r := range ranges {
			if p, err := netip.ParsePrefix(r); err == nil && p.Contains(a) {
				allowFromNode = true
			}
		}
	}
	if allowFromNode {
		fw.Expected = append(fw.Expected, vips...)
	}
	have := map[string]bool{}
	for _, a := range allowed {
		if p, ok := canonicalPrefix(a); ok && !have[p] {
			have[p] = true
			fw.Allowed = append(fw.Allowed, p)
		}
	}
	want := map[string]bool{}
	for _, e := range fw.Expected {
		want[e] = true
		if !have[e] {
			fw.Missing = append(fw.Missing, e)
		}
	}
	isVIP := map[string]bool{}
	for _, v := range vips {
		isVIP[v] = true
	}
	for _, a := range fw.Allowed {
		// Without the node's IP, a VIP among the sources may be kube-proxy's
		// allowFromNode: not called extra.
		if !want[a] && !(isVIP[a] && !nodeIPKnown) {
			fw.Extra = append(fw.Extra, a)
		}
	}
	sort.Strings(fw.Allowed)
	sort.Strings(fw.Expected)
	return fw
}

// canonicalPrefix writes an address or prefix as a masked prefix, hosts
// with their full length (iptables-save prints 10.0.0.1/32, nft 10.0.0.1).
func canonicalPrefix(s string) (string, bool) {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return "", false
		}
		return netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()).String(), true
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return "", false
	}
	return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()).Masked().String(), true
}

// iptFirewall reads the sources KUBE-FW-… lets through to the service.
func iptFirewall(nat *inspect.IPTable, sp *ServicePort, fam kubeproxy.Family, nv NodeView, chain string) *Firewall {
	var allowed []string
	name := ""
	if c := nat.Chain(chain); c != nil {
		name = chain
		for _, r := range c.Rules {
			if r.Source.Set() && !r.Source.Not && r.Target != "" {
				allowed = append(allowed, r.Source.Value)
			}
		}
	}
	return firewall(sp, fam, nv, name, allowed)
}

// nftFirewall reads the `ip saddr != { … } drop` of firewall-….
func nftFirewall(t *inspect.NFTTable, sp *ServicePort, fam kubeproxy.Family, nv NodeView, chain string) *Firewall {
	var allowed []string
	name := ""
	if c := t.Chain(chain); c != nil {
		name = chain
		for _, r := range c.Rules {
			if r.Info.SaddrNot && r.Info.Verdict == "drop" {
				allowed = append(allowed, r.Info.Saddr...)
			}
		}
	}
	return firewall(sp, fam, nv, name, allowed)
}
