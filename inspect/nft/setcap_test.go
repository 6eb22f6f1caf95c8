package nft

import (
	"fmt"
	"strings"
	"testing"
)

// setText is an `nft list` table with one set or map of n elements, four
// to a line as nft lists them.
func setText(isMap bool, n int) string {
	var b strings.Builder
	kind, typ, value := "set", "ipv4_addr", ""
	if isMap {
		kind, typ, value = "map", "ipv4_addr : verdict", " : goto svc"
	}
	fmt.Fprintf(&b, "table ip t {\n\t%s s {\n\t\ttype %s\n\t\telements = { ", kind, typ)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
			if i%4 == 0 {
				b.WriteString("\n\t\t\t     ")
			}
		}
		fmt.Fprintf(&b, "10.%d.%d.%d%s", i>>16&255, i>>8&255, i&255, value)
	}
	b.WriteString(" }\n\t}\n\tchain svc {\n\t}\n}\n")
	return b.String()
}

// A set or map of more than MaxSetElements (10 million took 3.4 GB) is
// read up to the cap, with a warning that says so; at the cap it is read
// whole, without one.
func TestSetElementsCap(t *testing.T) {
	tests := []struct {
		name  string
		isMap bool
		n     int
		warn  bool
	}{
		{"set at the cap", false, MaxSetElements, false},
		{"set over the cap", false, MaxSetElements + 3, true},
		{"map over the cap", true, MaxSetElements + 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs, err := ParseText(strings.NewReader(setText(tt.isMap, tt.n)), "ruleset.txt")
			if err != nil {
				t.Fatal(err)
			}
			tb := rs.NFTables[0]
			got := 0
			if tt.isMap {
				got = len(tb.Map("s").Elements)
			} else {
				got = len(tb.Set("s").Elements)
			}
			if want := min(tt.n, MaxSetElements); got != want {
				t.Errorf("%d elements read, want %d", got, want)
			}
			warned := strings.Contains(strings.Join(rs.Dumps[0].Warnings, "\n"), fmt.Sprintf("ip t s holds more than %d elements", MaxSetElements))
			if warned != tt.warn {
				t.Errorf("warned %v, want %v: %q", warned, tt.warn, rs.Dumps[0].Warnings)
			}
		})
	}
}
