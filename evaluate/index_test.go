package evaluate

import (
	"testing"
)

// TestIndexFromModel: a plain rule is indexed by the destination its
// model holds, which is the one its arguments read whole allow: where
// they name one (`-d HOST` first) the model names the same, and where the
// model names one they hold a `-d` of that host, not negated.
func TestIndexFromModel(t *testing.T) {
	indexed := 0
	for name, rs := range iptablesFixtures(t) {
		e := New(rs, Node{})
		for _, tb := range rs.IPTables {
			for _, c := range tb.Chains {
				for _, r := range c.Rules {
					if !plain(r) {
						continue
					}
					model, whole := modelOnlyDst(r), iptOnlyDst(e.iptSpec(r))
					if whole.IsValid() && model != whole {
						t.Errorf("%s %s %q: model %v, whole %v", name, c.Name, r.Text, model, whole)
					}
					if !model.IsValid() {
						continue
					}
					indexed++
					found := false
					for _, m := range e.iptSpec(r).spec.Matches {
						for _, o := range m.Options {
							found = found || o.Name == "-d" && !o.Not && hostOf(o.Arg()) == model
						}
					}
					if !found {
						t.Errorf("%s %s %q: indexed by %v, no -d %v", name, c.Name, r.Text, model, model)
					}
				}
			}
		}
	}
	if indexed < 1000 {
		t.Errorf("only %d rules indexed by their model", indexed)
	}
}
