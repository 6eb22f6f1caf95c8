package ifaddr

// Limits bound what reading costs. kube-ipvs0 holds an address per
// ClusterIP, external and load-balancer IP: tens of thousands in a large
// cluster; the caps hold on whatever arrives.
type Limits struct {
	MaxAddrs     int   // addresses kept; later ones are counted
	MaxLineBytes int   // a longer line is skipped without being held
	MaxBytes     int64 // stop reading after that many bytes (0: no cap)
	MaxWarnings  int   // lines quoted in warnings; the rest are counted
}

// DefaultLimits are the caps the plugin reads with.
func DefaultLimits() Limits {
	return Limits{MaxAddrs: 500_000, MaxLineBytes: 4096, MaxWarnings: 10}
}

func (l Limits) normalized() Limits {
	d := DefaultLimits()
	if l.MaxAddrs <= 0 {
		l.MaxAddrs = d.MaxAddrs
	}
	if l.MaxLineBytes <= 0 {
		l.MaxLineBytes = d.MaxLineBytes
	}
	if l.MaxWarnings <= 0 {
		l.MaxWarnings = d.MaxWarnings
	}
	return l
}
