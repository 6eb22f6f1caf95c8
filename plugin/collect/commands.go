// Package collect reads a node's rules and kube-proxy's endpoints through a
// short-lived debug pod (or kube-proxy's own pod), and writes them, with the
// API objects they are joined with, into a bundle that every command reads.
//
// On a node the plugin only reads: every command it can run there is built
// by this file's constructors and checked by Allowed before it is executed.
package collect

import (
	"fmt"
	"regexp"
	"strings"

	"sigs.k8s.io/knftables"

	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// A NodeCommand is one read-only command the plugin runs on a node. ID names
// its output in a bundle ("iptables-nft-save", "nft-ip-kube-proxy", ...).
// The constructors below build Argv from the typed fields, so that callers
// read what a command lists from the fields, never from argv positions.
type NodeCommand struct {
	ID string
	// Program is the binary: "iptables-nft-save", "ip6tables-nft", "nft".
	Program string
	// Family is the IP family whose rules the command reads; "" for the
	// commands that read none (iptables -V, nft --version).
	Family kubeproxy.Family
	// Backend is the iptables backend an iptables program reads; unknown
	// for the image's wrapper (plain "iptables", which picks the node's)
	// and for nft.
	Backend kubeproxy.Backend
	// Table and Chain narrow the command to one table, or one chain of
	// it; "" reads all.
	Table, Chain string
	// Argv is what runs on the node. Allowed is the gate: a command whose
	// Argv it refuses is never sent.
	Argv []string
	// Kind says what the output is: KindRuleset (a dump every parser
	// reads), KindChains (iptables -S of single chains), or KindInfo.
	Kind string
	// BigStack raises the stack limit first: iptables-nft-save of a large
	// nat table overflows the default 8 MB stack (it recurses per rule).
	BigStack bool
	// Optional: the command may fail (a table that may not exist) without
	// a warning; the manifest still records its exit status.
	Optional bool
	// Fallback is run instead when the command fails: nft -j as text,
	// iptables-nft-save as nft list table.
	Fallback []NodeCommand
}

// Kinds of output.
const (
	KindRuleset = "ruleset"
	KindChains  = "chains"
	KindInfo    = "info"
)

// The programs the plugin may run on a node, all of which only read when
// given the arguments Allowed accepts.
var savePrograms = map[string]bool{
	"iptables-save": true, "ip6tables-save": true,
	"iptables-nft-save": true, "ip6tables-nft-save": true,
	"iptables-legacy-save": true, "ip6tables-legacy-save": true,
}

var listPrograms = map[string]bool{
	"iptables": true, "ip6tables": true,
	"iptables-nft": true, "ip6tables-nft": true,
	"iptables-legacy": true, "ip6tables-legacy": true,
}

var (
	chainName   = regexp.MustCompile(`^(KUBE-[A-Z0-9-]{1,24}|PREROUTING|INPUT|FORWARD|OUTPUT|POSTROUTING)$`)
	nftObject   = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_./-]{0,255}$`)
	nftFamilies = map[string]bool{"ip": true, "ip6": true, "inet": true}
	iptTables   = map[string]bool{kubeproxy.TableNAT: true, kubeproxy.TableFilter: true, kubeproxy.TableMangle: true}
	nftTables   = map[string]bool{kubeproxy.NFTTable: true, kubeproxy.TableNAT: true, kubeproxy.TableFilter: true, kubeproxy.TableMangle: true}
	validateID  = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9.-]{0,80}$`)
)

// Allowed says whether argv is one of the read-only commands the plugin may
// run, and why not otherwise. It is the only gate to a node: the executor
// refuses anything it rejects.
func Allowed(argv []string) error {
	if len(argv) == 0 {
		return fmt.Errorf("empty command")
	}
	prog, args := argv[0], argv[1:]
	bad := func() error {
		return fmt.Errorf("not a read-only command the plugin may run: %q", strings.Join(argv, " "))
	}
	switch {
	case savePrograms[prog]:
		// iptables-save [-t TABLE]
		switch len(args) {
		case 0:
			return nil
		case 2:
			if args[0] == "-t" && iptTables[args[1]] {
				return nil
			}
		}
		return bad()
	case listPrograms[prog]:
		// iptables -V | iptables -t TABLE -S CHAIN
		if len(args) == 1 && args[0] == "-V" {
			return nil
		}
		if len(args) == 4 && args[0] == "-t" && iptTables[args[1]] && args[2] == "-S" && chainName.MatchString(args[3]) {
			return nil
		}
		return bad()
	case prog == "nft":
		// nft --version | nft [-j] list table FAMILY NAME |
		// nft [-j] list chain FAMILY TABLE NAME | nft -t list sets table FAMILY NAME.
		// Never list tables or ruleset: nft loads every table for them,
		// minutes beside a big iptables-nft ruleset, and the plugin names
		// the tables it reads.
		if len(args) == 1 && args[0] == "--version" {
			return nil
		}
		if len(args) == 6 && args[0] == "-t" && args[1] == "list" && args[2] == "sets" && args[3] == "table" && nftFamilies[args[4]] && nftTables[args[5]] {
			return nil
		}
		if len(args) > 0 && args[0] == "-j" {
			args = args[1:]
		}
		if len(args) < 2 || args[0] != "list" {
			return bad()
		}
		switch {
		case len(args) == 4 && args[1] == "table" && nftFamilies[args[2]] && nftTables[args[3]]:
			return nil
		case len(args) == 5 && args[1] == "chain" && nftFamilies[args[2]] && nftTables[args[3]] && nftObject.MatchString(args[4]):
			return nil
		}
		return bad()
	case prog == "grep" || prog == "cat" || prog == "ipset":
		// the conntrack reads: grep -H . SYSCTLS | cat /proc/net/stat/nf_conntrack |
		// grep -F [-w] -m N -e P... /proc/net/nf_conntrack; the IPVS reads:
		// cat /proc/net/ip_vs | cat /sys/class/net/kube-ipvs0/operstate |
		// cat /proc/net/fib_trie | cat /proc/net/if_inet6 | ipset save
		if allowedConntrack(argv) || allowedIPVS(argv) {
			return nil
		}
		return bad()
	}
	return bad()
}

// iptablesProgram is the iptables binary for a family and backend:
// iptables-nft, ip6tables-legacy, ...; BackendUnknown names the image's
// wrapper (iptables, ip6tables), which uses the backend the node uses.
func iptablesProgram(f kubeproxy.Family, b kubeproxy.Backend) string {
	program := "iptables"
	if f == kubeproxy.IPv6 {
		program = "ip6tables"
	}
	switch b {
	case kubeproxy.BackendNFT:
		program += "-nft"
	case kubeproxy.BackendLegacy:
		program += "-legacy"
	}
	return program
}

// nftFamily is the nftables family of an IP family's tables.
func nftFamily(f kubeproxy.Family) knftables.Family {
	if f == kubeproxy.IPv6 {
		return knftables.IPv6Family
	}
	return knftables.IPv4Family
}

// Save is iptables-save of all tables of one family and backend.
func Save(f kubeproxy.Family, b kubeproxy.Backend) NodeCommand {
	program := iptablesProgram(f, b) + "-save"
	return NodeCommand{ID: program, Program: program, Family: f, Backend: b, Argv: []string{program}, Kind: KindRuleset, BigStack: true}
}

// NFTTable lists one nftables table of a family, as JSON or text.
func NFTTable(f kubeproxy.Family, table string, json bool) NodeCommand {
	fam := string(nftFamily(f))
	text := NodeCommand{ID: "nft-" + fam + "-" + table, Program: "nft", Family: f, Table: table,
		Argv: []string{"nft", "list", "table", fam, table}, Kind: KindRuleset}
	if !json {
		return text
	}
	// An nft built without JSON (distroless-iptables v0.9.4-v0.9.5) fails:
	// read the text instead.
	return NodeCommand{ID: text.ID + ".json", Program: "nft", Family: f, Table: table,
		Argv: []string{"nft", "-j", "list", "table", fam, table}, Kind: KindRuleset, Fallback: []NodeCommand{text}}
}

// NFTVersion is "nft --version": is there an nft at all.
func NFTVersion() NodeCommand {
	return NodeCommand{ID: "nft-version", Program: "nft", Argv: []string{"nft", "--version"}, Kind: KindInfo}
}

// NFTKubeProxyTable asks whether kube-proxy's nftables table of a family is
// there (nftables mode): `nft -t list sets table FAM kube-proxy` fails
// where the table is not and prints the named sets' headers where it is.
// It loads no rules and no set elements. `nft list tables` would load every
// table first (70 s and more where iptables-nft holds 380k rules), and a
// listed chain loads the whole kube-proxy table's rules and anonymous maps
// (1.5 s on a node of 5,000 Services); this takes 0.03-0.08 s on both.
func NFTKubeProxyTable(f kubeproxy.Family) NodeCommand {
	fam := string(nftFamily(f))
	return NodeCommand{ID: "nft-" + fam + "-kube-proxy-sets", Program: "nft", Family: f, Table: kubeproxy.NFTTable,
		Argv: []string{"nft", "-t", "list", "sets", "table", fam, kubeproxy.NFTTable}, Kind: KindInfo}
}

// IPTablesVersion is "iptables -V" of the image's wrapper: it names the
// backend the wrapper chose for the node, "(nf_tables)" or "(legacy)".
func IPTablesVersion() NodeCommand {
	program := iptablesProgram(kubeproxy.IPv4, kubeproxy.BackendUnknown)
	return NodeCommand{ID: program + "-version", Program: program, Argv: []string{program, "-V"}, Kind: KindInfo}
}

// ListChain is "iptables -t TABLE -S CHAIN": one chain, fast on both
// backends where a full save of a big table takes minutes.
func ListChain(f kubeproxy.Family, b kubeproxy.Backend, table, chain string) NodeCommand {
	program := iptablesProgram(f, b)
	return NodeCommand{ID: program + "-" + table + "-" + chain, Program: program, Family: f, Backend: b, Table: table, Chain: chain,
		Argv: []string{program, "-t", table, "-S", chain}, Kind: KindChains}
}

// FileName is the name of the command's output in a bundle.
func (c NodeCommand) FileName() string {
	if strings.Contains(c.ID, ".") {
		return c.ID
	}
	return c.ID + ".txt"
}

// Check validates a command before it is run: an allowed argv and a safe ID.
func (c NodeCommand) Check() error {
	if !validateID.MatchString(c.ID) {
		return fmt.Errorf("bad output name %q", c.ID)
	}
	return Allowed(c.Argv)
}

// shellQuote quotes s for sh. Allowed arguments never need it, but the
// script does not rely on that.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Script runs several allowed commands in one exec (one round trip instead
// of one per chain). Each output is framed by marker lines carrying a nonce
// that the shell reads from its stdin (see RemoteRunner.Run): it never
// appears in the command line, which every process on the node can read,
// so neither a rule's text nor a process in the container can fake a frame.
// The exit status of each command is reported in its end marker; error
// messages go to the exec's stderr. Only commands that pass Check are
// accepted, the shell text around them is fixed, and the script stays
// under MaxScriptBytes (Batches splits longer lists).
func Script(cmds []NodeCommand) ([]string, error) {
	var b strings.Builder
	b.WriteString(scriptHeader)
	for i, c := range cmds {
		if err := c.Check(); err != nil {
			return nil, err
		}
		b.WriteString(scriptCommand(i, c))
	}
	if b.Len() > MaxScriptBytes {
		return nil, fmt.Errorf("%d commands make a script of %d bytes, more than one exec takes (%d): split them with Batches", len(cmds), b.Len(), MaxScriptBytes)
	}
	return []string{"sh", "-c", b.String()}, nil
}

// MaxScriptBytes bounds one script. The kernel takes at most 128 KiB in one
// argument ("argument list too long"), and the admission policy of
// deploy/ checks every line of it within its CEL cost budget, which a
// script of this size keeps well inside.
const MaxScriptBytes = 32 << 10

// scriptHeader reads the nonce, then gives the commands no stdin.
const scriptHeader = "read -r n\nexec </dev/null\n"

// scriptCommand is command i of a script: its begin marker, the command,
// its end marker with the exit status.
func scriptCommand(i int, c NodeCommand) string {
	q := make([]string, len(c.Argv))
	for j, a := range c.Argv {
		q[j] = shellQuote(a)
	}
	run := strings.Join(q, " ")
	if c.BigStack {
		run = bigStackPrefix + run + ")"
	}
	return fmt.Sprintf("echo \"%s $n begin %d\"\n%s\necho \"\n%s $n end %d rc=$?\"\n", markerPrefix, i, run, markerPrefix, i)
}

const bigStackPrefix = "(ulimit -s unlimited 2>/dev/null; exec "

// Batches splits cmds into runs whose scripts each fit MaxScriptBytes, in
// order: a Service with 5,000 endpoints is read in a few execs.
func Batches(cmds []NodeCommand) [][]NodeCommand {
	var out [][]NodeCommand
	start, size := 0, len(scriptHeader)
	for i, c := range cmds {
		n := len(scriptCommand(i-start, c))
		if i > start && size+n > MaxScriptBytes {
			out = append(out, cmds[start:i])
			start, size = i, len(scriptHeader)
			n = len(scriptCommand(0, c))
		}
		size += n
	}
	if start < len(cmds) {
		out = append(out, cmds[start:])
	}
	return out
}

const markerPrefix = "### kubectl-proxyrules"
