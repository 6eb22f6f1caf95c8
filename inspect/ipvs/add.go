package ipvs

import "strconv"

// addService keeps s within the cap and makes it the service real server
// lines belong to; it returns s's index, -1 when the cap left it out.
func (p *parser) addService(s Service) int {
	if len(p.t.Services) >= p.lim.MaxServices {
		p.t.Truncated.Incomplete = true
		p.t.Truncated.ServicesLeftOut++
		p.cur, p.curLeftOut, p.curBad = -1, true, false
		return -1
	}
	p.t.Services = append(p.t.Services, s)
	p.cur, p.curLeftOut, p.curBad = len(p.t.Services)-1, false, false
	return p.cur
}

// addRealServer adds rs to the service at idx, or to the current one when
// idx is -1.
func (p *parser) addRealServer(rs RealServer, idx int) string {
	if idx < 0 {
		idx = p.cur
	}
	switch {
	case idx < 0 && p.curBad:
		return "its service line was not understood"
	case idx < 0 && !p.curLeftOut:
		return "a real server before any service"
	case idx < 0 || p.reals >= p.lim.MaxRealServers:
		p.t.Truncated.Incomplete = true
		p.t.Truncated.RealServersLeftOut++
		return ""
	}
	svc := &p.t.Services[idx]
	svc.RealServers = append(svc.RealServers, rs)
	p.reals++
	return ""
}

// counters reads the five --stats or --rate columns; ok is false when rest
// is not five numbers.
func (p *parser) counters(rest []string) (*Counters, bool) {
	if len(rest) != 5 {
		return nil, false
	}
	var v [5]uint64
	c := &Counters{Rate: p.hdr == hdrRate}
	for i, s := range rest {
		n, rounded, ok := largeNum(s)
		if !ok {
			return nil, false
		}
		v[i] = n
		c.Rounded = c.Rounded || rounded
	}
	if p.hdr != hdrRate && p.hdr != hdrStats {
		p.guessed = true
	}
	c.Conns, c.InPkts, c.OutPkts, c.InBytes, c.OutBytes = v[0], v[1], v[2], v[3], v[4]
	return c, true
}

// largeNum reads ipvsadm's print_largenum: a number, or from 10^8 on (no
// --exact) the number over 1000^k followed by K, M, G or T.
func largeNum(s string) (n uint64, rounded, ok bool) {
	mult := uint64(1)
	switch s[len(s)-1] {
	case 'K':
		mult = 1e3
	case 'M':
		mult = 1e6
	case 'G':
		mult = 1e9
	case 'T':
		mult = 1e12
	}
	if mult > 1 {
		s, rounded = s[:len(s)-1], true
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n > ^uint64(0)/mult {
		return 0, false, false
	}
	return n * mult, rounded, true
}

// noteForm notes the form a data line was in.
func (p *parser) noteForm(hex bool, c *Counters) {
	switch {
	case c != nil && c.Rate:
		p.forms.rate = true
	case c != nil:
		p.forms.stats = true
	case hex:
		p.forms.proc = true
	default:
		p.forms.list = true
	}
}
