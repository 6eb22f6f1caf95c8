package plugin

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/plugin/collect"
)

// MapOptions are the options of `map`.
type MapOptions struct {
	genericiooptions.IOStreams
	Sources SourceOptions
	Output  string
	Color   string

	loaded *Loaded
	term   *Terminal
}

// NewMapOptions returns the defaults.
func NewMapOptions(streams genericiooptions.IOStreams) *MapOptions {
	return &MapOptions{IOStreams: streams, Output: "text", Color: "auto"}
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
  nft -j list ruleset | %[1]s map --from-dump - --from-objects objects.json -o json`

// NewCmdMap builds `map`.
func NewCmdMap(name string, streams genericiooptions.IOStreams, kube *genericclioptions.ConfigFlags) *cobra.Command {
	o := NewMapOptions(streams)
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
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Complete(); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			cmd.SilenceUsage = true
			return o.Run()
		},
	}
	o.Sources.AddFlags(cmd, kube)
	cmd.Flags().StringVarP(&o.Output, "output", "o", o.Output, "output format: text, wide, json or yaml")
	cmd.Flags().StringVar(&o.Color, "color", o.Color, "colour: auto (only on a terminal, honours NO_COLOR), always or never")
	return cmd
}

// Complete fills derived fields.
func (o *MapOptions) Complete() error {
	o.Sources.In, o.Sources.ErrOut = o.In, o.ErrOut
	t, err := NewTerminal(o.Out, o.Color)
	if err != nil {
		return err
	}
	o.term = t
	return nil
}

// Validate checks the options.
func (o *MapOptions) Validate() error {
	if err := validateOutput(o.Output); err != nil {
		return err
	}
	return o.Sources.Validate()
}

// ChainMap is the machine-readable report of `map`.
type ChainMap struct {
	APIVersion string                 `json:"apiVersion"`
	Kind       string                 `json:"kind"`
	Node       string                 `json:"node,omitempty"`
	Sources    []inspect.Dump         `json:"sources"`
	Summary    MapSummary             `json:"summary"`
	Chains     []correlate.ChainOwner `json:"chains"`
	// Collection says how the node was read (live or from a bundle).
	Collection *collect.Manifest `json:"collection,omitempty"`
}

// MapSummary counts the chains.
type MapSummary struct {
	Chains int `json:"chains"`
	// Attributed chains have an owning service port.
	Attributed int `json:"attributed"`
	Fixed      int `json:"fixed"`
	// Unowned chains are per-service chains whose owner could not be found.
	Unowned int `json:"unowned"`
	Stale   int `json:"stale"`
	// ObjectsGiven: stale can only be judged against API objects.
	ObjectsGiven bool `json:"objectsGiven"`
}

// Run loads the inputs, attributes and prints.
func (o *MapOptions) Run() error {
	loaded, err := o.Sources.Load()
	if err != nil {
		return err
	}
	o.loaded = loaded
	res := correlate.Attribute(loaded.Ruleset, loaded.Objects)
	report := BuildChainMap(o.Sources.Node, loaded.Ruleset, res)
	report.Collection = loaded.Collected
	for _, d := range report.Sources {
		for _, w := range d.Warnings {
			fmt.Fprintf(o.ErrOut, "warning: %s: %s\n", d.Source, w)
		}
	}
	switch o.Output {
	case "json", "yaml":
		return printMachine(o.Out, o.Output, report)
	}
	return renderChainMap(o.Out, o.term, report, o.Output == "wide")
}

// BuildChainMap wraps an attribution in the report type.
func BuildChainMap(node string, rs *inspect.Ruleset, res *correlate.Result) *ChainMap {
	m := &ChainMap{APIVersion: APIVersion, Kind: "ChainMap", Node: node, Sources: rs.Dumps, Chains: res.Chains}
	if m.Chains == nil {
		m.Chains = []correlate.ChainOwner{}
	}
	m.Summary.ObjectsGiven = res.HaveObjects
	for _, c := range res.Chains {
		m.Summary.Chains++
		switch {
		case c.Kind == correlate.KindFixed:
			m.Summary.Fixed++
		case c.ServicePort != "":
			m.Summary.Attributed++
		default:
			m.Summary.Unowned++
		}
		if c.Stale {
			m.Summary.Stale++
		}
	}
	return m
}

var kindOrder = map[correlate.Kind]int{
	correlate.KindService: 0, correlate.KindLocal: 1, correlate.KindExternal: 2,
	correlate.KindFirewall: 3, correlate.KindEndpoint: 4, correlate.KindUnknown: 5, correlate.KindFixed: 6,
}

// groupedChains orders chains by service port, then kind, family, chain;
// chains without an owner come last, fixed chains after them.
func groupedChains(chains []correlate.ChainOwner) []correlate.ChainOwner {
	out := append([]correlate.ChainOwner(nil), chains...)
	rank := func(c *correlate.ChainOwner) int {
		switch {
		case c.Kind == correlate.KindFixed:
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
	if c.ServicePort == "" && c.Kind != correlate.KindFixed {
		s = append(s, "no owner")
	}
	return strings.Join(s, ",")
}

func familyShort(f string) string {
	switch f {
	case string(inspect.IPv4):
		return "v4"
	case string(inspect.IPv6):
		return "v6"
	}
	return f
}

// mapRows builds the table rows for text and wide output.
func mapRows(m *ChainMap, wide bool) (headers []string, rows [][]string) {
	headers = []string{"SERVICE PORT", "PROTO", "FAM", "KIND", "CHAIN", "ENDPOINT", "STATUS"}
	if wide {
		headers = []string{"SERVICE PORT", "PROTO", "MODE", "FAMILY", "TABLE", "KIND", "CHAIN", "ENDPOINT", "RULES", "EVIDENCE", "STATUS"}
	}
	for _, c := range groupedChains(m.Chains) {
		if c.Kind == correlate.KindFixed && !wide {
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
func summaryLine(m *ChainMap, wide bool) string {
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
