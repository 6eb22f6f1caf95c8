package inspect

import "github.com/proxyrules/kubectl-proxyrules/inspect/ipvs"

// FormatIPVS is an IPVS listing: /proc/net/ip_vs, ipvsadm -Ln (--stats,
// --rate) or -Sn; the Dump's Version names which (ipvs.Format).
const FormatIPVS Format = "ipvs"

// IPVSState is the IPVS side of a node in IPVS mode, beside its iptables
// rules: the virtual server table (joined over every form read).
type IPVSState struct {
	Table *ipvs.Table
}

// mergeIPVS adds other's IPVS state to r's.
func (r *Ruleset) mergeIPVS(other *IPVSState) {
	if other == nil {
		return
	}
	if r.IPVS == nil {
		r.IPVS = &IPVSState{}
	}
	if other.Table != nil {
		r.IPVS.Table = ipvs.Join(r.IPVS.Table, other.Table)
	}
}

// HasIPVS: an IPVS table was read (it may hold no virtual server).
func (r *Ruleset) HasIPVS() bool { return r != nil && r.IPVS != nil && r.IPVS.Table != nil }

// IPVSRuleset is the ruleset of one IPVS listing read from source.
func IPVSRuleset(t *ipvs.Table, source string) *Ruleset {
	reals := 0
	for _, s := range t.Services {
		reals += len(s.RealServers)
	}
	return &Ruleset{
		Dumps: []Dump{{Source: source, Format: FormatIPVS, Version: string(t.Format), Rules: len(t.Services) + reals, Warnings: t.Warnings}},
		IPVS:  &IPVSState{Table: t},
	}
}
