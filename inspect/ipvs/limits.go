package ipvs

// Limits bound what reading a table costs. kube-proxy makes a virtual
// server per Service IP and port (cluster IP, each node address for a
// NodePort, external and load-balancer IPs), so a large cluster has tens
// of thousands; the caps hold on whatever arrives.
type Limits struct {
	MaxServices    int   // services kept; later service lines are counted
	MaxRealServers int   // real servers kept over all services
	MaxLineBytes   int   // a longer line is skipped without being held
	MaxBytes       int64 // stop reading after that many bytes (0: no cap)
	MaxWarnings    int   // lines quoted in warnings; the rest are counted
}

// DefaultLimits are the caps the plugin reads with.
func DefaultLimits() Limits {
	return Limits{MaxServices: 200_000, MaxRealServers: 1_000_000, MaxLineBytes: 4096, MaxWarnings: 10}
}

// readBufferSize is the reader's buffer; it also bounds a line.
const readBufferSize = 64 << 10

func (l Limits) normalized() Limits {
	d := DefaultLimits()
	if l.MaxServices <= 0 {
		l.MaxServices = d.MaxServices
	}
	if l.MaxRealServers <= 0 {
		l.MaxRealServers = d.MaxRealServers
	}
	if l.MaxLineBytes <= 0 {
		l.MaxLineBytes = d.MaxLineBytes
	}
	l.MaxLineBytes = min(l.MaxLineBytes, readBufferSize)
	if l.MaxWarnings <= 0 {
		l.MaxWarnings = d.MaxWarnings
	}
	return l
}
