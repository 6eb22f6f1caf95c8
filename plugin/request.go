package plugin

import (
	"net/netip"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/plugin/collect"
)

// A Request is one load of a node's inputs, a plain value: which node,
// where its inputs come from, how much of it to read, and what is already
// known. A command makes one from its flags (newRequest), narrows it where
// it knows more (explain: one Service; a sweep: one node, the objects read
// once), and hands it to a Loader (loader.go).
type Request struct {
	// Node is the node: read through the cluster when no file is given,
	// else the one the files come from; "" lets a bundle say.
	Node string
	// Files are the inputs given on the command line.
	Files InputFiles
	// Table is --table, for pasted iptables rules that do not say theirs.
	Table string
	// NodeIPs are --node-ip: the node's addresses when no Node object says.
	NodeIPs []netip.Addr
	// Select is -n and -l: the Services the report covers.
	Select ServiceSelection
	// At is --at, the time ages are judged against (zero: when the node
	// was read).
	At time.Time

	// ObjectsOnly: no node is read (map CHAIN recomputes the names from
	// the objects, the cluster's when none are given).
	ObjectsOnly bool
	// Service, when set, is the one Service the command looks at: a live
	// read fetches only its chains, an offline read parses only its
	// objects and chains where that gives the same answer (targeted.go).
	Service *correlate.ServiceFilter
	// Walk: the command only walks the Service's packets (trace), so a
	// narrowed read leaves other Services' chains out whole
	// (trace_load.go).
	Walk bool
	// Objects are API objects already read (explain resolved its Service
	// first; a sweep lists them once for every node): no objects file is
	// read, and none is listed from the cluster.
	Objects *correlate.Objects
	// Fleet is the live sweep this read belongs to: what is read once for
	// every node.
	Fleet *collect.Fleet
	// Quiet: no progress on stderr (a sweep's node: its warnings are in
	// its report).
	Quiet bool
	// Kernel: a live read also reads the kernel's state beside the rules
	// (the conntrack table, its counters and the sysctls: triage,
	// conntrack and collect judge or keep them). KernelOnly: the command
	// judges only that (conntrack), so inputs without a ruleset will do.
	Kernel, KernelOnly bool
	// KernelTable: a live read of one Service (explain) also reads the
	// conntrack entries of that Service alone: no counters, no wait.
	KernelTable bool
	// StatsInterval, when set, is the least time between the two reads
	// of the conntrack counters (collect.Options.StatsInterval).
	StatsInterval time.Duration
}

// InputFiles are the files of a load, by the flag that names them.
type InputFiles struct {
	Dumps, Objects, Metrics, Config, Bundles []string
	// Conntrack, ConntrackStats and Sysctls are --from-conntrack,
	// --from-conntrack-stats and --from-sysctls (conntrackinput.go).
	Conntrack, ConntrackStats, Sysctls []string
}

// ServiceSelection is -n and -l.
type ServiceSelection struct {
	// Namespace is -n as given ("" for every namespace).
	Namespace string
	// Labels is -l parsed, nil when not given.
	Labels labels.Selector
}

// newRequest is where the flags become a request: the values parsed
// (Validate has checked them) and the node named, when one is.
func newRequest(f *InputFlags, kube *genericclioptions.ConfigFlags) (Request, error) {
	r := Request{
		Files: InputFiles{Dumps: f.Dumps, Objects: f.Objects, Metrics: f.Metrics, Config: f.Config, Bundles: f.Bundles,
			Conntrack: f.Conntrack, ConntrackStats: f.ConntrackStats, Sysctls: f.Sysctls},
		Table: f.Table,
	}
	if len(f.Nodes) == 1 {
		r.Node = f.Nodes[0]
	}
	var err error
	if r.At, err = parseAt(f.At); err != nil {
		return r, err
	}
	if r.NodeIPs, err = parseNodeIPs(f.NodeIPs); err != nil {
		return r, err
	}
	if r.Select.Labels, err = parseSelector(f.Selector); err != nil {
		return r, err
	}
	if kube != nil && kube.Namespace != nil && !f.AllNamespaces {
		r.Select.Namespace = *kube.Namespace
	}
	return r, nil
}

func clip(s []string) []string { return s[:len(s):len(s)] }

// live says whether the node is read through the cluster.
func (r Request) live() bool {
	return len(r.Files.Dumps) == 0 && len(r.Files.Bundles) == 0 && !r.Files.kernel() && r.Node != ""
}

// kernel: the kernel's state beside the rules was given, saved (a table,
// counters or sysctls).
func (f InputFiles) kernel() bool {
	return len(f.Conntrack)+len(f.ConntrackStats)+len(f.Sysctls) > 0
}

// forNode is the request for one node of a sweep.
func (r Request) forNode(node string) Request {
	r.Node = node
	r.Files.Bundles = nil
	return r
}

// readsStdin: an input is "-", which cannot be read a second time.
func (f InputFiles) readsStdin() bool {
	for _, list := range [][]string{f.Dumps, f.Objects, f.Metrics, f.Config, f.Conntrack, f.ConntrackStats, f.Sysctls} {
		if slices.Contains(list, "-") {
			return true
		}
	}
	return false
}

// filter is the selection as a filter on Services, nil for all: -l needs
// the Services' labels, from objs.
func (s ServiceSelection) filter(objs *correlate.Objects) func(namespace, name string) bool {
	if s.Namespace == "" && s.Labels == nil {
		return nil
	}
	svcLabels := map[string]map[string]string{}
	if objs != nil && s.Labels != nil {
		for _, svc := range objs.Services {
			svcLabels[svc.Namespace+"/"+svc.Name] = svc.Labels
		}
	}
	return func(namespace, name string) bool {
		if s.Namespace != "" && namespace != s.Namespace {
			return false
		}
		if s.Labels == nil {
			return true
		}
		l, ok := svcLabels[namespace+"/"+name]
		return ok && s.Labels.Matches(labels.Set(l))
	}
}
