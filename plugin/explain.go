package plugin

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/diagnose"
)

// ExplainOptions are the options of `explain`.
type ExplainOptions struct {
	analysisOptions
	Port string

	kube      *genericclioptions.ConfigFlags
	namespace string
	name      string
}

const explainExample = `  # Why does svc/web in namespace shop get no traffic on this node?
  %[1]s explain svc/web -n shop --node ip-10-0-1-7

  # The same from a dump saved on the node and the objects saved from the cluster
  %[1]s explain svc/web -n shop --from-dump iptables-save.txt --from-objects objects.json --node ip-10-0-1-7

  # One port only, as JSON
  %[1]s explain web -n shop --port https --from-dump ruleset.json --from-objects objects.json -o json`

// NewCmdExplain builds `explain`.
func NewCmdExplain(name string, streams genericiooptions.IOStreams, kube *genericclioptions.ConfigFlags) *cobra.Command {
	o := &ExplainOptions{analysisOptions: analysisOptions{IOStreams: streams}, kube: kube}
	cmd := &cobra.Command{
		Use:   "explain svc/NAME [-n NAMESPACE] [--port PORT] (--node NAME | --from-bundle DIR | --from-dump FILE --from-objects FILE)",
		Short: "Show the path a packet for a Service takes on the node, against its EndpointSlices",
		Long: `Explain one Service on one node: for each port, the rules that catch its
traffic (cluster IP, node port, external and load-balancer IPs, source ranges,
"no endpoints" rejects), the chains a new connection goes through down to the
DNAT, each endpoint's share of new connections (multiplied out from the
probability cascade or the numgen map), and the EndpointSlices side by side:
endpoints missing from the rules (propagation lag, failed sync), endpoints in
the rules that the slices no longer have, shares that do not add up.

Use it first when a Service "gets no traffic" on a node.

` + exitStatusHelp,
		Example: fmt.Sprintf(explainExample, name),
		Args:    cobra.ExactArgs(1),
		RunE:    runAnalysis(o),
	}
	o.Inputs.AddFlags(cmd, kube)
	cmd.Flags().StringVar(&o.Port, "port", "", "only this port (name or number)")
	o.Out.AddFlags(cmd, false)
	return cmd
}

// Complete reads svc/NAME and the namespace: -n, else the kubeconfig
// context's, as kubectl does.
func (o *ExplainOptions) Complete(cmd *cobra.Command, args []string) error {
	if err := o.analysisOptions.Complete(cmd, args); err != nil {
		return err
	}
	ref := args[0]
	if kind, name, ok := strings.Cut(ref, "/"); ok {
		switch strings.ToLower(kind) {
		case "svc", "service", "services":
		default:
			return fmt.Errorf("explain takes a Service (svc/NAME), not %q", ref)
		}
		ref = name
	}
	o.name = ref
	o.namespace = kubeNamespace(o.kube)
	o.Inputs.ServiceNamespace, o.Inputs.ServiceName = o.namespace, o.name
	return nil
}

// Validate checks the options.
func (o *ExplainOptions) Validate() error {
	if o.name == "" {
		return fmt.Errorf("name the Service: explain svc/NAME")
	}
	if err := o.analysisOptions.Validate(); err != nil {
		return err
	}
	if len(o.Inputs.Objects) == 0 && len(o.Inputs.Dumps) > 0 {
		return fmt.Errorf("explain needs the Services and EndpointSlices: pass --from-objects (kubectl get services,endpointslices -A -o json)")
	}
	return nil
}

// Run explains the Service.
func (o *ExplainOptions) Run() error {
	return o.run(func(l *Loaded) (built, error) {
		ex, err := diagnose.ExplainService(l.Node, o.namespace, o.name, o.Port)
		if err != nil {
			return built{}, err
		}
		return built{ex, func(out io.Writer, t *Terminal) error { return renderExplanation(out, t, ex) }, ex.Status, nil}, nil
	})
}

func renderExplanation(out io.Writer, t *Terminal, ex *diagnose.ServiceExplanation) error {
	st := t.styles()
	head := fmt.Sprintf("svc %s/%s", ex.Namespace, ex.Name)
	facts := []string{ex.Type, "affinity " + ex.SessionAffinity}
	if ex.AffinitySeconds > 0 && ex.SessionAffinity == "ClientIP" {
		facts[1] += fmt.Sprintf(" (%ds)", ex.AffinitySeconds)
	}
	facts = append(facts, "internal policy "+ex.InternalTrafficPolicy)
	if ex.ExternalTrafficPolicy != "" {
		facts = append(facts, "external policy "+ex.ExternalTrafficPolicy)
	}
	fmt.Fprintln(out, st.group.Render(head)+" "+st.dim.Render(strings.Join(facts, ", ")))
	if len(ex.ClusterIPs) > 0 {
		fmt.Fprintln(out, st.dim.Render("cluster IPs: "+strings.Join(ex.ClusterIPs, ", ")))
	}
	if len(ex.Ports) == 0 {
		fmt.Fprintln(out, "kube-proxy writes no rules for this Service (headless or ExternalName), or the dump has no table for its IP family.")
		return nil
	}
	for _, pp := range ex.Ports {
		title := fmt.Sprintf("%s %s  %s %s", pp.ServicePort, pp.Protocol, pp.Mode, pp.Family)
		if pp.Topology != "" {
			title += "  topology " + pp.Topology
		}
		root := t.newTree(st.header.Render(title))
		entries := t.newTree("entries")
		for _, e := range pp.Entries {
			entries.Child(fmt.Sprintf("%-16s %-24s %s → %s", e.Kind, e.Address, e.Chain, shortName(e.Target)))
		}
		if len(pp.Entries) == 0 {
			entries.Child(st.bad.Render("none: no rule catches this port's traffic"))
		}
		root.Child(entries)
		byEndpoint := map[string]correlate.EndpointPath{}
		for _, ep := range pp.Endpoints {
			byEndpoint[ep.Endpoint] = ep
		}
		for _, r := range pp.Routes {
			chains := make([]string, len(r.Chains))
			for i, c := range r.Chains {
				chains[i] = shortName(c)
			}
			label := r.Traffic + ": " + strings.Join(chains, " → ")
			if r.AffinitySeconds > 0 {
				label += fmt.Sprintf("  (ClientIP affinity %ds)", r.AffinitySeconds)
			}
			rt := t.newTree(label)
			for _, h := range r.Hops {
				ep := byEndpoint[h.Endpoint]
				via := ""
				if h.Chain != "" {
					via = shortName(h.Chain) + " → "
				}
				rt.Child(fmt.Sprintf("%s  %sDNAT %s  %s", percent(h.Share), via, h.Endpoint, sliceState(st, ep)))
			}
			if len(r.Hops) == 0 {
				rt.Child(st.warn.Render("no endpoint"))
			}
			root.Child(rt)
		}
		// Endpoints in the slices that no rule reaches: missing where
		// kube-proxy should have programmed them, else why it rightly
		// left them out here.
		var missing, unused []string
		for _, ep := range pp.Endpoints {
			if ep.InRules {
				continue
			}
			line := fmt.Sprintf("%s  %s", ep.Endpoint, sliceState(st, ep))
			switch {
			case ep.Expected:
				missing = append(missing, line)
			case ep.Why != "":
				unused = append(unused, line+"\n"+st.dim.Render(wrap(ep.Why, t.Width-12)))
			default:
				unused = append(unused, line)
			}
		}
		if len(missing) > 0 {
			nr := t.newTree("in the EndpointSlices, not in the rules")
			for _, m := range missing {
				nr.Child(m)
			}
			root.Child(nr)
		}
		if len(unused) > 0 {
			nr := t.newTree("not used on this node")
			for _, m := range unused {
				nr.Child(m)
			}
			root.Child(nr)
		}
		if len(pp.Problems) > 0 {
			pr := t.newTree("problems")
			for _, p := range pp.Problems {
				pr.Child(severityStyle(st, p.Severity).Render(string(p.Severity)) + " " + wrap(p.Message, t.Width-16))
			}
			root.Child(pr)
		} else {
			root.Child(st.good.Render("no problems found"))
		}
		fmt.Fprintln(out, trimTrailing(root.String()))
	}
	renderNotChecked(out, t, ex.NotChecked)
	return nil
}

// renderNotChecked lists what a report could not check, and what to pass.
func renderNotChecked(out io.Writer, t *Terminal, gaps []diagnose.Gap) {
	if len(gaps) == 0 {
		return
	}
	st := t.styles()
	fmt.Fprintln(out, st.warn.Render("not checked:"))
	for _, g := range gaps {
		line := g.Check + ": " + g.Reason
		if g.Remedy != "" {
			line += "; pass " + g.Remedy
		}
		fmt.Fprintln(out, "  - "+wrapIndent(line, t.Width-4, 4))
	}
}

// sliceState says what the EndpointSlices say of an endpoint.
func sliceState(st styles, ep correlate.EndpointPath) string {
	if !ep.InSlices {
		return st.bad.Render("not in slices")
	}
	var s []string
	switch {
	case ep.Ready != nil && *ep.Ready:
		s = append(s, "ready")
	case ep.Terminating != nil && *ep.Terminating && ep.Serving != nil && *ep.Serving:
		s = append(s, "terminating,serving")
	case ep.Terminating != nil && *ep.Terminating:
		s = append(s, "terminating")
	default:
		s = append(s, "not ready")
	}
	if ep.NodeName != "" {
		n := ep.NodeName
		if ep.Local {
			n += " (local)"
		}
		s = append(s, n)
	}
	return st.dim.Render(strings.Join(s, " "))
}

// shortName drops the readable part of an nftables per-service name.
func shortName(chain string) string {
	if n, ok := correlate.ParseNFTName(chain); ok {
		return n.Prefix + n.Hash + "-…"
	}
	return chain
}
