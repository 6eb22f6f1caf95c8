package nft

import (
	"fmt"
	"strings"
	"testing"
)

// The readers' shortcuts keep each rule in its chain: rules of chains of
// the same name in two tables, interleaved (the JSON reader caches the
// last chain), and a chain listed twice in text (its rules join, and a
// "type" line after a rule is a rule).
func TestRulesStayInTheirChains(t *testing.T) {
	js := `{"nftables": [{"table": {"family": "ip", "name": "a"}}, {"table": {"family": "ip", "name": "b"}},
{"chain": {"family": "ip", "table": "a", "name": "x"}}, {"chain": {"family": "ip", "table": "b", "name": "x"}},
{"rule": {"family": "ip", "table": "b", "chain": "x", "expr": [{"drop": null}]}},
{"rule": {"family": "ip", "table": "a", "chain": "x", "expr": [{"accept": null}]}},
{"rule": {"family": "ip", "table": "b", "chain": "x", "expr": [{"jump": {"target": "y"}}]}},
{"rule": {"family": "ip", "table": "a", "chain": "x", "expr": [{"return": null}]}}]}`
	rs, err := ParseJSON(strings.NewReader(js), "two.json")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, tb := range rs.NFTables {
		for _, c := range tb.Chains {
			for _, r := range c.Rules {
				got[tb.Name+"/"+c.Name] = append(got[tb.Name+"/"+c.Name], r.Rule.Rule)
			}
		}
	}
	if fmt.Sprint(got) != "map[a/x:[accept return] b/x:[drop jump y]]" {
		t.Errorf("rules by chain: %v", got)
	}

	text := "table ip t {\n\tchain c {\n\t\ttype filter hook input priority filter; policy accept;\n\t\tcounter accept\n\t}\n\tchain d {\n\t\tdrop\n\t}\n\tchain c {\n\t\ttype filter hook input priority filter; policy accept;\n\t}\n}\n"
	rs, err = ParseText(strings.NewReader(text), "twice.txt")
	if err != nil {
		t.Fatal(err)
	}
	c := rs.NFTables[0].Chain("c")
	if c == nil || len(c.Rules) != 2 || c.Rules[0].Rule.Rule != "counter accept" || !strings.HasPrefix(c.Rules[1].Rule.Rule, "type filter") || c.Hook == nil {
		t.Errorf("chain c: %+v", c)
	}
}

// The rules of a big table are analysed on every core, each into its own
// rule: the same as one at a time.
func TestParallelAnalysisAgrees(t *testing.T) {
	var buf strings.Builder
	genText(&buf, shape135, 400, 20)
	rs, err := ParseText(strings.NewReader(buf.String()), "big.txt")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range rs.NFTables[0].Chains {
		for _, r := range c.Rules {
			n++
			if want := analyzeRule(r.Rule.Rule); fmt.Sprint(want) != fmt.Sprint(r.Info) {
				t.Fatalf("%s: %v, alone %v", r.Rule.Rule, r.Info, want)
			}
		}
	}
	if n < parallelMin {
		t.Fatalf("%d rules: too few to analyse in parallel", n)
	}
}
