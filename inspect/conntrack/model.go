// Package conntrack reads the kernel's connection tracking state as a node
// shows it: the table (/proc/net/nf_conntrack, `conntrack -L` in its default
// and `-o extended` forms, both families, also pasted), the per-CPU counters
// of /proc/net/stat/nf_conntrack and the sysctls Services depend on (a
// `grep -H . FILES` bundle). It is a parser (stage inspect): plain data, no
// Kubernetes types; which entry is stale is correlate's and diagnose's
// question (ARCHITECTURE.md).
//
// The readers stream: an entry left out by a cap costs no memory, and a
// line too long is skipped without being held (limits.go).
package conntrack

import (
	"net/netip"
	"strings"
)

// Entry is one connection as the kernel tracks it.
type Entry struct {
	Family  uint8  // 4 or 6
	Proto   string // "tcp", "udp", "sctp", "icmp", "icmpv6", ... or the number when unnamed
	ProtoNo uint8  // the l4 protocol number (6, 17, 132, 1, 58, ...)
	State   string // TCP/SCTP/DCCP state ("ESTABLISHED", "SYN_SENT", ...), "" for UDP and ICMP
	Timeout uint32 // seconds left
	Orig    Tuple  // as the first packet saw it (before NAT)
	Reply   Tuple  // as the answer is expected (after NAT: reply src = the chosen endpoint)
	Flags   Flags
	Mark    uint32
	Zone    uint16
	Use     uint32
	ID      uint32 // `conntrack -o id` only, else 0
}

// Tuple is one direction of a connection. Ports are 0 for port-less
// protocols; ICMP's type, code and id are kept instead.
type Tuple struct {
	Src, Dst     netip.Addr
	SPort, DPort uint16
	Type, Code   uint8  // ICMP/ICMPv6
	ICMPID       uint16 // ICMP/ICMPv6 id=
	// Packets and Bytes are shown only with net.netfilter.nf_conntrack_acct=1.
	Packets, Bytes uint64
	HasCounters    bool
}

// Flags are the bracketed status words of a line.
type Flags uint16

const (
	FlagUnreplied Flags = 1 << iota // [UNREPLIED]: no packet seen in the reply direction
	FlagAssured                     // [ASSURED]: not dropped early when the table is full
	FlagOffload                     // [OFFLOAD]
	FlagHWOffload                   // [HW_OFFLOAD]
	FlagUnknown                     // some other [WORD]
)

var flagNames = []struct {
	f    Flags
	name string
}{{FlagUnreplied, "UNREPLIED"}, {FlagAssured, "ASSURED"}, {FlagOffload, "OFFLOAD"}, {FlagHWOffload, "HW_OFFLOAD"}, {FlagUnknown, "UNKNOWN"}}

func (f Flags) String() string {
	var parts []string
	for _, n := range flagNames {
		if f&n.f != 0 {
			parts = append(parts, n.name)
		}
	}
	return strings.Join(parts, ",")
}

// Format is the text form a table was read from.
type Format string

const (
	FormatProc     Format = "proc"     // /proc/net/nf_conntrack: l3 prefix, zone= on every line
	FormatExtended Format = "extended" // conntrack -L -o extended: l3 prefix, zone= only when not 0
	FormatDefault  Format = "default"  // conntrack -L: no l3 prefix
	FormatMixed    Format = "mixed"    // lines of more than one form (pasted together)
)

// Table is what a reader kept of a table listing.
type Table struct {
	Format  Format
	Entries []Entry
	// Shown is the count in conntrack's trailer ("N flow entries have been
	// shown."), -1 when the input has none (the /proc form).
	Shown int64
	// Count, Max and Buckets are the sysctls when known (SetSizes), else -1.
	Count, Max, Buckets int64
	Truncated           Truncation
	Warnings            []string
}

// Truncation says what a cap left out: when Incomplete, the entries kept are
// not the whole table.
type Truncation struct {
	Incomplete     bool
	EntriesLeftOut int64 // entry lines over MaxEntries (counted, not parsed)
	LongLines      int64 // lines over MaxLineBytes, skipped
	LongLineBytes  int64 // their bytes
	// Unread is set when reading stopped at MaxBytes; BytesRead is how far.
	Unread    bool
	BytesRead int64
}

// SetSizes copies the table's size sysctls into t.
func (t *Table) SetSizes(s Sysctls) {
	t.Count, t.Max, t.Buckets = -1, -1, -1
	if v, ok := s.Int(SysctlCount); ok {
		t.Count = v
	}
	if v, ok := s.Int(SysctlMax); ok {
		t.Max = v
	}
	if v, ok := s.Int(SysctlBuckets); ok {
		t.Buckets = v
	}
}
