package kernelprobe

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Verdicts an Observation can have.
const (
	// DNAT: the conntrack entry's reply source differs from the original
	// destination (address or port): the kernel chose Endpoint.
	DNAT = "dnat"
	// Accept: an entry whose reply source is the original destination:
	// the flow went on un-DNATed (to the sink, or into the node itself).
	Accept = "accept"
	// Reject: no entry, and the sender got an error: ECONNREFUSED (ICMP
	// port unreachable, a TCP reset), EHOSTUNREACH (host unreachable,
	// admin prohibited), any other error but EPERM. A TCP reset from a
	// real destination counts here too: conntrack deletes an entry whose
	// only reply is a reset.
	Reject = "reject"
	// Drop: no entry and no ICMP error; for the node's own UDP, sendto may
	// have failed with EPERM (a rule in OUTPUT dropped it).
	Drop = "drop"
)

// A Probe is a set of flows of one protocol to one destination.
type Probe struct {
	From  From
	Proto string // "tcp" or "udp"
	Dst   netip.AddrPort
	// Flows is how many connections (1 when 0), flow i from source port
	// SrcPort0+i.
	Flows int
	// SrcPort0 is the first source port; 0 lets the Lab pick ports no
	// earlier probe of this Lab used. A probe that reuses ports after
	// another must FlushConntrack first, or its flows meet the old
	// entries and keep their NAT.
	SrcPort0 uint16
	// SrcIP binds "node" flows to this source; invalid: the kernel picks
	// (the route's src, the first node IP of the family for SinkCIDRs).
	// Pod and outside flows always come from the pod's or client's address.
	SrcIP netip.Addr
	// Wait is how long a flow with neither a conntrack entry nor an error
	// is waited for before it is called a drop (default 400ms). Flows that
	// show one or the other end the wait early.
	Wait time.Duration
}

// An Observation is what the kernel did to one flow.
type Observation struct {
	Flow    int
	Verdict string         // DNAT, Accept, Reject or Drop
	Src     netip.AddrPort // the flow's original source
	// Endpoint is the reply tuple's source: the endpoint chosen for a DNAT,
	// the original destination for an accept; zero for reject and drop.
	Endpoint netip.AddrPort
	// Masqueraded: the reply tuple's destination differs from the original
	// source (address or port). A masquerade that changes neither (the
	// node's own traffic already from the egress address, without
	// random-fully) leaves no trace and reads false.
	Masqueraded bool
	// Errno is the error the sender saw, if any (ECONNREFUSED, EHOSTUNREACH,
	// EPERM for a UDP datagram the node's own OUTPUT dropped). An accept or
	// DNAT can carry one too: UDP to a port nothing listens on keeps its
	// entry and gets ECONNREFUSED. (A TCP reset deletes the entry: that
	// flow is a reject.)
	Errno syscall.Errno
	Raw   string // the conntrack line (/proc/net/nf_conntrack format); "" without an entry
}

// flow is one socket of a probe while Send waits for its answer.
type flow struct {
	fd       int
	src      netip.AddrPort
	errno    syscall.Errno // the last error seen
	rejected bool          // an ICMP-type error: final
	entry    *ctEntry
}

const defaultWait = 400 * time.Millisecond

// Send starts p's flows and reports, per flow, what the kernel did. It
// returns once every flow has an entry in the node's conntrack table or an
// error, or p.Wait after the last was sent. Sockets are closed before it
// returns; their entries stay (TCP SYN_SENT 120 s, UDP 30 s) until
// FlushConntrack.
func (l *Lab) Send(t testing.TB, p Probe) []Observation {
	t.Helper()
	if p.SrcPort0 == 0 {
		port0, wrapped := l.ports(max(p.Flows, 1))
		if wrapped {
			l.FlushConntrack(t)
		}
		p.SrcPort0 = uint16(port0)
	}
	l.checkFresh(t, p)
	flows, err := l.open(p)
	defer func() {
		for _, f := range flows {
			unix.Close(f.fd)
		}
	}()
	if err != nil {
		t.Fatalf("kernel probe: %v", err)
	}
	wait := p.Wait
	if wait <= 0 {
		wait = defaultWait
	}
	deadline := time.Now().Add(wait)
	for {
		pending := 0
		for _, f := range flows {
			if f.entry != nil || f.rejected {
				continue
			}
			if e := soError(f.fd); e != 0 {
				f.errno = e
				f.rejected = e != unix.EPERM
			}
		}
		entries, err := l.conntrack(p.Dst.Addr().Is6())
		if err != nil {
			t.Fatalf("kernel probe: reading conntrack in %s: %v", l.Node, err)
		}
		for _, f := range flows {
			// Looked up for rejected flows too: an error with an entry
			// is a reset or ICMP error from wherever the flow went.
			if f.entry == nil {
				if e, ok := entries[ctKey{p.Proto, f.src, p.Dst}]; ok {
					f.entry = &e
				}
			}
			if f.entry == nil && !f.rejected {
				pending++
			}
		}
		if pending == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(15 * time.Millisecond)
	}
	obs := make([]Observation, len(flows))
	for i, f := range flows {
		o := Observation{Flow: i, Src: f.src, Errno: f.errno}
		switch {
		case f.entry != nil:
			o.Raw = f.entry.raw
			o.Endpoint = f.entry.reply.src
			o.Verdict = Accept
			if f.entry.reply.src != p.Dst {
				o.Verdict = DNAT
			}
			o.Masqueraded = f.entry.reply.dst != f.src
		case f.rejected:
			o.Verdict = Reject
		default:
			o.Verdict = Drop
		}
		obs[i] = o
	}
	return obs
}

// open makes p's sockets in the namespace it starts from and sends the
// flows: a non-blocking connect (the SYN) for TCP, one datagram on a
// connected socket for UDP. Errors the kernel gives at once are kept on
// the flow.
func (l *Lab) open(p Probe) ([]*flow, error) {
	ns, src, err := l.source(p)
	if err != nil {
		return nil, err
	}
	if !p.Dst.IsValid() {
		return nil, fmt.Errorf("probe destination %v not valid", p.Dst)
	}
	var typ int
	switch p.Proto {
	case "tcp":
		typ = unix.SOCK_STREAM
	case "udp":
		typ = unix.SOCK_DGRAM
	default:
		return nil, fmt.Errorf("probe protocol %q, want tcp or udp", p.Proto)
	}
	n := max(p.Flows, 1)
	port0 := uint32(p.SrcPort0)
	if port0+uint32(n)-1 > 65535 {
		return nil, fmt.Errorf("probe source ports %d+%d run past 65535", port0, n)
	}
	v6 := p.Dst.Addr().Is6()
	dst := sockaddr(p.Dst)
	var flows []*flow
	err = inNetns(ns, func() error {
		for i := range n {
			fam := unix.AF_INET
			if v6 {
				fam = unix.AF_INET6
			}
			fd, err := unix.Socket(fam, typ|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("socket: %w", err)
			}
			f := &flow{fd: fd}
			flows = append(flows, f)
			if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
				return fmt.Errorf("SO_REUSEADDR: %w", err)
			}
			if typ == unix.SOCK_DGRAM {
				// Every ICMP error, not only the "hard" ones a
				// connected UDP socket reports by default.
				if v6 {
					err = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_RECVERR, 1)
				} else {
					err = unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_RECVERR, 1)
				}
				if err != nil {
					return fmt.Errorf("RECVERR: %w", err)
				}
			}
			bindTo := src
			if !bindTo.IsValid() {
				bindTo = netip.IPv4Unspecified()
				if v6 {
					bindTo = netip.IPv6Unspecified()
				}
			}
			sport := uint16(port0 + uint32(i))
			if err := unix.Bind(fd, sockaddr(netip.AddrPortFrom(bindTo, sport))); err != nil {
				return fmt.Errorf("bind %v: %w", netip.AddrPortFrom(bindTo, sport), err)
			}
			err = unix.Connect(fd, dst)
			if typ == unix.SOCK_STREAM {
				if err != nil && err != unix.EINPROGRESS {
					f.note(err)
				}
			} else {
				if err != nil {
					return fmt.Errorf("connect %v: %w", p.Dst, err)
				}
				if _, err := unix.Write(fd, []byte("kernelprobe")); err != nil {
					f.note(err)
				}
			}
			sa, err := unix.Getsockname(fd)
			if err != nil {
				return fmt.Errorf("getsockname: %w", err)
			}
			f.src = addrPort(sa)
			if f.src.Port() != sport {
				return fmt.Errorf("socket bound to %v, want port %d", f.src, sport)
			}
		}
		return nil
	})
	return flows, err
}

func (f *flow) note(err error) {
	var e syscall.Errno
	if errors.As(err, &e) {
		f.errno = e
		f.rejected = e != unix.EPERM
	}
}

// source is the namespace a probe starts in and the address its sockets
// bind to (invalid: the kernel's choice).
func (l *Lab) source(p Probe) (string, netip.Addr, error) {
	v6 := p.Dst.Addr().Is6()
	switch p.From {
	case FromNode, "":
		if p.SrcIP.IsValid() && p.SrcIP.Is6() != v6 {
			return "", netip.Addr{}, fmt.Errorf("probe source %v and destination %v differ in family", p.SrcIP, p.Dst)
		}
		return l.Node, p.SrcIP, nil
	case FromPod, FromOutside:
		ns, addr := l.Pod, l.PodIP
		if p.From == FromOutside {
			ns, addr = l.Outside, l.OutsideIP
		}
		if ns == "" {
			return "", netip.Addr{}, fmt.Errorf("probe from %s, but the lab has none (LabConfig.PodIP / OutsideIP)", p.From)
		}
		if addr.Is6() != v6 {
			return "", netip.Addr{}, fmt.Errorf("probe from %s (%v) to %v: families differ", p.From, addr, p.Dst)
		}
		if p.SrcIP.IsValid() && p.SrcIP != addr {
			return "", netip.Addr{}, fmt.Errorf("probe from %s with SrcIP %v: its only address is %v", p.From, p.SrcIP, addr)
		}
		return ns, addr, nil
	}
	return "", netip.Addr{}, fmt.Errorf("probe from %q, want node, pod or outside", p.From)
}

// ports reserves n consecutive source ports, wrapping round to the first
// when the range runs out (wrapped: the caller flushes conntrack, or old
// entries would capture the flows).
func (l *Lab) ports(n int) (start uint32, wrapped bool) {
	for {
		cur := l.nextPort.Load()
		start, wrapped = cur, false
		if start+uint32(n)-1 > lastAutoPort {
			start, wrapped = firstAutoPort, true
		}
		if l.nextPort.CompareAndSwap(cur, start+uint32(n)) {
			return start, wrapped
		}
	}
}

// checkFresh fails the test when a flow of p would meet an entry already in
// the node's conntrack table (same protocol, source port and destination):
// the kernel would reuse that entry's NAT instead of deciding again.
func (l *Lab) checkFresh(t testing.TB, p Probe) {
	t.Helper()
	entries, err := l.conntrack(p.Dst.Addr().Is6())
	if err != nil {
		t.Fatalf("kernel probe: reading conntrack in %s: %v", l.Node, err)
	}
	n := max(p.Flows, 1)
	for k, e := range entries {
		if k.proto == p.Proto && k.dst == p.Dst && uint32(k.src.Port()) >= uint32(p.SrcPort0) && uint32(k.src.Port()) < uint32(p.SrcPort0)+uint32(n) {
			t.Fatalf("kernel probe: a flow of the probe meets an entry already there (FlushConntrack first, or leave SrcPort0 0): %s", e.raw)
		}
	}
}

func soError(fd int) syscall.Errno {
	v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
	if err != nil {
		return 0
	}
	return syscall.Errno(v)
}

func sockaddr(ap netip.AddrPort) unix.Sockaddr {
	if ap.Addr().Is4() {
		return &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	}
	return &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
}

func addrPort(sa unix.Sockaddr) netip.AddrPort {
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port))
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), uint16(sa.Port))
	}
	return netip.AddrPort{}
}

// A conntrack entry: the original and reply tuples.
type ctTuple struct{ src, dst netip.AddrPort }

type ctEntry struct {
	proto       string
	orig, reply ctTuple
	raw         string
}

type ctKey struct {
	proto    string
	src, dst netip.AddrPort
}

// conntrack reads the node's conntrack table (one family) by original
// tuple, from /proc/net/nf_conntrack as a thread in the node namespace
// sees it.
func (l *Lab) conntrack(v6 bool) (map[ctKey]ctEntry, error) {
	var data []byte
	err := inNetns(l.Node, func() error {
		var err error
		data, err = os.ReadFile("/proc/thread-self/net/nf_conntrack")
		return err
	})
	if err != nil {
		return nil, err
	}
	want := "ipv4"
	if v6 {
		want = "ipv6"
	}
	entries := map[ctKey]ctEntry{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		e, fam, ok := parseConntrack(sc.Text())
		if ok && fam == want {
			entries[ctKey{e.proto, e.orig.src, e.orig.dst}] = e
		}
	}
	return entries, sc.Err()
}

// parseConntrack reads one line of /proc/net/nf_conntrack:
//
//	ipv4     2 tcp      6 119 SYN_SENT src=10.0.0.10 dst=10.96.0.1 sport=20000 dport=80 [UNREPLIED] src=10.244.0.11 dst=10.0.0.10 sport=8080 dport=20000 mark=0 zone=0 use=2
//
// The first src/dst/sport/dport are the original tuple, the second the
// reply tuple. IPv6 addresses are written in full there; netip reads them.
// Protocols without ports (ICMP) are not flows of a probe and are skipped.
func parseConntrack(line string) (ctEntry, string, bool) {
	fields := strings.Fields(line)
	if len(fields) < 4 {
		return ctEntry{}, "", false
	}
	e := ctEntry{proto: fields[2], raw: line}
	var addrs []netip.Addr
	var ports []uint16
	for _, f := range fields[3:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		switch k {
		case "src", "dst":
			a, err := netip.ParseAddr(v)
			if err != nil {
				return ctEntry{}, "", false
			}
			addrs = append(addrs, a)
		case "sport", "dport":
			n, err := strconv.ParseUint(v, 10, 16)
			if err != nil {
				return ctEntry{}, "", false
			}
			ports = append(ports, uint16(n))
		}
	}
	if len(addrs) < 4 || len(ports) < 4 {
		return ctEntry{}, "", false
	}
	e.orig = ctTuple{netip.AddrPortFrom(addrs[0], ports[0]), netip.AddrPortFrom(addrs[1], ports[1])}
	e.reply = ctTuple{netip.AddrPortFrom(addrs[2], ports[2]), netip.AddrPortFrom(addrs[3], ports[3])}
	return e, fields[0], true
}
