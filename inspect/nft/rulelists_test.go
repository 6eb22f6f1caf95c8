package nft

import (
	"reflect"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
)

// Every list of NFTRuleInfo is filled through ruleScratch.lists, so a
// rule costs no allocation for its lists: a new []string field must be
// named by listFields (and numLists grow), NumgenTargets alone having a
// scratch list of its own.
func TestRuleListsInScratch(t *testing.T) {
	var info inspect.NFTRuleInfo
	inTable := map[*[]string]bool{}
	for _, f := range listFields(&info) {
		if inTable[f] {
			t.Errorf("listFields names a field twice")
		}
		inTable[f] = true
	}
	own := map[string]bool{"NumgenTargets": true} // ruleScratch.numgen
	for name, f := range listsOf(&info) {
		if !inTable[f] && !own[name] {
			t.Errorf("NFTRuleInfo.%s is a list not in listFields (rule.go): analyze would allocate it for every rule", name)
		}
	}
}

// listsOf returns the []string fields of info by name.
func listsOf(info *inspect.NFTRuleInfo) map[string]*[]string {
	out := map[string]*[]string{}
	v := reflect.ValueOf(info).Elem()
	for i := range v.NumField() {
		if l, ok := v.Field(i).Addr().Interface().(*[]string); ok {
			out[v.Type().Field(i).Name] = l
		}
	}
	return out
}

// The lists of a rule are carved from the scratch's blocks: once they
// have grown, analysing rules that fill every list allocates nothing.
func TestAnalyzeAllocatesNoLists(t *testing.T) {
	rules := []string{
		`ip saddr { 10.0.0.1, 10.0.0.2 } ip daddr @cluster-ips jump a`,
		`ip daddr . meta l4proto . th dport vmap @service-ips`,
		`meta l4proto tcp dnat ip addr . port to numgen random mod 2 map { 0 : 10.1.0.1 . 80, 1 : 10.1.0.2 . 80 }`,
		`numgen random mod 2 vmap { 0 : goto ep-1, 1 : goto ep-2 }`,
		`ip daddr . tcp dport map @m goto b`,
		`meta l4proto tcp xt match "recent" xt target "DNAT"`,
	}
	var sc ruleScratch
	var info inspect.NFTRuleInfo
	filled := map[*[]string]bool{}
	for _, r := range rules {
		info = inspect.NFTRuleInfo{}
		sc.analyze(&info, r)
		for _, l := range listsOf(&info) {
			if len(*l) > 0 {
				filled[l] = true
			}
		}
	}
	for name, l := range listsOf(&info) {
		if !filled[l] {
			t.Errorf("no rule of the test fills %s", name)
		}
	}
	// every rule at each run: a list filled by one rule that allocates
	// counts once a run, not once in len(rules) runs (rounded to 0)
	allocs := testing.AllocsPerRun(500, func() {
		for _, r := range rules {
			info = inspect.NFTRuleInfo{}
			sc.analyze(&info, r)
		}
	})
	if allocs != 0 {
		t.Errorf("analysing %d rules allocates %v times", len(rules), allocs)
	}
}
