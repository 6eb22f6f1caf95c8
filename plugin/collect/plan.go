package collect

import (
	"bytes"
	"slices"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/inspect/iptables"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// Probe is what one cheap exec learned about the node before reading it.
type Probe struct {
	// ProxyMode is kube-proxy's /proxyMode answer ("" when unknown).
	ProxyMode kubeproxy.Mode
	// Backend is what `iptables -V` said; BackendUnknown when it did not.
	Backend kubeproxy.Backend
	// NFTTables lists "FAMILY NAME" of the tables the mode and the chains
	// probed imply; NFTKnown is false when nft could not be run (no nft
	// in the image).
	NFTTables []string
	NFTKnown  bool
	// guessed: NFTTables lists the tables kube-proxy's mode and chains
	// imply, not what nft listed; reading one that is not there is no error.
	guessed bool
	// ipvsWhy: what made the probe take the node for IPVS mode when
	// kube-proxy did not say (ipvs.go); "" otherwise.
	ipvsWhy string
	// fromConfig: ProxyMode is kube-proxy's ConfigMap's, /proxyMode did
	// not answer; the read confirms it (readProbedMode).
	fromConfig bool
}

// ParseIPTablesVersion reads "iptables v1.8.9 (nf_tables)".
func ParseIPTablesVersion(out string) kubeproxy.Backend {
	switch {
	case strings.Contains(out, "(nf_tables)"):
		return kubeproxy.BackendNFT
	case strings.Contains(out, "(legacy)"):
		return kubeproxy.BackendLegacy
	case strings.HasPrefix(strings.TrimSpace(out), "iptables v"):
		return kubeproxy.BackendLegacy // before 1.8, iptables was legacy only
	}
	return kubeproxy.BackendUnknown
}

// nftTableName is a table as NFTTables lists it: "ip6 nat".
func nftTableName(f kubeproxy.Family, table string) string {
	return string(nftFamily(f)) + " " + table
}

func (p *Probe) hasAnyNFT(f kubeproxy.Family, tables ...string) bool {
	for _, t := range tables {
		if p.hasNFT(f, t) {
			return true
		}
	}
	return false
}

func (p *Probe) hasNFT(f kubeproxy.Family, table string) bool {
	return slices.Contains(p.NFTTables, nftTableName(f, table))
}

// ipFamilies are the families read, IPv4 first.
var ipFamilies = []kubeproxy.Family{kubeproxy.IPv4, kubeproxy.IPv6}

// iptablesTables are the tables kube-proxy writes through iptables.
var iptablesTables = []string{kubeproxy.TableNAT, kubeproxy.TableFilter, kubeproxy.TableMangle}

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
// plus the other iptables backend so that a mismatch shows, and in IPVS
// mode the IPVS state (IPVSCommands).
func FullPlan(p Probe, reader string) []NodeCommand {
	var cmds []NodeCommand
	// nftables mode: kube-proxy's own tables, as JSON (text if the image's
	// nft lacks JSON; the collector retries).
	for _, fam := range ipFamilies {
		if p.hasNFT(fam, kubeproxy.NFTTable) {
			c := NFTTable(fam, kubeproxy.NFTTable, true)
			c.Optional = p.guessed
			cmds = append(cmds, c)
		}
	}
	// iptables on the nf_tables backend (nothing to read when nft shows
	// none of its tables).
	for _, fam := range ipFamilies {
		if p.NFTKnown && !p.hasAnyNFT(fam, iptablesTables...) {
			continue
		}
		var viaNFT []NodeCommand
		for _, table := range iptablesTables {
			if p.hasNFT(fam, table) {
				c := NFTTable(fam, table, false)
				c.Optional = p.guessed
				viaNFT = append(viaNFT, c)
			}
		}
		save := Save(fam, kubeproxy.BackendNFT)
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
	for _, fam := range ipFamilies {
		cmds = append(cmds, Save(fam, kubeproxy.BackendLegacy))
	}
	// IPVS mode: the virtual servers and the sets its rules match on, in
	// the same exec.
	if p.ProxyMode == kubeproxy.ModeIPVS {
		cmds = append(cmds, IPVSCommands()...)
	}
	return cmds
}

// The fixed chains a Service's packets pass through, read with its own
// chains: kube-proxy's entry chains and the masquerade chains in nat, its
// filter chains (each is one kube-proxy counts in that table).
var (
	// The built-in chains are where a connection enters the tables:
	// without them a walk of the Service's rules would start nowhere.
	fixedNATChains = []string{
		"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING",
		kubeproxy.ChainServices, kubeproxy.ChainNodePorts, kubeproxy.ChainMarkMasq, kubeproxy.ChainPostrouting,
	}
	fixedFilterChains = []string{
		"INPUT", "FORWARD", "OUTPUT",
		kubeproxy.ChainServices, kubeproxy.ChainExternalServices, kubeproxy.ChainNodePorts,
		kubeproxy.ChainProxyFirewall, kubeproxy.ChainForward, kubeproxy.ChainFirewall,
	}
	// mangle has no kube-proxy rules a packet meets, but other programs'
	// marks there decide kube-proxy's: its built-in chains are read too.
	fixedMangleChains = []string{"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"}
)

// ChainPlan says whether reading only some chains is faster than the whole
// tables. It is not in nftables mode (kube-proxy's tables are compact and
// nft reads them in one go) nor on the legacy backend (legacy iptables
// reads the whole table for every -S, so one save is faster than a few -S).
func ChainPlan(p Probe) bool {
	if p.ProxyMode == kubeproxy.ModeNFTables || p.ProxyMode == kubeproxy.ModeIPVS || p.Backend != kubeproxy.BackendNFT {
		return false
	}
	// Without a nat table on nf_tables, kube-proxy's rules are not on this
	// backend (a mismatch, or not iptables mode): read everything and let
	// the analyses say so.
	return p.NFTKnown && (p.hasNFT(kubeproxy.IPv4, kubeproxy.TableNAT) || p.hasNFT(kubeproxy.IPv6, kubeproxy.TableNAT))
}

// FirstChains is the first round of a service-scoped read of one family on
// iptables-nft: the fixed entry chains and the chains named after the
// Service's ports and endpoints.
func FirstChains(f kubeproxy.Family, serviceChains []string) []NodeCommand {
	var cmds []NodeCommand
	for _, c := range fixedNATChains {
		cmds = append(cmds, ListChain(f, kubeproxy.BackendNFT, kubeproxy.TableNAT, c))
	}
	for _, c := range serviceChains {
		cmds = append(cmds, ListChain(f, kubeproxy.BackendNFT, kubeproxy.TableNAT, c))
	}
	for _, c := range fixedFilterChains {
		cmds = append(cmds, ListChain(f, kubeproxy.BackendNFT, kubeproxy.TableFilter, c))
	}
	for _, c := range fixedMangleChains {
		cmds = append(cmds, ListChain(f, kubeproxy.BackendNFT, kubeproxy.TableMangle, c))
	}
	return cmds
}

// parseListedChains reads the output of `iptables -t TABLE -S CHAIN` (one
// or more, of one table) with the iptables parser, wrapped in *TABLE …
// COMMIT as the save-format files of a service-scoped read are.
func parseListedChains(table string, outputs ...[]byte) (*inspect.IPTable, error) {
	var b bytes.Buffer
	b.WriteString("*" + table + "\n")
	for _, out := range outputs {
		b.Write(out)
		if len(out) > 0 && out[len(out)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	b.WriteString("COMMIT\n")
	rs, err := iptables.Parse(&b, "iptables -t "+table+" -S")
	if err != nil {
		return nil, err
	}
	return rs.IPTables[0], nil
}

// ReferencedChains lists, once each and in rule order, the KUBE- chains
// that the owned chains of t (a Service's own chains) jump to: endpoints
// the slices no longer name, the mark chain. The rules of fixed chains are
// never followed, or KUBE-SERVICES would pull in every Service.
func ReferencedChains(t *inspect.IPTable, owned map[string]bool) []string {
	var found []string
	seen := map[string]bool{}
	for _, c := range t.Chains {
		if !owned[c.Name] || kubeproxy.Fixed(c.Name) != nil {
			continue
		}
		for _, r := range c.Rules {
			if strings.HasPrefix(r.Target, kubeproxy.PrefixKube) && !seen[r.Target] {
				seen[r.Target] = true
				found = append(found, r.Target)
			}
		}
	}
	return found
}
