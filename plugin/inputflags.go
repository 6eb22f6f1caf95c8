package plugin

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/proxyrules/kubectl-proxyrules/inspect/iptables"
	"github.com/proxyrules/kubectl-proxyrules/plugin/collect"
)

// The input path of every analysis command, in three steps and three files:
// InputFlags (this file) are the flag values; request.go turns them into a
// Request, the plain value of one load; loader.go's Loader reads a Request
// into a Loaded, which package diagnose turns into a report. A sweep, a
// targeted explain and a full read are three Requests to one Loader.

// InputFlags are the input flags every analysis command shares: a node read
// live through a debug pod (--node alone), a bundle written by `collect`, or
// saved dumps, API objects and metrics; how to read a node live; which
// Services a report covers. Formats are detected, not declared.
type InputFlags struct {
	// Nodes are --node as given (repeated: a sweep).
	Nodes   []string
	Dumps   []string
	Objects []string
	Metrics []string
	Config  []string
	Bundles []string
	// Conntrack, ConntrackStats and Sysctls are the kernel's connection
	// tracking state saved from the node (conntrackinput.go).
	Conntrack      []string
	ConntrackStats []string
	Sysctls        []string
	Live           LiveOptions
	// Table is --table: the iptables table of pasted rules without one.
	Table string
	// NodeIPs is --node-ip: the node's addresses, when no Node object
	// gives them.
	NodeIPs []string
	// AllNamespaces (-A) and Selector (-l) select Services, with -n.
	AllNamespaces bool
	Selector      string
	// At is --at: the time ages are judged against.
	At string
	// MaxSize is --max-input-size: KIND=SIZE,... caps (see caps.go).
	MaxSize string
}

// LiveOptions are the flags of live collection.
type LiveOptions struct {
	Via            string
	Image          string
	DebugNamespace string
	StartTimeout   time.Duration
	Deadline       time.Duration
	Reader         string
	MetricsPort    int
	// IncludeControlPlane reads control-plane nodes too: off, a debug pod
	// there could reach etcd and the API server on the node's loopback.
	IncludeControlPlane bool
	// SkipPolicyCheck skips the dry run that proves an admission policy
	// guards the debug namespace (collect.GuardCheck).
	SkipPolicyCheck bool
}

// AddFlags registers the input flags on cmd.
func (f *InputFlags) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringArrayVar(&f.Nodes, "node", nil, "the node to read, live through a short-lived debug pod (repeated: a sweep of those nodes, where the command sweeps); with --from-dump, the node the dump comes from (traffic policies depend on it); with a sweep folder, one of its nodes")
	fs.StringArrayVar(&f.Bundles, "from-bundle", nil, "read a bundle written by \"collect -d\" (a folder or .tar.gz) instead of the cluster")
	fs.StringArrayVar(&f.Dumps, "from-dump", nil, "read a saved ruleset (iptables-save, iptables -S, iptables -L -n, pasted rule lines, nft list ruleset, nft -j list ruleset, knftables dump) or kube-proxy metrics; repeatable; - reads stdin")
	fs.StringArrayVar(&f.Objects, "from-objects", nil, "read Services and EndpointSlices saved with \"kubectl get services,endpointslices -A -o json\" (or -o yaml); repeatable")
	fs.StringArrayVar(&f.Metrics, "from-metrics", nil, "read kube-proxy's /metrics saved from the node (curl 127.0.0.1:10249/metrics); repeatable")
	fs.StringArrayVar(&f.Config, "from-config", nil, "read kube-proxy's configuration: its /configz JSON, a KubeProxyConfiguration file, or the kube-proxy ConfigMap (-o yaml or json)")
	fs.StringArrayVar(&f.Conntrack, "from-conntrack", nil, "read the node's conntrack table from `FILE`: cat /proc/net/nf_conntrack, conntrack -L or conntrack -L -o extended (either family, also pasted); repeatable (the entries are joined); - reads stdin")
	fs.StringArrayVar(&f.ConntrackStats, "from-conntrack-stats", nil, "read the node's conntrack counters from `FILE` (cat /proc/net/stat/nf_conntrack); repeat it with a later read for rates (a file's time is when it was last written)")
	fs.StringArrayVar(&f.Sysctls, "from-sysctls", nil, "read the node's kernel settings from `FILE`: grep -H . /proc/sys/net/... FILES 2>&1, or sysctl -a")
	groupFlags(cmd, flagGroupKernel, "from-conntrack", "from-conntrack-stats", "from-sysctls")
	fs.StringVar(&f.Table, "table", "", "the iptables table of pasted rules that do not say it (-S, -A lines, -L listings without a *table header or an iptables -t command line): "+strings.Join(iptables.Tables, ", ")+"; default: inferred from the chains")
	_ = cmd.RegisterFlagCompletionFunc("table", cobra.FixedCompletions(iptables.Tables, cobra.ShellCompDirectiveNoFileComp))
	fs.StringVar(&f.At, "at", "", "judge ages as of this time (RFC 3339 or Unix seconds), e.g. when the metrics were saved; default: when the node was read (live or the bundle's collectedAt), else the newest timestamp in the metrics")
	fs.StringVar(&f.MaxSize, "max-input-size", "", "caps on the size of inputs, KIND=SIZE,... (default "+strings.ReplaceAll(defaultCaps.String(), ",", ", ")+"; bundle: the files of one .tar.gz together)")
	f.Live.AddFlags(cmd)
}

// addSelectFlags registers -A and -l; -n is kubectl's.
func (f *InputFlags) addSelectFlags(cmd *cobra.Command) {
	allHelp := "every namespace (the default; -n NAMESPACE for one)"
	if cmd.Name() == "explain" {
		allHelp = "look the Service up in every namespace (with -l, select in every namespace)"
	}
	cmd.Flags().BoolVarP(&f.AllNamespaces, "all-namespaces", "A", false, allHelp)
	cmd.Flags().StringVarP(&f.Selector, "selector", "l", "", "only Services with these labels (e.g. app=web,tier!=db), as kubectl selects")
}

// addNodeIPFlag registers --node-ip, for the commands that walk
// connections through the rules (explain, trace, triage).
func (f *InputFlags) addNodeIPFlag(cmd *cobra.Command) {
	cmd.Flags().StringArrayVar(&f.NodeIPs, "node-ip", nil, "an address of the node (repeatable), when no Node object says (--from-objects with kubectl get nodes): what node ports and local addresses are")
}

// AddFlags registers the live collection flags.
func (l *LiveOptions) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&l.Via, "via", collect.ViaAuto, "how to reach the node: debug-pod (a short-lived pod on the node), kube-proxy (exec into its kube-proxy pod), or auto (what your RBAC allows, preferring the debug pod)")
	fs.StringVar(&l.Image, "image", "", "debug pod image (needs sleep, iptables and nft); default: the node's own kube-proxy image, already cached there")
	fs.StringVar(&l.DebugNamespace, "debug-namespace", collect.DefaultDebugNamespace, "namespace of the debug pod: the one \"kubectl apply -f deploy/\" creates, or one whose Pod Security allows the privileged level")
	fs.DurationVar(&l.StartTimeout, "pod-timeout", 2*time.Minute, "how long to wait for the debug pod to run")
	fs.DurationVar(&l.Deadline, "pod-deadline", collect.DefaultPodDeadline, "activeDeadlineSeconds of the debug pod (the kubelet stops it after this even if the plugin is killed), and the most reading the node may take; at most 1h")
	fs.StringVar(&l.Reader, "reader", collect.ReaderAuto, "how to read whole iptables-nft tables: save (iptables-nft-save, with rule comments), nft (nft list table, no comments), or auto (save, then nft if the save fails)")
	fs.IntVar(&l.MetricsPort, "metrics-port", 0, "kube-proxy's metrics port on the node's loopback; default: from metricsBindAddress in kube-proxy's ConfigMap, else 10249")
	fs.BoolVar(&l.IncludeControlPlane, "include-control-plane", false, "also read control-plane nodes, whose loopback ports (etcd, the API server) a debug pod there could reach; off, --node refuses them and a sweep skips them")
	fs.BoolVar(&l.SkipPolicyCheck, "skip-policy-check", false, "create the debug pod even where a dry run shows that no admission policy guards --debug-namespace (a privileged pod would be admitted there); for admins who guard it otherwise")
	groupFlags(cmd, flagGroupLive, "via", "image", "debug-namespace", "pod-timeout", "pod-deadline", "reader", "metrics-port", "include-control-plane", "skip-policy-check")
	_ = cmd.RegisterFlagCompletionFunc("via", cobra.FixedCompletions([]string{collect.ViaAuto, collect.ViaDebugPod, collect.ViaKubeProxy}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("reader", cobra.FixedCompletions(collect.Readers, cobra.ShellCompDirectiveNoFileComp))
}

// Validate checks the live collection flags.
func (l *LiveOptions) Validate() error {
	switch l.Via {
	case collect.ViaAuto, collect.ViaDebugPod, collect.ViaKubeProxy:
	default:
		return fmt.Errorf("--via must be auto, debug-pod or kube-proxy, not %q", l.Via)
	}
	switch l.Reader {
	case collect.ReaderAuto, collect.ReaderSave, collect.ReaderNFT:
	default:
		return fmt.Errorf("--reader must be auto, save or nft, not %q", l.Reader)
	}
	if l.Deadline < collect.MinPodDeadline || l.Deadline > collect.MaxPodDeadline {
		return fmt.Errorf("--pod-deadline must be between %s and %s (the admission policy of deploy/ refuses longer-lived pods), not %s", collect.MinPodDeadline, collect.MaxPodDeadline, l.Deadline)
	}
	return nil
}

// Validate checks the flags before anything is read. sweep says the
// command sweeps (--node may repeat); nodeOptional that it may read no node
// at all (map CHAIN recomputes names from the objects).
func (f *InputFlags) Validate(sweep, nodeOptional bool) error {
	if len(f.Nodes) > 1 && !sweep {
		return fmt.Errorf("--node once: this command reads one node")
	}
	if len(f.Dumps) == 0 && len(f.Bundles) == 0 && len(f.Nodes) == 0 && !nodeOptional && !sweep {
		return fmt.Errorf("which node? Pass --node NAME to read it through the cluster, or --from-bundle DIR / --from-dump FILE to read a saved one")
	}
	if len(f.Dumps) > 0 && len(f.Bundles) > 0 {
		return fmt.Errorf("--from-dump and --from-bundle do not mix: a bundle holds its own dumps")
	}
	if err := readOptions(f.Table).Validate(); err != nil {
		return fmt.Errorf("--table: %w", err)
	}
	if err := f.Live.Validate(); err != nil {
		return err
	}
	stdin := 0
	for _, list := range [][]string{f.Dumps, f.Objects, f.Metrics, f.Config, f.Conntrack, f.ConntrackStats, f.Sysctls} {
		for _, d := range list {
			if d == "-" {
				stdin++
			}
		}
	}
	if stdin > 1 {
		return fmt.Errorf("only one input can be read from stdin (-)")
	}
	if _, err := parseAt(f.At); err != nil {
		return err
	}
	if _, err := parseNodeIPs(f.NodeIPs); err != nil {
		return err
	}
	if _, err := parseSelector(f.Selector); err != nil {
		return err
	}
	_, err := parseCaps(f.MaxSize)
	return err
}

// sweepDir is the sweep folder among --from-bundle, or "".
func (f *InputFlags) sweepDir() string {
	return sweepDirOf(f.Bundles)
}

func sweepDirOf(bundles []string) string {
	for _, b := range bundles {
		if collect.IsSweepDir(b) {
			return b
		}
	}
	return ""
}

// parseNodeIPs parses --node-ip.
func parseNodeIPs(ips []string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, s := range ips {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("--node-ip %q is not an IP address", s)
		}
		out = append(out, a.Unmap())
	}
	return out, nil
}

// parseSelector parses -l; nil when not given.
func parseSelector(s string) (labels.Selector, error) {
	if s == "" {
		return nil, nil
	}
	sel, err := labels.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("-l %q: %v", s, err)
	}
	return sel, nil
}
