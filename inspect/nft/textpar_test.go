package nft

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
)

// parseTextBothWays parses data in segments (when it can) and in one piece.
func parseTextBothWays(data string) (segmented, whole *inspect.Ruleset, errS, errW error) {
	segmented, errS = ParseText(strings.NewReader(data), "in")
	textParallel = false
	defer func() { textParallel = true }()
	whole, errW = ParseText(strings.NewReader(data), "in")
	return
}

// indexed builds the tables' name indexes (a cache one reader may have
// built and the other not), so that results compare by content.
func indexed(rs *inspect.Ruleset) *inspect.Ruleset {
	for _, t := range rs.NFTables {
		t.DistinctChains()
	}
	for _, t := range rs.IPTables {
		t.Reindex()
	}
	return rs
}

func sameTextParse(t *testing.T, what, data string) {
	t.Helper()
	s, w, errS, errW := parseTextBothWays(data)
	sameResult(t, what, "segmented", s, w, errS, errW)
}

// The segmented reader reads what the one-piece reader reads, on big
// rulesets of every shape and on them damaged in a later segment; when a
// check fails it falls back to one piece, and when none does it really
// reads in segments.
func TestTextSegmentsAgree(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	for _, shape := range []genShape{shape137, shape135, shapeIPTablesNFT} {
		var buf bytes.Buffer
		genText(&buf, shape, 600, 20)
		data := buf.String()
		if shape == shape137 {
			// the v1.37 shape is small: add a second big table
			var more bytes.Buffer
			genText(&more, shape135, 500, 20)
			data += strings.Replace(more.String(), "table ip kube-proxy", "table ip6 kube-proxy", 1)
		}
		t.Run(string(shape), func(t *testing.T) {
			if len(data) < textParallelMin {
				t.Fatalf("%d bytes: too small to segment", len(data))
			}
			rs, ok := parseTextSegments(data, "in")
			if !ok || rs.Dumps[0].Rules < 600 {
				t.Fatalf("not read in segments (ok %v)", ok)
			}
			sameTextParse(t, "whole", data)
			sameTextParse(t, "crlf", strings.ReplaceAll(data, "\n", "\r\n"))
			for _, cut := range []int{len(data) / 5, len(data) / 2, len(data) - 4} {
				sameTextParse(t, fmt.Sprintf("cut at %d", cut), data[:cut])
			}
			// damage the chain that starts two thirds in
			at := strings.Index(data[2*len(data)/3:], "\n\tchain ") + 2*len(data)/3 + 1
			first := data[strings.Index(data, "\n\tchain ")+1:]
			firstChain := first[:strings.Index(first, "\n\t}\n")+4]
			chainAt := data[at:]
			chainAt = chainAt[:strings.Index(chainAt, "\n\t}\n")+4]
			for name, ins := range map[string]string{
				"chain listed again":    firstChain,
				"chain listed twice":    chainAt, // in one segment
				"garbage":               "\tthis is not nft\n",
				"binary":                "\tchain x {\n\t\tdrop \x00\n\t}\n",
				"unclosed chain":        "\tchain open {\n\t\tdrop\n",
				"statement across":      "\tcounter c {\n\t\tpackets 1\n",
				"table closed early":    "}\n",
				"another table":         "}\ntable inet other {\n",
				"warnings":              strings.Repeat("\twhat\n", 2*maxWarnings),
				"rule before its chain": "\t\tjump somewhere\n",
			} {
				sameTextParse(t, name, data[:at]+ins+data[at:])
			}
		})
	}
}

func TestTextCutSegments(t *testing.T) {
	in := "table ip a {\n\tchain x {\n\t\tdrop\n\t}\n\tchain y {\n\t\taccept\n\t}\n}\ntable ip6 b { # handle 4\n\tchain z {\n\t}\n}\n"
	segs := cutSegments(in, 8)
	var got []string
	for _, sg := range segs {
		tb := "top"
		if sg.table != nil {
			tb = fmt.Sprint(*sg.table)
		}
		got = append(got, fmt.Sprintf("%d@%s:%q", sg.startLine, tb, strings.SplitN(sg.text, "\n", 2)[0]))
	}
	want := `[0@top:"table ip a {" 1@{ip a}:"\tchain x {" 4@{ip a}:"\tchain y {" 9@{ip6 b}:"\tchain z {"]`
	if fmt.Sprint(got) != want {
		t.Errorf("segments %s\nwant     %s", got, want)
	}
	if segs := cutSegments("chain x {\n}\n\tchain y {\n", 4); segs != nil {
		t.Errorf("no table line, yet segments: %+v", segs)
	}
}
