package ipvs

import (
	"net/netip"
	"strconv"
	"strings"
)

// saveLine reads a line of ipvsadm -Sn: "-A -t 10.96.0.1:443 -s rr -p
// 10800" adds a service, "-a -t 10.96.0.1:443 -r 10.244.1.2:8443 -m -w 1"
// a real server to it.
func (p *parser) saveLine(f []string) string {
	o, why := p.saveOptions(f[1:])
	if why != "" {
		return why
	}
	if !o.svc.Addr.IsValid() && o.svc.FWMark == 0 {
		return "no service (-t, -u, --sctp-service or -f)"
	}
	p.forms.save = true
	key := o.key()
	if f[0] == "-A" {
		if o.rs.Addr.IsValid() {
			return "-A with a real server"
		}
		o.svc.settleMask()
		if i := p.addService(o.svc); i >= 0 {
			p.saved[key] = i
		}
		return ""
	}
	if !o.rs.Addr.IsValid() {
		return "-a without -r"
	}
	i, ok := p.saved[key]
	switch {
	case ok:
		return p.addRealServer(o.rs, i)
	case p.t.Truncated.ServicesLeftOut > 0:
		// its service may be one the cap left out
		p.t.Truncated.RealServersLeftOut++
		return ""
	}
	return "a real server of a service not listed before it"
}

type saveOpts struct {
	svc Service
	rs  RealServer
	v6  bool // -6: a firewall-mark service's family; an address has its own
}

func (o *saveOpts) key() string {
	if o.svc.FWMark != 0 {
		return "FWM " + strconv.FormatUint(uint64(o.svc.FWMark), 10) + " " + strconv.Itoa(int(o.svc.Family))
	}
	return string(o.svc.Protocol) + " " + o.svc.Addr.String()
}

// saveOptions reads the options ipvsadm's save prints (print_service_entry
// with FMT_RULE), long or short.
func (p *parser) saveOptions(args []string) (o saveOpts, why string) {
	o.svc.PersistBits = maskUnset
	o.rs = RealServer{ActiveConn: -1, InActConn: -1, Weight: 1}
	for i := 0; i < len(args); i++ {
		a, val := args[i], ""
		if i+1 < len(args) {
			val = args[i+1]
		}
		takes, why := o.option(p, a, val)
		if why != "" {
			return o, why
		}
		if takes {
			if i+1 >= len(args) {
				return o, a + " without a value"
			}
			i++
		}
	}
	switch {
	case o.svc.FWMark != 0 && o.v6:
		o.svc.Family = 6
	case o.svc.FWMark != 0:
		o.svc.Family = 4
	case o.v6 && o.svc.Addr.IsValid() && o.svc.Family != 6:
		return o, "-6 given for an IPv4 service address"
	}
	return o, ""
}

// option applies one option; takes says whether it used val.
func (o *saveOpts) option(p *parser, a, val string) (takes bool, why string) {
	switch a {
	case "-t", "--tcp-service", "-u", "--udp-service", "--sctp-service":
		o.svc.Protocol = map[string]Protocol{"-t": ProtoTCP, "--tcp-service": ProtoTCP, "-u": ProtoUDP, "--udp-service": ProtoUDP}[a]
		if o.svc.Protocol == "" {
			o.svc.Protocol = ProtoSCTP
		}
		return true, o.address(p, val, &o.svc.Addr)
	case "-f", "--fwmark-service":
		m, err := strconv.ParseUint(val, 10, 32)
		if err != nil || m == 0 {
			return true, "bad firewall mark"
		}
		o.svc.Protocol, o.svc.FWMark = ProtoFWMark, uint32(m)
		return true, ""
	case "-6", "--ipv6":
		o.v6 = true
	case "-s", "--scheduler":
		o.svc.Scheduler = val
		return true, ""
	case "-p", "--persistent":
		t, err := strconv.ParseUint(val, 10, 32)
		if err != nil {
			return true, "bad persistence timeout"
		}
		o.svc.Flags |= FlagPersistent
		o.svc.Timeout = uint32(t)
		return true, ""
	case "-M", "--netmask":
		o.svc.PersistBits = maskBits(val)
		return true, ""
	case "-o", "--ops":
		o.svc.Flags |= FlagOnePacket
	case "-r", "--real-server":
		return true, o.address(p, val, &o.rs.Addr)
	case "-m", "--masquerading":
		o.rs.Forward = ForwardMasq
	case "-g", "--gatewaying":
		o.rs.Forward = ForwardRoute
	case "-i", "--ipip":
		o.rs.Forward = ForwardTunnel
	case "-w", "--weight":
		w, err := strconv.ParseInt(val, 10, 32)
		if err != nil {
			return true, "bad weight"
		}
		o.rs.Weight = int32(w)
		return true, ""
	default:
		if !strings.HasPrefix(a, "-") {
			return false, "unexpected word " + strconv.Quote(a)
		}
		// sched flags (-b), --pe, thresholds (-x, -y), tunnel options:
		// kept with their value, not modelled
		if val != "" && !strings.HasPrefix(val, "-") {
			o.svc.Extra = append(o.svc.Extra, a+" "+val)
			return true, ""
		}
		o.svc.Extra = append(o.svc.Extra, a)
	}
	return false, ""
}

// address reads a save line's address: numeric, as -n prints it.
func (o *saveOpts) address(p *parser, s string, dst *netip.AddrPort) string {
	saved := p.hdr
	p.hdr = hdrList // decimal ports, shortened IPv6
	ap, _, why := p.parseAddrPort(s)
	p.hdr = saved
	if why != "" {
		return why
	}
	*dst = ap
	if dst == &o.svc.Addr {
		o.svc.Family = family(ap.Addr())
	}
	return ""
}
