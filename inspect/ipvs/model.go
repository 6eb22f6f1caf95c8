package ipvs

import "net/netip"

// Table is what a reader kept of an IPVS listing.
type Table struct {
	Format Format
	// Version and ConnTableSize are the header's "IP Virtual Server
	// version 1.2.1 (size=4096)"; "" and -1 when the input has none.
	Version       string
	ConnTableSize int64
	Services      []Service
	Truncated     Truncation
	Warnings      []string
}

// Format is the text form a table was read from.
type Format string

const (
	FormatProc  Format = "proc"  // /proc/net/ip_vs: hex addresses and ports
	FormatList  Format = "list"  // ipvsadm -Ln
	FormatStats Format = "stats" // ipvsadm -Ln --stats
	FormatRate  Format = "rate"  // ipvsadm -Ln --rate
	FormatSave  Format = "save"  // ipvsadm -Sn
	FormatMixed Format = "mixed" // lines of more than one form (pasted together)
)

// Service is one virtual service: a protocol and address:port, or a
// firewall mark.
type Service struct {
	Protocol Protocol
	Addr     netip.AddrPort // invalid for a fwmark service
	FWMark   uint32         // 0 unless Protocol is ProtoFWMark
	// Family is 4 or 6; a fwmark service's is 6 only when the form marks it
	// (ipvsadm's "FWM  1 IPv6", "-f 1 -6"): /proc does not say.
	Family uint8
	// Scheduler is "" in the --stats and --rate forms, which do not show it.
	Scheduler string
	Flags     ServiceFlags
	// Timeout is the persistence timeout in seconds (Flags&FlagPersistent).
	Timeout uint32
	// PersistBits is the persistence netmask as a prefix length (32 or 128
	// when the form does not show it), 0 without persistence, -1 when the
	// mask is no prefix.
	PersistBits int
	// Extra holds the flags this package does not model ("sh-fallback",
	// "pe sip"), in the order shown.
	Extra       []string
	RealServers []RealServer
	// Counters are the --stats or --rate columns, nil in the other forms.
	Counters *Counters
}

// Protocol is the service's protocol as the forms name it.
type Protocol string

const (
	ProtoTCP    Protocol = "TCP"
	ProtoUDP    Protocol = "UDP"
	ProtoSCTP   Protocol = "SCTP"
	ProtoFWMark Protocol = "FWM"
)

// ServiceFlags are the service's flags the forms show.
type ServiceFlags uint8

const (
	FlagPersistent ServiceFlags = 1 << iota // "persistent N" / -p N
	FlagOnePacket                           // "ops" / -o: one-packet scheduling (UDP)
)

// RealServer is one destination of a virtual service.
type RealServer struct {
	Addr    netip.AddrPort
	Forward Forward // "" in the --stats and --rate forms
	Weight  int32
	// ActiveConn and InActConn are -1 where the form does not show them
	// (--stats, --rate, save).
	ActiveConn, InActConn int64
	Counters              *Counters
}

// Forward is the forwarding method: what the kernel names it in
// ip_vs_fwd_name and ipvsadm prints.
type Forward string

const (
	ForwardMasq    Forward = "Masq"   // NAT (-m): kube-proxy's only method
	ForwardLocal   Forward = "Local"  // the destination is this node
	ForwardTunnel  Forward = "Tunnel" // IP-in-IP (-i)
	ForwardRoute   Forward = "Route"  // direct routing (-g)
	ForwardFullNat Forward = "FullNat"
)

// Counters are a service's or a destination's --stats (totals since the
// last zeroing) or --rate (per second) columns.
type Counters struct {
	Rate bool // --rate: CPS InPPS OutPPS InBPS OutBPS
	// Conns, InPkts, OutPkts, InBytes, OutBytes; per second when Rate.
	Conns, InPkts, OutPkts, InBytes, OutBytes uint64
	// Rounded is set when ipvsadm shortened a value with K, M, G or T
	// (without --exact): the value is then only to three digits.
	Rounded bool
}

// Truncation says what a cap left out: when Incomplete, the services kept
// are not the whole table.
type Truncation struct {
	Incomplete         bool
	ServicesLeftOut    int64 // service lines over MaxServices
	RealServersLeftOut int64 // real server lines over MaxRealServers, or of a service left out
	LongLines          int64 // lines over MaxLineBytes, skipped
	Unread             bool  // reading stopped at MaxBytes
	// CutLine: the input ends inside a line not understood (a cut paste)
	CutLine   bool
	BytesRead int64
}
