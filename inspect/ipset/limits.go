package ipset

// Limits bound what reading costs. kube-proxy puts a member per Service
// address and port in its sets (and one per endpoint in KUBE-LOOP-BACK),
// so a large cluster has tens of thousands; the caps hold on whatever
// arrives.
type Limits struct {
	MaxSets      int   // sets kept; later sets are counted
	MaxMembers   int   // members kept over all sets
	MaxLineBytes int   // a longer line is skipped without being held
	MaxBytes     int64 // stop reading after that many bytes (0: no cap)
	MaxWarnings  int   // lines quoted in warnings; the rest are counted
}

// DefaultLimits are the caps the plugin reads with.
func DefaultLimits() Limits {
	return Limits{MaxSets: 10_000, MaxMembers: 2_000_000, MaxLineBytes: 4096, MaxWarnings: 10}
}

func (l Limits) normalized() Limits {
	d := DefaultLimits()
	if l.MaxSets <= 0 {
		l.MaxSets = d.MaxSets
	}
	if l.MaxMembers <= 0 {
		l.MaxMembers = d.MaxMembers
	}
	if l.MaxLineBytes <= 0 {
		l.MaxLineBytes = d.MaxLineBytes
	}
	if l.MaxWarnings <= 0 {
		l.MaxWarnings = d.MaxWarnings
	}
	return l
}
