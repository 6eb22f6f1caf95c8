package ipvs

import "net/netip"

// Join merges tables read from several forms of one node's table (and the
// listings of a paste of several, Format "mixed"): a service is one by its
// protocol and address, or its mark and family, and a real server by its
// address. What one form does not show (the scheduler and weights in
// --stats, connections in -Sn) is taken from a form that does; counters
// from the --stats or --rate form. Nil tables are passed over; Join of none
// is nil.
func Join(tables ...*Table) *Table {
	var out *Table
	index := map[serviceKey]int{}
	for _, t := range tables {
		if t == nil {
			continue
		}
		if out == nil {
			out = &Table{Format: t.Format, ConnTableSize: -1}
		}
		out.joinHeader(t)
		for _, s := range t.Services {
			k := keyOf(&s)
			i, ok := index[k]
			if !ok {
				index[k] = len(out.Services)
				s.RealServers = append([]RealServer(nil), s.RealServers...)
				out.Services = append(out.Services, s)
				out.Services[len(out.Services)-1].dedupeRealServers()
				continue
			}
			out.Services[i].fillFrom(&s)
		}
	}
	return out
}

type serviceKey struct {
	proto  Protocol
	addr   netip.AddrPort
	mark   uint32
	family uint8
}

func keyOf(s *Service) serviceKey {
	k := serviceKey{proto: s.Protocol, mark: s.FWMark}
	if s.Protocol == ProtoFWMark {
		k.family = s.Family
	} else {
		k.addr = netip.AddrPortFrom(s.Addr.Addr().Unmap(), s.Addr.Port())
	}
	return k
}

func (out *Table) joinHeader(t *Table) {
	if out.Format != t.Format {
		out.Format = FormatMixed
	}
	if out.Version == "" {
		out.Version = t.Version
	}
	if out.ConnTableSize < 0 {
		out.ConnTableSize = t.ConnTableSize
	}
	tr, o := &out.Truncated, t.Truncated
	tr.Incomplete = tr.Incomplete || o.Incomplete
	tr.ServicesLeftOut += o.ServicesLeftOut
	tr.RealServersLeftOut += o.RealServersLeftOut
	tr.LongLines += o.LongLines
	tr.Unread = tr.Unread || o.Unread
	tr.CutLine = tr.CutLine || o.CutLine
	tr.BytesRead += o.BytesRead
	out.Warnings = append(out.Warnings, t.Warnings...)
}

// fillFrom completes s with what o, the same service in another form,
// shows and s does not.
func (s *Service) fillFrom(o *Service) {
	if s.Scheduler == "" && o.Scheduler != "" {
		s.Scheduler, s.Flags, s.Timeout, s.PersistBits = o.Scheduler, o.Flags, o.Timeout, o.PersistBits
		s.Extra = o.Extra
	}
	if s.Counters == nil {
		s.Counters = o.Counters
	}
	for _, r := range o.RealServers {
		s.addOrFill(r)
	}
}

func (s *Service) dedupeRealServers() {
	rs := s.RealServers
	s.RealServers = rs[:0:0]
	for _, r := range rs {
		s.addOrFill(r)
	}
}

func (s *Service) addOrFill(r RealServer) {
	for i := range s.RealServers {
		have := &s.RealServers[i]
		if have.Addr != r.Addr {
			continue
		}
		if have.Forward == "" && r.Forward != "" {
			have.Forward, have.Weight = r.Forward, r.Weight
		}
		if have.ActiveConn < 0 && r.ActiveConn >= 0 {
			have.ActiveConn, have.InActConn = r.ActiveConn, r.InActConn
		}
		if have.Counters == nil {
			have.Counters = r.Counters
		}
		return
	}
	s.RealServers = append(s.RealServers, r)
}
