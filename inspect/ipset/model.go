// Package ipset reads the ipsets of a node as `ipset save` and `ipset list`
// print them, into plain data: no Kubernetes types; which Service a member
// stands for is correlate's question (ARCHITECTURE.md). kube-proxy's IPVS
// mode keeps its Service addresses and ports in such sets
// (pkg/proxy/ipvs/ipset).
//
// Both forms are read, also pasted (CRLF, indentation, shell prompts, the
// command line itself) and together (a list and a save of the same sets:
// each set once, Join). Bounds (limits.go): a line over MaxLineBytes is
// skipped without being held, reading stops at MaxBytes, sets and members
// past their caps are counted, not kept; what a cap left out is in
// Sets.Truncated. A line not understood is quoted in Sets.Warnings and the
// rest kept: the error is only the io.Reader's.
package ipset

import "net/netip"

// Format is the text form the sets were read from.
type Format string

const (
	FormatSave  Format = "save"  // ipset save: create and add lines
	FormatList  Format = "list"  // ipset list: Name:, Type:, … Members:
	FormatMixed Format = "mixed" // lines of both forms
)

// Sets is what a reader kept of a listing.
type Sets struct {
	Format    Format
	Sets      []Set // in the order the input shows them
	Truncated Truncation
	Warnings  []string
}

// Set is one ipset.
type Set struct {
	Name string
	// Type is the set type as printed: "hash:ip,port", "bitmap:port" …
	Type string
	// Family is "inet" or "inet6"; "" for a type that has none (bitmap:port).
	Family string
	// HashSize and MaxElem are the create options; 0 when not shown.
	HashSize, MaxElem int64
	// Range is a bitmap type's "range" ("0-65535"), "" otherwise.
	Range string
	// Comment: the set was created with the comment option.
	Comment bool
	// Options are the other create options, as printed ("timeout 300",
	// "counters"); bucketsize and initval, which change nothing for a
	// reader, are left out.
	Options []string
	// Revision and References are what `ipset list` shows, -1 in a save.
	Revision, References int64
	// Entries is the list's "Number of entries:", -1 when not shown (a
	// save). It counts the kernel's entries, which Members may lack when
	// a cap or a terse listing (ipset list -t) left them out.
	Entries int64
	// Listed: the set's members were shown (a save, or a list with its
	// Members: section); false for `ipset list -t` or a cut paste.
	Listed  bool
	Members []Member
}

// Member is one entry of a set. The fields filled are those of the set
// type's components: hash:ip gives IP; hash:ip,port IP, Proto and Port;
// hash:ip,port,ip adds IP2; hash:ip,port,net adds Net; bitmap:port gives
// Port alone. A member not understood keeps only Raw (with a warning).
type Member struct {
	// Raw is the member as printed, without its options (comment, timeout …).
	Raw string
	IP  netip.Addr
	// Proto is the protocol name ipset prints ("tcp", "udp", "sctp",
	// "icmp" …), "" when the type has no port.
	Proto string
	// Port is the port; HasPort is false when the member has none (or an
	// ICMP type in its place).
	Port    uint16
	HasPort bool
	// IP2 is hash:ip,port,ip's second address (KUBE-LOOP-BACK: the
	// endpoint, its own source).
	IP2 netip.Addr
	// Net is hash:ip,port,net's network; ipset prints a host network
	// without its length, read here as /32 or /128.
	Net netip.Prefix
	// Comment is the member's comment option, unquoted.
	Comment string
}

// Truncation says what a cap left out: when Incomplete, the sets kept
// are not all of the input.
type Truncation struct {
	Incomplete     bool
	SetsLeftOut    int64 // sets over MaxSets (their members counted in MembersLeftOut)
	MembersLeftOut int64 // members over MaxMembers, or of a set left out
	LongLines      int64 // lines over MaxLineBytes, skipped
	Unread         bool  // reading stopped at MaxBytes
	BytesRead      int64
}

// Set returns the set of that name, nil when there is none.
func (s *Sets) Set(name string) *Set {
	if s == nil {
		return nil
	}
	for i := range s.Sets {
		if s.Sets[i].Name == name {
			return &s.Sets[i]
		}
	}
	return nil
}

// Members is the number of members kept over all sets.
func (s *Sets) Members() int {
	n := 0
	if s != nil {
		for _, set := range s.Sets {
			n += len(set.Members)
		}
	}
	return n
}
