package diagnose

import (
	"fmt"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/inspect/conntrack"
)

// kube-proxy v1.37.2 sizes nf_conntrack_max (pkg/proxy/conntrack/sysctls.go,
// getConntrackMax :131-157, setSysctls :68-92): maxPerCore × the node's
// CPUs, at least min, at most 1,048,576; nothing when maxPerCore is 0. It
// raises max and never lowers it, once, at start: a max below that target
// was lowered after kube-proxy started (or by a kube-proxy that failed to
// set it). Defaults (pkg/proxy/apis/config/v1alpha1/defaults.go:81-120):
// maxPerCore 32768, min 131072.
const (
	conntrackMaxLimit   = 1 << 20
	defaultConntrackMin = 131072
)

// KubeProxyConntrackMax is the nf_conntrack_max kube-proxy sets, 0 for
// none.
func KubeProxyConntrackMax(maxPerCore, floor int64, cpus int) int64 {
	if maxPerCore <= 0 {
		return 0
	}
	scaled := maxPerCore * int64(cpus)
	switch {
	case scaled > conntrackMaxLimit:
		return conntrackMaxLimit
	case scaled > floor:
		return scaled
	}
	return floor
}

// pressure judges the table's fill, its drop counters and its max.
func (rep *ConntrackReport) pressure(n *Node, in ConntrackInputs) {
	count, max, ok := tableSize(in)
	switch {
	case !ok:
		rep.NotChecked = append(rep.NotChecked, Gap{Check: "how full the conntrack table is (nf_conntrack_count against nf_conntrack_max)",
			Reason: "the sysctls were not read", Remedy: "the sysctl bundle (" + bundleHint() + ")"})
	case max > 0 && count >= max:
		rep.add(ConntrackProblem{Severity: SeverityError, Kind: ConntrackTableFull, Subject: conntrack.SysctlCount,
			Message:     fmt.Sprintf("the conntrack table is full (%d of %d): new connections dropped", count, max),
			Evidence:    fmt.Sprintf("%s = %d, %s = %d", conntrack.SysctlCount, count, conntrack.SysctlMax, max),
			Consequence: "every packet that would start a connection (every Service connection in iptables and nftables mode takes a slot) is dropped; the kernel logs \"nf_conntrack: table full, dropping packet\"",
			Remedy:      fmt.Sprintf("raise %s (kube-proxy's conntrack.maxPerCore/min set it at start), and find what fills it (conntrack -S; conntrack -L | sort by source)", conntrack.SysctlMax)})
	case max > 0 && count*10 >= max*9:
		rep.add(ConntrackProblem{Severity: SeverityWarning, Kind: ConntrackTableNearFull, Subject: conntrack.SysctlCount,
			Message:     fmt.Sprintf("the conntrack table is %d%% full (%d of %d)", count*100/max, count, max),
			Evidence:    fmt.Sprintf("%s = %d, %s = %d", conntrack.SysctlCount, count, conntrack.SysctlMax, max),
			Consequence: "at 100% new connections are dropped; unassured entries are evicted first (early_drop)",
			Remedy:      fmt.Sprintf("raise %s, or find what fills the table", conntrack.SysctlMax)})
	}
	rep.drops(in)
	rep.maxLowered(n, in, max, ok)
}

// tableSize is count and max, from the sysctls or the table's copy.
func tableSize(in ConntrackInputs) (count, max int64, ok bool) {
	count, max = -1, -1
	if in.Table != nil {
		count, max = in.Table.Count, in.Table.Max
	}
	if in.Sysctls != nil {
		if v, ok := in.Sysctls.Int(conntrack.SysctlCount); ok {
			count = v
		}
		if v, ok := in.Sysctls.Int(conntrack.SysctlMax); ok {
			max = v
		}
	}
	return count, max, count >= 0 && max >= 0
}

// drops judges the growth of insert_failed, drop and early_drop between
// two reads of /proc/net/stat/nf_conntrack (datapath facts §4.5: a full
// table makes drop and early_drop grow).
func (rep *ConntrackReport) drops(in ConntrackInputs) {
	if in.Before == nil || in.After == nil {
		rep.NotChecked = append(rep.NotChecked, Gap{Check: "whether conntrack drops packets now (insert_failed, drop, early_drop growing)",
			Reason: "not two reads of /proc/net/stat/nf_conntrack", Remedy: "read /proc/net/stat/nf_conntrack twice, a few seconds apart"})
		return
	}
	d := conntrack.Diff(in.Before, in.After)
	rate := func(v int64) string {
		if in.Interval <= 0 {
			return fmt.Sprintf("+%d", v)
		}
		return fmt.Sprintf("+%d in %s (%.1f/s)", v, in.Interval, float64(v)/in.Interval.Seconds())
	}
	var grew []string
	for _, c := range []string{conntrack.StatInsertFailed, conntrack.StatDrop} {
		if d[c] > 0 {
			grew = append(grew, c+" "+rate(d[c]))
		}
	}
	if len(grew) > 0 {
		p := ConntrackProblem{Severity: SeverityError, Kind: ConntrackDrops, Subject: "/proc/net/stat/nf_conntrack",
			Message:  "conntrack is dropping packets now: " + joinComma(grew),
			Evidence: "between two reads of /proc/net/stat/nf_conntrack: " + joinComma(grew)}
		p.Consequence, p.Remedy = dropCauses(d[conntrack.StatDrop], d[conntrack.StatInsertFailed])
		rep.add(p)
	}
	if d[conntrack.StatEarlyDrop] > 0 {
		rep.add(ConntrackProblem{Severity: SeverityWarning, Kind: ConntrackEarlyDrops, Subject: "/proc/net/stat/nf_conntrack",
			Message:     "conntrack evicts entries to make room: early_drop " + rate(d[conntrack.StatEarlyDrop]),
			Evidence:    "between two reads of /proc/net/stat/nf_conntrack: early_drop " + rate(d[conntrack.StatEarlyDrop]),
			Consequence: "the table is full: a new connection evicts an unassured entry near its hash bucket (the kernel looks at 8 buckets) and is dropped when none is there, however many are elsewhere",
			Remedy:      "raise nf_conntrack_max, or find what fills the table"})
	}
}

// maxLowered: nf_conntrack_max below what kube-proxy's configuration sets.
func (rep *ConntrackReport) maxLowered(n *Node, in ConntrackInputs, max int64, ok bool) {
	cpus := in.CPUs
	if cpus <= 0 {
		cpus = nodeCPUs(n)
	}
	switch {
	case !ok:
		return // the fill gap says the sysctls were not read
	case in.MaxPerCore == nil:
		rep.NotChecked = append(rep.NotChecked, Gap{Check: "nf_conntrack_max against what kube-proxy's conntrack.maxPerCore and min set",
			Reason: "kube-proxy's conntrack configuration was not given", Remedy: "--from-config with its conntrack section"})
		return
	}
	floor := int64(0)
	if in.Min != nil {
		floor = int64(*in.Min)
	}
	if cpus <= 0 {
		// The counters have a row per possible CPU, at least the CPUs
		// kube-proxy counts (online): what they would set is a bound.
		if rows := statsCPUs(in); rows > 0 && max >= KubeProxyConntrackMax(int64(*in.MaxPerCore), floor, rows) {
			return
		}
		if *in.MaxPerCore <= 0 || max >= floor {
			rep.NotChecked = append(rep.NotChecked, Gap{Check: "nf_conntrack_max against what kube-proxy's conntrack.maxPerCore sets",
				Reason: "the node's CPU count is not known", Remedy: "--from-objects with the Node (kubectl get nodes -o json)"})
			return
		}
		// below min: lowered whatever the CPU count (kube-proxy sets at least min)
		rep.add(maxLoweredProblem(max, floor, fmt.Sprintf("%s = %d; kube-proxy sets at least conntrack.min %d, whatever the CPUs", conntrack.SysctlMax, max, floor)))
		return
	}
	want := KubeProxyConntrackMax(int64(*in.MaxPerCore), floor, cpus)
	if want == 0 || max >= want {
		return
	}
	rep.add(maxLoweredProblem(max, want, fmt.Sprintf("%s = %d; kube-proxy: maxPerCore %d × %d CPUs, min %d → %d", conntrack.SysctlMax, max, *in.MaxPerCore, cpus, floor, want)))
}

// maxLoweredProblem: nf_conntrack_max is max, kube-proxy sets want.
func maxLoweredProblem(max, want int64, evidence string) ConntrackProblem {
	return ConntrackProblem{Severity: SeverityWarning, Kind: ConntrackMaxLowered, Subject: conntrack.SysctlMax,
		Message:     fmt.Sprintf("%s is %d, below the %d kube-proxy sets: someone lowered it", conntrack.SysctlMax, max, want),
		Evidence:    evidence,
		Consequence: "the table fills sooner than kube-proxy's configuration allows for; kube-proxy raises it only when it starts",
		Remedy:      fmt.Sprintf("sysctl -w %s=%d (and find who lowered it: a sysctl.d file, a DaemonSet), or restart kube-proxy", conntrack.SysctlMax, want)}
}

// dropCauses tells the two causes of drop apart: a new entry that lost a
// clash is counted in both insert_failed and drop (nf_ct_resolve_clash),
// so only drops beyond insert_failed are for a full table.
func dropCauses(drop, insertFailed int64) (consequence, remedy string) {
	var cons, rem []string
	if full := drop - insertFailed; full > 0 {
		cons = append(cons, fmt.Sprintf("%d new connections refused for a full table (drop beyond insert_failed)", full))
		rem = append(rem, "raise nf_conntrack_max, and find what fills the table")
	}
	if insertFailed > 0 {
		cons = append(cons, fmt.Sprintf("%d new entries lost a race to an identical one (insert_failed, counted in drop too: often parallel UDP DNS queries from one socket) and their packets were dropped", insertFailed))
		rem = append(rem, "for the races: single-request-reopen or TCP for DNS, or NodeLocal DNSCache")
	}
	return strings.Join(cons, "; "), strings.Join(rem, "; ")
}

// statsCPUs is the rows of the counters read: the node's possible CPUs.
func statsCPUs(in ConntrackInputs) int {
	for _, st := range []*conntrack.Stats{in.After, in.Before} {
		if st != nil && len(st.CPUs) > 0 {
			return len(st.CPUs)
		}
	}
	return 0
}

// nodeCPUs is the Node object's CPU capacity, 0 when unknown (kube-proxy
// sizes by the host's CPUs, which capacity reports).
func nodeCPUs(n *Node) int {
	node := n.Objects.Node(n.Name)
	if node == nil {
		return 0
	}
	if q, ok := node.Status.Capacity["cpu"]; ok {
		return int(q.Value())
	}
	return 0
}

func bundleHint() string { return "grep -H . /proc/sys/net/netfilter/nf_conntrack_* … on the node" }

func joinComma(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ", "
		}
		out += x
	}
	return out
}
