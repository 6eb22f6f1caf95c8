package diagnose

import (
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
)

// kube-proxy's iptables and nftables rules for the same objects program
// every Service alike: the diff by ownership is empty, on every fixture.
func TestDiffModesAgree(t *testing.T) {
	for _, dir := range fixture.Dirs(t) {
		ipt, okI := fixture.Load(t, dir, "iptables/save-legacy-ipv4.txt", "iptables/save-legacy-ipv6.txt")
		nft, okN := fixture.Load(t, dir, "nftables/ruleset.json")
		if !okI || !okN {
			continue
		}
		objs := fixture.Objects(t, dir)
		d := Diff(DiffSides{A: &Node{Ruleset: ipt, Objects: objs}, B: &Node{Ruleset: nft, Objects: objs}})
		// The kubelet's KUBE-MARK-DROP (foreign-mark) exists in iptables only.
		unowned := 0
		for _, c := range append(d.Unowned.OnlyA, d.Unowned.OnlyB...) {
			if !strings.HasSuffix(c, " KUBE-MARK-DROP") {
				unowned++
			}
		}
		if len(d.ServicePorts) > 0 || unowned > 0 || d.Same == 0 {
			t.Errorf("%s: iptables and nftables differ: %d ports alike, %+v, unowned %+v", dir, d.Same, d.ServicePorts, d.Unowned)
		}
	}
}

// A node before and after churn (kube-proxy's own rules: large-v1.37 is the
// state before large-churn-v1.37): what was removed, added, and left stale,
// with the deleted Service named from the older objects.
func TestDiffBeforeAndAfterChurn(t *testing.T) {
	before, after := fixture.Dir("large-v1.37"), fixture.Dir("large-churn-v1.37")
	a, _ := fixture.Load(t, before, "iptables/save-legacy-ipv4.txt")
	b, _ := fixture.Load(t, after, "iptables/save-legacy-ipv4.txt")
	d := Diff(DiffSides{A: &Node{Ruleset: a, Objects: fixture.Objects(t, before)}, B: &Node{Ruleset: b, Objects: fixture.Objects(t, after)}})
	type want struct{ onlyA, onlyB map[string]int }
	got := map[string]want{}
	for _, sp := range d.ServicePorts {
		w := want{map[string]int{}, map[string]int{}}
		for _, e := range sp.OnlyA {
			w.onlyA[e.What]++
		}
		for _, e := range sp.OnlyB {
			w.onlyB[e.What]++
		}
		got[sp.ServicePort] = w
		if sp.ServicePort == "load/svc-003:http" && !strings.Contains(sp.Expected, "deleted between the two") {
			t.Errorf("svc-003: expected %q", sp.Expected)
		}
	}
	for spn, w := range map[string]want{
		// 20 → 10: ten endpoints gone, their chains still there (throttled).
		"load/svc-001:http": {map[string]int{"endpoint": 10}, map[string]int{"stale chain": 10}},
		// 20 → 30.
		"load/svc-002:http": {map[string]int{}, map[string]int{"endpoint": 10}},
		// Deleted: the cluster IP no longer leads anywhere, so no endpoint
		// is reached on B (walked: the SVC and 20 SEP chains that linger
		// reach nothing).
		"load/svc-003:http": {map[string]int{"entry": 1, "endpoint": 20}, map[string]int{"stale chain": 21}},
	} {
		g := got[spn]
		if !equalCounts(g.onlyA, w.onlyA) || !equalCounts(g.onlyB, w.onlyB) {
			t.Errorf("%s: only in A %v, only in B %v; want %v, %v", spn, g.onlyA, g.onlyB, w.onlyA, w.onlyB)
		}
	}
	if len(d.ServicePorts) != 3 || d.Status != StatusProblems {
		t.Errorf("%d Service ports differ (want 3), status %s", len(d.ServicePorts), d.Status)
	}
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A fault injected on one side: an endpoint's jump removed from its
// Service chain. The diff names that endpoint and nothing else.
func TestDiffRemovedJump(t *testing.T) {
	dir := fixture.Dir("small-v1.37")
	text, _ := fixture.Text(t, dir, "iptables/save-legacy-ipv4.txt")
	var kept []string
	removed := 0
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "-A KUBE-SVC-67NZLRHBNDSAWJRO ") && strings.Contains(line, "-j KUBE-SEP-GXKVICYM64SODBWJ") {
			removed++
			continue
		}
		kept = append(kept, line)
	}
	if removed != 1 {
		t.Fatalf("removed %d rules", removed)
	}
	objs := fixture.Objects(t, dir)
	good := fixture.Parse(t, text, "good")
	bad := fixture.Parse(t, strings.Join(kept, "\n"), "bad")
	d := Diff(DiffSides{A: &Node{Ruleset: good, Objects: objs}, B: &Node{Ruleset: bad, Objects: objs}})
	if len(d.ServicePorts) != 1 {
		t.Fatalf("%d Service ports differ: %+v", len(d.ServicePorts), d.ServicePorts)
	}
	sp := d.ServicePorts[0]
	if sp.ServicePort != "shop/web:http" || len(sp.OnlyA) != 1 || sp.OnlyA[0].What != "endpoint" || sp.OnlyA[0].Detail != "10.244.0.11:8080" || len(sp.OnlyB) != 0 {
		t.Errorf("diff: %+v", sp)
	}
	// Nothing differs between a ruleset and itself, whatever the order.
	same := Diff(DiffSides{A: &Node{Ruleset: good, Objects: objs}, B: &Node{Ruleset: good, Objects: objs}})
	if len(same.ServicePorts) != 0 || same.Status != StatusHealthy {
		t.Errorf("a ruleset differs from itself: %+v", same.ServicePorts)
	}
	// No objects: compared by names and comments, and said.
	bare := Diff(DiffSides{A: &Node{Ruleset: good}, B: &Node{Ruleset: &inspect.Ruleset{}}})
	if len(bare.Notes) == 0 || !strings.Contains(strings.Join(bare.Notes, " "), "no Services and EndpointSlices") {
		t.Errorf("notes: %v", bare.Notes)
	}
}

// A Local traffic policy's nodes reach the same endpoints for cluster
// traffic and different ones for external traffic: the diff says which
// traffic reaches what, not only which endpoints some traffic reaches. B is
// kube-proxy's rules for small-v1.37 without the jump of the local-endpoints
// chain of shop/ingress:http (externalTrafficPolicy Local) to its one local
// endpoint, which cluster traffic still reaches.
func TestDiffLocalTrafficRoutes(t *testing.T) {
	dir := fixture.Dir("small-v1.37")
	a, _ := fixture.Load(t, dir, "iptables/save-legacy-ipv4.txt")
	text, _ := fixture.Text(t, dir, "iptables/save-legacy-ipv4.txt")
	const jump = `-A KUBE-SVL-KKIQHC5ZC4IBF76O -m comment --comment "shop/ingress:http -> 10.244.0.51:8080" -j KUBE-SEP-J3CSYAOACR6KUZIC` + "\n"
	if !strings.Contains(text, jump) {
		t.Fatal("the fixture no longer has the local jump of shop/ingress:http")
	}
	b := fixture.Parse(t, strings.Replace(text, jump, "", 1), "without the local jump")
	objs := fixture.Objects(t, dir)
	d := Diff(DiffSides{A: &Node{Ruleset: a, Objects: objs}, B: &Node{Ruleset: b, Objects: objs}})
	if len(d.ServicePorts) != 1 || d.ServicePorts[0].ServicePort != "shop/ingress:http" {
		t.Fatalf("want one Service port that differs, shop/ingress:http; got %+v", d.ServicePorts)
	}
	sp := d.ServicePorts[0]
	var got []string
	for _, e := range sp.OnlyA {
		got = append(got, e.String())
	}
	want := []string{"external traffic reaches 10.244.0.51:8080 (KUBE-SEP-J3CSYAOACR6KUZIC)"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") || len(sp.OnlyB) != 0 {
		t.Errorf("only in A %q, only in B %+v; want %q and nothing", got, sp.OnlyB, want)
	}
}
