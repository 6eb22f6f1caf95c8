package plugin

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// MapOptions are the options of `map`.
type MapOptions struct {
	analysisOptions
	// chains are the names asked for: map CHAIN...
	chains []string
}

const mapExample = `  # Which Service owns each kube-proxy chain of a node? (read live)
  %[1]s map --node ip-10-0-1-7

  # ... of a saved dump?
  %[1]s map --from-dump iptables-save.txt --from-objects objects.json

  # Collect the inputs on the node and in the cluster:
  #   iptables-save > v4.txt; ip6tables-save > v6.txt      (on the node)
  #   kubectl get services,endpointslices -A -o json > objects.json
  %[1]s map --from-dump v4.txt --from-dump v6.txt --from-objects objects.json --node ip-10-0-1-7

  # nftables mode, from a pasted ruleset on stdin, as JSON
  nft -j list ruleset | %[1]s map --from-dump - --from-objects objects.json -o json

  # Which Service is KUBE-SEP-GXKVICYM64SODBWJ? (names recomputed from the
  # cluster's Services and EndpointSlices: no node is read)
  %[1]s map KUBE-SEP-GXKVICYM64SODBWJ

  # ... on a node, with who jumps to it; a hash part is enough
  %[1]s map GXKVICYM64SODBWJ --node ip-10-0-1-7`

// NewCmdMap builds `map`.
func NewCmdMap(name string, streams genericiooptions.IOStreams, kube *genericclioptions.ConfigFlags) *cobra.Command {
	o := &MapOptions{analysisOptions: analysisOptions{IOStreams: streams}}
	cmd := &cobra.Command{
		Use:   "map [CHAIN...] (--node NAME | --from-bundle DIR | --from-dump FILE [--from-objects FILE])",
		Short: "Attribute every kube-proxy chain to its Service port and endpoint",
		Long: `Attribute every kube-proxy chain on a node to the Service port and endpoint it
belongs to, by recomputing kube-proxy's own chain names from the Services and
EndpointSlices. It works when large-cluster mode (more than 1000 endpoints) has
removed the comments, for iptables (legacy and nft backends, IPv4 and IPv6) and
nftables mode. Use it when a KUBE-SVC-/KUBE-SEP- name in a dump means nothing
to you, or to find chains that no current Service or endpoint owns.

In IPVS mode the chains name no Service: map lists the IPVS virtual servers
(/proc/net/ip_vs or ipvsadm -Ln given with --from-dump), each with its Service
port and frontend, and each real server with whether it is an endpoint of that
port; those no Service port has are listed apart (see stale).

Given chain names (KUBE-SVC-…, service-…, or just their hash part), map shows
only those: kind, owner, endpoint, whether stale, and which chains jump to
them. Without a node or dump it answers from the objects alone (the cluster's,
or --from-objects) by recomputing kube-proxy's names. An unknown name exits 1.`,
		Example:           fmt.Sprintf(mapExample, name),
		Args:              cobra.ArbitraryArgs,
		RunE:              runAnalysis(o),
		ValidArgsFunction: chainArgCompletion(o),
	}
	o.addFlags(cmd, kube, true)
	return cmd
}

// Complete takes the chain names.
func (o *MapOptions) Complete(cmd *cobra.Command, args []string) error {
	if err := o.analysisOptions.Complete(cmd, args); err != nil {
		return err
	}
	o.chains = args
	return nil
}

// Validate checks the chain names.
func (o *MapOptions) Validate() error {
	for _, c := range o.chains {
		if !correlate.LooksLikeChain(c) {
			return fmt.Errorf("%q is not a kube-proxy chain name: map takes KUBE-SVC-/SVL-/EXT-/FW-/SEP-/XLB-… (iptables), service-/local-/external-/firewall-/endpoint-… (nftables), or their hash part", c)
		}
	}
	return o.analysisOptions.validate(len(o.chains) > 0) // chains need no node
}

// Run loads the inputs, attributes and prints.
func (o *MapOptions) Run() error {
	if len(o.chains) > 0 {
		return o.lookup()
	}
	return o.run(func(l *Loaded) (built, error) {
		m := diagnose.MapChains(l.Node)
		return built{report: m,
			render: func(out io.Writer, t *Terminal) error { return renderMap(out, t, m, o.Out.Wide()) },
			rows: func() rows {
				return rows{kind: "chain", items: anySlice(m.Chains), name: func(i int) string { return m.Chains[i].Chain }}
			}}, nil
	})
}

// renderMap prints the virtual servers in IPVS mode, then the chains; the
// chains' table and summary only when some were read (an IPVS table alone
// has none, and "0 kube-proxy chains" would say nothing).
func renderMap(out io.Writer, t *Terminal, m *diagnose.ChainMap, wide bool) error {
	if m.Summary.IPVS == nil {
		return renderChainMap(out, t, m, wide)
	}
	if err := renderMapIPVS(out, t, m, wide); err != nil {
		return err
	}
	if len(m.Chains) == 0 {
		return nil
	}
	if !t.NoHeaders {
		fmt.Fprintln(out)
	}
	return renderChainMap(out, t, m, wide)
}

var kindOrder = map[kubeproxy.ChainKind]int{
	kubeproxy.KindService: 0, kubeproxy.KindLocal: 1, kubeproxy.KindExternal: 2,
	kubeproxy.KindFirewall: 3, kubeproxy.KindEndpoint: 4, kubeproxy.KindUnknown: 5, kubeproxy.KindFixed: 6,
}

// groupedChains orders chains by service port, then kind, family, chain;
// chains without an owner come last, fixed chains after them.
func groupedChains(chains []correlate.ChainOwner) []correlate.ChainOwner {
	out := append([]correlate.ChainOwner(nil), chains...)
	rank := func(c *correlate.ChainOwner) int {
		switch {
		case c.Kind == kubeproxy.KindFixed:
			return 2
		case c.ServicePort == "":
			return 1
		}
		return 0
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := &out[i], &out[j]
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra < rb
		}
		if a.ServicePort != b.ServicePort {
			return a.ServicePort < b.ServicePort
		}
		if a.Protocol != b.Protocol {
			return a.Protocol < b.Protocol
		}
		if a.Mode != b.Mode {
			return a.Mode < b.Mode
		}
		if a.Family != b.Family {
			return a.Family < b.Family
		}
		if kindOrder[a.Kind] != kindOrder[b.Kind] {
			return kindOrder[a.Kind] < kindOrder[b.Kind]
		}
		if a.Endpoint != b.Endpoint {
			return a.Endpoint < b.Endpoint
		}
		return a.Chain < b.Chain
	})
	return out
}

func chainStatus(c *correlate.ChainOwner) string {
	var s []string
	if c.Stale {
		s = append(s, "stale")
	}
	if c.ServicePort == "" && c.Kind != kubeproxy.KindFixed {
		s = append(s, "no owner")
	}
	return strings.Join(s, ",")
}

func familyShort(f string) string {
	switch f {
	case string(kubeproxy.IPv4):
		return "v4"
	case string(kubeproxy.IPv6):
		return "v6"
	}
	return f
}

// mapRows builds the table rows for text and wide output. Plain text
// leaves out the fixed chains, and the stale and unowned ones (listed below
// the table by mapSections); -o wide lists every chain with every column.
func mapRows(m *diagnose.ChainMap, wide bool) (headers []string, rows [][]string) {
	headers = []string{"SERVICE", "KIND", "CHAIN", "ENDPOINT", "FAM", "PROTOCOL"}
	if wide {
		headers = []string{"SERVICE", "PROTOCOL", "MODE", "FAMILY", "TABLE", "KIND", "CHAIN", "ENDPOINT", "RULES", "EVIDENCE", "STATUS"}
	}
	for _, c := range groupedChains(m.Chains) {
		owner := c.ServicePort
		if owner == "" {
			owner = "-"
		}
		if wide {
			rows = append(rows, []string{owner, c.Protocol, c.Mode, c.Family, c.Table, string(c.Kind), c.Chain, c.Endpoint,
				strconv.Itoa(int(c.Rules)), c.Evidence.String(), chainStatus(&c)})
			continue
		}
		if c.Kind == kubeproxy.KindFixed || c.Stale || c.ServicePort == "" {
			continue
		}
		rows = append(rows, []string{owner, string(c.Kind), c.Chain, c.Endpoint, familyShort(c.Family), c.Protocol})
	}
	return headers, rows
}

// fitMapTable drops the columns a narrow table can do without, and the
// family when there is only one. An nftables chain's name holds its
// Service port and endpoint, so those columns go before the name is cut
// (which pipes never do). The family stays longest: the ip and ip6 tables
// hold chains of the same name.
func fitMapTable(m *diagnose.ChainMap, headers []string, rows [][]string, width int) ([]string, [][]string) {
	nft := true
	for _, c := range m.Chains {
		nft = nft && c.Mode == string(kubeproxy.ModeNFTables)
	}
	families := map[string]bool{}
	col := slices.Index(headers, "FAM")
	for _, r := range rows {
		families[r[col]] = true
	}
	order := []string{"PROTOCOL", "KIND", "FAM"}
	if nft {
		order = []string{"PROTOCOL", "ENDPOINT", "SERVICE", "KIND", "FAM"}
	}
	if len(families) == 1 {
		headers, rows = fitColumns(headers, rows, 0, "FAM") // 0: drop it however narrow the table
	}
	return fitColumns(headers, rows, width, order...)
}

// mapSections lists, below the plain table, the chains it leaves out:
// stale ones with their former owner, and those no owner was found for.
func mapSections(out io.Writer, t *Terminal, m *diagnose.ChainMap) {
	st := t.styles()
	var stale, unowned [][]string
	for _, c := range groupedChains(m.Chains) {
		switch {
		case c.Kind == kubeproxy.KindFixed:
		case c.Stale:
			owner := c.ServicePort
			if owner == "" {
				owner = "(former owner unknown)"
			}
			if c.Endpoint != "" {
				owner += " → " + c.Endpoint
			}
			stale = append(stale, []string{c.Chain, familyShort(c.Family), owner})
		case c.ServicePort == "":
			unowned = append(unowned, []string{c.Chain, familyShort(c.Family), c.Table})
		}
	}
	section := func(title string, rows [][]string, style lipgloss.Style) {
		if len(rows) == 0 {
			return
		}
		fmt.Fprintln(out, style.Render(title))
		families := map[string]bool{}
		for _, r := range rows {
			families[r[1]] = true
		}
		if len(families) == 1 {
			for i, r := range rows {
				rows[i] = append(r[:1:1], r[2:]...)
			}
		}
		// An nftables name already says its owner.
		if tableWidth(nil, rows)+2 > t.Width {
			for i, r := range rows {
				if _, ok := correlate.ParseNFTName(r[0]); ok && len(r) == 3 {
					rows[i] = r[:2]
				} else if ok {
					rows[i] = r[:1]
				}
			}
		}
		fmt.Fprint(out, alignColumns(rows, "  ", func(int, int) lipgloss.Style { return t.Renderer.NewStyle() }))
	}
	section(fmt.Sprintf("%d stale (no current Service or endpoint owns them; see `stale`):", len(stale)), stale, st.bad)
	section(fmt.Sprintf("%d without an owner (pass --from-objects, or see -o wide):", len(unowned)), unowned, st.warn)
}

// summaryLine says what the table holds, in lines that fit 80 columns.
func summaryLine(m *diagnose.ChainMap, wide bool) string {
	s := m.Summary
	line := fmt.Sprintf("%d kube-proxy chains: %d attributed, %d without owner, %d fixed", s.Chains, s.Attributed, s.Unowned, s.Fixed)
	if !wide && s.Fixed > 0 {
		line += " (see -o wide)"
	}
	if s.ObjectsGiven {
		stale := "stale"
		if s.IPVS != nil {
			stale = "stale chains" // the virtual servers are counted above
		}
		line += fmt.Sprintf("\n%d %s: owned by no current Service or endpoint", s.Stale, stale)
	} else {
		line += "\nstale chains: pass --from-objects to judge"
	}
	return line
}

// lookup answers map CHAIN...: just those chains; exit 1 for a name that
// matches nothing.
func (o *MapOptions) lookup() error {
	var unknown []string
	haveDump, haveObjects := false, false
	req := o.request()
	req.ObjectsOnly = true // a node's rules when given, else the objects alone
	err := o.runRequest(req, func(l *Loaded) (built, error) {
		haveDump = len(l.Ruleset.IPTables)+len(l.Ruleset.NFTables) > 0
		haveObjects = l.Objects != nil
		rep := diagnose.LookupChains(l.Node, o.chains)
		unknown = rep.Unknown
		return built{report: rep,
			render: func(out io.Writer, t *Terminal) error { return renderLookup(out, t, rep) },
			rows: func() rows {
				return rows{kind: "chain", items: anySlice(rep.Chains), name: func(i int) string { return rep.Chains[i].Chain }}
			}}, nil
	})
	if err == nil && len(unknown) > 0 {
		return correlate.UnknownChainError(unknown, haveDump, haveObjects)
	}
	return err
}

// renderLookup prints each chain asked for, one block each.
func renderLookup(out io.Writer, t *Terminal, rep *diagnose.ChainLookup) error {
	st := t.styles()
	for _, c := range rep.Chains {
		owner := c.ServicePort
		if owner == "" {
			owner = "(no owner found)"
		}
		where := ""
		if c.TableRef != nil {
			where = strings.Join(strings.Fields(c.Mode+" "+c.Family+" "+c.Table), " ")
		}
		fmt.Fprintf(out, "%s  %s\n", st.header.Render(c.Chain), st.dim.Render(where))
		fmt.Fprintf(out, "  %-13s %s\n", "kind", c.Kind)
		fmt.Fprintf(out, "  %-13s %s\n", "owner", owner)
		if c.Endpoint != "" {
			fmt.Fprintf(out, "  %-13s %s\n", "endpoint", c.Endpoint)
		}
		switch {
		case !c.InDump:
			fmt.Fprintf(out, "  %-13s %s\n", "in the dump", "no: the name is recomputed from the objects")
		case c.Stale:
			fmt.Fprintf(out, "  %-13s %s\n", "status", st.bad.Render("stale: owned by no current Service or endpoint"))
		default:
			fmt.Fprintf(out, "  %-13s %s\n", "status", "current")
		}
		if c.InDump {
			refs := "nothing: unreferenced"
			if len(c.ReferencedBy) > 0 {
				refs = strings.Join(c.ReferencedBy, ", ")
			}
			fmt.Fprintf(out, "  %-13s %s\n", "jumped to by", wrapIndent(refs, t.Width-16, 16))
		}
		if len(c.Evidence.Names()) > 0 {
			fmt.Fprintf(out, "  %-13s %s\n", "evidence", c.Evidence)
		}
	}
	return nil
}
