package diagnose_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
)

// large-churn: svc-003 deleted and svc-001 scaled down between two syncs in
// large-cluster mode; their chains linger, unreferenced, awaiting the
// throttled cleanup.
func TestStaleLargeClusterChurn(t *testing.T) {
	dir := filepath.Join(fixture.Root, "large-churn-v1.37")
	objs := fixture.Objects(t, dir)
	expected := fixture.Expected(t, dir)
	want := map[string]fixture.ExpectedChain{}
	for _, e := range expected {
		if e.Stale && e.Mode == "iptables" {
			want[e.Family+"/"+e.Chain] = e
		}
	}
	for _, form := range fixture.Forms(t, dir) {
		if form.Mode != "iptables" {
			continue
		}
		t.Run(form.Name, func(t *testing.T) {
			rs := fixture.ReadFiles(t, form.Files...)
			rep := diagnose.Stale(&diagnose.Node{Ruleset: rs, Objects: objs}, diagnose.StaleOptions{})
			if !rep.LargeClusterMode["IPv4"] || rep.LargeClusterMode["IPv6"] {
				t.Errorf("large-cluster mode = %v", rep.LargeClusterMode)
			}
			got := map[string]diagnose.StaleVerdict{}
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
				if form.Comments && (s.ServicePort != e.ServicePort || s.Endpoint != e.Endpoint) {
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
	dir := filepath.Join(fixture.Root, "large-churn-v1.37")
	objs := fixture.Objects(t, dir)
	rs := fixture.ReadFiles(t, filepath.Join(dir, "iptables", "restore-ipv4.sync1.txt"))
	rep := diagnose.Stale(&diagnose.Node{Ruleset: rs, Objects: objs}, diagnose.StaleOptions{})
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
	dir := filepath.Join(fixture.Root, "small-v1.37")
	objs := fixture.Objects(t, dir)
	for _, f := range []string{"iptables/save-nft-ipv4.txt", "nftables/ruleset.json"} {
		rs := fixture.ReadFiles(t, filepath.Join(dir, f))
		rep := diagnose.Stale(&diagnose.Node{Ruleset: rs, Objects: objs}, diagnose.StaleOptions{})
		if len(rep.Chains) != 0 || len(rep.Elements) != 0 {
			t.Errorf("%s: stale on a healthy node: %+v %+v", f, rep.Chains, rep.Elements)
		}
		rep = diagnose.Stale(&diagnose.Node{Ruleset: rs, Objects: nil}, diagnose.StaleOptions{})
		if len(rep.Notes) == 0 || !strings.Contains(rep.Notes[0], "--from-objects") {
			t.Errorf("%s: no note about missing objects: %v", f, rep.Notes)
		}
	}
}

// nft-churn: kube-proxy flushed the chains of the deleted and scaled-down
// Services (meta.json lists them) and deletes them a sync later.
func TestStaleNFTablesFlushed(t *testing.T) {
	dir := filepath.Join(fixture.Root, "nft-churn-v1.37")
	objs := fixture.Objects(t, dir)
	for _, f := range []string{"nftables/ruleset.json", "nftables/ruleset.txt"} {
		rs := fixture.ReadFiles(t, filepath.Join(dir, f))
		rep := diagnose.Stale(&diagnose.Node{Ruleset: rs, Objects: objs}, diagnose.StaleOptions{})
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
