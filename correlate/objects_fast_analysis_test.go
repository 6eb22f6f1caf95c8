package correlate_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
)

// The analyses see no difference between the fast objects decoder and the
// generic one: on every form of every fixture, attribution, every
// Service's explanation and the stale chains are the same.
func TestFastObjectsSameAnalysis(t *testing.T) {
	for _, dir := range fixture.Scenarios(t) {
		f, err := os.Open(filepath.Join(dir, "objects.json"))
		if err != nil {
			t.Fatal(err)
		}
		generic, err := correlate.ReadObjectsGeneric(f, "objects.json")
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		fast := fixture.Objects(t, dir)
		node := fixture.ReadMeta(t, dir).Node
		for _, form := range fixture.Forms(t, dir) {
			t.Run(filepath.Base(dir)+"/"+form.Name, func(t *testing.T) {
				rs := fixture.ReadFiles(t, form.Files...)
				resFast, resGeneric := correlate.Attribute(rs, fast), correlate.Attribute(rs, generic)
				same := func(what string, g, f any) {
					t.Helper()
					gj, err := json.MarshalIndent(g, "", " ")
					if err != nil {
						t.Fatal(err)
					}
					fj, _ := json.MarshalIndent(f, "", " ")
					if diff := cmp.Diff(string(gj), string(fj)); diff != "" {
						t.Errorf("%s (-generic +fast):\n%s", what, diff)
					}
				}
				same("attribution", resGeneric, resFast)
				nv := correlate.NodeView{Name: node}
				all := correlate.ExplainAll(rs, generic, nv)
				if len(all) == 0 {
					t.Fatal("no Service explained")
				}
				same("explanations", all, correlate.ExplainAll(rs, fast, nv))
				same("stale chains", correlate.FindStale(rs, resGeneric, generic), correlate.FindStale(rs, resFast, fast))
			})
		}
	}
}
