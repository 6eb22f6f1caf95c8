package diagnose

import (
	"fmt"
	"math"
	"path/filepath"
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
		// What every route does (endpoints, shares, verdicts, masquerade)
		// and the masquerade mark are alike too: ServicePorts holds a port
		// whose routes differ.
		if len(d.ServicePorts) > 0 || unowned > 0 || d.Same == 0 || len(d.FixedRules) > 0 {
			t.Errorf("%s: iptables and nftables differ: %d ports alike, %+v, unowned %+v, fixed rules %+v", dir, d.Same, d.ServicePorts, d.Unowned, d.FixedRules)
		}
	}
}

// The same rules in another form (iptables-save of either backend,
// kube-proxy's iptables-restore input, nft's listing of iptables-nft; nft
// list ruleset as text or JSON) do the same to every packet, and their
// fixed rules the same.
func TestDiffFormsAgree(t *testing.T) {
	for _, dir := range fixture.Dirs(t) {
		if fixture.ReadMeta(t, dir).LegacyBackendHasKubeChains {
			continue // its two backends hold two kube-proxies' rules
		}
		objs := fixture.Objects(t, dir)
		for _, pair := range [][2][]string{
			{{"iptables/save-legacy-ipv4.txt", "iptables/save-legacy-ipv6.txt"}, {"iptables/save-nft-ipv4.txt", "iptables/save-nft-ipv6.txt"}},
			{{"iptables/save-legacy-ipv4.txt", "iptables/save-legacy-ipv6.txt"}, {"iptables/restore-ipv4.txt", "iptables/restore-ipv6.txt"}},
			{{"iptables/save-nft-ipv4.txt", "iptables/save-nft-ipv6.txt"}, {"iptables/nft-list.txt"}},
			{{"nftables/ruleset.txt"}, {"nftables/ruleset.json"}},
		} {
			a, okA := fixture.Load(t, dir, pair[0]...)
			b, okB := fixture.Load(t, dir, pair[1]...)
			if !okA || !okB {
				continue
			}
			d := Diff(DiffSides{A: &Node{Ruleset: a, Objects: objs}, B: &Node{Ruleset: b, Objects: objs}})
			for _, sp := range d.ServicePorts {
				// nft's listing of iptables-nft has no comments: some
				// entries are told otherwise (see the report); what the
				// routes do is the same.
				if len(sp.Routes) > 0 || pair[1][0] != "iptables/nft-list.txt" {
					t.Errorf("%s: %s and %s differ for %s: %+v", filepath.Base(dir), pair[0][0], pair[1][0], sp.ServicePort, sp)
				}
			}
			if len(d.FixedRules) > 0 {
				t.Errorf("%s: %s and %s: fixed rules differ: %+v", filepath.Base(dir), pair[0][0], pair[1][0], d.FixedRules)
			}
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
	// What it does: the other two split the connections.
	wantRoutes(t, sp, "cluster IP 10.96.10.1:80 from a pod: A 33.3% each to 3 endpoints; B 50% to 10.244.1.11:8080, 50% to 10.244.2.11:8080, 10.244.0.11:8080 gets none")
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
	// Walked: external clients are no longer DNATed on B; pods and the
	// node, not held to the policy, still reach both endpoints.
	wantRoutes(t, sp, "external traffic from outside to 198.51.100.11:80: A 100% to 10.244.0.51:8080; B 100% not DNATed (accepted as is)")
	if !strings.Contains(sp.Expected, "Local traffic policy") {
		t.Errorf("expected: %q", sp.Expected)
	}
}

// wantRoutes checks the summaries of a Service port's route differences.
func wantRoutes(t *testing.T, sp ServicePortDiff, want ...string) {
	t.Helper()
	var got []string
	for _, r := range sp.Routes {
		got = append(got, r.Summary)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s: routes differ as\n%s\nwant\n%s", sp.ServicePort, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// withoutLines is text without the lines keep rejects; it fails unless
// exactly n went.
func withoutLines(t *testing.T, text string, n int, drop func(line string) bool) string {
	t.Helper()
	var kept []string
	gone := 0
	for _, line := range strings.Split(text, "\n") {
		if drop(line) {
			gone++
			continue
		}
		kept = append(kept, line)
	}
	if gone != n {
		t.Fatalf("removed %d lines, want %d", gone, n)
	}
	return strings.Join(kept, "\n")
}

// loadText reads the scenario files' text, each to be parsed alone.
func loadText(t *testing.T, dir string, files ...string) []string {
	t.Helper()
	var out []string
	for _, f := range files {
		text, ok := fixture.Text(t, dir, f)
		if !ok {
			t.Fatalf("%s has no %s", dir, f)
		}
		out = append(out, text)
	}
	return out
}

func parseAll(t *testing.T, texts []string, source string) *inspect.Ruleset {
	t.Helper()
	rs := &inspect.Ruleset{}
	for i, text := range texts {
		rs.Merge(fixture.Parse(t, text, fmt.Sprintf("%s-%d", source, i)))
	}
	return rs
}

// Nodes whose kube-proxies run with another masquerade bit (14, the
// default, and 15) do the same to every packet (each masquerades with its
// own bit) but differ in the mark, which the diff says once per family:
// what else on the node uses the bit matters (masq, the CNI). The rules of
// masqueradeBit 15 are kube-proxy's for small-v1.37 with 0x4000 written
// as 0x8000, line for line what kube-proxy wrote for masq-bit15-v1.37.
func TestDiffMasqueradeBit(t *testing.T) {
	small, bit15 := fixture.Dir("small-v1.37"), fixture.Dir("masq-bit15-v1.37")
	objs := fixture.Objects(t, small)
	for _, mode := range []struct {
		name     string
		files    []string
		from, to string
	}{
		{"iptables", []string{"iptables/save-legacy-ipv4.txt", "iptables/save-legacy-ipv6.txt"}, "0x4000", "0x8000"},
		{"nftables", []string{"nftables/ruleset.txt"}, "0x00004000", "0x00008000"},
	} {
		texts := loadText(t, small, mode.files...)
		b15 := loadText(t, bit15, mode.files...)
		var rewritten []string
		for i, text := range texts {
			r := strings.ReplaceAll(text, mode.from, mode.to)
			rewritten = append(rewritten, r)
			// Every line of kube-proxy's own bit-15 rules that names the
			// mark is in the rewrite.
			marks := 0
			for _, line := range strings.Split(b15[i], "\n") {
				if strings.Contains(line, mode.to) {
					marks++
					if !strings.Contains(r, line) {
						t.Errorf("%s: kube-proxy's bit-15 rule %q is not in the rewrite", mode.name, line)
					}
				}
			}
			if marks == 0 {
				t.Fatalf("%s: masq-bit15-v1.37 %s names no %s", mode.name, mode.files[i], mode.to)
			}
		}
		a, b := parseAll(t, texts, "bit 14"), parseAll(t, rewritten, "bit 15")
		d := Diff(DiffSides{A: &Node{Ruleset: a, Objects: objs}, B: &Node{Ruleset: b, Objects: objs}})
		if len(d.ServicePorts) > 0 || d.Status != StatusProblems {
			t.Errorf("%s: status %s, Service ports differ: %+v", mode.name, d.Status, d.ServicePorts)
		}
		var got []string
		for _, f := range d.FixedRules {
			got = append(got, f.Family+" "+f.What+": "+f.A+" | "+f.B)
		}
		want := []string{"IPv4 masqueradeMark: bit 14 (0x00004000) | bit 15 (0x00008000)", "IPv6 masqueradeMark: bit 14 (0x00004000) | bit 15 (0x00008000)"}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: fixed rules differ as\n%s\nwant\n%s", mode.name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if len(d.FixedRules) > 0 && !strings.HasPrefix(d.FixedRules[0].Summary, "masquerade mark: A bit 14 (0x00004000), B bit 15 (0x00008000)") {
			t.Errorf("%s: %q", mode.name, d.FixedRules[0].Summary)
		}
	}
	// The two scenarios as kube-proxy wrote them, each with its objects
	// (masq-bit15-v1.37 has some of small-v1.37's Services): the mark, and
	// the Services only A has.
	a, _ := fixture.Load(t, small, "iptables/save-legacy-ipv4.txt")
	b, _ := fixture.Load(t, bit15, "iptables/save-legacy-ipv4.txt")
	d := Diff(DiffSides{A: &Node{Ruleset: a, Objects: objs}, B: &Node{Ruleset: b, Objects: fixture.Objects(t, bit15)}})
	if len(d.FixedRules) != 1 || d.FixedRules[0].What != "masqueradeMark" {
		t.Errorf("fixed rules: %+v", d.FixedRules)
	}
	for _, sp := range d.ServicePorts {
		if !strings.Contains(sp.Expected, "deleted between the two") {
			t.Errorf("%s differs, and is not a Service only A has: %+v", sp.ServicePort, sp)
		}
	}
}

// The masquerade mark changed on one side only, half applied (the fault
// evaluate/kernel_test.go holds to the kernel): B's KUBE-MARK-MASQ sets
// 0x8000 while its KUBE-POSTROUTING masquerades 0x4000, so nothing B marks
// is masqueraded: every route that masquerades on A says so.
func TestDiffMasqueradeHalfApplied(t *testing.T) {
	dir := fixture.Dir("small-v1.37")
	text, _ := fixture.Text(t, dir, "iptables/save-legacy-ipv4.txt")
	const set = "-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000"
	if strings.Count(text, set+"\n") != 1 {
		t.Fatalf("the fixture has no %q", set)
	}
	b := strings.Replace(text, set+"\n", "-A KUBE-MARK-MASQ -j MARK --set-xmark 0x8000/0x8000\n", 1)
	objs := fixture.Objects(t, dir)
	d := Diff(DiffSides{A: &Node{Ruleset: fixture.Parse(t, text, "a"), Objects: objs}, B: &Node{Ruleset: fixture.Parse(t, b, "b"), Objects: objs}})
	routes := map[string]string{}
	for _, sp := range d.ServicePorts {
		for _, r := range sp.Routes {
			routes[sp.ServicePort+" "+r.Entry+" "+r.From] = r.Summary
			if strings.Join(r.Differs, ",") != "masquerade" {
				t.Errorf("%s: %s differs in %v", sp.ServicePort, r.Summary, r.Differs)
			}
		}
	}
	for k, want := range map[string]string{
		"shop/api:http nodePort outside":             "external traffic from outside to node port 30080: A masquerades, B does not",
		"shop/legacy-gw:http externalIP outside":     "external traffic from outside to 203.0.113.50:8080: A masquerades, B does not",
		"shop/frontend:https loadBalancerIP outside": "external traffic from outside to 198.51.100.10:443: A masquerades, B does not",
	} {
		if routes[k] != want {
			t.Errorf("%s: %q, want %q", k, routes[k], want)
		}
	}
	var fixed []string
	for _, f := range d.FixedRules {
		fixed = append(fixed, f.String())
	}
	if len(fixed) == 0 || fixed[0] != "! masquerade mark: A bit 14 (0x00004000), B sets bit 15 (0x00008000), masquerades bit 14 (0x00004000)" {
		t.Errorf("fixed rules: %q", fixed)
	}
}

// An endpoint chain emptied (its rules flushed) but still jumped to: the
// kernel returns from it and the connections its statistic rule took go on
// down the cascade (evaluate/kernel_test.go): the middle endpoint of
// shop/web's three gets none, the last two thirds. In nftables mode
// (endpoint chains only for ClientIP affinity) one of shop/cart's two
// emptied: its half falls off the service chain un-DNATed, into
// cluster-ips-check's reject.
func TestDiffEmptiedEndpointChain(t *testing.T) {
	dir := fixture.Dir("small-v1.37")
	objs := fixture.Objects(t, dir)
	text, _ := fixture.Text(t, dir, "iptables/save-legacy-ipv4.txt")
	sep := ""
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "-A KUBE-SVC-") && strings.Contains(line, `"shop/web:http -> 10.244.1.11:8080"`) {
			sep = line[strings.LastIndex(line, " ")+1:]
		}
	}
	if !strings.HasPrefix(sep, "KUBE-SEP-") {
		t.Fatal("no endpoint chain of shop/web:http 10.244.1.11:8080")
	}
	b := withoutLines(t, text, 2, func(l string) bool { return strings.HasPrefix(l, "-A "+sep+" ") })
	d := Diff(DiffSides{A: &Node{Ruleset: fixture.Parse(t, text, "a"), Objects: objs}, B: &Node{Ruleset: fixture.Parse(t, b, "emptied"), Objects: objs}})
	if len(d.ServicePorts) != 1 || d.ServicePorts[0].ServicePort != "shop/web:http" || len(d.FixedRules) > 0 {
		t.Fatalf("want shop/web:http alone to differ: %+v, fixed %+v", d.ServicePorts, d.FixedRules)
	}
	sp := d.ServicePorts[0]
	wantRoutes(t, sp, "cluster IP 10.96.10.1:80 from a pod: A 33.3% each to 3 endpoints; B 33.3% to 10.244.0.11:8080, 66.7% to 10.244.2.11:8080, 10.244.1.11:8080 gets none")
	if len(sp.Routes) == 1 {
		r := sp.Routes[0]
		wantShares(t, "A", r.A, map[string]float64{"10.244.0.11:8080": 1.0 / 3, "10.244.1.11:8080": 1.0 / 3, "10.244.2.11:8080": 1.0 / 3})
		wantShares(t, "B", r.B, map[string]float64{"10.244.0.11:8080": 1.0 / 3, "10.244.2.11:8080": 2.0 / 3})
		if r.B.Masquerade || len(r.B.Verdicts) > 0 || math.Abs(r.B.ShareSum-1) > 1e-6 {
			t.Errorf("B: %+v", r.B)
		}
	}
	if len(sp.OnlyA) != 1 || sp.OnlyA[0].What != "endpoint" || sp.OnlyA[0].Detail != "10.244.1.11:8080" {
		t.Errorf("only in A: %+v", sp.OnlyA)
	}

	nft, _ := fixture.Text(t, dir, "nftables/ruleset.txt")
	const chain = "\tchain endpoint-O5JCUGGF-shop/cart/tcp/http__10.244.0.81/8080 {\n"
	i := strings.Index(nft, chain)
	if i < 0 {
		t.Fatal("no endpoint chain of shop/cart:http 10.244.0.81:8080")
	}
	body := i + len(chain)
	flushed := nft[:body] + nft[body+strings.Index(nft[body:], "\t}"):]
	d = Diff(DiffSides{A: &Node{Ruleset: fixture.Parse(t, nft, "a"), Objects: objs}, B: &Node{Ruleset: fixture.Parse(t, flushed, "flushed"), Objects: objs}})
	if len(d.ServicePorts) != 1 || d.ServicePorts[0].ServicePort != "shop/cart:http" {
		t.Fatalf("want shop/cart:http alone to differ: %+v", d.ServicePorts)
	}
	wantRoutes(t, d.ServicePorts[0], `cluster IP 10.96.10.7:80 from a pod: A 50% each to 2 endpoints; B 50% to 10.244.2.81:8080, 10.244.0.81:8080 gets none, rejects 50% in cluster-ips-check ("Reject traffic to invalid ports of ClusterIPs")`)
}

func wantShares(t *testing.T, side string, f *RouteFate, want map[string]float64) {
	t.Helper()
	if f == nil {
		t.Errorf("%s: no route", side)
		return
	}
	got := map[string]float64{}
	for _, e := range f.Endpoints {
		got[e.Endpoint] = e.Share
	}
	if len(got) != len(want) {
		t.Errorf("%s: shares %v, want %v", side, got, want)
		return
	}
	for ep, w := range want {
		if math.Abs(got[ep]-w) > 1e-6 {
			t.Errorf("%s: shares %v, want %v", side, got, want)
			return
		}
	}
}

// KUBE-FORWARD's INVALID drop removed on one side: a fixed rule that
// differs (no new connection walked meets it: conntrack calls a new
// connection NEW), said by what it does, once per family.
func TestDiffForwardInvalidDrop(t *testing.T) {
	dir := fixture.Dir("small-v1.37")
	objs := fixture.Objects(t, dir)
	texts := loadText(t, dir, "iptables/save-legacy-ipv4.txt", "iptables/save-legacy-ipv6.txt")
	var without []string
	for _, text := range texts {
		without = append(without, withoutLines(t, text, 1, func(l string) bool {
			return strings.HasPrefix(l, "-A KUBE-FORWARD -m conntrack --ctstate INVALID ")
		}))
	}
	d := Diff(DiffSides{A: &Node{Ruleset: parseAll(t, texts, "a"), Objects: objs}, B: &Node{Ruleset: parseAll(t, without, "b"), Objects: objs}})
	var got []string
	for _, f := range d.FixedRules {
		got = append(got, f.Family+" "+f.String())
	}
	want := []string{
		"IPv4 - KUBE-FORWARD drops packets conntrack finds INVALID (the INVALID drop)",
		"IPv6 - KUBE-FORWARD drops packets conntrack finds INVALID (the INVALID drop)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") || len(d.ServicePorts) > 0 || d.Status != StatusProblems {
		t.Errorf("fixed rules\n%s\nwant\n%s\n(Service ports %+v, status %s)", strings.Join(got, "\n"), strings.Join(want, "\n"), d.ServicePorts, d.Status)
	}
	if len(d.FixedRules) > 0 && (d.FixedRules[0].Chain != "KUBE-FORWARD" || !strings.Contains(d.FixedRules[0].RuleA, "--ctstate INVALID")) {
		t.Errorf("%+v", d.FixedRules[0])
	}
	// The reverse, and the localhost drop of KUBE-FIREWALL.
	fw := withoutLines(t, texts[0], 1, func(l string) bool { return strings.HasPrefix(l, "-A KUBE-FIREWALL ") })
	d = Diff(DiffSides{A: &Node{Ruleset: fixture.Parse(t, fw, "b"), Objects: objs}, B: &Node{Ruleset: fixture.Parse(t, texts[0], "a"), Objects: objs}})
	if len(d.FixedRules) != 1 || d.FixedRules[0].String() != "+ KUBE-FIREWALL drops connections to 127.0.0.0/8 from other addresses, unless DNATed (the localhost drop)" {
		t.Errorf("fixed rules: %+v", d.FixedRules)
	}
}
