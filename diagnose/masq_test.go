package diagnose

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/inspect/input"
	"github.com/proxyrules/kubectl-proxyrules/inspect/kpconfig"
	"github.com/proxyrules/kubectl-proxyrules/inspect/metrics"
	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// insertIntoTable adds chain declarations after the `*table` line and rules
// before its COMMIT, in every section of that table.
func insertIntoTable(text, table string, decls, rules []string) string {
	lines := strings.Split(text, "\n")
	var out []string
	in := false
	for _, l := range lines {
		if in && l == "COMMIT" {
			out = append(out, rules...)
			in = false
		}
		out = append(out, l)
		if l == "*"+table {
			out = append(out, decls...)
			in = true
		}
	}
	return strings.Join(out, "\n")
}

func masqByKey(reps []MasqReport) map[string]MasqReport {
	m := map[string]MasqReport{}
	for _, r := range reps {
		m[string(r.Mode)+"/"+string(r.Family)] = r
	}
	return m
}

// TestMasqueradeFixtures: every form of every fixture shows kube-proxy's
// own mark (meta.json's masqueradeBit), agreeing, without problems.
func TestMasqueradeFixtures(t *testing.T) {
	for _, dir := range fixture.Dirs(t) {
		meta := fixture.ReadMeta(t, dir)
		name := filepath.Base(dir)
		if strings.HasPrefix(name, "foreign-mark") {
			continue // TestMasqueradeScenarioFixtures
		}
		wantMark := kubeproxy.FormatMark(uint32(1) << uint(meta.MasqueradeBit))
		for _, forms := range append(append([][]string{}, fixture.IPTablesForms...), fixture.NFTablesForms...) {
			rs, ok := fixture.Load(t, dir, forms...)
			if !ok {
				continue
			}
			t.Run(name+"/"+strings.Join(forms, "+"), func(t *testing.T) {
				reps := AnalyzeMasquerade(rs, nil)
				if len(reps) != 2 {
					t.Fatalf("%d reports, want 2 (one per family): %+v", len(reps), reps)
				}
				for _, r := range reps {
					if r.MasqueradeBit != meta.MasqueradeBit || r.Mark != wantMark || r.MarkValue != 1<<uint(meta.MasqueradeBit) {
						t.Errorf("%s/%s: bit %d mark %s, want %d %s", r.Mode, r.Family, r.MasqueradeBit, r.Mark, meta.MasqueradeBit, wantMark)
					}
					if !r.Agree || len(r.Problems) > 0 || len(r.Conflicts) > 0 {
						t.Errorf("%s/%s: agree %v problems %q conflicts %+v", r.Mode, r.Family, r.Agree, r.Problems, r.Conflicts)
					}
					if r.SetByTotal == 0 || len(r.TestedBy) == 0 || len(r.ClearedBy) == 0 {
						t.Errorf("%s/%s: set %d tested %d cleared %d", r.Mode, r.Family, r.SetByTotal, len(r.TestedBy), len(r.ClearedBy))
					}
					if r.RandomFully == r.RandomFullyUnknown {
						t.Errorf("%s/%s: randomFully %v unknown %v", r.Mode, r.Family, r.RandomFully, r.RandomFullyUnknown)
					}
					if r.ConfigBit != nil || r.ConfigAgrees != nil {
						t.Errorf("config fields without a config: %v %v", r.ConfigBit, r.ConfigAgrees)
					}
					for _, ref := range append(append(append([]RuleRef{}, r.SetBy...), r.TestedBy...), r.ClearedBy...) {
						if ref.Mark != wantMark {
							t.Errorf("%s/%s: %s %s: mark %s", r.Mode, r.Family, ref.Chain, ref.Rule, ref.Mark)
						}
					}
					switch r.Mode {
					case "iptables":
						if r.Shape != ShapeIPTables || r.SetByTotal != 1 || len(r.TestedBy) != 2 || len(r.ClearedBy) != 1 {
							t.Errorf("iptables %s: shape %s set %d tested %d cleared %d", r.Family, r.Shape, r.SetByTotal, len(r.TestedBy), len(r.ClearedBy))
						}
						if r.SetBy[0].Chain != "KUBE-MARK-MASQ" || r.ClearedBy[0].Chain != "KUBE-POSTROUTING" {
							t.Errorf("iptables %s: setBy %+v clearedBy %+v", r.Family, r.SetBy, r.ClearedBy)
						}
					case "nftables":
						want := ShapeNFTables136
						if strings.HasPrefix(meta.KubeProxyVersion, "v1.3") && meta.KubeProxyVersion < "v1.36" {
							want = ShapeNFTables135
						}
						if r.Shape != want {
							t.Errorf("nftables %s: shape %s, want %s (kube-proxy %s)", r.Family, r.Shape, want, meta.KubeProxyVersion)
						}
					}
				}
			})
		}
	}
}

// TestMasqueradeFormsAgree: iptables-save (both backends), kube-proxy's
// restore input and iptables-nft read through nft give the same answer.
func TestMasqueradeFormsAgree(t *testing.T) {
	type view struct {
		Bit                         int
		Mark                        string
		Agree                       bool
		Set, Tested, Cleared        int
		SetChain, Tested0, Cleared0 string
	}
	for _, dir := range fixture.Dirs(t) {
		var first map[string]view
		var firstForm string
		for _, forms := range fixture.IPTablesForms {
			rs, ok := fixture.Load(t, dir, forms...)
			if !ok {
				continue
			}
			got := map[string]view{}
			for _, r := range AnalyzeMasquerade(rs, nil) {
				got[string(r.Mode)+"/"+string(r.Family)] = view{r.MasqueradeBit, r.Mark, r.Agree, r.SetByTotal, len(r.TestedBy), len(r.ClearedBy), r.SetBy[0].Chain, r.TestedBy[0].Chain, r.ClearedBy[0].Chain}
				if r.RandomFullyUnknown && !(forms[0] == "iptables/nft-list.txt" && r.Family == kubeproxy.IPv6) {
					t.Errorf("%s %s %s: randomFully unknown", dir, forms[0], r.Family)
				}
			}
			if first == nil {
				first, firstForm = got, forms[0]
				continue
			}
			if len(got) != len(first) {
				t.Errorf("%s: %s gives %d reports, %s %d", dir, forms[0], len(got), firstForm, len(first))
			}
			for k, v := range first {
				if got[k] != v {
					t.Errorf("%s %s: %s gives %+v, %s gives %+v", dir, k, forms[0], got[k], firstForm, v)
				}
			}
		}
	}
}

// TestMasqueradeNFTShapes: ≤1.35 has the mark-for-masquerade chain and the
// three-rule masquerading chain; ≥1.36 marks inline.
func TestMasqueradeNFTShapes(t *testing.T) {
	for _, c := range []struct {
		dir, shape, setChain string
		testedRule           string
	}{
		{"small-v1.34", ShapeNFTables135, "mark-for-masquerade", "meta mark & 0x00004000 == 0x00000000 return"},
		{"small-v1.37", ShapeNFTables136, "services", "meta mark & 0x00004000 != 0x00000000 meta mark set meta mark ^ 0x00004000 masquerade fully-random"},
	} {
		rs, ok := fixture.Load(t, filepath.Join(fixture.Root, c.dir), "nftables/ruleset.txt")
		if !ok {
			t.Fatalf("%s: no nftables/ruleset.txt", c.dir)
		}
		reps := masqByKey(AnalyzeMasquerade(rs, nil))
		for _, fam := range []kubeproxy.Family{kubeproxy.IPv4, kubeproxy.IPv6} {
			r, ok := reps["nftables/"+string(fam)]
			if !ok {
				t.Fatalf("%s: no nftables/%s report", c.dir, fam)
			}
			if r.Shape != c.shape || !r.Agree || !r.RandomFully || r.MasqueradeBit != 14 {
				t.Errorf("%s %s: %+v", c.dir, fam, r)
			}
			found := false
			for _, s := range r.SetBy {
				if s.Chain == c.setChain {
					found = true
				}
			}
			if !found {
				t.Errorf("%s %s: no setBy in %s: %+v", c.dir, fam, c.setChain, r.SetBy)
			}
			if len(r.TestedBy) != 1 || r.TestedBy[0].Rule != c.testedRule {
				t.Errorf("%s %s: testedBy %+v", c.dir, fam, r.TestedBy)
			}
			if c.shape == ShapeNFTables135 && (r.SetByTotal != 1 || len(r.ClearedBy) != 1 || r.ClearedBy[0].Rule != "meta mark set meta mark ^ 0x00004000") {
				t.Errorf("%s %s: ≤1.35 shape: set %d cleared %+v", c.dir, fam, r.SetByTotal, r.ClearedBy)
			}
		}
	}
}

func TestMasqueradeConfig(t *testing.T) {
	cfg := func(t *testing.T, yaml string) *kpconfig.Config {
		c, err := kpconfig.Parse(strings.NewReader(yaml), "cfg.yaml")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	def := "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: iptables\n"
	bit15 := def + "iptables:\n  masqueradeBit: 15\nnftables:\n  masqueradeBit: 15\n"
	for _, c := range []struct {
		dir, cfg string
		agrees   bool
	}{
		{"small-v1.37", def, true},
		{"small-v1.37", bit15, false},
		{"masq-bit15-v1.37", bit15, true},
		{"masq-bit15-v1.37", def, false},
	} {
		rs, _ := fixture.Load(t, filepath.Join(fixture.Root, c.dir), "iptables/save-nft-ipv4.txt", "nftables/ruleset.txt")
		pc := cfg(t, c.cfg)
		for _, r := range AnalyzeMasquerade(rs, pc) {
			if r.ConfigBit == nil || r.ConfigAgrees == nil || *r.ConfigAgrees != c.agrees {
				t.Errorf("%s %s/%s: configBit %v agrees %v, want agrees %v", c.dir, r.Mode, r.Family, r.ConfigBit, r.ConfigAgrees, c.agrees)
				continue
			}
			if *r.ConfigBit != int(*pc.IPTablesMasqueradeBit) {
				t.Errorf("configBit %d", *r.ConfigBit)
			}
			mismatch := false
			for _, p := range r.Problems {
				if strings.Contains(p, "masqueradeBit") && strings.Contains(p, "configuration") {
					mismatch = true
				}
			}
			if mismatch == c.agrees {
				t.Errorf("%s %s/%s: problems %q (agrees %v)", c.dir, r.Mode, r.Family, r.Problems, c.agrees)
			}
			if r.Mode == "nftables" && !strings.Contains(strings.Join(r.Notes, " "), "iptables mode") {
				t.Errorf("%s nftables report with an iptables-mode config: notes %q", c.dir, r.Notes)
			}
		}
	}
	// nftables mode reads nftables.masqueradeBit.
	nftCfg := cfg(t, "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: nftables\niptables:\n  masqueradeBit: 12\nnftables:\n  masqueradeBit: 15\n")
	rs, _ := fixture.Load(t, filepath.Join(fixture.Root, "masq-bit15-v1.37"), "iptables/save-nft-ipv4.txt", "nftables/ruleset.txt")
	for _, r := range AnalyzeMasquerade(rs, nftCfg) {
		want := r.Mode == "nftables"
		if r.ConfigAgrees == nil || *r.ConfigAgrees != want {
			t.Errorf("%s/%s: configAgrees %v, want %v (configBit %v)", r.Mode, r.Family, r.ConfigAgrees, want, *r.ConfigBit)
		}
	}
}

func TestMasqueradeConflicts(t *testing.T) {
	small := filepath.Join(fixture.Root, "small-v1.37")
	bit15 := filepath.Join(fixture.Root, "masq-bit15-v1.37")
	save4, _ := fixture.Text(t, small, "iptables/save-nft-ipv4.txt")
	save15, _ := fixture.Text(t, bit15, "iptables/save-nft-ipv4.txt")
	nftText, _ := fixture.Text(t, small, "nftables/ruleset.txt")

	// The kubelet's KUBE-MARK-DROP (0x8000) and its KUBE-FIREWALL drop, as
	// a ≤1.27 kubelet left them.
	kubeletDrop := func(text string) string {
		text = insertIntoTable(text, "nat", []string{":KUBE-MARK-DROP - [0:0]"}, []string{"-A KUBE-MARK-DROP -j MARK --set-xmark 0x8000/0x8000"})
		return insertIntoTable(text, "filter", nil, []string{`-A KUBE-FIREWALL -m comment --comment "kubernetes firewall for dropping marked packets" -m mark --mark 0x8000/0x8000 -j DROP`})
	}
	foreignMangle := "*mangle\n:CNI-MARK - [0:0]\n-A PREROUTING -j CNI-MARK\n-A CNI-MARK -j MARK --set-xmark 0x4000/0x4000\n-A CNI-MARK -m connmark --mark 0x4000/0x4000 -j ACCEPT\n-A CNI-MARK -j MARK --set-xmark 0x200/0xf00\nCOMMIT\n"

	type want struct {
		chain, op, owner string
		conflict         bool // else otherMarks
	}
	for _, c := range []struct {
		name  string
		input string
		key   string
		want  []want
		none  []string // chains that must appear nowhere
	}{
		{"foreign mangle chain sets 0x4000", save4 + foreignMangle, "iptables/IPv4",
			[]want{{"CNI-MARK", "sets", OwnerForeign, true}, {"CNI-MARK", "sets", OwnerForeign, false}}, nil},
		{"foreign rule in kube-proxy's table", insertIntoTable(save4, "nat", []string{":CALICO-POST - [0:0]"}, []string{"-A CALICO-POST -j MARK --set-xmark 0x0/0xffff0000", "-A CALICO-POST -j MARK --set-mark 0x1"}), "iptables/IPv4",
			[]want{{"CALICO-POST", "sets", OwnerForeign, true}, {"CALICO-POST", "clears", OwnerForeign, false}}, nil},
		{"kubelet KUBE-MARK-DROP does not overlap bit 14", kubeletDrop(save4), "iptables/IPv4",
			[]want{{"KUBE-MARK-DROP", "sets", OwnerKubelet, false}, {"KUBE-FIREWALL", "tests", OwnerKubelet, false}}, nil},
		{"kubelet KUBE-MARK-DROP overlaps bit 15", kubeletDrop(save15), "iptables/IPv4",
			[]want{{"KUBE-MARK-DROP", "sets", OwnerKubelet, true}, {"KUBE-FIREWALL", "tests", OwnerKubelet, true}}, nil},
		{"nft foreign inet table", nftText + "table inet foreign {\n\tchain pre {\n\t\ttype filter hook prerouting priority mangle; policy accept;\n\t\tmeta mark set meta mark | 0x00004000\n\t\tmeta mark set meta mark | 0x00000200\n\t\tct mark set meta mark\n\t}\n}\n", "nftables/IPv6",
			[]want{{"pre", "sets", OwnerForeign, true}, {"pre", "sets", OwnerForeign, false}}, nil},
		{"nft meta mark set ct mark", nftText + "table ip restore {\n\tchain pre {\n\t\ttype filter hook prerouting priority mangle; policy accept;\n\t\tmeta mark set ct mark\n\t}\n}\n", "nftables/IPv4",
			[]want{{"pre", "sets", OwnerForeign, true}}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			rs := fixture.Parse(t, c.input, c.name)
			reps := masqByKey(AnalyzeMasquerade(rs, nil))
			r, ok := reps[c.key]
			if !ok {
				t.Fatalf("no %s report in %v", c.key, reps)
			}
			// kube-proxy's own rules still agree
			if !r.Agree {
				t.Errorf("agree false: %q", r.Problems)
			}
			for _, w := range c.want {
				list := r.OtherMarks
				if w.conflict {
					list = r.Conflicts
				}
				found := false
				for _, mc := range list {
					if mc.Chain == w.chain && mc.Op == w.op && mc.Owner == w.owner && mc.Reason != "" {
						found = true
					}
				}
				if !found {
					t.Errorf("no %+v in conflicts %+v / otherMarks %+v", w, r.Conflicts, r.OtherMarks)
				}
			}
			for _, mc := range append(append([]MarkConflict{}, r.Conflicts...), r.OtherMarks...) {
				if strings.Contains(mc.Rule, "connmark") || strings.Contains(mc.Rule, "ct mark set") {
					t.Errorf("connection-mark rule reported as a packet-mark rule: %+v", mc)
				}
				if mc.Chain == "KUBE-MARK-MASQ" || mc.Chain == "KUBE-POSTROUTING" || mc.Chain == "masquerading" {
					t.Errorf("kube-proxy's own rule reported: %+v", mc)
				}
			}
			if c.key == "nftables/IPv6" {
				if r4 := reps["nftables/IPv4"]; len(r4.Conflicts) == 0 || r4.Conflicts[0].Family != "inet" {
					t.Errorf("inet table not reported for IPv4: %+v", r4.Conflicts)
				}
			}
		})
	}
}

// TestMasqueradeOtherModeLeftovers: iptables and nftables kube-proxy rules
// on one node see each other as kube-proxy-owned conflicts.
func TestMasqueradeOtherModeLeftovers(t *testing.T) {
	rs, _ := fixture.Load(t, filepath.Join(fixture.Root, "small-v1.37"), "iptables/save-nft-ipv4.txt", "nftables/ruleset.txt")
	reps := masqByKey(AnalyzeMasquerade(rs, nil))
	for _, k := range []string{"iptables/IPv4", "nftables/IPv4"} {
		r := reps[k]
		kp := 0
		for _, mc := range r.Conflicts {
			if mc.Owner == OwnerKubeProxy {
				kp++
			}
			if k == "nftables/IPv4" && mc.Mode != "iptables" {
				t.Errorf("nftables report: conflict from %s: %+v", mc.Mode, mc)
			}
		}
		if kp == 0 {
			t.Errorf("%s: no kube-proxy-owned conflict: %+v", k, r.Conflicts)
		}
	}
	if r := reps["nftables/IPv6"]; len(r.Conflicts) != 0 {
		t.Errorf("nftables IPv6 sees IPv4 iptables rules: %+v", r.Conflicts)
	}
}

// TestMasqueradeProblems: broken rules give specific problems.
func TestMasqueradeProblems(t *testing.T) {
	small := filepath.Join(fixture.Root, "small-v1.37")
	save4, _ := fixture.Text(t, small, "iptables/save-nft-ipv4.txt")
	restore4, _ := fixture.Text(t, small, "iptables/restore-ipv4.txt")
	nftText, _ := fixture.Text(t, small, "nftables/ruleset.txt")
	for _, c := range []struct {
		name, input, key string
		agree            bool
		bit              int
		problem          string
	}{
		{"set 0x4000, tested 0x8000", strings.Replace(restore4, "--mark 0x00004000/0x00004000 -j RETURN", "--mark 0x00008000/0x00008000 -j RETURN", 1), "iptables/IPv4", false, -1, "KUBE-POSTROUTING tests 0x00008000 (bit 15) but"},
		{"no --random-fully", strings.Replace(save4, "-j MASQUERADE --random-fully", "-j MASQUERADE", 1), "iptables/IPv4", true, 14, "random-fully"},
		{"no KUBE-MARK-MASQ rule", strings.Replace(save4, "-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000\n", "", 1), "iptables/IPv4", false, 14, "KUBE-MARK-MASQ has no MARK rule"},
		{"no clear", strings.Replace(save4, "-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0\n", "", 1), "iptables/IPv4", false, 14, "does not clear"},
		{"set-mark overwrites", strings.Replace(save4, "--set-xmark 0x4000/0x4000", "--set-xmark 0x4000/0xffffffff", 1), "iptables/IPv4", true, 14, "overwrites the whole packet mark"},
		{"no POSTROUTING jump", strings.Replace(save4, `-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING`+"\n", "", 1), "iptables/IPv4", true, 14, "POSTROUTING does not jump"},
		{"nft without fully-random", strings.Replace(nftText, "meta mark set meta mark ^ 0x00004000 masquerade fully-random", "meta mark set meta mark ^ 0x00004000 masquerade", 1), "nftables/IPv4", true, 14, "fully-random"},
		{"nft set 0x4000 cleared 0x8000", strings.Replace(nftText, "meta mark set meta mark ^ 0x00004000 masquerade", "meta mark set meta mark ^ 0x00008000 masquerade", 1), "nftables/IPv4", false, 14, "masquerading clears 0x00008000 (bit 15) but"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, ok := masqByKey(AnalyzeMasquerade(fixture.Parse(t, c.input, c.name), nil))[c.key]
			if !ok {
				t.Fatalf("no %s report", c.key)
			}
			if r.Agree != c.agree || r.MasqueradeBit != c.bit {
				t.Errorf("agree %v bit %d, want %v %d (problems %q)", r.Agree, r.MasqueradeBit, c.agree, c.bit, r.Problems)
			}
			if !strings.Contains(strings.Join(r.Problems, "\n"), c.problem) {
				t.Errorf("problems %q lack %q", r.Problems, c.problem)
			}
		})
	}
}

// fxForeignMarkRule is meta.json's record of a foreign mark rule.
type fxForeignMarkRule struct {
	Mode, Family, Table, Chain, Rule, Action, Bits string
	Clashes                                        bool
}

// TestMasqueradeScenarioFixtures checks the foreign-mark and
// legacy-leftovers fixtures when they exist: every foreign mark rule
// meta.json lists is reported, as a conflict exactly when it clashes with
// kube-proxy's bit; leftovers in the other iptables backend are kube-proxy's.
func TestMasqueradeScenarioFixtures(t *testing.T) {
	ran := false
	for _, dir := range fixture.Dirs(t) {
		name := filepath.Base(dir)
		data, err := os.ReadFile(filepath.Join(dir, "meta.json"))
		if err != nil {
			t.Fatal(err)
		}
		var meta struct {
			MasqueradeBit    int                 `json:"masqueradeBit"`
			ForeignMarkRules []fxForeignMarkRule `json:"foreignMarkRules"`
		}
		if err := json.Unmarshal(data, &meta); err != nil {
			t.Fatal(err)
		}
		leftovers := fxLegacyLeftovers(t, dir)
		if len(meta.ForeignMarkRules) == 0 && !leftovers {
			continue
		}
		ran = true
		for _, forms := range [][]string{
			{"iptables/save-nft-ipv4.txt", "iptables/save-nft-ipv6.txt"},
			{"iptables/restore-ipv4.txt", "iptables/restore-ipv6.txt"},
			{"iptables/nft-list.txt"},
			{"nftables/ruleset.txt"},
			{"nftables/ruleset.json"},
		} {
			rs, ok := fixture.Load(t, dir, forms...)
			if !ok {
				continue
			}
			reps := AnalyzeMasquerade(rs, nil)
			mode := strings.Split(forms[0], "/")[0]
			for _, r := range reps {
				if r.MasqueradeBit != meta.MasqueradeBit || !r.Agree || len(r.Problems) > 0 {
					t.Errorf("%s %s %s/%s: bit %d agree %v problems %q", name, forms[0], r.Mode, r.Family, r.MasqueradeBit, r.Agree, r.Problems)
				}
			}
			for _, fr := range meta.ForeignMarkRules {
				if fr.Mode != mode {
					continue
				}
				op := map[string]string{"set": markOpSets, "test": markOpTests}[fr.Action]
				for _, r := range reps {
					if fr.Family != "inet" && kubeproxy.Family(fr.Family) != r.Family {
						continue
					}
					var hit *MarkConflict
					for _, list := range [][]MarkConflict{r.Conflicts, r.OtherMarks} {
						for i, mc := range list {
							if mc.Table == fr.Table && mc.Chain == fr.Chain && mc.Op == op && mc.Mask == fr.Bits && string(mc.Family) == fr.Family {
								hit = &list[i]
							}
						}
					}
					if hit == nil {
						t.Errorf("%s %s %s/%s: %s %s %q not reported: conflicts %+v otherMarks %+v", name, forms[0], r.Mode, r.Family, fr.Table, fr.Chain, fr.Rule, r.Conflicts, r.OtherMarks)
						continue
					}
					isConflict := false
					for _, mc := range r.Conflicts {
						if mc == *hit {
							isConflict = true
						}
					}
					wantOwner := OwnerForeign
					if strings.HasPrefix(fr.Chain, "KUBE-MARK-DROP") {
						wantOwner = OwnerKubelet
					}
					ruleOK := true
					switch forms[0] {
					case "iptables/save-nft-ipv4.txt":
						ruleOK = hit.Rule == strings.TrimPrefix(fr.Rule, "-A "+fr.Chain+" ")
					case "nftables/ruleset.txt":
						ruleOK = strings.HasPrefix(fr.Rule, hit.Rule)
					}
					if isConflict != fr.Clashes || hit.Owner != wantOwner || !ruleOK {
						t.Errorf("%s %s %s/%s: %q: conflict %v owner %s rule %q (meta: clashes %v)", name, forms[0], r.Mode, r.Family, fr.Rule, isConflict, hit.Owner, hit.Rule, fr.Clashes)
					}
				}
			}
		}
		if leftovers {
			rs, _ := fixture.Load(t, dir, "iptables/save-nft-ipv4.txt")
			for _, r := range AnalyzeMasquerade(rs, nil) {
				if !strings.Contains(strings.Join(r.Notes, " "), "iptables-legacy tables are present") {
					t.Errorf("%s: nft dump alone: no note on legacy tables: %q", name, r.Notes)
				}
			}
			rs, _ = fixture.Load(t, dir, "iptables/save-nft-ipv4.txt", "iptables/save-legacy-ipv4.txt")
			reps := AnalyzeMasquerade(rs, nil)
			backends := map[kubeproxy.Backend]bool{}
			for _, r := range reps {
				backends[r.Backend] = true
				kp := 0
				for _, mc := range r.Conflicts {
					if mc.Owner == OwnerKubeProxy {
						kp++
					}
				}
				if kp == 0 || !strings.Contains(strings.Join(r.Notes, " "), "both iptables backends") {
					t.Errorf("%s %s: other backend's kube-proxy rules not reported: conflicts %+v notes %q", name, r.Backend, r.Conflicts, r.Notes)
				}
			}
			if len(reps) != 2 || !backends[kubeproxy.BackendNFT] || !backends[kubeproxy.BackendLegacy] {
				t.Errorf("%s: %d reports, backends %v", name, len(reps), backends)
			}
		}
	}
	if !ran {
		t.Skip("no foreign-mark-* or legacy-leftovers-* fixture yet")
	}
}

// TestMasqueradePartial: partial and odd rulesets give reports, never a
// panic.
func TestMasqueradePartial(t *testing.T) {
	if got := AnalyzeMasquerade(nil, nil); got != nil {
		t.Errorf("nil ruleset: %+v", got)
	}
	if got := AnalyzeMasquerade(&inspect.Ruleset{}, &kpconfig.Config{}); len(got) != 0 {
		t.Errorf("empty ruleset: %+v", got)
	}
	// only the filter table
	r := masqByKey(AnalyzeMasquerade(fixture.Parse(t, "*filter\n:KUBE-FORWARD - [0:0]\n-A KUBE-FORWARD -m mark --mark 0x4000/0x4000 -j ACCEPT\nCOMMIT\n", "f"), nil))["iptables/IPv4"]
	if r.Agree || r.MasqueradeBit != 14 || len(r.Problems) == 0 {
		t.Errorf("filter only: %+v", r)
	}
	// a table without kube-proxy chains gives no report
	if got := AnalyzeMasquerade(fixture.Parse(t, "*nat\n:FOO - [0:0]\n-A FOO -j MARK --set-xmark 0x4000/0x4000\nCOMMIT\n", "foo"), nil); len(got) != 0 {
		t.Errorf("no kube-proxy chains: %+v", got)
	}
	// an empty nft kube-proxy table
	nr := AnalyzeMasquerade(fixture.Parse(t, "table ip kube-proxy {\n}\n", "n"), nil)
	if len(nr) != 1 || nr[0].Agree || len(nr[0].Problems) == 0 {
		t.Errorf("empty nft table: %+v", nr)
	}
	// every truncation of real dumps
	for _, f := range []string{"iptables/save-nft-ipv4.txt", "iptables/nft-list.txt", "nftables/ruleset.txt", "nftables/ruleset.json"} {
		text, _ := fixture.Text(t, filepath.Join(fixture.Root, "small-v1.37"), f)
		for n := 0; n < len(text); n += 173 {
			in, err := input.Read(strings.NewReader(text[:n]), f)
			if err != nil || in.Ruleset == nil {
				continue
			}
			AnalyzeMasquerade(in.Ruleset, &kpconfig.Config{})
		}
	}
}

// FuzzAnalyzeRuleset feeds any readable input to AnalyzeMasquerade and
// CompareCounts.
func FuzzAnalyzeRuleset(f *testing.F) {
	if text, ok := fixture.Text(f, filepath.Join(fixture.Root, "small-v1.37"), "iptables/save-nft-ipv4.txt"); ok {
		f.Add(text[:min(len(text), 6000)])
	}
	if text, ok := fixture.Text(f, filepath.Join(fixture.Root, "small-v1.34"), "nftables/ruleset.txt"); ok {
		f.Add(text[:min(len(text), 6000)])
	}
	f.Add("*nat\n:KUBE-MARK-MASQ - [0:0]\n:KUBE-POSTROUTING - [0:0]\n-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000\n-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN\nCOMMIT\n")
	f.Add("table ip kube-proxy {\n chain masquerading {\n  meta mark & 0x4000 != 0 meta mark set meta mark ^ 0x4000 masquerade\n }\n}\n")
	metricsText, _ := fixture.Text(f, filepath.Join(fixture.Root, "small-v1.37"), "metrics-iptables.txt")
	m, _ := metrics.Parse(strings.NewReader(metricsText), "m")
	cfg := &kpconfig.Config{}
	f.Fuzz(func(t *testing.T, s string) {
		in, err := input.Read(strings.NewReader(s), "fuzz")
		if err != nil || in.Ruleset == nil {
			return
		}
		for _, r := range AnalyzeMasquerade(in.Ruleset, cfg) {
			if r.Problems == nil || r.Conflicts == nil || r.SetBy == nil {
				t.Fatalf("nil lists: %+v", r)
			}
		}
		CompareCounts(in.Ruleset, m, nil, timeZero, CountOptions{})
	})
}

// TestMasqueradeAgreesWithFixtureConfig: the bit kube-proxy's /configz says
// is the bit its rules use, in every fixture and mode.
func TestMasqueradeAgreesWithFixtureConfig(t *testing.T) {
	n := 0
	for _, dir := range fixture.Dirs(t) {
		matches, _ := filepath.Glob(filepath.Join(dir, "*configz*.json"))
		for _, path := range matches {
			text, _ := fixture.Text(t, dir, filepath.Base(path))
			cfg, err := kpconfig.Parse(strings.NewReader(text), path)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			rs, _ := fixture.Load(t, dir, "iptables/save-nft-ipv4.txt", "nftables/ruleset.txt")
			for _, r := range AnalyzeMasquerade(rs, cfg) {
				n++
				if r.ConfigAgrees == nil || !*r.ConfigAgrees {
					t.Errorf("%s: %s/%s: config bit %v, rules %d", path, r.Mode, r.Family, r.ConfigBit, r.MasqueradeBit)
				}
			}
		}
	}
	if n < 10 {
		t.Errorf("only %d families checked", n)
	}
}

// TestMasqueradeOddOneOut: of the marks set, tested, cleared and
// configured, the finding names the one that differs, the others are its
// evidence, the bits are labelled, and the remedy fits the case. Faults
// injected into kube-proxy's own rules (small-v1.37).
func TestMasqueradeOddOneOut(t *testing.T) {
	small := filepath.Join(fixture.Root, "small-v1.37")
	save4, _ := fixture.Text(t, small, "iptables/save-nft-ipv4.txt")
	nftText, _ := fixture.Text(t, small, "nftables/ruleset.txt")
	const (
		markMasq = "-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000"
		postTest = "-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN"
		nftClear = "meta mark set meta mark ^ 0x00004000 masquerade"
		nftTest  = "meta mark & 0x00004000 != 0x00000000"
	)
	cfg := func(bit int) *kpconfig.Config {
		c, err := kpconfig.Parse(strings.NewReader(fmt.Sprintf("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\niptables:\n  masqueradeBit: %d\nnftables:\n  masqueradeBit: %d\n", bit, bit)), "cfg.yaml")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, c := range []struct {
		name, input, key string
		cfg              *kpconfig.Config
		problem          string   // the finding's text, up to its consequences
		differs          []string // the ops that differ
		evidence         []string // "chain op" of the evidence, configured as "configured"
		remedy, noRemedy string
	}{
		{"KUBE-MARK-MASQ sets bit 15", strings.Replace(save4, markMasq, strings.ReplaceAll(markMasq, "0x4000", "0x8000"), 1), "iptables/IPv4", nil,
			"KUBE-MARK-MASQ sets 0x00008000 (bit 15) but KUBE-POSTROUTING tests and clears 0x00004000 (bit 14): packets marked for masquerading are not masqueraded",
			[]string{"sets"}, []string{"KUBE-POSTROUTING tests", "KUBE-POSTROUTING clears", "KUBE-FORWARD tests"},
			"find who rewrote KUBE-MARK-MASQ", ""},
		{"KUBE-MARK-MASQ sets bit 15, configured 14", strings.Replace(save4, markMasq, strings.ReplaceAll(markMasq, "0x4000", "0x8000"), 1), "iptables/IPv4", cfg(14),
			"KUBE-MARK-MASQ sets 0x00008000 (bit 15) but KUBE-POSTROUTING tests and clears 0x00004000 (bit 14), as kube-proxy is configured (iptables.masqueradeBit 14):",
			[]string{"sets"}, []string{"KUBE-POSTROUTING tests", "KUBE-POSTROUTING clears", "KUBE-FORWARD tests", "configured"},
			"rewrites its chains with the configured bit 14", "or set iptables.masqueradeBit"},
		{"KUBE-MARK-MASQ sets bit 15, configured 15", strings.Replace(save4, markMasq, strings.ReplaceAll(markMasq, "0x4000", "0x8000"), 1), "iptables/IPv4", cfg(15),
			"KUBE-MARK-MASQ sets 0x00008000 (bit 15), as kube-proxy is configured (iptables.masqueradeBit 15), but KUBE-POSTROUTING tests and clears 0x00004000 (bit 14):",
			[]string{"sets", "configured"}, []string{"KUBE-POSTROUTING tests", "KUBE-POSTROUTING clears", "KUBE-FORWARD tests"},
			"find who rewrote KUBE-MARK-MASQ", ""},
		{"KUBE-POSTROUTING tests bit 15", strings.Replace(save4, postTest, strings.ReplaceAll(postTest, "0x4000", "0x8000"), 1), "iptables/IPv4", nil,
			"KUBE-POSTROUTING tests 0x00008000 (bit 15) but KUBE-MARK-MASQ sets and KUBE-POSTROUTING clears 0x00004000 (bit 14): packets marked for masquerading are not masqueraded; the bit cleared is not the one tested",
			[]string{"tests"}, []string{"KUBE-MARK-MASQ sets", "KUBE-POSTROUTING clears", "KUBE-FORWARD tests"},
			"find who rewrote KUBE-POSTROUTING", ""},
		{"configured 15, rules 14", save4, "iptables/IPv4", cfg(15),
			"kube-proxy's configuration (cfg.yaml) sets iptables.masqueradeBit 15 (0x00008000) but KUBE-MARK-MASQ sets and KUBE-POSTROUTING tests and clears 0x00004000 (bit 14): kube-proxy runs with another configuration",
			[]string{"configured"}, []string{"KUBE-MARK-MASQ sets", "KUBE-POSTROUTING tests", "KUBE-POSTROUTING clears", "KUBE-FORWARD tests"},
			"to program bit 15 (it reads masqueradeBit only when it starts), or set iptables.masqueradeBit to 14", "find who rewrote"},
		{"KUBE-MARK-MASQ sets two bits", strings.Replace(save4, markMasq, strings.ReplaceAll(markMasq, "0x4000", "0xc000"), 1), "iptables/IPv4", nil,
			"KUBE-MARK-MASQ sets 0x0000c000 (bits 14+15, not one bit) but KUBE-POSTROUTING tests and clears 0x00004000 (bit 14):",
			[]string{"sets"}, []string{"KUBE-POSTROUTING tests", "KUBE-POSTROUTING clears", "KUBE-FORWARD tests"},
			"find who rewrote KUBE-MARK-MASQ", ""},
		{"every rule uses two bits", strings.NewReplacer("0x4000/0x4000", "0xc000/0xc000", "--set-xmark 0x4000/0x0", "--set-xmark 0xc000/0x0").Replace(save4), "iptables/IPv4", nil,
			"the masquerade mark 0x0000c000 is bits 14+15, not one bit: kube-proxy marks with 1 << masqueradeBit",
			[]string{}, []string{"KUBE-MARK-MASQ sets", "KUBE-POSTROUTING tests", "KUBE-POSTROUTING clears", "KUBE-FORWARD tests"},
			"restart kube-proxy", ""},
		{"nft masquerading clears bit 15", strings.Replace(nftText, nftClear, strings.ReplaceAll(nftClear, "0x00004000", "0x00008000"), 1), "nftables/IPv4", nil,
			"masquerading clears 0x00008000 (bit 15) but the rules of services and 7 more chains set and masquerading tests 0x00004000 (bit 14): the bit cleared is not the one tested",
			[]string{"clears"}, []string{"services sets", "external-NT4BACJN-shop/ingress/tcp/http sets", "external-SFJRS2S6-shop/reports/tcp/http sets", "masquerading tests"},
			"find who rewrote masquerading", ""},
		{"nft masquerading tests bit 15, configured 14", strings.Replace(nftText, nftTest, strings.ReplaceAll(nftTest, "0x00004000", "0x00008000"), 1), "nftables/IPv4", cfg(14),
			"masquerading tests 0x00008000 (bit 15) but the rules of services and 7 more chains set and masquerading clears 0x00004000 (bit 14), as kube-proxy is configured (nftables.masqueradeBit 14):",
			[]string{"tests"}, []string{"services sets", "external-NT4BACJN-shop/ingress/tcp/http sets", "external-SFJRS2S6-shop/reports/tcp/http sets", "masquerading clears", "configured"},
			"find who rewrote masquerading", ""},
		{"nft: three marks, none agreeing", strings.Replace(strings.Replace(nftText, nftClear, strings.ReplaceAll(nftClear, "0x00004000", "0x00010000"), 1), nftTest, strings.ReplaceAll(nftTest, "0x00004000", "0x00008000"), 1), "nftables/IPv4", nil,
			"the masquerade mark's uses disagree: the rules of services and 7 more chains set 0x00004000 (bit 14), masquerading tests 0x00008000 (bit 15) and masquerading clears 0x00010000 (bit 16):",
			[]string{"sets", "tests", "clears"}, []string{},
			"find who rewrote services, external-NT4BACJN-shop/ingress/tcp/http, external-SFJRS2S6-shop/reports/tcp/http, …", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, ok := masqByKey(AnalyzeMasquerade(fixture.Parse(t, c.input, c.name), c.cfg))[c.key]
			if !ok {
				t.Fatalf("no %s report", c.key)
			}
			if len(r.Findings) != 1 || len(r.Problems) != 1 || r.Findings[0].Problem != r.Problems[0] {
				t.Fatalf("want one problem, its finding: problems %q findings %+v", r.Problems, r.Findings)
			}
			f := r.Findings[0]
			if !strings.HasPrefix(f.Problem, c.problem) {
				t.Errorf("problem\n%q\nwant it to begin\n%q", f.Problem, c.problem)
			}
			if !slices.Equal(f.Differs, c.differs) {
				t.Errorf("differs %q, want %q", f.Differs, c.differs)
			}
			var ev []string
			for _, u := range f.Evidence {
				if u.Op == OpConfigured {
					ev = append(ev, "configured")
					if u.Source != "cfg.yaml" || u.Mark == "" || u.Bits == "" {
						t.Errorf("configured evidence %+v", u)
					}
					continue
				}
				ev = append(ev, u.Chain+" "+u.Op)
				if !strings.Contains(u.Rule, "0x") || u.Bits != MarkBits(parseMark(t, u.Mark)) {
					t.Errorf("evidence %+v", u)
				}
			}
			if !slices.Equal(ev, c.evidence) {
				t.Errorf("evidence %q, want %q", ev, c.evidence)
			}
			if (len(f.Odd) == 0) != (len(c.differs) == 0) {
				t.Errorf("odd uses %+v, differs %q", f.Odd, f.Differs)
			}
			if r.Remedy(r.Problems[0]) != f.Remedy || r.Remedy("another problem") != "" {
				t.Errorf("Remedy(problem) %q, want the finding's", r.Remedy(r.Problems[0]))
			}
			if !strings.Contains(f.Remedy, c.remedy) || c.noRemedy != "" && strings.Contains(f.Remedy, c.noRemedy) {
				t.Errorf("remedy %q, want %q and not %q", f.Remedy, c.remedy, c.noRemedy)
			}
		})
	}
}

func parseMark(t *testing.T, s string) uint32 {
	t.Helper()
	var v uint32
	if _, err := fmt.Sscanf(s, "0x%x", &v); err != nil {
		t.Fatalf("mark %q: %v", s, err)
	}
	return v
}

func TestMarkBits(t *testing.T) {
	for v, want := range map[uint32]string{
		0x4000: "bit 14", 0x8000: "bit 15", 0x80000000: "bit 31", 1: "bit 0",
		0xc000: "bits 14+15, not one bit", 0: "no bit", 0xffffffff: "32 bits, not one bit",
	} {
		if got := MarkBits(v); got != want {
			t.Errorf("MarkBits(%#x) = %q, want %q", v, got, want)
		}
	}
}

// TestMasqueradeCell: a sweep's MASQ column says which bits the rules use,
// never "?".
func TestMasqueradeCell(t *testing.T) {
	small := filepath.Join(fixture.Root, "small-v1.37")
	save4, _ := fixture.Text(t, small, "iptables/save-nft-ipv4.txt")
	nftText, _ := fixture.Text(t, small, "nftables/ruleset.txt")
	bit15, _ := fixture.Text(t, filepath.Join(fixture.Root, "masq-bit15-v1.37"), "iptables/save-nft-ipv4.txt")
	for _, c := range []struct{ name, input, want string }{
		{"healthy", save4, "bit 14"},
		{"healthy bit 15", bit15, "bit 15"},
		{"healthy nftables", nftText, "bit 14"},
		{"set bit 15", strings.Replace(save4, "-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000", "-A KUBE-MARK-MASQ -j MARK --set-xmark 0x8000/0x8000", 1), "bit 15≠14!"},
		{"tested bit 15", strings.Replace(save4, "! --mark 0x4000/0x4000 -j RETURN", "! --mark 0x8000/0x8000 -j RETURN", 1), "bit 14≠15!"},
		{"two bits", strings.Replace(save4, "--set-xmark 0x4000/0x4000", "--set-xmark 0xc000/0xc000", 1), "bits 14+15≠14!"},
		{"nft cleared bit 15", strings.ReplaceAll(nftText, "meta mark ^ 0x00004000", "meta mark ^ 0x00008000"), "bit 14≠15!"},
		{"no mark rules", "*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-POSTROUTING - [0:0]\nCOMMIT\n", "none!"},
	} {
		t.Run(c.name, func(t *testing.T) {
			reps := AnalyzeMasquerade(fixture.Parse(t, c.input, c.name), nil)
			if got := masqueradeCell(reps); got != c.want {
				t.Errorf("cell %q, want %q", got, c.want)
			}
		})
	}
}
