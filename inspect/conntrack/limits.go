package conntrack

// Limits bound what reading a table costs. A node may hold a million
// entries (nf_conntrack_max is at most 1,048,576 by kube-proxy's own cap,
// §4.3 of the datapath facts); the node-side read is filtered and capped
// first, and these caps hold on whatever still arrives.
type Limits struct {
	// MaxEntries is the number of entries kept; the entry lines after it
	// are counted (Truncation.EntriesLeftOut), not kept.
	MaxEntries int
	// MaxLineBytes is the longest line read; a longer one is skipped
	// without being held. A /proc line with IPv6 addresses in full and
	// accounting on is about 400 bytes.
	MaxLineBytes int
	// MaxBytes stops reading after that many bytes (0: no cap).
	MaxBytes int64
	// MaxWarnings is the number of lines quoted in warnings; the rest are
	// counted in one more.
	MaxWarnings int
}

// DefaultLimits are the caps the plugin reads with.
func DefaultLimits() Limits {
	return Limits{MaxEntries: 1_000_000, MaxLineBytes: 4096, MaxWarnings: 10}
}

// readBufferSize is the reader's buffer: lines are cut in place in it, so
// it also bounds a line (MaxLineBytes is clamped to it).
const readBufferSize = 64 << 10

func (l Limits) normalized() Limits {
	d := DefaultLimits()
	if l.MaxEntries <= 0 {
		l.MaxEntries = d.MaxEntries
	}
	if l.MaxLineBytes <= 0 {
		l.MaxLineBytes = d.MaxLineBytes
	}
	if l.MaxLineBytes > readBufferSize {
		l.MaxLineBytes = readBufferSize
	}
	if l.MaxWarnings <= 0 {
		l.MaxWarnings = d.MaxWarnings
	}
	return l
}
