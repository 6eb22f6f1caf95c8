package collect

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/inspect/ifaddr"
	"github.com/proxyrules/kubectl-proxyrules/inspect/ipvs"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// IPVS mode's own state, read with what the kube-proxy image has (cat and
// ipset; no ipvsadm, no ip): the virtual server table from /proc (per
// network namespace: a hostNetwork pod reads the node's), the ipsets
// kube-proxy's iptables rules match on, whether kube-ipvs0 exists, and the
// node's local addresses (so whether each Service address is bound) from
// the kernel's routing table and IPv6 address list. Its sysctls
// (net/ipv4/vs/*) are read with the conntrack sysctls.

const (
	ipvsProc = "/proc/net/ip_vs"
	// ipvsLink is the dummy link the IPVS proxier binds Service IPs to.
	ipvsLink = "kube-ipvs0"
	// ipvsLinkState exists when the link does; a dummy link says "unknown".
	ipvsLinkState = "/sys/class/net/" + ipvsLink + "/operstate"
	// maxIPVSOutput bounds the table and the sets as they stream: 5,000
	// Services of 20 endpoints are some 6 MB of /proc/net/ip_vs (a NodePort
	// adds a virtual server per node address) and less of ipset save.
	maxIPVSOutput = 64 << 20
	// procFIBTrie lists every local IPv4 address as a "/32 host LOCAL"
	// leaf of the local table (kube-ipvs0's too: /sys has no IPv4
	// address); procIfInet6 every IPv6 address with its link's name.
	procFIBTrie = ifaddr.ProcFIBTrie
	procIfInet6 = ifaddr.ProcIfInet6
)

// IDs of the IPVS reads, and so their files' names (an ID has no "_").
const (
	idIPVSTable = "proc-net-ip-vs"
	idIPSetSave = "ipset-save"
	idIPVSLink  = "kube-ipvs0-operstate"
	idFIBTrie   = "proc-net-fib-trie"
	idIfInet6   = "proc-net-if-inet6"
)

// IPVSTableCommand reads the virtual servers and their real servers. It
// may fail: without the ip_vs module there is no file (IPVSRead says so).
func IPVSTableCommand() NodeCommand {
	return NodeCommand{ID: idIPVSTable, Program: "cat", Argv: []string{"cat", ipvsProc}, Kind: KindRuleset, Optional: true}
}

// IPSetSaveCommand lists every set with its members ("create", "add"
// lines). ipset reads over nfnetlink, which takes CAP_NET_ADMIN for any
// message, reads too: the capability iptables-nft and nft already need.
func IPSetSaveCommand() NodeCommand {
	return NodeCommand{ID: idIPSetSave, Program: "ipset", Argv: []string{"ipset", "save"}, Kind: KindRuleset}
}

// IPVSLinkCommand says whether kube-ipvs0 exists. Its addresses are read
// by LocalAddrsCommands (the image has no ip, and /sys does not list a
// link's IPv4 addresses).
func IPVSLinkCommand() NodeCommand {
	return NodeCommand{ID: idIPVSLink, Program: "cat", Argv: []string{"cat", ipvsLinkState}, Kind: KindInfo, Optional: true}
}

// FIBTrieCommand reads the kernel's IPv4 routing tables, of which the
// local addresses are kept (ifaddr.ReadFIBTrie). A ruleset file: every
// command reads it through input.Read, into Ruleset.IPVS.Local. Some MB
// for 50,000 cluster IPs (each leaf printed under Main: and Local:), and
// capped as the table is.
func FIBTrieCommand() NodeCommand {
	return NodeCommand{ID: idFIBTrie, Program: "cat", Argv: []string{"cat", procFIBTrie}, Kind: KindRuleset}
}

// IfInet6Command reads every IPv6 address with its link. It may fail: a
// node booted with IPv6 disabled has no file.
func IfInet6Command() NodeCommand {
	return NodeCommand{ID: idIfInet6, Program: "cat", Argv: []string{"cat", procIfInet6}, Kind: KindRuleset, Optional: true}
}

// IPVSCommands are the reads FullPlan adds on a node in IPVS mode.
func IPVSCommands() []NodeCommand {
	return []NodeCommand{IPVSTableCommand(), IPSetSaveCommand(), IPVSLinkCommand(), FIBTrieCommand(), IfInet6Command()}
}

// ipvsOutputCapped are the reads capped at maxIPVSOutput as they stream.
func ipvsOutputCapped(id string) bool {
	return id == idIPVSTable || id == idIPSetSave || id == idFIBTrie || id == idIfInet6
}

// allowedIPVS accepts exactly the IPVS reads: no other file (not the
// unbounded /proc/net/ip_vs_conn), no other ipset command.
func allowedIPVS(argv []string) bool {
	if len(argv) == 2 && argv[0] == "cat" {
		switch argv[1] {
		case ipvsProc, ipvsLinkState, procFIBTrie, procIfInet6:
			return true
		}
	}
	return slices.Equal(argv, []string{"ipset", "save"})
}

// IPVSRead is what a bundle's manifest says of the IPVS read.
type IPVSRead struct {
	// Why the node was read as IPVS mode: kube-proxy's /proxyMode, or
	// what the probe found when it did not answer.
	Why string `json:"why"`
	// Table is the file of /proc/net/ip_vs, "" when the node has none.
	Table string `json:"table,omitempty"`
	// Sets is the file of ipset save, "" when it failed.
	Sets string `json:"sets,omitempty"`
	// Link is kube-ipvs0's operstate ("unknown" for a dummy link that
	// is up), "" when the node has no kube-ipvs0.
	Link string `json:"link,omitempty"`
	// Local is the file of /proc/net/fib_trie, LocalIPv6 of
	// /proc/net/if_inet6: the node's local addresses; "" when not read.
	Local     string `json:"local,omitempty"`
	LocalIPv6 string `json:"localIPv6,omitempty"`
	// Addresses says how kube-ipvs0's addresses are known: read from the
	// kernel's local routing table, or (when that failed) not.
	Addresses string   `json:"addresses"`
	Notes     []string `json:"notes,omitempty"`
}

// IPVSRead.Addresses: read (IPv4 and IPv6, or IPv4 only), or not.
const (
	ipvsAddressesRead   = "read from the kernel's local routing table (" + procFIBTrie + ": every local IPv4 address, its link not said) and " + procIfInet6 + " (IPv6, kube-ipvs0's by name); the kube-proxy image has no ip"
	ipvsAddressesIPv4   = "read from the kernel's local routing table (" + procFIBTrie + ": every local IPv4 address, its link not said); IPv6 not read (" + procIfInet6 + " absent: IPv6 disabled)"
	ipvsAddressesIPv6   = "IPv6 read from " + procIfInet6 + " (kube-ipvs0's by name); IPv4 not read (" + procFIBTrie + " failed, and the kube-proxy image has no ip): whether each IPv4 Service address is bound is unknown"
	ipvsAddressesNotRun = "not read (" + procFIBTrie + " and " + procIfInet6 + " failed, and the kube-proxy image has no ip): whether each Service address is bound is unknown"
)

// ipvsProbeCommands are what the probe adds when kube-proxy did not say
// its mode: the table (a file only with the module loaded) and
// KUBE-NODE-PORT, a chain only the IPVS proxier writes, through the
// image's wrapper (the node's backend, whichever it is).
func ipvsProbeCommands() []NodeCommand {
	return []NodeCommand{IPVSTableCommand(),
		ListChain(kubeproxy.IPv4, kubeproxy.BackendUnknown, kubeproxy.TableNAT, kubeproxy.ChainIPVSNodePort),
		ListChain(kubeproxy.IPv6, kubeproxy.BackendUnknown, kubeproxy.TableNAT, kubeproxy.ChainIPVSNodePort)}
}

// detectIPVS sets IPVS mode from what ipvsProbeCommands printed (outs and
// rcs in their order), and says why in p.ipvsWhy.
func (p *Probe) detectIPVS(outs []bytes.Buffer, rcs []int) {
	switch {
	case rcs[1] == 0 || rcs[2] == 0:
		p.ipvsWhy = "kube-proxy did not say its mode; the nat table has chain " + kubeproxy.ChainIPVSNodePort + ", which only the IPVS proxier writes"
	case rcs[0] == 0 && hasVirtualServers(outs[0].Bytes()):
		p.ipvsWhy = "kube-proxy did not say its mode; " + ipvsProc + " lists virtual servers"
	default:
		return
	}
	p.ProxyMode = kubeproxy.ModeIPVS
}

// canUseIPVSProbe is the virtual server kube-proxy's CanUseIPVSProxier
// creates and deletes (198.51.100.0:20000): a leftover of it is no sign
// of IPVS mode.
var canUseIPVSProbe = netip.MustParseAddrPort("198.51.100.0:20000")

// hasVirtualServers says whether a /proc/net/ip_vs lists a virtual server
// besides the probe's leftover.
func hasVirtualServers(out []byte) bool {
	t, err := ipvs.Read(bytes.NewReader(out), ipvs.DefaultLimits())
	if err != nil {
		return false
	}
	return slices.ContainsFunc(t.Services, func(s ipvs.Service) bool { return s.Addr != canUseIPVSProbe })
}

// noteIPVS records in the manifest what the IPVS reads of a full read
// found: a node without /proc/net/ip_vs (no ip_vs module) is a note, not
// an error.
func (w *bundleWriter) noteIPVS(p Probe) {
	why := p.ipvsWhy
	if why == "" {
		why = "kube-proxy's /proxyMode: " + string(kubeproxy.ModeIPVS)
	}
	r := &IPVSRead{Why: why}
	w.man.IPVS = r
	for _, f := range w.files() {
		switch f.Path {
		case IPVSTableCommand().FileName():
			if f.Error == "" {
				r.Table = f.Path
			} else {
				r.Notes = append(r.Notes, ipvsProc+" is absent ("+f.Error+"): the ip_vs module is not loaded, so the node has no virtual servers")
			}
		case IPSetSaveCommand().FileName():
			if f.Error == "" {
				r.Sets = f.Path
			} else {
				r.Notes = append(r.Notes, "ipset save failed ("+f.Error+"): the sets kube-proxy's rules match on are unknown")
			}
		case IPVSLinkCommand().FileName():
			if f.Error != "" {
				r.Notes = append(r.Notes, "the node has no "+ipvsLink+" link ("+ipvsLinkState+" is absent): no cluster IP is local to it")
				continue
			}
			if data, err := os.ReadFile(filepath.Join(w.dir, f.Path)); err == nil {
				r.Link = strings.TrimSpace(string(data))
			}
		case FIBTrieCommand().FileName():
			if f.Error == "" {
				r.Local = f.Path
			}
		case IfInet6Command().FileName():
			if f.Error == "" {
				r.LocalIPv6 = f.Path
			}
		}
	}
	switch {
	case r.Local == "" && r.LocalIPv6 == "":
		r.Addresses = ipvsAddressesNotRun
	case r.Local == "":
		r.Addresses = ipvsAddressesIPv6
	case r.LocalIPv6 == "":
		r.Addresses = ipvsAddressesIPv4
	default:
		r.Addresses = ipvsAddressesRead
	}
}
