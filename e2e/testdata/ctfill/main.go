// Command ctfill fills a node's conntrack table with real kernel entries:
// one UDP datagram per distinct destination, each a new flow the kernel
// tracks (conntrack -I is far too slow for a million). Run it inside the
// node's network namespace (ip netns exec NODE ctfill ...); where the
// datagrams go is the caller's business (a sink that drops them).
//
//	ctfill -src A -sport P -dst 10.253.0.0/16 -dport 40000 -n 1000000
//	    n flows from A:P, one socket: every address of -dst in turn, then
//	    the next destination port;
//	ctfill -src A -sport 1024 -vip 10.96.0.10:53 -n 5000 -skip 9999
//	    n flows to one address, one socket per source port from -sport
//	    (skipping -skip), as n clients of a Service would.
//
// It prints "sent N" (and the first error, if any) and exits 1 when it sent
// none. It is built by e2e/conntrack_million_bench_test.go.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"
)

func main() {
	src := flag.String("src", "", "source address")
	sport := flag.Int("sport", 0, "the one source port (-dst), or the first (-vip)")
	dst := flag.String("dst", "", "destination prefix: distinct flows over its addresses and ports")
	dport := flag.Int("dport", 40000, "first destination port (-dst)")
	vip := flag.String("vip", "", "one destination address:port, a flow per source port")
	skip := flag.Int("skip", 0, "a source port -vip leaves out")
	n := flag.Int("n", 0, "flows")
	flag.Parse()
	a, err := netip.ParseAddr(*src)
	if err != nil || *n <= 0 || (*dst == "") == (*vip == "") {
		fmt.Fprintln(os.Stderr, "usage: ctfill -src ADDR -sport PORT (-dst PREFIX [-dport P] | -vip ADDR:PORT [-skip P]) -n N")
		os.Exit(2)
	}
	var sent int
	if *dst != "" {
		sent, err = flood(a, *sport, *dst, *dport, *n)
	} else {
		sent, err = clients(a, *sport, *vip, *skip, *n)
	}
	fmt.Printf("sent %d\n", sent)
	if err != nil {
		fmt.Println("first error:", err)
	}
	if sent == 0 {
		os.Exit(1)
	}
}

// flood sends n datagrams from one socket to distinct destinations.
func flood(src netip.Addr, sport int, prefix string, dport0, n int) (int, error) {
	p, err := netip.ParsePrefix(prefix)
	if err != nil || !p.Addr().Is4() || p.Bits() > 24 {
		return 0, fmt.Errorf("-dst %q: want an IPv4 prefix of at least 256 addresses", prefix)
	}
	conn, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, uint16(sport))))
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	size := 1 << (32 - p.Bits())
	base := p.Masked().Addr().As4()
	b := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	payload := []byte{0}
	var first error
	sent := 0
	for i := range n {
		h := b + uint32(i%size)
		to := netip.AddrPortFrom(netip.AddrFrom4([4]byte{byte(h >> 24), byte(h >> 16), byte(h >> 8), byte(h)}), uint16(dport0+i/size))
		if _, err := conn.WriteToUDPAddrPort(payload, to); err != nil {
			if first == nil {
				first = err
			}
			if errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.EAGAIN) {
				continue
			}
			return sent, err
		}
		sent++
	}
	return sent, first
}

// clients sends one datagram to vip from each of n source ports.
func clients(src netip.Addr, sport0 int, vip string, skip, n int) (int, error) {
	to, err := netip.ParseAddrPort(vip)
	if err != nil {
		return 0, err
	}
	var first error
	sent := 0
	for port := sport0; sent < n && port <= 65535; port++ {
		if port == skip {
			continue
		}
		conn, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, uint16(port))))
		if err != nil { // a port some process of the node holds
			if first == nil {
				first = err
			}
			continue
		}
		_, err = conn.WriteToUDPAddrPort([]byte{0}, to)
		conn.Close()
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		sent++
	}
	return sent, first
}
