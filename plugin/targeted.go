package plugin

import (
	"bytes"
	"io"
	"io/fs"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/inspect/input"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// The targeted explain path: `explain svc/NAME` reads only what explaining
// that Service looks at (Request.Service; inputSet.narrowTo says when).
// that Service looks at. Of the objects it keeps that Service, its
// EndpointSlices and the objects of other kinds (ReadServiceObjects); of
// an iptables-save dump (or kube-proxy's restore input) it keeps every
// line but the rules of other Services' chains: the fixed chains whole,
// every chain declared (so that the same chains exist), and the rules of
// this Service's KUBE-SVC/SVL/EXT/FW and KUBE-SEP chains, closed over the
// jumps between per-service chains, so that endpoint chains the slices no
// longer name are kept. nftables dumps are read whole. The answer is that
// of the full path (TestTargetedExplainSameAnswer compares them on every
// fixture Service); a garbled rule of another Service's chain is dropped
// unread, so its warning is not printed.

// perServicePrefixes are the prefixes of the iptables chains kube-proxy
// writes per service port or endpoint (and KUBE-XLB of kube-proxy ≤ 1.23).
var perServicePrefixes = []string{kubeproxy.PrefixService, kubeproxy.PrefixLocal, kubeproxy.PrefixExternal, kubeproxy.PrefixFirewall,
	kubeproxy.PrefixEndpoint, kubeproxy.PrefixXLB}

func perServiceChain(name []byte) bool {
	for _, p := range perServicePrefixes {
		if bytes.HasPrefix(name, []byte(p)) {
			return true
		}
	}
	return false
}

// readTargeted reads one dump for the targeted path: an iptables-save
// dump (or restore input) filtered to the chains of objs' Service, any
// other format whole.
func readTargeted(r io.Reader, source string, opts input.Options, objs func() *correlate.Objects) (*input.Input, error) {
	data, err := readWhole(r)
	if err != nil {
		return nil, err
	}
	format, err := input.Detect(data[:min(len(data), 64<<10)])
	if err != nil || format != inspect.FormatIPTablesSave && format != inspect.FormatIPTablesRestore {
		return opts.Read(bytes.NewReader(data), source)
	}
	keep := map[string]bool{}
	if o := objs(); o != nil {
		for _, c := range correlate.ChainsOfService(o.ServicePorts()) {
			keep[c] = true
		}
	}
	filtered, dropped := filterIPTablesDump(data, keep)
	in, err := opts.Read(bytes.NewReader(filtered), source)
	if err == nil && in.Ruleset != nil {
		for i := range in.Ruleset.Dumps {
			in.Ruleset.Dumps[i].Rules += dropped // as if read whole
		}
		markUnread(in.Ruleset, keep)
	}
	return in, err
}

// markUnread marks the per-service chains whose rules the targeted read
// left out: a walk that reaches one must not take it for an empty chain
// (inspect.IPChain.OnlyReferenced: its rules were not shown).
func markUnread(rs *inspect.Ruleset, keep map[string]bool) {
	for _, t := range rs.IPTables {
		for _, c := range t.Chains {
			if len(c.Rules) == 0 && !keep[c.Name] && perServiceChain([]byte(c.Name)) {
				c.OnlyReferenced = true
			}
		}
	}
}

// ruleChain returns the chain of an "-A CHAIN …" line (also "[0:0] -A …",
// iptables-save -c), or nil.
func ruleChain(line []byte) []byte {
	if len(line) > 0 && line[0] == '[' {
		i := bytes.IndexByte(line, ']')
		if i < 0 {
			return nil
		}
		line = bytes.TrimLeft(line[i+1:], " ")
	}
	if !bytes.HasPrefix(line, []byte("-A ")) {
		return nil
	}
	line = line[3:]
	if i := bytes.IndexByte(line, ' '); i >= 0 {
		return line[:i]
	}
	return line
}

// jumpTargets calls fn with the per-service chains a rule line jumps or
// goes to.
func jumpTargets(line []byte, fn func(target []byte)) {
	for _, flag := range [][]byte{[]byte(" -j "), []byte(" -g "), []byte(" --jump "), []byte(" --goto ")} {
		rest := line
		for {
			i := bytes.Index(rest, flag)
			if i < 0 {
				break
			}
			rest = rest[i+len(flag):]
			target := rest
			if j := bytes.IndexByte(target, ' '); j >= 0 {
				target = target[:j]
			}
			if perServiceChain(target) {
				fn(target)
			}
		}
	}
}

// filterIPTablesDump keeps every line of data except the rules of
// per-service chains outside keep, which it first closes over the jumps
// of the rules it keeps (a comment that reads like a jump only keeps more).
// dropped counts the rules left out. It is trace's walkFilter
// (trace_load.go) keeping the declarations and the line numbers' order
// without blank lines: both read data's lines once, as dumpSpans.
func filterIPTablesDump(data []byte, keep map[string]bool) (out []byte, dropped int) {
	spans := dumpSpans(data)
	if spans == nil {
		return data, 0 // past what spans can index (2 GiB): read whole
	}
	closeOverJumps(data, spans, keep)
	var b bytes.Buffer
	b.Grow(len(data) / 16)
	for _, sp := range spans {
		if !sp.perService || sp.decl || keep[string(sp.chain(data))] {
			b.Write(data[sp.start:sp.end])
			continue
		}
		dropped += sp.lines(data)
	}
	return b.Bytes(), dropped
}

// readWhole reads r whole, in one allocation when r is a file.
func readWhole(r io.Reader) ([]byte, error) {
	if f, ok := r.(interface{ Stat() (fs.FileInfo, error) }); ok {
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > 0 {
			buf := bytes.NewBuffer(make([]byte, 0, st.Size()+bytes.MinRead))
			_, err := buf.ReadFrom(r)
			return buf.Bytes(), err
		}
	}
	return io.ReadAll(r)
}
