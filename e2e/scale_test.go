//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

const (
	nsBig     = "e2e-big"
	bigEPs    = 5000
	perSlice  = 1000 // the EndpointSlice controller's maximum
	bigTarget = 8080
)

// bigService is a Service with 5,000 endpoints (on no node of ours), in
// slices of 1000 as the EndpointSlice controller writes them.
func bigService() (svc map[string]any, slices []any) {
	d := svcDef{ns: nsBig, name: "big", ports: []svcPort{{name: "http", port: 80, target: bigTarget, proto: "TCP"}}}
	svc = serviceObject(d)
	for i := 0; i < bigEPs; i += perSlice {
		var eps []endpoint
		for j := i; j < i+perSlice; j++ {
			eps = append(eps, endpoint{ip: fmt.Sprintf("10.245.%d.%d", j/250, 1+j%250)})
		}
		s := sliceObject(svcDef{ns: nsBig, name: "big", ports: d.ports, eps: eps})
		s["metadata"].(map[string]any)["name"] = fmt.Sprintf("big-e2e%02d", i/perSlice)
		slices = append(slices, s)
	}
	return svc, slices
}

// TestLiveExplainBigService: explain on a Service with 5,000 endpoints
// works live, as a member of the group, under the admission policy: on the
// iptables-nft node its 5,000 chains are read chain by chain in several
// execs (one script that long is refused by the kernel: "argument list too
// long"), and explain says what the full dump says; on the nftables node
// the table is read whole. This runs last: the Service stays.
func TestLiveExplainBigService(t *testing.T) {
	defer noDebugPods(t)
	createObjects(t, namespaceObjects(nsBig)...)
	marks := markAll(t)
	svc, slices := bigService()
	createObjects(t, append([]any{svc}, slices...)...)
	waitAll(t, marks, 1, len(slices))

	type explanation struct {
		Ports []struct {
			Family    string
			Mode      string
			Endpoints []struct {
				Endpoint          string
				InRules, InSlices bool
			}
		}
		Problems   []json.RawMessage
		Collection *collection
	}
	explain := func(args ...string) (explanation, time.Duration) {
		start := time.Now()
		out, errOut, code := plugin(t, append(append([]string{"explain", "svc/big", "-n", nsBig, "-o", "json"}, member...), args...)...)
		if code != 0 && code != 2 {
			t.Fatalf("explain svc/big %v: exit %d\n%s", args, code, errOut)
		}
		var e explanation
		if err := json.Unmarshal([]byte(out), &e); err != nil {
			t.Fatalf("explain -o json: %v\n%.500s", err, out)
		}
		return e, time.Since(start)
	}
	inRules := func(e explanation) int {
		n := 0
		for _, p := range e.Ports {
			for _, ep := range p.Endpoints {
				if ep.InRules && ep.InSlices {
					n++
				}
			}
		}
		return n
	}
	for _, node := range nodes {
		t.Run(node, func(t *testing.T) {
			live, took := explain("--node", node)
			if got := inRules(live); got != bigEPs {
				t.Errorf("explain --node %s: %d endpoints both in the rules and the slices, want %d", node, got, bigEPs)
			}
			c := live.Collection
			if nodeMode[node] == "iptables" {
				if c == nil || c.Scope != "service "+nsBig+"/big" {
					t.Fatalf("explain --node %s collected %+v, want only the Service's chains", node, c)
				}
				for _, f := range c.Files {
					if f.Kind == "ruleset" && f.Bytes > 0 && !f.Partial {
						t.Errorf("explain read a whole table: %s", f.Command)
					}
				}
				// The same as explain of the full dump.
				objects := writeTemp(t, "objects.json", kubectl(t, "get", "services,endpointslices", "-A", "-o", "json"))
				v4 := writeTemp(t, "v4.txt", mustRun(t, nil, "ip", "netns", "exec", node, "iptables-save"))
				full, _ := explain("--node", node, "--from-dump", v4, "--from-objects", objects)
				if inRules(full) != inRules(live) || len(full.Problems) != len(live.Problems) {
					t.Errorf("live: %d endpoints, %d problems; full dump: %d, %d", inRules(live), len(live.Problems), inRules(full), len(full.Problems))
				}
			}
			for _, w := range c.Warnings {
				if strings.Contains(w, "argument list too long") {
					t.Errorf("a script was too long: %s", w)
				}
			}
			t.Logf("explain svc/big (5,000 endpoints) --node %s: %s, read %s", node, took.Round(100*time.Millisecond), files(c))
		})
	}
}
