package nft

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
)

// The readers keep strings that point into their read buffers (set and
// map elements, a set's table; unsafe.String): a buffer is never written
// again once read. Checked by parsing a ruleset whose every element is
// known, read in short pieces (many fills of one buffer), then parsing
// another into the same pools and buffers, and reading the first again:
// a buffer reused or compacted in place changes its strings.
func TestParsedStringsOutliveInput(t *testing.T) {
	t.Parallel()
	const sets, elems = 120, 100
	for _, tc := range []struct {
		name  string
		gen   func(w io.Writer, v, sets, elems int)
		parse func(r io.Reader) (*inspect.Ruleset, error)
	}{
		{"json in segments", genOwnedJSON, func(r io.Reader) (*inspect.Ruleset, error) {
			return parseJSON(r, "in", readOptions{jsonSegmentMin: 4 << 10})
		}},
		{"json one at a time", genOwnedJSON, func(r io.Reader) (*inspect.Ruleset, error) {
			return parseJSON(r, "in", readOptions{jsonOneAtATime: true})
		}},
		{"text in segments", genOwnedText, func(r io.Reader) (*inspect.Ruleset, error) {
			return parseTextWith(r, "in", readOptions{})
		}},
		{"text whole", genOwnedText, func(r io.Reader) (*inspect.Ruleset, error) {
			return parseTextWith(r, "in", readOptions{textWhole: true})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parse := func(v int) *inspect.Ruleset {
				var buf bytes.Buffer
				n := sets
				if strings.HasPrefix(tc.name, "text") {
					n = 5 * sets // past textParallelMin: segments
				}
				tc.gen(&buf, v, n, elems)
				if tc.name == "text in segments" && buf.Len() < textParallelMin {
					t.Fatalf("%d bytes: read whole, not in segments", buf.Len())
				}
				rs, err := tc.parse(pieceReader{bytes.NewReader(buf.Bytes()), 4 << 10})
				if err != nil {
					t.Fatal(err)
				}
				if d := checkOwned(rs, v, n, elems); d != "" {
					t.Fatalf("ruleset %d, as parsed: %s", v, d)
				}
				return rs
			}
			first := parse(1)
			parse(2)
			if d := checkOwned(first, 1, len(first.NFTables[0].Sets), elems); d != "" {
				t.Fatalf("ruleset 1, after ruleset 2 was parsed: %s", d)
			}
		})
	}
}

// ownedElem is element j of set (or map) i in ruleset v.
func ownedElem(v, i, j int) (key, val string) {
	return fmt.Sprintf("10.%d.%d.%d", 2*v+i/256, i%256, j), fmt.Sprintf("172.%d.%d.%d", 16+2*v+i/256, i%256, j)
}

// genOwnedJSON writes ruleset v as nft -j lists it: table tV, then for
// each i a chain with a rule, a set and a map of elems elements each.
func genOwnedJSON(w io.Writer, v, sets, elems int) {
	fmt.Fprintf(w, `{"nftables": [{"table": {"family": "ip", "name": "t%d", "handle": 1}}`, v)
	for i := range sets {
		fmt.Fprintf(w, `, {"chain": {"family": "ip", "table": "t%d", "name": "c%d", "handle": %d}}`, v, i, 2*i+2)
		fmt.Fprintf(w, `, {"rule": {"family": "ip", "table": "t%d", "chain": "c%d", "handle": %d, "expr": [{"accept": null}]}}`, v, i, 2*i+3)
		var s, m []string
		for j := range elems {
			k, val := ownedElem(v, i, j)
			s = append(s, `"`+k+`"`)
			m = append(m, `["`+k+`", "`+val+`"]`)
		}
		fmt.Fprintf(w, `, {"set": {"family": "ip", "name": "s%d", "table": "t%d", "type": "ipv4_addr", "elem": [%s]}}`, i, v, strings.Join(s, ", "))
		fmt.Fprintf(w, `, {"map": {"family": "ip", "name": "m%d", "table": "t%d", "type": "ipv4_addr", "map": "ipv4_addr", "elem": [%s]}}`, i, v, strings.Join(m, ", "))
	}
	io.WriteString(w, "]}\n")
}

// genOwnedText writes ruleset v as `nft list ruleset` lists it.
func genOwnedText(w io.Writer, v, sets, elems int) {
	fmt.Fprintf(w, "table ip t%d {\n", v)
	for i := range sets {
		var s, m []string
		for j := range elems {
			k, val := ownedElem(v, i, j)
			s = append(s, k)
			m = append(m, k+" : "+val)
		}
		fmt.Fprintf(w, "\tset s%d {\n\t\ttype ipv4_addr\n\t\telements = { %s }\n\t}\n\n", i, strings.Join(s, ", "))
		fmt.Fprintf(w, "\tmap m%d {\n\t\ttype ipv4_addr : ipv4_addr\n\t\telements = { %s }\n\t}\n\n", i, strings.Join(m, ", "))
	}
	for i := range sets {
		fmt.Fprintf(w, "\tchain c%d {\n\t\taccept\n\t}\n\n", i)
	}
	io.WriteString(w, "}\n")
}

// checkOwned reports the first string of rs that is not what ruleset v
// holds ("" when all are).
func checkOwned(rs *inspect.Ruleset, v, sets, elems int) string {
	if len(rs.NFTables) != 1 {
		return fmt.Sprintf("%d tables", len(rs.NFTables))
	}
	tb := rs.NFTables[0]
	if want := fmt.Sprintf("t%d", v); tb.Name != want || len(tb.Sets) != sets || len(tb.Maps) != sets {
		return fmt.Sprintf("table %q with %d sets and %d maps, want %q with %d", tb.Name, len(tb.Sets), len(tb.Maps), want, sets)
	}
	for i := range sets {
		s, m := tb.Set(fmt.Sprintf("s%d", i)), tb.Map(fmt.Sprintf("m%d", i))
		if s == nil || m == nil || len(s.Elements) != elems || len(m.Elements) != elems {
			return fmt.Sprintf("set or map %d missing or short", i)
		}
		if s.Table != tb.Name || m.Table != tb.Name {
			return fmt.Sprintf("set %d in table %q, map in %q, want %q", i, s.Table, m.Table, tb.Name)
		}
		for j := range elems {
			k, val := ownedElem(v, i, j)
			se, me := s.Elements[j], m.Elements[j]
			if fmt.Sprint(se.Key) != "["+k+"]" || se.Table != tb.Name {
				return fmt.Sprintf("set %d element %d: %q in %q, want %q", i, j, se.Key, se.Table, k)
			}
			if fmt.Sprint(me.Key) != "["+k+"]" || fmt.Sprint(me.Value) != "["+val+"]" {
				return fmt.Sprintf("map %d element %d: %q : %q, want %q : %q", i, j, me.Key, me.Value, k, val)
			}
		}
	}
	return ""
}
