package plugin

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// MapOptions are the options of `map`.
type MapOptions struct{ analysisOptions }

const mapExample = `  # Which Service owns each kube-proxy chain of a node? (read live)
  %[1]s map --node ip-10-0-1-7

  # ... of a saved dump?
  %[1]s map --from-dump iptables-save.txt --from-objects objects.json

  # Collect the inputs on the node and in the cluster:
  #   iptables-save > v4.txt; ip6tables-save > v6.txt      (on the node)
  #   kubectl get services,endpointslices -A -o json > objects.json
  %[1]s map --from-dump v4.txt --from-dump v6.txt --from-objects objects.json --node ip-10-0-1-7

  # nftables mode, from a pasted ruleset on stdin, as JSON
  nft -j list ruleset | %[1]s map --from-dump - --from-objects objects.json -o json`

// NewCmdMap builds `map`.
func NewCmdMap(name string, streams genericiooptions.IOStreams, kube *genericclioptions.ConfigFlags) *cobra.Command {
	o := &MapOptions{analysisOptions{IOStreams: streams}}
	cmd := &cobra.Command{
		Use:   "map (--node NAME | --from-bundle DIR | --from-dump FILE [--from-objects FILE])",
		Short: "Attribute every kube-proxy chain to its Service port and endpoint",
		Long: `Attribute every kube-proxy chain on a node to the Service port and endpoint it
belongs to, by recomputing kube-proxy's own chain names from the Services and
EndpointSlices. It works when large-cluster mode (more than 1000 endpoints) has
removed the comments, for iptables (legacy and nft backends, IPv4 and IPv6) and
nftables mode. Use it when a KUBE-SVC-/KUBE-SEP- name in a dump means nothing
to you, or to find chains that no current Service or endpoint owns.`,
		Example: fmt.Sprintf(mapExample, name),
		Args:    cobra.NoArgs,
		RunE:    runAnalysis(o),
	}
	o.addFlags(cmd, kube, true)
	return cmd
}

// Run loads the inputs, attributes and prints.
func (o *MapOptions) Run() error {
	return o.run(func(l *Loaded) (built, error) {
		m := diagnose.MapChains(l.Node)
		return built{m, func(out io.Writer, t *Terminal) error { return renderChainMap(out, t, m, o.Out.Wide()) }, "", nil}, nil
	})
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

// mapRows builds the table rows for text and wide output.
func mapRows(m *diagnose.ChainMap, wide bool) (headers []string, rows [][]string) {
	headers = []string{"SERVICE PORT", "PROTO", "FAM", "KIND", "CHAIN", "ENDPOINT", "STATUS"}
	if wide {
		headers = []string{"SERVICE PORT", "PROTO", "MODE", "FAMILY", "TABLE", "KIND", "CHAIN", "ENDPOINT", "RULES", "EVIDENCE", "STATUS"}
	}
	for _, c := range groupedChains(m.Chains) {
		if c.Kind == kubeproxy.KindFixed && !wide {
			continue
		}
		owner := c.ServicePort
		if owner == "" {
			owner = "-"
		}
		if wide {
			rows = append(rows, []string{owner, c.Protocol, c.Mode, c.Family, c.Table, string(c.Kind), c.Chain, c.Endpoint,
				strconv.Itoa(int(c.Rules)), c.Evidence.String(), chainStatus(&c)})
			continue
		}
		rows = append(rows, []string{owner, c.Protocol, familyShort(c.Family), string(c.Kind), c.Chain, c.Endpoint, chainStatus(&c)})
	}
	return headers, rows
}

// summaryLine says what the table holds, in lines that fit 80 columns.
func summaryLine(m *diagnose.ChainMap, wide bool) string {
	s := m.Summary
	line := fmt.Sprintf("%d kube-proxy chains: %d attributed, %d without owner, %d fixed", s.Chains, s.Attributed, s.Unowned, s.Fixed)
	if !wide && s.Fixed > 0 {
		line += " (see -o wide)"
	}
	if s.ObjectsGiven {
		line += fmt.Sprintf("\n%d stale: owned by no current Service or endpoint", s.Stale)
	} else {
		line += "\nstale chains: pass --from-objects to judge"
	}
	return line
}
