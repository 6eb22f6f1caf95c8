package conntrack

import "strconv"

// AppendText appends e in /proc/net/nf_conntrack's layout (IPv6 addresses
// in their short form, as `conntrack -o extended` prints them); ReadTable
// reads it back to e.
func (e *Entry) AppendText(b []byte) []byte {
	if e.Family == 6 {
		b = append(b, "ipv6     10 "...)
	} else {
		b = append(b, "ipv4     2 "...)
	}
	b = append(b, e.Proto...)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(e.ProtoNo), 10)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(e.Timeout), 10)
	if e.State != "" {
		b = append(b, ' ')
		b = append(b, e.State...)
	}
	b = e.Orig.appendText(b)
	if e.Flags&FlagUnreplied != 0 {
		b = append(b, " [UNREPLIED]"...)
	}
	b = e.Reply.appendText(b)
	for _, n := range flagNames[1:] {
		if e.Flags&n.f != 0 {
			b = append(b, " ["...)
			b = append(b, n.name...)
			b = append(b, ']')
		}
	}
	b = append(b, " mark="...)
	b = strconv.AppendUint(b, uint64(e.Mark), 10)
	b = append(b, " zone="...)
	b = strconv.AppendUint(b, uint64(e.Zone), 10)
	b = append(b, " use="...)
	b = strconv.AppendUint(b, uint64(e.Use), 10)
	if e.ID != 0 {
		b = append(b, " id="...)
		b = strconv.AppendUint(b, uint64(e.ID), 10)
	}
	return b
}

func (t *Tuple) appendText(b []byte) []byte {
	b = append(b, " src="...)
	b = t.Src.AppendTo(b)
	b = append(b, " dst="...)
	b = t.Dst.AppendTo(b)
	if t.Type != 0 || t.Code != 0 || t.ICMPID != 0 {
		b = append(b, " type="...)
		b = strconv.AppendUint(b, uint64(t.Type), 10)
		b = append(b, " code="...)
		b = strconv.AppendUint(b, uint64(t.Code), 10)
		b = append(b, " id="...)
		b = strconv.AppendUint(b, uint64(t.ICMPID), 10)
	}
	if t.SPort != 0 || t.DPort != 0 {
		b = append(b, " sport="...)
		b = strconv.AppendUint(b, uint64(t.SPort), 10)
		b = append(b, " dport="...)
		b = strconv.AppendUint(b, uint64(t.DPort), 10)
	}
	if t.HasCounters {
		b = append(b, " packets="...)
		b = strconv.AppendUint(b, t.Packets, 10)
		b = append(b, " bytes="...)
		b = strconv.AppendUint(b, t.Bytes, 10)
	}
	return b
}

// String is AppendText's line.
func (e Entry) String() string { return string(e.AppendText(nil)) }
