package collect

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
)

// readNode reads the node (read), then, for explain, the Service's
// conntrack entries.
func (c *Collector) readNode(ctx context.Context, w *bundleWriter, t Target, listing *pendingObjects, metricsPort int) error {
	if err := c.read(ctx, w, t, listing, metricsPort); err != nil {
		return err
	}
	if c.KernelTable && !c.Kernel {
		objects, err := listing.wait()
		if err != nil {
			return err
		}
		defer c.Timings.Start(PhaseKernel)(0)
		return c.readServiceConntrack(ctx, w, t, objects)
	}
	return nil
}

// readServiceConntrack reads, for explain (Options.KernelTable), the
// table's entries of the one Service read (ServiceNamespace/ServiceName):
// one grep filtered on the node to its addresses and NodePorts. No
// counters (their rates need two reads seconds apart: explain must stay
// fast), no sysctls (node-wide settings, judged by triage and conntrack;
// explain shows only the Service's entries), no ServiceCIDR range (a
// deleted Service is explained from a whole read). A Service not among
// the objects reads nothing.
func (c *Collector) readServiceConntrack(ctx context.Context, w *bundleWriter, t Target, objects *correlate.Objects) error {
	svc := serviceObjects(objects, c.ServiceNamespace, c.ServiceName)
	if svc == nil {
		return nil
	}
	filter := ServiceConntrackFilter(svc)
	ct := &ConntrackRead{Total: -1, Filter: filter.Mode, Patterns: len(filter.Patterns), MaxEntries: filter.MaxEntries}
	w.man.Conntrack = ct
	cmds := []NodeCommand{ConntrackTableCommand(filter)}
	c.Progress.Step("reading the conntrack entries of %s/%s (%d addresses and NodePorts, at most %d)", c.ServiceNamespace, c.ServiceName, len(filter.Patterns), filter.MaxEntries)
	res, stderr, err := c.runConntrack(ctx, w, t, cmds, 0)
	if err != nil {
		return c.conntrackFailed(ctx, w, err, t, stderr)
	}
	tf := res.file(0, cmds[0])
	tf.Bytes, tf.Seconds = res.lines.n, res.seconds
	ct.Kept = res.lines.lines
	ct.Capped = ct.Kept >= int64(filter.MaxEntries)
	// grep exits 1 when no entry matches: none of this Service, no failure.
	if rc := res.rcs[0]; rc > 1 || rc < 0 {
		tf.Error = fmt.Sprintf("exit status %d", rc)
		w.warn("the conntrack table was not read (%s%s): %s needs root in the node's network namespace and a kernel with NF_CONNTRACK_PROCFS; the Service's conntrack entries are not shown",
			tf.Error, stderrHint(stderr, failedCommands(res.rcs)), conntrackProc)
	} else {
		tf.Error = "" // the table's output is in its file
	}
	w.add(tf)
	return nil
}

// serviceObjects are objs narrowed to the Service ns/name, nil when it is
// not there: what the table's filter is made of.
func serviceObjects(objs *correlate.Objects, ns, name string) *correlate.Objects {
	if objs == nil || name == "" {
		return nil
	}
	for _, s := range objs.Services {
		if s.Namespace == ns && s.Name == name {
			return &correlate.Objects{Services: []*corev1.Service{s}}
		}
	}
	return nil
}
