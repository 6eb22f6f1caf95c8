package ifaddr

import (
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/inspect/internal/scan"
)

// Read reads an `ip addr` listing in any of the forms doc.go lists and
// keeps the link named name ("kube-ipvs0"). What the caps left out is in
// Listing.Truncated; lines not understood are in Listing.Warnings. The
// error is only the reader's.
func Read(r io.Reader, name string, lim Limits) (*Listing, error) {
	lim = lim.normalized()
	l := &Listing{}
	lr := scan.NewBounded(r, lim.MaxLineBytes, lim.MaxBytes)
	p := parser{l: l, lr: lr, name: name, lim: lim, w: scan.Warnings{Max: lim.MaxWarnings}, seen: map[netip.Prefix]bool{}}
	for {
		line, ok := lr.Next()
		if !ok {
			break
		}
		p.line(lr.No, line)
	}
	tr := &l.Truncated
	tr.LongLines, tr.Unread, tr.BytesRead = lr.LongLines, lr.Unread, lr.Read
	tr.Incomplete = tr.Incomplete || tr.LongLines > 0 || tr.Unread
	l.Format = p.format()
	l.Warnings = append(p.w.Done(), p.notes()...)
	return l, lr.Err
}

type parser struct {
	l       *Listing
	lr      *scan.Bounded
	long    int64 // lr.LongLines when the last line was read
	name    string
	lim     Limits
	w       scan.Warnings
	seen    map[netip.Prefix]bool
	inBlock bool   // below an ip addr header line
	wanted  bool   // that header is the named link's
	index   string // the last -o line's link index
	links   int64  // ip link header lines passed over
	forms   [3]bool
}

func (p *parser) line(no int64, raw []byte) {
	if p.lr.LongLines != p.long {
		// a skipped line may have been a header: pass over its block
		p.long = p.lr.LongLines
		p.inBlock, p.wanted = true, false
	}
	l := scan.TrimPasted(string(raw))
	if l == "" {
		return
	}
	if h, ok := parseHeader(l); ok {
		p.header(h)
		return
	}
	f := strings.Fields(l)
	if len(f) == 0 {
		return // white space TrimPasted keeps (a form feed)
	}
	if pre, ok := addrOf(f); ok && p.inBlock {
		if p.wanted {
			p.add(pre)
		}
		return
	}
	if idx, name, pre, ok := oneline(f); ok {
		p.forms[1] = true
		p.inBlock = false
		if idx != p.index {
			p.index = idx
			p.l.Links++
		}
		if baseName(name) == p.name {
			p.iface().Name = p.name
			p.add(pre)
		}
		return
	}
	switch {
	case p.inBlock && p.wanted && (f[0] == "inet" || f[0] == "inet6"):
		p.w.Line(no, raw, "address not understood")
	case p.inBlock && (strings.HasPrefix(f[0], "link/") || f[0] == "valid_lft" || f[0] == "altname" || f[0] == "inet" || f[0] == "inet6"):
		// the link's other details
	case p.brief(f):
	case scan.IsPrompt(l) || isCommand(l):
		p.inBlock = false
	default:
		p.w.Line(no, raw, "not an ip addr line")
	}
}

func (p *parser) header(h header) {
	p.inBlock, p.wanted = !h.link, false
	if h.link {
		p.links++
		return
	}
	p.forms[0] = true
	p.l.Links++
	if baseName(h.name) != p.name {
		return
	}
	p.wanted = true
	i := p.iface()
	if i.Flags == nil {
		i.Flags = h.flags
	}
	if i.State == "" {
		i.State = h.state
	}
}

func (p *parser) brief(f []string) bool {
	name, state, addrs, ok := brief(f)
	if !ok {
		return false
	}
	p.forms[2] = true
	p.inBlock = false
	p.l.Links++
	if baseName(name) == p.name {
		i := p.iface()
		if i.State == "" {
			i.State = state
		}
		for _, a := range addrs {
			p.add(a)
		}
	}
	return true
}

func (p *parser) iface() *Interface {
	if p.l.Interface == nil {
		p.l.Interface = &Interface{Name: p.name}
	}
	return p.l.Interface
}

// add keeps an address of the named link, once, within the cap.
func (p *parser) add(a netip.Prefix) {
	i := p.iface()
	if p.seen[a] {
		return
	}
	if len(i.Addrs) >= p.lim.MaxAddrs {
		p.l.Truncated.AddrsLeftOut++
		p.l.Truncated.Incomplete = true
		return
	}
	p.seen[a] = true
	i.Addrs = append(i.Addrs, a)
}

func (p *parser) format() Format {
	var got []Format
	for i, f := range []Format{FormatAddr, FormatOneline, FormatBrief} {
		if p.forms[i] {
			got = append(got, f)
		}
	}
	switch len(got) {
	case 0:
		return FormatAddr
	case 1:
		return got[0]
	}
	return FormatMixed
}

// notes says what the caps left out (each starting INCOMPLETE), and what
// the listing did not show.
func (p *parser) notes() []string {
	var out []string
	tr := p.l.Truncated
	if tr.AddrsLeftOut > 0 {
		out = append(out, fmt.Sprintf("INCOMPLETE: %d addresses kept (the cap), %d more left out", p.lim.MaxAddrs, tr.AddrsLeftOut))
	}
	if tr.LongLines > 0 {
		out = append(out, fmt.Sprintf("INCOMPLETE: %d lines over %d bytes left out", tr.LongLines, p.lim.MaxLineBytes))
	}
	if tr.Unread {
		out = append(out, fmt.Sprintf("INCOMPLETE: reading stopped after %d bytes (the cap); the rest was not read", tr.BytesRead))
	}
	if p.links > 0 {
		out = append(out, fmt.Sprintf("%d ip link lines show no addresses: pass ip addr output", p.links))
	}
	if p.l.Interface == nil && p.l.Links > 0 {
		out = append(out, fmt.Sprintf("no %s among the %d links listed", p.name, p.l.Links))
	}
	return out
}
