package ifaddr

import (
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/inspect/internal/scan"
)

// LocalListing is what ReadFIBTrie or ReadIfInet6 kept.
type LocalListing struct {
	Format Format // FormatFIBTrie or FormatIfInet6
	// Local are the addresses read; never nil.
	Local *LocalAddrs
	// Tables is how many routing tables fib_trie printed ("Main:",
	// "Local:", "Id N:"); 0 for if_inet6.
	Tables    int
	Truncated Truncation
	Warnings  []string
}

// ReadFIBTrie reads /proc/net/fib_trie (pasted too: CRLF, prompts, the
// command line): every table's LOCAL routes, the "/32 host LOCAL" leaf
// each local IPv4 address has, whichever table prints it (when no policy
// rule is set the kernel merges local into main, and prints the merged
// trie under both). Wider LOCAL routes (lo's 127.0.0.0/8) go to
// LocalAddrs.Ranges. The error is only the reader's.
func ReadFIBTrie(r io.Reader, lim Limits) (*LocalListing, error) {
	lim = lim.normalized()
	lr := scan.NewBounded(r, lim.MaxLineBytes, lim.MaxBytes)
	w := scan.Warnings{Max: lim.MaxWarnings}
	l := &LocalListing{Format: FormatFIBTrie}
	addrs := sortedSet{max: lim.MaxAddrs}
	var ranges []netip.Prefix
	var leaf netip.Addr           // the "|-- A.B.C.D" the alias lines below belong to
	long, lost := int64(0), false // lr.LongLines at the last line; leaf was skipped
	for {
		raw, ok := lr.Next()
		if !ok {
			break
		}
		if lr.LongLines != long {
			// a skipped line may have been another leaf: its routes are not leaf's
			long, leaf, lost = lr.LongLines, netip.Addr{}, true
		}
		line := scan.TrimPasted(string(raw))
		f := strings.Fields(line)
		switch k, p := fibLine(line, f); k {
		case fibBlank, fibCommand:
		case fibTable:
			l.Tables++
			leaf, lost = netip.Addr{}, false
		case fibNode:
			leaf, lost = netip.Addr{}, false
		case fibLeaf:
			leaf, lost = p.Addr(), false
		case fibAlias:
			switch {
			case lost: // counted in LongLines
			case !leaf.IsValid():
				w.Line(lr.No, raw, "route not below an address")
			case f[2] != "LOCAL":
			case p.Bits() == 32:
				addrs.add(leaf)
			case len(ranges) < maxRanges:
				ranges = appendPrefix(ranges, netip.PrefixFrom(leaf, p.Bits()).Masked())
			}
		default:
			w.Line(lr.No, raw, "not a fib_trie line")
		}
	}
	l.Local = &LocalAddrs{Addrs: addrs.sorted(), Ranges: ranges, IPv4: true, Source: ProcFIBTrie}
	finish(l, lr, &w, addrs.leftOut, lim)
	if l.Tables == 0 {
		l.Warnings = append(l.Warnings, "no routing table (Main:, Local:) in it: not "+ProcFIBTrie)
	}
	return l, lr.Err
}

// finish records what the caps left out, as Read does.
func finish(l *LocalListing, lr *scan.Bounded, w *scan.Warnings, leftOut int64, lim Limits) {
	tr := &l.Truncated
	tr.AddrsLeftOut, tr.LongLines, tr.Unread, tr.BytesRead = leftOut, lr.LongLines, lr.Unread, lr.Read
	tr.Incomplete = leftOut > 0 || tr.LongLines > 0 || tr.Unread
	l.Local.Incomplete = tr.Incomplete
	l.Warnings = w.Done()
	if leftOut > 0 {
		l.Warnings = append(l.Warnings, fmt.Sprintf("INCOMPLETE: %d addresses kept (the cap), %d more left out", lim.MaxAddrs, leftOut))
	}
	if tr.LongLines > 0 {
		l.Warnings = append(l.Warnings, fmt.Sprintf("INCOMPLETE: %d lines over %d bytes left out", tr.LongLines, lim.MaxLineBytes))
	}
	if tr.Unread {
		l.Warnings = append(l.Warnings, fmt.Sprintf("INCOMPLETE: reading stopped after %d bytes (the cap); the rest was not read", tr.BytesRead))
	}
}

func appendPrefix(ps []netip.Prefix, p netip.Prefix) []netip.Prefix {
	for _, q := range ps {
		if q == p {
			return ps
		}
	}
	return append(ps, p)
}

// maxRanges bounds LocalAddrs.Ranges: a node has a few (lo's 127.0.0.0/8).
const maxRanges = 64

type fibKind int

const (
	fibOther   fibKind = iota
	fibBlank           // nothing
	fibCommand         // "$ cat /proc/net/fib_trie"
	fibTable           // "Main:", "Local:", "Id 100:"
	fibNode            // "+-- 10.96.0.0/20 2 0 2": prefix, bits, full children, empty children
	fibLeaf            // "|-- 10.96.0.1"
	fibAlias           // "/32 host LOCAL" ["tos=N"]: a route of the leaf above; p's bits are its length
)

// rtnScopes and rtnTypes are the names the kernel prints (rtn_scope,
// rtn_type in net/ipv4/fib_trie.c); others print as "scope=N", "type N".
var (
	rtnScopes = map[string]bool{"universe": true, "site": true, "link": true, "host": true, "nowhere": true}
	rtnTypes  = map[string]bool{"UNSPEC": true, "UNICAST": true, "LOCAL": true, "BROADCAST": true, "ANYCAST": true, "MULTICAST": true,
		"BLACKHOLE": true, "UNREACHABLE": true, "PROHIBIT": true, "THROW": true, "NAT": true, "XRESOLVE": true}
)

// fibLine tells what a trimmed fib_trie line is; p is the node's prefix,
// the leaf's address (as a /32) or the alias's length (on 0.0.0.0).
func fibLine(line string, f []string) (fibKind, netip.Prefix) {
	switch {
	case len(f) == 0:
		return fibBlank, netip.Prefix{}
	case line == "Main:" || line == "Local:":
		return fibTable, netip.Prefix{}
	case len(f) == 2 && f[0] == "Id" && strings.HasSuffix(f[1], ":") && isDigits(f[1][:len(f[1])-1]):
		return fibTable, netip.Prefix{}
	case len(f) == 5 && f[0] == "+--" && isDigits(f[2]) && isDigits(f[3]) && isDigits(f[4]):
		if p, err := netip.ParsePrefix(f[1]); err == nil && p.Addr().Is4() {
			return fibNode, p
		}
	case len(f) == 2 && f[0] == "|--":
		if a, err := netip.ParseAddr(f[1]); err == nil && a.Is4() {
			return fibLeaf, netip.PrefixFrom(a, 32)
		}
	case (len(f) == 3 || len(f) == 4 && strings.HasPrefix(f[3], "tos=")) && len(f[0]) > 1 && f[0][0] == '/':
		bits, err := strconv.Atoi(f[0][1:])
		scopeOK := rtnScopes[f[1]] || strings.HasPrefix(f[1], "scope=")
		if err == nil && isDigits(f[0][1:]) && bits <= 32 && scopeOK && rtnTypes[f[2]] {
			return fibAlias, netip.PrefixFrom(netip.IPv4Unspecified(), bits)
		}
	case scan.IsPrompt(line) || isProcCommand(f, ProcFIBTrie):
		return fibCommand, netip.Prefix{}
	}
	return fibOther, netip.Prefix{}
}

// isProcCommand is a pasted command that printed file: "$ cat
// /proc/net/fib_trie", "[root@node-a ~]# sudo cat /proc/net/if_inet6".
func isProcCommand(f []string, file string) bool {
	return len(f) >= 2 && f[len(f)-1] == file && strings.HasSuffix(f[len(f)-2], "cat")
}

// IsFIBTrieLine says whether one line (spaces and a paste's prompt
// trimmed or not) is one only /proc/net/fib_trie prints: a trie node
// ("+-- 10.96.0.0/16 2 0 2") or an address leaf ("|-- 10.96.0.1"), or
// the command that printed it. The table headers and the route lines
// alone are too short to tell.
func IsFIBTrieLine(line string) bool {
	l := scan.TrimPasted(line)
	f := strings.Fields(l)
	k, _ := fibLine(l, f)
	return k == fibNode || k == fibLeaf || isProcCommand(f, ProcFIBTrie)
}
