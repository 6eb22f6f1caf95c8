package plugin

import (
	"fmt"
	"io"

	"github.com/proxyrules/kubectl-proxyrules/diagnose"
)

// renderTriageIPVS is triage's summary of an IPVS node, in place of the
// chain count: IPVS mode's chains name no Service.
func renderTriageIPVS(out io.Writer, t *Terminal, r *diagnose.IPVSReport) {
	if !r.Read {
		fmt.Fprintln(out, "ipvs: virtual servers not read (see not checked)")
		return
	}
	c := r.Counts
	fmt.Fprintln(out, wrapIndent(fmt.Sprintf("ipvs: %s (%d of a Service, %d without owner), %s", count(c.VirtualServers, "virtual server"),
		c.Attributed-c.Probes, c.Unattributed, count(c.RealServers, "real server")), t.Width, 2))
	if s := r.IPSets; s != nil {
		fmt.Fprintln(out, wrapIndent(fmt.Sprintf("ipsets: %s, %d attributed, %d without owner, %d missing", count(s.Counts.Members, "member"),
			s.Counts.Attributed, s.Counts.Unattributed, s.Counts.Missing), t.Width, 2))
	}
}
