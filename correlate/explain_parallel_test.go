package correlate_test

import (
	"encoding/json"
	"runtime"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
)

// TestExplainAllParallel: ExplainAll's workers say what explaining each
// Service alone says, in the same order. `make unit` runs it with -race,
// with a worker per Service on four threads.
func TestExplainAllParallel(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	defer correlate.SetExplainPerWorker(correlate.SetExplainPerWorker(1))
	compared := 0
	for _, dir := range fixture.Scenarios(t) {
		objs := fixture.Objects(t, dir)
		node := correlate.NodeView{Name: "node-a"}
		for _, form := range fixture.Forms(t, dir) {
			all := correlate.ExplainAll(fixture.ReadFiles(t, form.Files...), objs, node)
			alone := fixture.ReadFiles(t, form.Files...)
			if len(all) < 2 {
				t.Fatalf("%s %s: %d Services explained", dir, form.Name, len(all))
			}
			for _, got := range all {
				want, err := correlate.Explain(alone, objs, correlate.ExplainOptions{Namespace: got.Namespace, Name: got.Name, Node: node})
				if err != nil {
					t.Fatal(err)
				}
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(want)
				if string(g) != string(w) {
					t.Errorf("%s %s: %s/%s explained with the others:\n%s\nalone:\n%s", dir, form.Name, got.Namespace, got.Name, g, w)
				}
				compared++
			}
			// In the order of the service ports, each Service once.
			var order []string
			seen := map[string]bool{}
			for _, sp := range objs.ServicePorts() {
				if k := sp.Namespace + "/" + sp.Name; sp.Proxied && !seen[k] {
					seen[k] = true
					order = append(order, k)
				}
			}
			for i, ex := range all {
				if i >= len(order) || order[i] != ex.Namespace+"/"+ex.Name {
					t.Errorf("%s %s: explanation %d is %s/%s, want the order %v", dir, form.Name, i, ex.Namespace, ex.Name, order)
					break
				}
			}
		}
	}
	if compared < 100 {
		t.Errorf("only %d explanations compared", compared)
	}
}
