package plugin

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/internal/synth"
	"github.com/proxyrules/kubectl-proxyrules/plugin/collect"
)

// checkStreamed compares printMachine's streamed output with what
// json.MarshalIndent (and yaml.JSONToYAML of it) write for report.
func checkStreamed(t *testing.T, name string, report any) {
	t.Helper()
	data, err := json.MarshalIndent(report, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	wantYAML, err := yaml.JSONToYAML(data)
	if err != nil {
		t.Fatal(err)
	}
	for format, want := range map[string][]byte{"json": append(data, '\n'), "yaml": wantYAML} {
		var got bytes.Buffer
		if err := printMachine(&got, format, report); err != nil {
			t.Fatalf("%s -o %s: %v", name, format, err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Errorf("%s -o %s differs from the encoder's (-want +got):\n%s", name, format, cmp.Diff(string(want), got.String()))
		}
	}
}

// Every report of every fixture, every Service's explanation, with and
// without a collection manifest: streamed, byte for byte what the encoders
// write.
func TestStreamedOutputIsByteIdentical(t *testing.T) {
	dirs, _ := filepath.Glob("../testdata/fixtures/*-v1.*")
	if len(dirs) < 10 {
		t.Fatalf("fixtures: %v", dirs)
	}
	manifest := &collect.Manifest{APIVersion: APIVersion, Kind: "Bundle", Node: "node-a", CollectedAt: time.Unix(1795939150, 0).UTC(), Via: "debug-pod",
		Scope: "full", Files: []collect.BundleFile{{Path: "iptables-nft-save-ipv4.txt", Kind: collect.KindRuleset, Command: "iptables-nft-save", Bytes: 1234, Seconds: 0.5}}, Warnings: []string{"a <warning> & more"}}
	for _, dir := range dirs {
		for _, dumps := range [][]string{{"iptables/save-nft-ipv4.txt", "iptables/save-nft-ipv6.txt"}, {"nftables/ruleset.json"}} {
			o := InputFiles{Objects: []string{filepath.Join(dir, "objects.json")}}
			for _, d := range dumps {
				if _, err := os.Stat(filepath.Join(dir, d)); err == nil {
					o.Dumps = append(o.Dumps, filepath.Join(dir, d))
				}
			}
			if len(o.Dumps) == 0 {
				continue
			}
			for _, m := range []string{"metrics-iptables.txt", "metrics-nftables.txt"} {
				if _, err := os.Stat(filepath.Join(dir, m)); err == nil {
					o.Metrics = append(o.Metrics, filepath.Join(dir, m))
					break
				}
			}
			l, err := loadRequest(Request{Files: o})
			if err != nil {
				t.Fatal(err)
			}
			name := filepath.Base(dir) + "/" + filepath.Base(dumps[0])
			reports := map[string]any{
				"map": diagnose.MapChains(l.Node), "triage": diagnose.Triage(l.Node), "stale": diagnose.Stale(l.Node, diagnose.StaleOptions{}),
				"masq": diagnose.Masquerade(l.Node), "counts": diagnose.Counts(l.Node),
			}
			for _, svc := range l.Objects.Services {
				if ex, err := diagnose.ExplainService(l.Node, svc.Namespace, svc.Name, ""); err == nil {
					reports["explain "+svc.Namespace+"/"+svc.Name] = ex
				}
			}
			for what, rep := range reports {
				checkStreamed(t, name+" "+what, withCollection{rep, nil})
				checkStreamed(t, name+" "+what+" with collection", withCollection{rep, manifest})
			}
		}
	}
	checkStreamed(t, "manifest", manifest)
	checkStreamed(t, "version", GetVersion())
}

// A big report, where YAML is converted in chunks on every core.
func TestStreamedOutputIsByteIdenticalLarge(t *testing.T) {
	f, err := synth.Cluster{Services: 300, Endpoints: 5}.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l, err := loadRequest(Request{Files: InputFiles{Dumps: []string{f.IPTablesSave}, Objects: []string{f.Objects}, Metrics: []string{f.Metrics}}, Node: synth.LocalNode})
	if err != nil {
		t.Fatal(err)
	}
	if m := diagnose.MapChains(l.Node); len(m.Chains) < 4*yamlChunk {
		t.Fatalf("%d chains: too few for chunks", len(m.Chains))
	} else {
		checkStreamed(t, "map", withCollection{m, nil})
	}
	checkStreamed(t, "triage", withCollection{diagnose.Triage(l.Node), nil})
}
