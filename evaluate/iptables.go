package evaluate

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/inspect/iptables/ruleargs"
)

// evalIPT evaluates an iptables rule read from iptables-save text.
func (w *walk) evalIPT(t *thread, ch chainRef, i int, r *iptRule) []branch {
	if r.err != nil {
		return w.branches(t, ch, i, []cond{unknown("a rule that could not be read (%v)", r.err)},
			func(*thread) effect {
				return effect{act: actUnknown, what: "the target of a rule that could not be read"}
			})
	}
	conds := w.conds[:0]
	defer func() { w.conds = conds[:0] }()
	for _, m := range r.spec.Matches {
		if m.Module == "recent" {
			conds = append(conds, w.recentMatch(m))
			continue
		}
		for _, o := range m.Options {
			c := w.iptOption(t, m.Module, o)
			conds = append(conds, c)
			if c.kind == condFalse {
				return w.result(t, effect{}, nil)
			}
		}
		if m.Module != "" && len(m.Options) == 0 && !moduleAlwaysMatches(m.Module) {
			conds = append(conds, unknown("-m %s", m.Module))
		}
	}
	return w.branches(t, ch, i, conds, func(t *thread) effect { return w.iptTarget(t, ch, &r.spec) })
}

// moduleAlwaysMatches: modules that match any packet when given no
// options (-m tcp, -m comment …).
func moduleAlwaysMatches(m string) bool {
	switch m {
	case "tcp", "udp", "sctp", "udplite", "dccp", "comment", "nfacct", "conntrack", "state", "mark", "connmark", "multiport", "addrtype":
		return true
	}
	return false
}

// iptOption evaluates one match option: by its module, and as not
// understood (so both ways) where the module or option is not one this
// reads. Each reader's ok is false for an option it does not know.
func (w *walk) iptOption(t *thread, module string, o ruleargs.Option) cond {
	arg := o.Arg()
	switch module {
	case "":
		if c, ok := w.plainOption(t, o); ok {
			return c
		}
	case "tcp", "udp", "sctp", "udplite", "dccp":
		if !strings.EqualFold(w.pkt.Protocol, module) {
			return no
		}
		if c, ok := portOption(t, o); ok {
			return c
		}
	case "multiport":
		if c, ok := multiportOption(t, o); ok {
			return c
		}
	case "addrtype":
		return w.addrtypeOption(t, o)
	case "comment", "nfacct":
		return yes
	case "mark":
		if o.Name == "--mark" {
			return not(markCond(t.mark, arg), o.Not)
		}
	case "connmark":
		if o.Name == "--mark" {
			return not(markCond(t.ctmark, arg), o.Not)
		}
	case "conntrack", "state":
		if c, ok := w.conntrackOption(t, o); ok {
			return c
		}
	case "statistic":
		if c, ok := statisticOption(o); ok {
			return c
		}
	case "iprange":
		switch o.Name {
		case "--src-range":
			return not(addrCond(t.src.Addr(), arg), o.Not)
		case "--dst-range":
			return not(addrCond(t.dst.Addr(), arg), o.Not)
		}
	case "set":
		if c, ok := w.setOption(t, o); ok {
			return c
		}
	case "ipvs":
		if c, ok := w.ipvsOption(t, o); ok {
			return c
		}
	case "pkttype":
		if o.Name == "--pkt-type" {
			return not(truth(strings.EqualFold(arg, "unicast")), o.Not)
		}
	}
	return not(unknown("-m %s %s %s", module, o.Name, strings.Join(o.Args, " ")), o.Not)
}

// plainOption is an option of no module: -p, -s, -d, -i, -o, -f.
func (w *walk) plainOption(t *thread, o ruleargs.Option) (cond, bool) {
	arg := o.Arg()
	switch o.Name {
	case "-p":
		return not(w.protoIs(t, arg), o.Not), true
	case "-s":
		return not(addrCond(t.src.Addr(), arg), o.Not), true
	case "-d":
		return not(addrCond(t.dst.Addr(), arg), o.Not), true
	case "-i":
		if !t.iifKnown {
			return not(inIface(strings.TrimSuffix(arg, "+")+wildcard(arg)), o.Not), true
		}
		return not(truth(ifaceMatches(t.iif, arg)), o.Not), true
	case "-o":
		if w.pkt.OutIface == "" {
			return not(outIface(strings.TrimSuffix(arg, "+")+wildcard(arg)), o.Not), true
		}
		return not(truth(ifaceMatches(w.pkt.OutIface, arg)), o.Not), true
	case "-f":
		return not(no, o.Not), true // a connection's first packet is no later fragment
	}
	return cond{}, false
}

// portOption is an option of -m tcp, udp, sctp, udplite or dccp, of a
// packet of that protocol.
func portOption(t *thread, o ruleargs.Option) (cond, bool) {
	arg := o.Arg()
	switch o.Name {
	case "--dport", "--destination-port":
		return not(portCond(t.dst.Port(), arg), o.Not), true
	case "--sport", "--source-port":
		return not(portCond(t.src.Port(), arg), o.Not), true
	case "--syn":
		return not(yes, o.Not), true // a new connection's first packet is a SYN
	case "--tcp-flags":
		if len(o.Args) == 2 {
			mask, ok1 := tcpFlags(o.Args[0])
			comp, ok2 := tcpFlags(o.Args[1])
			if ok1 && ok2 {
				return not(truth(tcpSYN&mask == comp), o.Not), true
			}
		}
	}
	return cond{}, false
}

// multiportOption is an option of -m multiport: a list of ports and
// port ranges.
func multiportOption(t *thread, o ruleargs.Option) (cond, bool) {
	arg := o.Arg()
	ports := strings.Split(arg, ",")
	anyOf := func(port uint16) cond {
		for _, p := range ports {
			if m, ok := portInRange(port, p); !ok {
				return unknown("multiport %s", arg)
			} else if m {
				return yes
			}
		}
		return no
	}
	switch o.Name {
	case "--dports", "--destination-ports":
		return not(anyOf(t.dst.Port()), o.Not), true
	case "--sports", "--source-ports":
		return not(anyOf(t.src.Port()), o.Not), true
	case "--ports":
		c := anyOf(t.dst.Port())
		if c.kind == condFalse {
			c = anyOf(t.src.Port())
		}
		return not(c, o.Not), true
	}
	return cond{}, false
}

// addrtypeOption is an option of -m addrtype.
func (w *walk) addrtypeOption(t *thread, o ruleargs.Option) cond {
	var a netip.Addr
	switch o.Name {
	case "--src-type":
		a = t.src.Addr()
	case "--dst-type":
		a = t.dst.Addr()
	default:
		return unknown("-m addrtype %s", o.Name)
	}
	return not(w.addrTypeCond(a, o.Arg()), o.Not)
}

// conntrackOption is an option of -m conntrack or -m state, of a new
// connection's first packet.
func (w *walk) conntrackOption(t *thread, o ruleargs.Option) (cond, bool) {
	arg := o.Arg()
	switch o.Name {
	case "--ctstate", "--state":
		return not(w.ctStateCond(t, arg), o.Not), true
	case "--ctstatus":
		return not(ctStatusCond(t, arg), o.Not), true
	case "--ctdir":
		return not(truth(strings.EqualFold(arg, "ORIGINAL")), o.Not), true
	case "--ctorigdst":
		return not(addrCond(t.origDst.Addr(), arg), o.Not), true
	case "--ctorigsrc":
		return not(addrCond(t.origSrc.Addr(), arg), o.Not), true
	case "--ctorigdstport":
		return not(portCond(t.origDst.Port(), arg), o.Not), true
	case "--ctproto":
		return not(w.protoIs(t, arg), o.Not), true
	}
	return cond{}, false
}

// statisticOption is an option of -m statistic: a random match with its
// exact probability.
func statisticOption(o ruleargs.Option) (cond, bool) {
	arg := o.Arg()
	switch o.Name {
	case "--mode":
		return yes, true // read with its other options
	case "--probability":
		f, err := strconv.ParseFloat(arg, 64)
		if err != nil {
			return unknown("statistic --probability %s", arg), true
		}
		return not(cond{kind: condRandom, p: statisticProb(f)}, o.Not), true
	case "--every":
		n, err := strconv.ParseUint(arg, 10, 32)
		if err != nil || n == 0 {
			return unknown("statistic --every %s", arg), true
		}
		// Every n-th packet of the rule: over many connections, 1 in n.
		return not(cond{kind: condRandom, p: Fraction(1, n)}, o.Not), true
	case "--packet":
		return yes, true
	}
	return cond{}, false
}

// wildcard is nft's spelling of iptables' '+' at the end of an interface.
func wildcard(pattern string) string {
	if strings.HasSuffix(pattern, "+") {
		return "*"
	}
	return ""
}

func bang(neg bool) string {
	if neg {
		return "! "
	}
	return ""
}

// recentMatch is `-m recent`: --set and --remove always match (and
// record the client); --rcheck and --update match when the client has a
// record in the list, which the dump does not show (/proc/net/xt_recent/
// NAME holds it): unless Options.Pinned says, the walk follows both.
func (w *walk) recentMatch(m ruleargs.Match) cond {
	check := false
	aff := Affinity{Record: "DEFAULT"}
	for _, o := range m.Options {
		switch o.Name {
		case "--rcheck", "--update":
			check = true
		case "--name":
			aff.Record = o.Arg()
		case "--seconds":
			aff.Seconds, _ = strconv.Atoi(o.Arg())
		case "--set", "--remove", "--reap", "--rsource", "--mask", "--rttl":
		default: // --rdest, --hitcount, …
			return unknown("-m recent %s %s", o.Name, strings.Join(o.Args, " "))
		}
	}
	if !check {
		return yes
	}
	if pinned, ok := w.opts.Pinned[aff.Record]; ok {
		aff.Known, aff.Pinned = true, pinned
	}
	return cond{kind: condAffinity, aff: aff}
}

func (w *walk) protoIs(t *thread, name string) cond {
	if strings.EqualFold(name, "all") || name == "0" {
		return yes
	}
	want, ok := protoNumber(name)
	if !ok {
		return unknown("-p %s", name)
	}
	have, _ := protoNumber(w.pkt.Protocol)
	return truth(want == have)
}

func addrCond(a netip.Addr, spec string) cond {
	if !strings.Contains(spec, "/") && !strings.Contains(spec, "-") {
		spec += "/" + strconv.Itoa(a.BitLen())
	}
	if p, err := parsePrefix(spec); err == nil {
		if p.Addr().Is4() != a.Unmap().Is4() {
			return no
		}
		return truth(p.Contains(a.Unmap()))
	}
	m, ok := addrMatches(a.Unmap(), spec)
	if !ok {
		return unknown("address %s", spec)
	}
	return truth(m)
}

func portCond(port uint16, spec string) cond {
	m, ok := portInRange(port, spec)
	if !ok {
		return unknown("port %s", spec)
	}
	return truth(m)
}

// markCond is `--mark value[/mask]`: (mark & mask) == value.
func markCond(mark uint32, spec string) cond {
	v, m, ok := parseValueMask(spec)
	if !ok {
		return unknown("--mark %s", spec)
	}
	return truth(mark&m == v)
}

func parseValueMask(spec string) (value, mask uint32, ok bool) {
	a, b, hasMask := strings.Cut(spec, "/")
	v, ok1 := parseUint(a)
	m := uint64(0xffffffff)
	ok2 := true
	if hasMask {
		m, ok2 = parseUint(b)
	}
	return uint32(v), uint32(m), ok1 && ok2 && v <= 0xffffffff && m <= 0xffffffff
}

const tcpSYN = 0x02

var tcpFlagBits = map[string]uint8{"FIN": 0x01, "SYN": 0x02, "RST": 0x04, "PSH": 0x08, "ACK": 0x10, "URG": 0x20, "ECE": 0x40, "CWR": 0x80, "ALL": 0xff, "NONE": 0}

func tcpFlags(s string) (uint8, bool) {
	var f uint8
	for _, name := range strings.Split(s, ",") {
		b, ok := tcpFlagBits[strings.ToUpper(name)]
		if !ok {
			return 0, false
		}
		f |= b
	}
	return f, true
}

// addrTypeCond is addrtype's LOCAL (the node's addresses and loopback),
// UNICAST (any other unicast address here) and their lists.
func (w *walk) addrTypeCond(a netip.Addr, types string) cond {
	for _, ty := range strings.Split(types, ",") {
		switch strings.ToUpper(ty) {
		case "LOCAL":
			if w.e.isLocal(a) {
				return yes
			}
		case "UNICAST":
			if !w.e.isLocal(a) && !a.IsMulticast() {
				return yes
			}
		case "MULTICAST":
			if a.IsMulticast() {
				return yes
			}
		case "BROADCAST", "ANYCAST", "BLACKHOLE", "UNREACHABLE", "PROHIBIT", "THROW", "NAT", "XRESOLVE", "UNSPEC":
			return unknown("-m addrtype type %s", ty)
		default:
			return unknown("-m addrtype type %s", ty)
		}
	}
	return no
}

// ctStateCond: a new connection's state, as conntrack's virtual states
// name it (NEW, and DNAT/SNAT once NAT'ed; INVALID before conntrack ran;
// UNTRACKED after notrack).
func (w *walk) ctStateCond(t *thread, states string) cond {
	for _, s := range strings.Split(states, ",") {
		switch strings.ToUpper(s) {
		case "NEW":
			if t.ctstate&ctNew != 0 {
				return yes
			}
		case "INVALID":
			if t.ctstate&ctInvalid != 0 && !t.untracked {
				return yes
			}
		case "UNTRACKED":
			if t.untracked {
				return yes
			}
		case "DNAT":
			if t.ctstatus&ctsDNAT != 0 {
				return yes
			}
		case "SNAT":
			if t.ctstatus&ctsSNAT != 0 {
				return yes
			}
		case "ESTABLISHED", "RELATED":
		default:
			return unknown("conntrack state %s", s)
		}
	}
	return no
}

func ctStatusCond(t *thread, statuses string) cond {
	for _, s := range strings.Split(statuses, ",") {
		bit, ok := ctStatusBits[strings.ToLower(s)]
		if strings.EqualFold(s, "NONE") {
			if t.ctstatus == 0 {
				return yes
			}
			continue
		}
		if !ok {
			return unknown("conntrack status %s", s)
		}
		if t.ctstatus&bit != 0 {
			return yes
		}
	}
	return no
}

// iptTarget is what a matched iptables rule does.
func (w *walk) iptTarget(t *thread, ch chainRef, s *ruleargs.Spec) effect {
	opt := func(name string) string {
		o, _ := s.TargetOption(name)
		return o.Arg()
	}
	switch s.Target {
	case "":
		return effect{act: actNext, what: "count"}
	case "ACCEPT":
		return effect{act: actAccept}
	case "DROP":
		return effect{act: actDrop}
	case "REJECT":
		t.reject = opt("--reject-with")
		if t.reject == "" {
			t.reject = "icmp-port-unreachable"
			if w.pkt.Family == "IPv6" {
				t.reject = "icmp6-port-unreachable"
			}
		}
		return effect{act: actReject}
	case "RETURN":
		return effect{act: actReturn}
	case "DNAT":
		to := opt("--to-destination")
		if n := countOptions(s.TargetOptions, "--to-destination"); n != 1 || strings.Contains(to, "-") {
			return effect{act: actUnknown, what: "DNAT to a range or several destinations"}
		}
		return w.dnatTo(t, to)
	case "SNAT":
		to := opt("--to-source")
		if strings.Contains(to, "-") || countOptions(s.TargetOptions, "--to-source") != 1 {
			t.snatTo = to
		} else {
			t.snatTo, _ = splitHostPortText(to)
		}
		t.masq, t.natSrc = true, true
		t.ctstatus |= ctsSNAT
		return effect{act: actNAT, verb: "snat", what: w.words("SNAT to " + to)}
	case "MASQUERADE":
		t.masq, t.natSrc = true, true
		t.ctstatus |= ctsSNAT
		return effect{act: actNAT, verb: "masquerade", what: "masquerade"}
	case "REDIRECT":
		return w.redirect(t, opt("--to-ports"))
	case "MARK":
		v, m, ok := markTarget(s.TargetOptions)
		if !ok {
			return effect{act: actUnknown, what: "MARK " + optionsText(s.TargetOptions)}
		}
		t.mark = (t.mark &^ m) ^ v
		if w.opts.Brief {
			return effect{act: actNext}
		}
		return effect{act: actNext, what: fmt.Sprintf("mark %#x/%#x → %#x", v, m, t.mark)}
	case "CONNMARK":
		return w.connmark(t, s.TargetOptions)
	case "CT", "NOTRACK":
		if _, ok := s.TargetOption("--notrack"); ok || s.Target == "NOTRACK" {
			t.untracked = true
			t.ctstate = ctUntracked
			return effect{act: actNext, what: "notrack"}
		}
		return effect{act: actNext, what: "CT " + optionsText(s.TargetOptions)}
	case "LOG", "NFLOG", "ULOG", "TRACE", "AUDIT", "TCPMSS", "CHECKSUM", "TOS", "DSCP", "TTL", "HL", "ECN",
		"CLASSIFY", "SECMARK", "CONNSECMARK", "TEE", "IDLETIMER", "LED", "RATEEST", "NETMAP_":
		return effect{act: actNext, what: strings.ToLower(s.Target)}
	case "NFQUEUE", "QUEUE":
		return effect{act: actUnknown, what: "-j " + s.Target + " (a userspace program decides)"}
	}
	if s.Goto {
		return effect{act: actGoto, target: s.Target}
	}
	if _, ok := ch.lookup(s.Target); ok || strings.ToUpper(s.Target) != s.Target || strings.Contains(s.Target, "-") {
		return effect{act: actJump, target: s.Target}
	}
	return effect{act: actUnknown, what: "target " + s.Target}
}

func countOptions(opts []ruleargs.Option, name string) int {
	n := 0
	for _, o := range opts {
		if o.Name == name {
			n++
		}
	}
	return n
}

func optionsText(opts []ruleargs.Option) string {
	var parts []string
	for _, o := range opts {
		parts = append(parts, strings.TrimSpace(bang(o.Not)+o.Name+" "+strings.Join(o.Args, " ")))
	}
	return strings.Join(parts, " ")
}

// markTarget reads MARK's options as the kernel applies them:
// mark = (mark AND NOT mask) XOR value (xt_MARK; libxt_MARK's spellings).
func markTarget(opts []ruleargs.Option) (value, mask uint32, ok bool) {
	if len(opts) != 1 {
		return 0, 0, false
	}
	o := opts[0]
	switch o.Name {
	case "--set-xmark":
		return parseValueMask(o.Arg())
	case "--set-mark":
		v, m, ok := parseValueMask(o.Arg())
		return v, m | v, ok
	case "--or-mark":
		v, ok := parseUint(o.Arg())
		return uint32(v), uint32(v), ok
	case "--and-mark":
		v, ok := parseUint(o.Arg())
		return 0, ^uint32(v), ok
	case "--xor-mark":
		v, ok := parseUint(o.Arg())
		return uint32(v), 0, ok
	}
	return 0, 0, false
}

// connmark applies CONNMARK (xt_CONNMARK.c): set the connection mark,
// save the packet mark into it, or restore the packet mark from it.
func (w *walk) connmark(t *thread, opts []ruleargs.Option) effect {
	nfmask, ctmask := uint32(0xffffffff), uint32(0xffffffff)
	op := ""
	var val, mask uint32
	for _, o := range opts {
		switch o.Name {
		case "--nfmask":
			v, ok := parseUint(o.Arg())
			if !ok {
				return effect{act: actUnknown, what: "CONNMARK " + optionsText(opts)}
			}
			nfmask = uint32(v)
		case "--ctmask":
			v, ok := parseUint(o.Arg())
			if !ok {
				return effect{act: actUnknown, what: "CONNMARK " + optionsText(opts)}
			}
			ctmask = uint32(v)
		case "--mask": // both, in --save-mark/--restore-mark
			v, ok := parseUint(o.Arg())
			if !ok {
				return effect{act: actUnknown, what: "CONNMARK " + optionsText(opts)}
			}
			nfmask, ctmask = uint32(v), uint32(v)
		case "--save-mark", "--restore-mark":
			op = o.Name
		case "--set-xmark", "--set-mark", "--or-mark", "--and-mark", "--xor-mark":
			v, m, ok := markTarget([]ruleargs.Option{o})
			if !ok {
				return effect{act: actUnknown, what: "CONNMARK " + optionsText(opts)}
			}
			op, val, mask = "set", v, m
		default:
			return effect{act: actUnknown, what: "CONNMARK " + optionsText(opts)}
		}
	}
	switch op {
	case "set":
		t.ctmark = (t.ctmark &^ mask) ^ val
	case "--save-mark":
		t.ctmark = (t.ctmark &^ ctmask) ^ (t.mark & nfmask)
	case "--restore-mark":
		t.mark = (t.mark &^ nfmask) ^ (t.ctmark & ctmask)
	default:
		return effect{act: actUnknown, what: "CONNMARK " + optionsText(opts)}
	}
	if w.opts.Brief {
		return effect{act: actNext}
	}
	return effect{act: actNext, what: fmt.Sprintf("connmark %s (mark %#x, connection mark %#x)", optionsText(opts), t.mark, t.ctmark)}
}

// dnatTo rewrites the destination to "ip[:port]" ("[ip6]:port").
func (w *walk) dnatTo(t *thread, to string) effect {
	host, port := splitHostPortText(to)
	a, err := netip.ParseAddr(host)
	if err != nil {
		return effect{act: actUnknown, what: "DNAT to " + to}
	}
	p := t.dst.Port()
	if port != "" {
		n, ok := parsePort(port)
		if !ok || strings.Contains(port, "-") {
			return effect{act: actUnknown, what: "DNAT to a port range " + to}
		}
		p = n
	}
	return w.dnatAddr(t, netip.AddrPortFrom(a, p))
}

// dnatAddr rewrites the destination to nd.
func (w *walk) dnatAddr(t *thread, nd netip.AddrPort) effect {
	if nd != t.dst {
		t.ctstatus |= ctsDNAT
	}
	t.dst, t.dnat, t.natDst = nd, true, true
	if w.opts.Brief {
		return effect{act: actNAT, verb: "dnat"}
	}
	return effect{act: actNAT, verb: "dnat", what: "DNAT to " + nd.String()}
}

// redirect rewrites the destination to the node itself (the incoming
// interface's first address; loopback for a local process).
func (w *walk) redirect(t *thread, ports string) effect {
	var a netip.Addr
	if w.pkt.Origin == FromNode {
		a = netip.MustParseAddr("127.0.0.1")
		if w.pkt.Family == "IPv6" {
			a = netip.IPv6Loopback()
		}
	} else {
		for _, n := range w.e.node.Addresses {
			if n.Is4() == (w.pkt.Family != "IPv6") {
				a = n
				break
			}
		}
		if !a.IsValid() {
			return effect{act: actUnknown, what: "REDIRECT (the node's addresses are not known)"}
		}
	}
	p := t.dst.Port()
	if ports != "" {
		n, ok := parsePort(ports)
		if !ok {
			return effect{act: actUnknown, what: "REDIRECT to ports " + ports}
		}
		p = n
	}
	nd := netip.AddrPortFrom(a, p)
	t.dst, t.dnat, t.natDst = nd, true, true
	t.ctstatus |= ctsDNAT
	return effect{act: actNAT, verb: "redirect", what: w.words("redirect to " + nd.String())}
}

// splitHostPortText splits "10.0.0.1:80", "[fd00::1]:80", "10.0.0.1",
// "fd00::1".
func splitHostPortText(s string) (host, port string) {
	if strings.HasPrefix(s, "[") {
		if i := strings.Index(s, "]"); i > 0 {
			return s[1:i], strings.TrimPrefix(s[i+1:], ":")
		}
	}
	if strings.Count(s, ":") == 1 {
		host, port, _ = strings.Cut(s, ":")
		return host, port
	}
	return s, ""
}
