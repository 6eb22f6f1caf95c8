package diagnose

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/inspect/conntrack"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// The settings Services depend on (datapath facts §4.8; kube-proxy v1.37.2):
//   - net.ipv4.ip_forward is per network namespace; only IPVS mode sets it
//     (pkg/proxy/ipvs/proxier.go:104, 290);
//   - net.ipv4.conf.all.route_localnet: the iptables proxier sets it to 1
//     while localhostNodePorts is in effect (pkg/proxy/iptables/proxier.go:90,
//     229-232), once, at start;
//   - nf_conntrack_tcp_be_liberal: kube-proxy sets it to 1 when
//     conntrack.tcpBeLiberal (pkg/proxy/conntrack/sysctls.go:108-112), and
//     the iptables proxier leaves out KUBE-FORWARD's INVALID drop when it is
//     not 0 (proxier.go:91, 241);
//   - kube-proxy never reads or sets bridge-nf-call-* or
//     ip_local_port_range: a NodePort inside the ephemeral range can be
//     taken by a local client's socket (#111823, open; PR #138272 closed:
//     "fixed at installation time").

// settings judges the sysctls.
func (rep *ConntrackReport) settings(n *Node, in ConntrackInputs, mode kubeproxy.Mode) {
	s := in.Sysctls
	if s == nil {
		rep.NotChecked = append(rep.NotChecked, Gap{Check: "the kernel settings Services depend on (ip_forward, bridge-nf-call-iptables, route_localnet, ip_local_port_range, tcp_be_liberal)",
			Reason: "the sysctls were not read", Remedy: "the sysctl bundle (" + strings.Join(conntrack.BundleCommand()[:3], " ") + " /proc/sys/… on the node)"})
		return
	}
	v6 := n.Objects != nil && len(servicesOfFamily(n.Objects, kubeproxy.IPv6)) > 0
	rep.forwarding(s, v6, n.Objects != nil)
	rep.bridge(s, v6)
	rep.routeLocalnet(n, in, s, mode)
	rep.portRange(n, s)
	rep.beLiberal(n, s, mode)
	rep.ipvs(s, mode)
}

// zeroSetting is a setting read as 0; missing says whether it was not read.
func zeroSetting(s *conntrack.Sysctls, name string) (zero, read bool) {
	v, ok := s.Int(name)
	return ok && v == 0, ok
}

func (rep *ConntrackReport) notRead(name, check string) {
	rep.NotChecked = append(rep.NotChecked, Gap{Check: check, Reason: name + " was not in the sysctls read", Remedy: "the sysctl bundle with " + conntrack.SysctlPath(name)})
}

func (rep *ConntrackReport) forwarding(s *conntrack.Sysctls, v6Services, haveObjects bool) {
	if zero, read := zeroSetting(s, conntrack.SysctlIPForward); !read {
		rep.notRead(conntrack.SysctlIPForward, "IPv4 forwarding")
	} else if zero {
		rep.add(forwardingProblem(conntrack.SysctlIPForward, "IPv4"))
	}
	zero, read := zeroSetting(s, conntrack.SysctlIPv6Forwarding)
	switch {
	case !read:
		rep.notRead(conntrack.SysctlIPv6Forwarding, "IPv6 forwarding")
	case zero && v6Services:
		rep.add(forwardingProblem(conntrack.SysctlIPv6Forwarding, "IPv6"))
	case zero && !haveObjects:
		rep.NotChecked = append(rep.NotChecked, Gap{Check: "whether IPv6 forwarding off (" + conntrack.SysctlIPv6Forwarding + " = 0) breaks IPv6 Services",
			Reason: "no API objects were given: whether there are IPv6 Services is not known", Remedy: "--from-objects"})
	}
}

func forwardingProblem(name, fam string) ConntrackProblem {
	return ConntrackProblem{Severity: SeverityError, Kind: ConntrackForwarding, Subject: name,
		Message:     fmt.Sprintf("%s forwarding is off on the node: Service traffic to endpoints elsewhere is not forwarded", fam),
		Evidence:    name + " = 0",
		Consequence: "packets DNATed to an endpoint on another node or in a pod, from pods or from outside, are dropped: Services (and NodePorts) fail though the rules are right",
		Remedy:      fmt.Sprintf("sysctl -w %s=1, and set it in /etc/sysctl.d so it survives a reboot (only IPVS mode sets it itself)", name)}
}

// bridge: with br_netfilter loaded the files exist; 0 lets bridged
// traffic past iptables and nftables.
func (rep *ConntrackReport) bridge(s *conntrack.Sysctls, v6 bool) {
	for _, b := range []struct {
		name string
		need bool
	}{{conntrack.SysctlBridgeIPTables, true}, {conntrack.SysctlBridgeIP6Tables, v6}} {
		if zero, read := zeroSetting(s, b.name); !read || !zero || !b.need {
			continue // absent: br_netfilter is not loaded, nothing to judge
		}
		rep.add(ConntrackProblem{Severity: SeverityWarning, Kind: ConntrackBridgeNF, Subject: b.name,
			Message:     "br_netfilter is loaded but " + b.name + " is 0: bridged traffic skips kube-proxy's rules",
			Evidence:    b.name + " = 0 (the file exists: br_netfilter is loaded)",
			Consequence: "with a bridge CNI, a pod's reply to a pod on the same bridge skips conntrack's reverse NAT: a client that reached a Service gets its answer from the endpoint's IP and drops it",
			Remedy:      "sysctl -w " + b.name + "=1 and persist it (kubeadm's preflight requires it)"})
	}
}

// routeLocalnet: route_localnet 0 while the rules accept localhost
// NodePorts (iptables mode).
func (rep *ConntrackReport) routeLocalnet(n *Node, in ConntrackInputs, s *conntrack.Sysctls, mode kubeproxy.Mode) {
	if mode != kubeproxy.ModeIPTables {
		return // nftables never DNATs localhost NodePorts; IPVS does not use it
	}
	zero, read := zeroSetting(s, conntrack.SysctlRouteLocalnet)
	if !read {
		rep.notRead(conntrack.SysctlRouteLocalnet, "route_localnet against localhost NodePorts")
		return
	}
	on, evidence := in.LocalhostNodePorts, "given"
	if on == nil && n.Config != nil && n.Config.LocalhostNodePorts != nil {
		v := n.Config.LocalhostNodePortsEffective
		on, evidence = &v, "kube-proxy's configuration (iptables.localhostNodePorts, nodePortAddresses)"
	}
	if on == nil && n.Ruleset != nil {
		on, evidence = LocalhostNodePortsFromDump(n.Ruleset.IPTable(kubeproxy.IPv4, kubeproxy.TableNAT))
	}
	switch {
	case on == nil:
		if zero {
			rep.NotChecked = append(rep.NotChecked, Gap{Check: "whether route_localnet = 0 breaks localhost NodePorts",
				Reason: "neither kube-proxy's configuration nor the nat table says whether localhost NodePorts are on", Remedy: "--from-config, or the whole iptables-save"})
		}
	case *on && zero:
		rep.add(ConntrackProblem{Severity: SeverityWarning, Kind: ConntrackRouteLocalnet, Subject: conntrack.SysctlRouteLocalnet,
			Message:     "the rules accept NodePorts on 127.0.0.1 but route_localnet is 0: localhost NodePorts do not answer",
			Evidence:    fmt.Sprintf("%s = 0; localhost NodePorts on: %s", conntrack.SysctlRouteLocalnet, evidence),
			Consequence: "connections to 127.0.0.1:NODEPORT are DNATed to an endpoint, but the kernel will not route a packet from 127.0.0.1 off the host: they time out",
			Remedy:      "sysctl -w " + conntrack.SysctlRouteLocalnet + "=1 (kube-proxy sets it only at start; find who reset it), or iptables.localhostNodePorts: false"})
	}
}

// portRange: NodePorts and health-check NodePorts inside
// ip_local_port_range and not reserved.
func (rep *ConntrackReport) portRange(n *Node, s *conntrack.Sysctls) {
	lo, hi, ok := s.PortRange()
	if !ok {
		rep.notRead(conntrack.SysctlLocalPortRange, "NodePorts against the ephemeral port range")
		return
	}
	if n.Objects == nil {
		return // the objects' gap says it
	}
	reserved := reservedPorts(s.Values[conntrack.SysctlLocalReservedPorts])
	inRange := map[int32][]string{}
	for _, sp := range n.Objects.ServicePorts() {
		for _, p := range []struct {
			port int32
			what string
		}{{sp.NodePort, "nodePort of " + sp.String()}, {sp.HealthCheckNodePort, "healthCheckNodePort of " + sp.Namespace + "/" + sp.Name}} {
			if p.port > 0 && int(p.port) >= lo && int(p.port) <= hi && !reserved(int(p.port)) && !slices.Contains(inRange[p.port], p.what) {
				inRange[p.port] = append(inRange[p.port], p.what)
			}
		}
	}
	if len(inRange) == 0 {
		return
	}
	var ports []int32
	for p := range inRange {
		ports = append(ports, p)
	}
	sort.Slice(ports, func(i, j int) bool { return ports[i] < ports[j] })
	var list []string
	for _, p := range ports {
		list = append(list, fmt.Sprintf("%d (%s)", p, strings.Join(inRange[p], ", ")))
	}
	rep.add(ConntrackProblem{Severity: SeverityWarning, Kind: ConntrackPortRange, Subject: conntrack.SysctlLocalPortRange,
		Message:     fmt.Sprintf("%d NodePort%s inside the ephemeral port range %d-%d: %s", len(ports), plural(len(ports)), lo, hi, examples(list, 5)),
		Evidence:    fmt.Sprintf("%s = %d %d; not in %s", conntrack.SysctlLocalPortRange, lo, hi, conntrack.SysctlLocalReservedPorts),
		Consequence: "a local client's socket can take the port as its source port (#111823); its flows then collide with the NodePort's, and a health-check NodePort kube-proxy cannot bind fails the load balancer's checks",
		Remedy:      fmt.Sprintf("add the NodePort range to %s (e.g. 30000-32767), or move ip_local_port_range above it", conntrack.SysctlLocalReservedPorts)})
}

// reservedPorts reads ip_local_reserved_ports ("30000-32767,40000").
func reservedPorts(v string) func(int) bool {
	type span struct{ lo, hi int }
	var spans []span
	for _, part := range strings.Split(strings.ReplaceAll(v, " ", ""), ",") {
		a, b, isRange := strings.Cut(part, "-")
		l, err1 := strconv.Atoi(a)
		h, err2 := l, error(nil)
		if isRange {
			h, err2 = strconv.Atoi(b)
		}
		if err1 == nil && err2 == nil {
			spans = append(spans, span{l, h})
		}
	}
	return func(p int) bool {
		for _, s := range spans {
			if p >= s.lo && p <= s.hi {
				return true
			}
		}
		return false
	}
}

// beLiberal: nf_conntrack_tcp_be_liberal against kube-proxy's
// conntrack.tcpBeLiberal.
func (rep *ConntrackReport) beLiberal(n *Node, s *conntrack.Sysctls, mode kubeproxy.Mode) {
	v, read := s.Int(conntrack.SysctlTCPBeLiberal)
	switch {
	case !read:
		rep.notRead(conntrack.SysctlTCPBeLiberal, "tcp_be_liberal against kube-proxy's conntrack.tcpBeLiberal")
	case n.Config == nil:
		rep.NotChecked = append(rep.NotChecked, Gap{Check: "tcp_be_liberal against kube-proxy's conntrack.tcpBeLiberal",
			Reason: "kube-proxy's configuration was not given", Remedy: "--from-config"})
	case n.Config.ConntrackTCPBeLiberal && v == 0:
		consequence := "conntrack marks out-of-window TCP packets INVALID again"
		if mode == kubeproxy.ModeIPTables {
			consequence += "; if kube-proxy started with it on, its rules lack KUBE-FORWARD's INVALID drop, so such packets leave un-DNATed and the client answers them with a reset"
		}
		rep.add(ConntrackProblem{Severity: SeverityWarning, Kind: ConntrackTCPBeLiberal, Subject: conntrack.SysctlTCPBeLiberal,
			Message:     "kube-proxy's configuration sets tcp_be_liberal, but the node has it off: someone reset it",
			Evidence:    conntrack.SysctlTCPBeLiberal + " = 0; kube-proxy conntrack.tcpBeLiberal: true",
			Consequence: consequence,
			Remedy:      "sysctl -w " + conntrack.SysctlTCPBeLiberal + "=1 (kube-proxy sets it only at start), and find who reset it"})
	}
}
