// Command ctpressure makes conntrack entries fast, for
// hack/gen-conntrack-pressure.sh: run inside the throw-away namespace (ip
// netns exec), never on a host's own table.
//
//	ctpressure udp -n N -from I   send N datagrams from one socket to N
//	                              fresh destinations (127.2.0.0/16 on lo,
//	                              index I on): each is a new unassured
//	                              entry, or is refused (EPERM) when
//	                              conntrack drops it for a full table
//	ctpressure tcp                hold established TCP connections over lo
//	                              (each an ASSURED entry that early_drop
//	                              cannot evict); reads "until N" lines on
//	                              stdin: connect until nf_conntrack_count
//	                              reaches N; exits at EOF
//	ctpressure bundle             print conntrack.BundleCommand, a word a
//	                              line: the script reads the sysctls with
//	                              the command the plugin runs on a node
//
// udp and tcp print one line of figures per request.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/proxyrules/kubectl-proxyrules/inspect/conntrack"
)

const countFile = "/proc/sys/net/netfilter/nf_conntrack_count"

func main() {
	if len(os.Args) < 2 {
		fail("usage: ctpressure udp -n N -from I | ctpressure tcp | ctpressure bundle")
	}
	var err error
	switch os.Args[1] {
	case "udp":
		err = udp(os.Args[2:])
	case "tcp":
		err = tcp()
	case "bundle":
		fmt.Println(strings.Join(conntrack.BundleCommand(), "\n"))
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fail(err.Error())
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "ctpressure:", msg)
	os.Exit(1)
}

func count() (int, error) {
	b, err := os.ReadFile(countFile)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// dest is the I-th destination: 50,000 ports per address of 127.2.0.0/16,
// all local on lo, none listened on (the ICMP error is RELATED, the entry
// stays [UNREPLIED], never ASSURED).
func dest(i int) netip.AddrPort {
	a := 2<<16 | (i/50000+1)&0xffff
	addr := netip.AddrFrom4([4]byte{127, byte(a >> 16), byte(a >> 8), byte(a)})
	return netip.AddrPortFrom(addr, uint16(10000+i%50000))
}

func udp(args []string) error {
	fs := flag.NewFlagSet("udp", flag.ExitOnError)
	n := fs.Int("n", 0, "datagrams to send")
	from := fs.Int("from", 0, "index of the first destination")
	_ = fs.Parse(args)
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return err
	}
	defer c.Close()
	sent, refused := 0, 0
	for i := *from; i < *from+*n; i++ {
		_, err := c.WriteToUDPAddrPort([]byte("x"), dest(i))
		switch {
		case err == nil:
			sent++
		case errors.Is(err, syscall.EPERM): // NF_DROP in OUTPUT
			refused++
		default:
			return err
		}
	}
	now, err := count()
	if err != nil {
		return err
	}
	fmt.Printf("udp sent=%d refused=%d count=%d\n", sent, refused, now)
	return nil
}

func tcp() error {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() {
		var held []net.Conn // kept open: the entries stay ESTABLISHED
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	var clients []net.Conn
	d := net.Dialer{Timeout: 2 * time.Second, KeepAlive: -1}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 || f[0] != "until" {
			return fmt.Errorf("request %q: want until N", sc.Text())
		}
		want, err := strconv.Atoi(f[1])
		if err != nil {
			return err
		}
		failed := 0
		for {
			now, err := count()
			if err != nil {
				return err
			}
			if now >= want {
				fmt.Printf("tcp conns=%d failed=%d count=%d\n", len(clients), failed, now)
				break
			}
			c, err := d.Dial("tcp4", ln.Addr().String())
			if err != nil {
				if failed++; failed > 100 {
					return fmt.Errorf("connect: %v (%d failures)", err, failed)
				}
				continue
			}
			clients = append(clients, c)
		}
	}
	return sc.Err()
}
