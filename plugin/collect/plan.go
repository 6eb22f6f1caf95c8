package collect

import (
	"bufio"
	"bytes"
	"regexp"
	"sort"
	"strings"
)

// Probe is what one cheap exec learned about the node before reading it.
type Probe struct {
	// ProxyMode is kube-proxy's /proxyMode answer ("" when unknown).
	ProxyMode string
	// Backend is what `iptables -V` said: "nf_tables", "legacy" or "".
	Backend string
	// NFTTables lists "FAMILY NAME" from `nft list tables`; NFTKnown is
	// false when nft could not be run (no nft in the image).
	NFTTables []string
	NFTKnown  bool
	// ServiceRules counts the rules of the nat KUBE-SERVICES chain on the
	// nf_tables backend (about one per service port), -1 when unknown: it
	// sizes the table before choosing a reader.
	ServiceRules int
	// guessed: NFTTables lists kube-proxy's tables from its mode, not from
	// nft; reading one that is not there is no error.
	guessed bool
}

// ParseServiceRules counts the -A lines of `iptables -S KUBE-SERVICES`.
func ParseServiceRules(out string) int {
	return strings.Count(out, "\n-A ") + map[bool]int{true: 1}[strings.HasPrefix(out, "-A ")]
}

// ParseIPTablesVersion reads "iptables v1.8.9 (nf_tables)".
func ParseIPTablesVersion(out string) string {
	switch {
	case strings.Contains(out, "(nf_tables)"):
		return "nf_tables"
	case strings.Contains(out, "(legacy)"):
		return "legacy"
	case strings.HasPrefix(strings.TrimSpace(out), "iptables v"):
		return "legacy" // before 1.8, iptables was legacy only
	}
	return ""
}

// ParseNFTTables reads `nft list tables` ("table ip kube-proxy" lines).
func ParseNFTTables(out string) []string {
	var tables []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 3 && f[0] == "table" {
			tables = append(tables, f[1]+" "+f[2])
		}
	}
	sort.Strings(tables)
	return tables
}

func (p *Probe) hasAnyNFT(tables ...string) bool {
	for _, fam := range []string{"ip", "ip6"} {
		for _, t := range tables {
			if p.hasNFT(fam, t) {
				return true
			}
		}
	}
	return false
}

func (p *Probe) hasNFT(family, table string) bool {
	for _, t := range p.NFTTables {
		if t == family+" "+table {
			return true
		}
	}
	return false
}

// Reader choices for whole iptables-nft tables.
const (
	// ReaderAuto picks ReaderSave for tables of fewer than
	// AutoSaveBelow KUBE-SERVICES rules (seconds there), ReaderNFT above.
	ReaderAuto = "auto"
	// ReaderSave reads them with iptables-nft-save: comments included
	// (the former owners of deleted Services' chains), but minutes on a
	// big node (facts: 269 s for 312k rules).
	ReaderSave = "save"
	// ReaderNFT reads them with `nft list table`: ~7× faster than
	// iptables-nft-save on big tables and never overflows its stack, but
	// without rule comments (attribution recomputes names instead).
	ReaderNFT = "nft"
)

// AutoSaveBelow is the KUBE-SERVICES size under which ReaderAuto still
// uses iptables-nft-save: a few thousand rules in all, read in seconds.
const AutoSaveBelow = 1000

// Readers are the values of --reader.
var Readers = []string{ReaderAuto, ReaderSave, ReaderNFT}

// useSave says whether whole iptables-nft tables are read with
// iptables-nft-save.
func useSave(p Probe, reader string) bool {
	switch reader {
	case ReaderSave:
		return true
	case ReaderNFT:
		return !p.NFTKnown
	}
	return !p.NFTKnown || p.ServiceRules >= 0 && p.ServiceRules < AutoSaveBelow
}

// FullPlan lists the commands that read every table kube-proxy may have
// written on the node, with the fastest complete reader for each backend,
// plus the other iptables backend so that a mismatch shows.
func FullPlan(p Probe, reader string) []NodeCommand {
	var cmds []NodeCommand
	// nftables mode: kube-proxy's own tables, as JSON (text if the image's
	// nft lacks JSON; the collector retries).
	for _, fam := range []string{"ip", "ip6"} {
		if p.hasNFT(fam, "kube-proxy") {
			c := NFTTable(fam, "kube-proxy", true)
			c.Optional = p.guessed
			cmds = append(cmds, c)
		}
	}
	// iptables on the nf_tables backend (nothing to read when nft shows
	// none of its tables).
	switch {
	case p.NFTKnown && !p.hasAnyNFT("nat", "filter", "mangle"):
	case useSave(p, reader):
		cmds = append(cmds, Save("iptables-nft-save"), Save("ip6tables-nft-save"))
	default:
		for _, fam := range []string{"ip", "ip6"} {
			for _, table := range []string{"nat", "filter", "mangle"} {
				if p.hasNFT(fam, table) {
					cmds = append(cmds, NFTTable(fam, table, false))
				}
			}
		}
	}
	// The legacy backend: fast to read, usually empty; kube-proxy's rules
	// there on an nf_tables node (or the reverse) are the backend mismatch.
	cmds = append(cmds, Save("iptables-legacy-save"), Save("ip6tables-legacy-save"))
	return cmds
}

// Fixed chains a Service's packets pass through, read with its own chains.
var (
	fixedNATChains    = []string{"KUBE-SERVICES", "KUBE-NODEPORTS", "KUBE-MARK-MASQ", "KUBE-POSTROUTING"}
	fixedFilterChains = []string{"KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES", "KUBE-NODEPORTS", "KUBE-PROXY-FIREWALL", "KUBE-FORWARD"}
)

// ChainPlan says how to read only some chains, or ok=false when the whole
// tables are as fast: nftables mode (kube-proxy's tables are compact and
// nft reads them in one go) and the legacy backend (legacy iptables reads
// the whole table for every -S, so one save is faster than a few -S).
func ChainPlan(p Probe) (program6, program4 string, ok bool) {
	if p.ProxyMode == "nftables" || p.ProxyMode == "ipvs" || p.Backend != "nf_tables" {
		return "", "", false
	}
	if !p.NFTKnown || (!p.hasNFT("ip", "nat") && !p.hasNFT("ip6", "nat")) {
		// kube-proxy's rules are not on this backend (a mismatch or not
		// iptables mode): read everything and let the analyses say so.
		return "", "", false
	}
	return "ip6tables-nft", "iptables-nft", true
}

// FirstChains is the first round of a service-scoped read: the fixed entry
// chains and the chains named after the Service's ports and endpoints.
func FirstChains(program string, serviceChains []string) []NodeCommand {
	var cmds []NodeCommand
	for _, c := range fixedNATChains {
		cmds = append(cmds, ListChain(program, "nat", c))
	}
	for _, c := range serviceChains {
		cmds = append(cmds, ListChain(program, "nat", c))
	}
	for _, c := range fixedFilterChains {
		cmds = append(cmds, ListChain(program, "filter", c))
	}
	return cmds
}

var jumpTarget = regexp.MustCompile(`(?:^| )-[jg] (KUBE-[A-Z0-9-]+)`)

// ReferencedChains lists the KUBE- chains that the -S output of a
// Service's own chains jumps to (endpoints the slices no longer have, the
// mark chain): the next round of a service-scoped read. Fixed chains are
// not followed, or KUBE-SERVICES would pull in every Service.
func ReferencedChains(out []byte, owned map[string]bool) []string {
	var found []string
	chain := ""
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) < 2 || (f[0] != "-A" && f[0] != "-N") {
			continue
		}
		chain = f[1]
		if !owned[chain] || f[0] != "-A" {
			continue
		}
		for _, m := range jumpTarget.FindAllStringSubmatch(line, -1) {
			found = append(found, m[1])
		}
	}
	return found
}
