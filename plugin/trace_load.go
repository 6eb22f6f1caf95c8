package plugin

import (
	"bytes"
	"io"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/inspect/input"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// trace's narrowed read (Request.Walk, issue 33): a walk reads the chains
// it reaches and nothing else, so of an iptables-save dump (or restore
// input) it keeps what explain's narrowed read keeps (targeted.go: every
// line but the rules of other Services' chains) less the declarations of
// those chains too: on the 5,000-Service node they are 100k lines, and
// the chains they make cost more to parse than the rules kept. A walk that
// jumps into a chain left out finds it missing ("is not in the input", as
// it would an unread one) and trace reads the node whole (TraceOptions.Run).

// readWalkTargeted reads one dump for trace's narrowed path.
func readWalkTargeted(r io.Reader, source string, opts input.Options, objs func() *correlate.Objects) (*input.Input, error) {
	// one allocation of the file's size (readWhole's io.ReadAll would
	// grow a slice through a capped reader, copying it twice)
	data, err := inspect.ReadAll(r)
	if err != nil {
		return nil, err
	}
	format, err := input.Detect(data[:min(len(data), 64<<10)])
	var spans []dumpSpan
	if err == nil && (format == inspect.FormatIPTablesSave || format == inspect.FormatIPTablesRestore) {
		spans = dumpSpans(data) // while the objects decode
	}
	if spans == nil {
		return opts.Read(bytes.NewReader(data), source) // whole
	}
	keep := map[string]bool{}
	if o := objs(); o != nil {
		for _, c := range correlate.ChainsOfService(o.ServicePorts()) {
			keep[c] = true
		}
	}
	filtered, dropped := walkFilter(data, spans, keep)
	in, err := opts.Read(bytes.NewReader(filtered), source)
	if err == nil && in.Ruleset != nil {
		for i := range in.Ruleset.Dumps {
			in.Ruleset.Dumps[i].Rules += dropped // as if read whole
		}
	}
	return in, err
}

// dumpSpan is a run of lines of a dump: lines of no per-service chain,
// or the declaration (decl) or consecutive rules of one (perService),
// whose name is data[name:name+nameLen]. 16 bytes: the 5,000-Service
// node has 210k spans.
type dumpSpan struct {
	start, end, name int32
	nameLen          uint16
	decl             bool
	perService       bool
}

// chain is the chain of a per-service span.
func (sp dumpSpan) chain(data []byte) []byte {
	return data[sp.name : sp.name+int32(sp.nameLen)]
}

// lines counts the span's lines, the last one's even without a newline.
func (sp dumpSpan) lines(data []byte) int {
	n := bytes.Count(data[sp.start:sp.end], []byte{'\n'})
	if sp.end > sp.start && data[sp.end-1] != '\n' {
		n++
	}
	return n
}

// startsTable: the span holds a "*table" line.
func (sp dumpSpan) startsTable(data []byte) bool {
	text := data[sp.start:sp.end]
	return !sp.perService && (len(text) > 0 && text[0] == '*' || bytes.Contains(text, []byte("\n*")))
}

// walkFilter keeps every line of data except the declarations and rules
// of per-service chains outside keep, which it first closes over the
// jumps of the rules it keeps (as filterIPTablesDump does) and the chains
// the pod source's range may be read from (cidrChains); a line left out
// is left empty. dropped counts the rules left out. spans are data's
// (dumpSpans): its lines are read once.
func walkFilter(data []byte, spans []dumpSpan, keep map[string]bool) (out []byte, dropped int) {
	for _, c := range cidrChains(data, spans) {
		keep[c] = true
	}
	closeOverJumps(data, spans, keep)
	var b bytes.Buffer
	b.Grow(len(data) / 16)
	for _, sp := range spans {
		if !sp.perService || keep[string(sp.chain(data))] {
			b.Write(data[sp.start:sp.end])
			continue
		}
		// an empty line for each line left out: the rules kept keep
		// their line numbers (a hop's "line")
		n := sp.lines(data)
		if !sp.decl {
			dropped += n
		}
		for ; n > 0; n -= min(n, len(newlines)) {
			b.Write(newlines[:min(n, len(newlines))])
		}
	}
	return b.Bytes(), dropped
}

var newlines = bytes.Repeat([]byte{'\n'}, 4096)

// closeOverJumps adds to keep the per-service chains the rules of the
// chains in keep jump or go to, until none is new.
func closeOverJumps(data []byte, spans []dumpSpan, keep map[string]bool) {
	for grew := true; grew; {
		grew = false
		for _, sp := range spans {
			if !sp.perService || sp.decl || !keep[string(sp.chain(data))] {
				continue
			}
			for rest := data[sp.start:sp.end]; len(rest) > 0; {
				line := rest
				if i := bytes.IndexByte(rest, '\n'); i >= 0 {
					line, rest = rest[:i], rest[i+1:]
				} else {
					rest = nil
				}
				jumpTargets(bytes.TrimRight(line, "\r"), func(t []byte) {
					if !keep[string(t)] {
						keep[string(t)] = true
						grew = true
					}
				})
			}
		}
	}
}

// cidrChains are the KUBE-SVC chains, of each table, whose first rule a
// trace from a pod may take the cluster's pod range from when no Node
// object or configuration gives it (diagnose: rulesClusterCIDRs reads the
// first chain, in the table's order, whose first rule is `! -s CIDR … -j
// KUBE-MARK-MASQ`): in declaration order, every one whose first rule may
// be that, up to the first that surely is.
func cidrChains(data []byte, spans []dumpSpan) []string {
	var out []string
	for len(spans) > 0 {
		n := 1
		for n < len(spans) && !spans[n].startsTable(data) {
			n++
		}
		out = append(out, tableCIDRChains(data, spans[:n])...)
		spans = spans[n:]
	}
	return out
}

// tableCIDRChains is cidrChains of one table's spans.
func tableCIDRChains(data []byte, spans []dumpSpan) []string {
	if name, ok := firstCIDRChain(data, spans); ok {
		return []string{name}
	}
	var order []string
	first := map[string][]byte{} // a KUBE-SVC chain's first rule line
	add := func(name []byte) {
		if _, ok := first[string(name)]; !ok {
			first[string(name)] = nil
			order = append(order, string(name))
		}
	}
	for _, sp := range spans {
		if !sp.perService {
			continue
		}
		name := sp.chain(data)
		if !bytes.HasPrefix(name, []byte(kubeproxy.PrefixService)) {
			continue
		}
		add(name) // declared, or first seen in a rule: the parser's order
		if !sp.decl && first[string(name)] == nil {
			line := data[sp.start:sp.end]
			if i := bytes.IndexByte(line, '\n'); i >= 0 {
				line = line[:i]
			}
			first[string(name)] = bytes.TrimRight(line, "\r")
		}
	}
	var out []string
	for _, name := range order {
		line := first[name]
		if !bytes.Contains(line, []byte(kubeproxy.ChainMarkMasq)) || !bytes.Contains(line, []byte("!")) {
			continue // its first rule is not one, or it has none
		}
		out = append(out, name)
		if surelyCIDRRule(line, []byte(name)) {
			break
		}
	}
	return out
}

// firstCIDRChain is tableCIDRChains in the common case, without a map:
// the first KUBE-SVC chain of the table (declared, or seen in a rule) has
// rules, and its first rule surely is the one.
func firstCIDRChain(data []byte, spans []dumpSpan) (string, bool) {
	var first []byte
	for _, sp := range spans {
		if !sp.perService || !bytes.HasPrefix(sp.chain(data), []byte(kubeproxy.PrefixService)) {
			continue
		}
		if first == nil {
			first = sp.chain(data)
		}
		if sp.decl {
			continue
		}
		line := data[sp.start:sp.end]
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line = line[:i]
		}
		if bytes.Equal(sp.chain(data), first) && surelyCIDRRule(bytes.TrimRight(line, "\r"), first) {
			return string(first), true
		}
		return "", false
	}
	return "", false
}

// surelyCIDRRule: line, a rule of chain, is `-A chain ! -s CIDR … -j
// KUBE-MARK-MASQ`.
func surelyCIDRRule(line, chain []byte) bool {
	_, rest, ok := bytes.Cut(line, append(append([]byte(" "), chain...), ' '))
	return ok && bytes.HasPrefix(rest, []byte("! -s ")) && bytes.HasSuffix(rest, []byte(" -j "+kubeproxy.ChainMarkMasq))
}

// dumpSpans cuts data into spans of lines (walkFilter); nil when data is
// too big for them (2 GiB: the caps on inputs are far below).
func dumpSpans(data []byte) []dumpSpan {
	if len(data) >= 1<<31 {
		return nil
	}
	spans := make([]dumpSpan, 0, len(data)/128) // lines of 60-75 bytes, runs of them
	for pos := 0; pos < len(data); {
		end := len(data)
		if i := bytes.IndexByte(data[pos:], '\n'); i >= 0 {
			end = pos + i + 1
		}
		line := data[pos:end]
		decl := len(line) > 0 && line[0] == ':'
		var c []byte
		if decl {
			c = declChain(line)
		} else {
			c = ruleChain(line)
		}
		sp := dumpSpan{start: int32(pos), end: int32(end), decl: decl}
		if c != nil && len(c) < 1<<16 && perServiceChain(c) {
			// c is data's: where it starts, by what is left after it
			sp.perService = true
			sp.name, sp.nameLen = int32(cap(data)-cap(c)), uint16(len(c))
		}
		last := len(spans) - 1
		switch {
		case last >= 0 && !sp.perService && !spans[last].perService:
			spans[last].end = sp.end // another line of no per-service chain
		case last >= 0 && sp.perService && !decl && spans[last].perService && !spans[last].decl &&
			bytes.Equal(c, spans[last].chain(data)):
			spans[last].end = sp.end // the next rule of the same chain
		default:
			spans = append(spans, sp)
		}
		pos = end
	}
	return spans
}

// declChain is the chain a ":CHAIN POLICY [p:b]" line declares.
func declChain(line []byte) []byte {
	line = bytes.TrimRight(line[1:], "\r\n")
	if i := bytes.IndexByte(line, ' '); i >= 0 {
		return line[:i]
	}
	return line
}
