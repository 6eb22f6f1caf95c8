package diagnose

import (
	"fmt"
	"regexp"
)

// The reasons given for stale UDP entries (correlate.Cause*: who cleans
// them and why not) are kube-proxy v1.37's cleanup (pkg/proxy/conntrack/
// cleanup.go). Other versions differ: before v1.37.0 a Service scaled to
// zero is not cleaned (#139628), and after v1.37 a deleted Service is
// (#141371, on master since 2026-08-14).
var minorOf = regexp.MustCompile(`^v1\.([0-9]+)\.`)

// cleanupVersionGap says so when the node's kube-proxy is known to be of
// another minor version and there are stale UDP entries to judge.
func (rep *ConntrackReport) cleanupVersionGap(n *Node) {
	m := minorOf.FindStringSubmatch(n.KubeProxyVersion)
	if m == nil || m[1] == "37" || rep.Summary.StaleUDP == 0 {
		return
	}
	rep.NotChecked = append(rep.NotChecked, Gap{
		Check: "whether kube-proxy's own cleanup removes the stale UDP entries, and why not (judged as kube-proxy v1.37 cleans)",
		Reason: fmt.Sprintf("this node's kube-proxy is %s, whose cleanup differs (before v1.37.0 a Service scaled to zero is not cleaned, #139628; after v1.37 a deleted Service is, #141371)",
			n.KubeProxyVersion),
		Remedy: "clear the entries with the commands shown, whatever kube-proxy would do"})
}
