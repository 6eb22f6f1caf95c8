package correlate_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
)

// large-churn: svc-003 deleted and svc-001 scaled down between two syncs in
// large-cluster mode; their chains linger, unreferenced, awaiting the
// throttled cleanup.
func TestStaleLargeClusterChurn(t *testing.T) {
	dir := filepath.Join(fixtureRoot, "large-churn-v1.37")
	objs := loadObjects(t, dir)
	expected := loadExpected(t, dir)
	want := map[string]expectedChain{}
	for _, e := range expected {
		if e.Stale && e.Mode == "iptables" {
			want[e.Family+"/"+e.Chain] = e
		}
	}
	for _, form := range forms(dir) {
		if form.mode != "iptables" {
			continue
		}
		t.Run(form.name, func(t *testing.T) {
			rs := readDumps(t, form.files...)
			rep := correlate.FindStale(rs, correlate.Attribute(rs, objs), objs, correlate.StaleOptions{})
			if !rep.LargeClusterMode["IPv4"] || rep.LargeClusterMode["IPv6"] {
				t.Errorf("large-cluster mode = %v", rep.LargeClusterMode)
			}
			got := map[string]correlate.StaleChain{}
			for _, s := range rep.Chains {
				got[s.Family+"/"+s.Chain] = s
			}
			if len(got) != len(want) {
				t.Errorf("%d stale chains, want %d", len(got), len(want))
			}
			for k, e := range want {
				s, ok := got[k]
				if !ok {
					t.Errorf("%s not reported stale", k)
					continue
				}
				if s.Referenced || !s.NotDueYet || !strings.Contains(s.Reason, "at most once per syncPeriod") {
					t.Errorf("%s: referenced=%v notDueYet=%v reason=%q", k, s.Referenced, s.NotDueYet, s.Reason)
				}
				if form.comments && (s.ServicePort != e.ServicePort || s.Endpoint != e.Endpoint) {
					t.Errorf("%s: former owner %q %q, want %q %q", k, s.ServicePort, s.Endpoint, e.ServicePort, e.Endpoint)
				}
			}
		})
	}
}

// The first sync's rules against the final objects: the chains of deleted
// svc-003 and svc-001's removed endpoints are still referenced from
// KUBE-SERVICES / the SVC chain there, which is harmful.
func TestStaleReferencedIsHarmful(t *testing.T) {
	dir := filepath.Join(fixtureRoot, "large-churn-v1.37")
	objs := loadObjects(t, dir)
	rs := readDumps(t, filepath.Join(dir, "iptables", "restore-ipv4.sync1.txt"))
	rep := correlate.FindStale(rs, correlate.Attribute(rs, objs), objs, correlate.StaleOptions{})
	referenced := 0
	for _, s := range rep.Chains {
		if s.Referenced {
			referenced++
			if s.NotDueYet || len(s.ReferencedBy) == 0 || !strings.Contains(s.Reason, "still reached from") {
				t.Errorf("%s: %+v", s.Chain, s)
			}
		}
	}
	if referenced < 31 {
		t.Errorf("%d referenced stale chains, want at least svc-003's 21 and svc-001's 10", referenced)
	}
	if len(rep.Chains) == 0 || !rep.Chains[0].Referenced {
		t.Error("harmful chains must come first")
	}
}

func TestStaleHealthyAndWithoutObjects(t *testing.T) {
	dir := filepath.Join(fixtureRoot, "small-v1.37")
	objs := loadObjects(t, dir)
	for _, f := range []string{"iptables/save-nft-ipv4.txt", "nftables/ruleset.json"} {
		rs := readDumps(t, filepath.Join(dir, f))
		rep := correlate.FindStale(rs, correlate.Attribute(rs, objs), objs, correlate.StaleOptions{})
		if len(rep.Chains) != 0 || len(rep.Elements) != 0 {
			t.Errorf("%s: stale on a healthy node: %+v %+v", f, rep.Chains, rep.Elements)
		}
		rep = correlate.FindStale(rs, correlate.Attribute(rs, nil), nil, correlate.StaleOptions{})
		if len(rep.Notes) == 0 || !strings.Contains(rep.Notes[0], "--from-objects") {
			t.Errorf("%s: no note about missing objects: %v", f, rep.Notes)
		}
	}
}

// nft-churn: kube-proxy flushed the chains of the deleted and scaled-down
// Services (meta.json lists them) and deletes them a sync later.
func TestStaleNFTablesFlushed(t *testing.T) {
	dir := filepath.Join(fixtureRoot, "nft-churn-v1.37")
	objs := loadObjects(t, dir)
	for _, f := range []string{"nftables/ruleset.json", "nftables/ruleset.txt"} {
		rs := readDumps(t, filepath.Join(dir, f))
		rep := correlate.FindStale(rs, correlate.Attribute(rs, objs), objs, correlate.StaleOptions{})
		if len(rep.Chains) == 0 {
			t.Fatalf("%s: no stale chains", f)
		}
		for _, s := range rep.Chains {
			if !s.Flushed || s.Referenced || !s.NotDueYet || !strings.Contains(s.Reason, "flushed by kube-proxy") || s.ServicePort == "" {
				t.Errorf("%s %s: %+v", f, s.Chain, s)
			}
		}
		if len(rep.Elements) != 0 {
			t.Errorf("%s: kube-proxy already removed the elements, got %+v", f, rep.Elements)
		}
	}
}
