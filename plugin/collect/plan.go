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
	// guessed: NFTTables lists the tables kube-proxy's mode and chains
	// imply, not what nft listed; reading one that is not there is no error.
	guessed bool
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

func (p *Probe) hasAnyNFT(family string, tables ...string) bool {
	for _, t := range tables {
		if p.hasNFT(family, t) {
			return true
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

// Reader choices for whole iptables-nft tables. Measured on the e2e
// cluster (kube-proxy v1.37.2, 5,000 Services × 20 endpoints and 2,000 more
// lingering, 380k nat rules, Debian iptables 1.8.9 and nft 1.0.6):
// iptables-nft-save -t nat took 6.2 s, nft list table ip nat 77 s.
const (
	// ReaderAuto reads with iptables-nft-save and, should that fail (it
	// has been seen to overflow its stack on big tables; the plugin lifts
	// the limit first), again with nft.
	ReaderAuto = "auto"
	// ReaderSave reads with iptables-nft-save only: rule comments
	// included, which name the former owners of a deleted Service's chains.
	ReaderSave = "save"
	// ReaderNFT reads with `nft list table`: the rules as nft shows them,
	// without comments (attribution recomputes names instead).
	ReaderNFT = "nft"
)

// Readers are the values of --reader.
var Readers = []string{ReaderAuto, ReaderSave, ReaderNFT}

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
	for _, fam := range []string{"ip", "ip6"} {
		if p.NFTKnown && !p.hasAnyNFT(fam, "nat", "filter", "mangle") {
			continue
		}
		var viaNFT []NodeCommand
		for _, table := range []string{"nat", "filter", "mangle"} {
			if p.hasNFT(fam, table) {
				c := NFTTable(fam, table, false)
				c.Optional = p.guessed
				viaNFT = append(viaNFT, c)
			}
		}
		save := Save(map[string]string{"ip": "iptables-nft-save", "ip6": "ip6tables-nft-save"}[fam])
		switch {
		case reader == ReaderNFT && len(viaNFT) > 0:
			cmds = append(cmds, viaNFT...)
		case reader == ReaderSave:
			cmds = append(cmds, save)
		default:
			save.Fallback = viaNFT
			cmds = append(cmds, save)
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
func ChainPlan(p Probe) bool {
	if p.ProxyMode == "nftables" || p.ProxyMode == "ipvs" || p.Backend != "nf_tables" {
		return false
	}
	// Without a nat table on nf_tables, kube-proxy's rules are not on this
	// backend (a mismatch, or not iptables mode): read everything and let
	// the analyses say so.
	return p.NFTKnown && (p.hasNFT("ip", "nat") || p.hasNFT("ip6", "nat"))
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
