package ifaddr

import (
	"encoding/hex"
	"io"
	"net/netip"
	"strconv"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/inspect/internal/scan"
)

// Inet6Addr is one line of /proc/net/if_inet6: "fd00001000960000000000000000000b
// 03 80 00 82 kube-ipvs0" (net/ipv6/addrconf.c if6_seq_show: the address,
// then in hex the link's index, the prefix length, the scope and the
// address's flags, then the link's name).
type Inet6Addr struct {
	Addr      netip.Addr
	Index     int
	PrefixLen int
	Scope     uint8  // IPV6_ADDR_*: 0x00 global, 0x10 host, 0x20 link …
	Flags     uint32 // IFA_F_*: 0x80 permanent, 0x40 tentative, 0x02 nodad …
	Name      string
}

// Usable: the kernel takes the address as local (its local route is in
// place): neither tentative (DAD under way, or its link not ready) nor
// DAD-failed. Seen in a network namespace: a tentative address has no
// "local" route in `ip -6 route show table local`.
func (a Inet6Addr) Usable() bool { return a.Flags&(ifaFTentative|ifaFDADFailed) == 0 }

// parseIfInet6 reads one if_inet6 line's fields.
func parseIfInet6(f []string) (Inet6Addr, bool) {
	if len(f) != 6 || len(f[0]) != 32 || !isName(f[5]) || strings.Contains(f[5], "@") {
		return Inet6Addr{}, false
	}
	var b [16]byte
	if _, err := hex.Decode(b[:], []byte(f[0])); err != nil {
		return Inet6Addr{}, false
	}
	var n [4]uint64
	for i, s := range f[1:5] {
		v, err := strconv.ParseUint(s, 16, 32)
		if err != nil || len(s) < 2 {
			return Inet6Addr{}, false
		}
		n[i] = v
	}
	if n[1] > 128 || n[2] > 0xff {
		return Inet6Addr{}, false
	}
	return Inet6Addr{Addr: netip.AddrFrom16(b), Index: int(n[0]), PrefixLen: int(n[1]), Scope: uint8(n[2]), Flags: uint32(n[3]), Name: f[5]}, true
}

// ReadIfInet6 reads /proc/net/if_inet6 (pasted too): every usable IPv6
// address into LocalAddrs.Addrs, kube-ipvs0's into Kube as well, the
// tentative and DAD-failed ones into Unusable (and KubeUnusable). The
// error is only the reader's.
func ReadIfInet6(r io.Reader, lim Limits) (*LocalListing, error) {
	lim = lim.normalized()
	lr := scan.NewBounded(r, lim.MaxLineBytes, lim.MaxBytes)
	w := scan.Warnings{Max: lim.MaxWarnings}
	l := &LocalListing{Format: FormatIfInet6}
	var addrs, kube, unusable, kubeUnusable = sortedSet{max: lim.MaxAddrs}, sortedSet{max: lim.MaxAddrs},
		sortedSet{max: lim.MaxAddrs}, sortedSet{max: lim.MaxAddrs}
	for {
		raw, ok := lr.Next()
		if !ok {
			break
		}
		line := scan.TrimPasted(string(raw))
		f := strings.Fields(line)
		a, ok := parseIfInet6(f)
		switch {
		case ok && a.Usable():
			if addrs.add(a.Addr) && a.Name == KubeIPVS0 {
				kube.add(a.Addr)
			}
		case ok:
			if unusable.add(a.Addr) && a.Name == KubeIPVS0 {
				kubeUnusable.add(a.Addr)
			}
		case len(f) == 0 || scan.IsPrompt(line) || isProcCommand(f, ProcIfInet6):
		default:
			w.Line(lr.No, raw, "not an if_inet6 line")
		}
	}
	l.Local = &LocalAddrs{Addrs: addrs.sorted(), Kube: kube.sorted(), Unusable: unusable.sorted(),
		KubeUnusable: kubeUnusable.sorted(), IPv6: true, Source: ProcIfInet6}
	finish(l, lr, &w, addrs.leftOut+unusable.leftOut, lim)
	return l, lr.Err
}

// IsIfInet6Line says whether one line (spaces and a paste's prompt
// trimmed or not) is one of /proc/net/if_inet6, or the command that
// printed it.
func IsIfInet6Line(line string) bool {
	l := scan.TrimPasted(line)
	f := strings.Fields(l)
	_, ok := parseIfInet6(f)
	return ok || isProcCommand(f, ProcIfInet6)
}
