package evaluate

import (
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/knftables"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/inspect/nft"
)

// Indexes keep a walk linear in the rules it visits, not in the table:
// kube-proxy's KUBE-SERVICES has a rule per Service port (10,000 on a big
// node), its service-ips map an element per address and port.

// indexFrom is the size from which a chain is indexed.
const indexFrom = 32

// chainIndex lists, of a big iptables chain, the rules that can only
// match one destination address (`-d 10.96.0.1/32`, `ip daddr
// 10.96.0.1`) by that address, and the others in order.
type chainIndex struct {
	byDst  map[netip.Addr][]int
	others []int
}

// nextRule is the first rule at or after from that may match a packet to
// dst (every rule of a small chain).
func (e *Evaluator) nextRule(ch chainRef, from int, dst netip.Addr) int {
	if ch.ic == nil || len(ch.ic.Rules) < indexFrom {
		return from
	}
	idx := e.indexes[ch.ic]
	if idx == nil {
		idx = e.buildIndex(ch)
		e.indexes[ch.ic] = idx
	}
	n := len(ch.ic.Rules)
	first := func(list []int) int {
		k := sort.SearchInts(list, from)
		if k < len(list) {
			return list[k]
		}
		return n
	}
	return min(first(idx.byDst[dst.Unmap()]), first(idx.others))
}

func (e *Evaluator) buildIndex(ch chainRef) *chainIndex {
	idx := &chainIndex{byDst: map[netip.Addr][]int{}}
	for i, r := range ch.ic.Rules {
		var a netip.Addr
		switch {
		case ch.ipt.FromNFT:
			a = nftOnlyDst(e.statements(r, r.Text))
		case plain(r):
			// the model holds its -d: no rule of a 5,000-Service
			// KUBE-SERVICES is read whole for the index
			a = modelOnlyDst(r)
		default:
			a = iptOnlyDst(e.iptSpec(r))
		}
		if a.IsValid() {
			idx.byDst[a] = append(idx.byDst[a], i)
		} else {
			idx.others = append(idx.others, i)
		}
	}
	return idx
}

// iptOnlyDst is the one destination a rule's `-d HOST` allows.
func iptOnlyDst(r *iptRule) netip.Addr {
	if r.err != nil || len(r.spec.Matches) == 0 {
		return netip.Addr{}
	}
	for _, o := range r.spec.Matches[0].Options {
		if o.Name != "-d" || o.Not {
			continue
		}
		return hostOf(o.Arg())
	}
	return netip.Addr{}
}

// modelOnlyDst is the one destination a plain rule's `-d HOST` allows,
// from its model.
func modelOnlyDst(r *inspect.IPRule) netip.Addr {
	if d := r.Destination(); d.Set() && !d.Not {
		return hostOf(d.Value)
	}
	return netip.Addr{}
}

// nftOnlyDst is the one destination a rule's `ip daddr HOST` allows.
func nftOnlyDst(stmts []nft.Statement) netip.Addr {
	for _, st := range stmts {
		if st.Kind != nft.StmtMatch || st.Op != "==" || st.Left.Kind != nft.ExprSelector || st.Right.Kind != nft.ExprLiteral {
			continue
		}
		if st.Left.Name == "ip daddr" || st.Left.Name == "ip6 daddr" {
			return hostOf(st.Right.Name)
		}
	}
	return netip.Addr{}
}

// hostOf reads "10.0.0.1", "10.0.0.1/32", "fd00::1/128"; no prefix or
// range of more than one address.
func hostOf(s string) netip.Addr {
	if strings.Contains(s, "/") {
		p, err := parsePrefix(s)
		if err != nil || !p.IsSingleIP() {
			return netip.Addr{}
		}
		return p.Addr().Unmap()
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}

// setKey names a set or map of a table, with the types of the key it is
// looked up with (up to 8 parts; more fall to the list).
type setKey struct {
	elems *[]*knftables.Element
	types [8]fieldType
	n     int
}

// elemIndex finds the elements of a set or map by key: by hash when every
// element is one exact key, else in order.
type elemIndex struct {
	exact map[string]*knftables.Element
	list  []*knftables.Element
}

// lookup returns the first element whose key matches vals; ok false when
// an element's key cannot be read as the types of vals.
func (e *Evaluator) lookup(elems *[]*knftables.Element, vals []value) (*knftables.Element, bool) {
	k := setKey{elems: elems, n: len(vals)}
	for i, v := range vals {
		if i < len(k.types) {
			k.types[i] = v.t
		}
	}
	idx := e.sets[k]
	if idx == nil {
		idx = buildElemIndex(*elems, vals)
		if len(vals) > len(k.types) {
			idx.exact = nil
			idx.list = *elems
		}
		e.sets[k] = idx
	}
	if idx.exact != nil {
		e.keyBuf = appendCanonicalKey(e.keyBuf[:0], vals)
		return idx.exact[string(e.keyBuf)], true // no copy of the key
	}
	for _, el := range idx.list {
		m, ok := keyMatches(el.Key, vals)
		if !ok {
			return nil, false
		}
		if m {
			return el, true
		}
	}
	return nil, true
}

func keyMatches(key []string, vals []value) (match, ok bool) {
	if len(key) != len(vals) {
		return false, false
	}
	for j, w := range key {
		m, ok := matchLiteral(vals[j], unquoteWord(w))
		if !ok {
			return false, false
		}
		if !m {
			return false, true
		}
	}
	return true, true
}

func buildElemIndex(elems []*knftables.Element, vals []value) *elemIndex {
	exact := make(map[string]*knftables.Element, len(elems))
	for _, el := range elems {
		k, ok := canonicalWords(el.Key, vals)
		if !ok {
			return &elemIndex{list: elems}
		}
		if _, dup := exact[k]; !dup {
			exact[k] = el
		}
	}
	return &elemIndex{exact: exact}
}

// appendCanonicalKey and canonicalWords spell a key the same way from
// the packet's values and from an element's words.
func appendCanonicalKey(b []byte, vals []value) []byte {
	for j, v := range vals {
		if j > 0 {
			b = append(b, ' ')
		}
		switch v.t {
		case tAddr:
			b = v.addr.Unmap().AppendTo(b)
		case tPort, tNum, tProto:
			b = strconv.AppendUint(b, v.num, 10)
		default:
			b = append(b, v.str...)
		}
	}
	return b
}

func canonicalWords(key []string, vals []value) (string, bool) {
	if len(key) != len(vals) {
		return "", false
	}
	var b strings.Builder
	for j, w := range key {
		w = unquoteWord(w)
		if j > 0 {
			b.WriteByte(' ')
		}
		switch vals[j].t {
		case tAddr:
			a, err := netip.ParseAddr(w)
			if err != nil {
				return "", false
			}
			b.WriteString(a.Unmap().String())
		case tPort, tNum:
			n, ok := parseUint(w)
			if !ok {
				return "", false
			}
			b.WriteString(strconv.FormatUint(n, 10))
		case tProto:
			n, ok := protoNumber(w)
			if !ok {
				return "", false
			}
			b.WriteString(strconv.FormatUint(n, 10))
		case tIface:
			if strings.HasSuffix(w, "*") {
				return "", false
			}
			b.WriteString(w)
		default:
			return "", false
		}
	}
	return b.String(), true
}

func unquoteWord(w string) string {
	if len(w) >= 2 && w[0] == '"' && w[len(w)-1] == '"' {
		return w[1 : len(w)-1]
	}
	return w
}
