// Package layering holds the test that keeps the stages apart: data flows
// collect → parse → correlate → diagnose → render, and each stage may only
// import what its place allows (ARCHITECTURE.md).
package layering

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/proxyrules/kubectl-proxyrules"

// Forbidden dependencies (direct or not) per package pattern.
var (
	kubernetesAPI = []string{"k8s.io/api/", "k8s.io/apimachinery/", "k8s.io/client-go/", "k8s.io/cli-runtime/", "k8s.io/kubectl/"}
	client        = []string{"k8s.io/client-go/", "k8s.io/cli-runtime/"}
	cobra         = []string{"github.com/spf13/cobra", "github.com/spf13/pflag"}
	terminal      = []string{"github.com/charmbracelet/", "github.com/muesli/termenv", "golang.org/x/term", "github.com/mattn/go-isatty"}
	project       = func(pkgs ...string) []string {
		var out []string
		for _, p := range pkgs {
			out = append(out, module+"/"+p)
		}
		return out
	}
)

var rules = []struct {
	// prefix selects packages by import path below the module.
	prefix    string
	forbidden [][]string
	why       string
	// direct: only the package's own imports count (client-go itself
	// pulls in golang.org/x/term for exec terminals).
	direct bool
}{
	{"kubeproxy", [][]string{kubernetesAPI, cobra, terminal, project("inspect", "evaluate", "correlate", "diagnose", "plugin")}, "the vocabulary is a leaf", false},
	{"inspect", [][]string{kubernetesAPI, cobra, terminal, project("evaluate", "correlate", "diagnose", "plugin")}, "inspect parses rulesets and knows no Kubernetes objects", false},
	{"evaluate", [][]string{kubernetesAPI, cobra, terminal, project("correlate", "diagnose", "plugin")}, "evaluate walks packets through the rules model and a few node facts; it knows no Kubernetes object (labels come from correlate)", false},
	{"correlate", [][]string{client, cobra, terminal, project("diagnose", "plugin")}, "correlate joins rules with API objects; it reaches no cluster and no terminal", false},
	{"diagnose", [][]string{client, cobra, terminal, project("plugin")}, "diagnose judges; it knows no cluster, no command line and no terminal", false},
	{"plugin/collect", [][]string{cobra, terminal, project("diagnose")}, "collect reaches the node; commands and rendering are the plugin's", true},
}

// unstaged are the places outside the stages: the commands and their
// rendering (plugin, cmd), test and build helpers, the krew manifest's
// checks.
var unstaged = []string{"cmd", "plugin", "internal", "hack", "e2e", "krew"}

// placeOf is the stage rule or unstaged place a package (its path below
// the module) belongs to, "" for none.
func placeOf(rel string) string {
	for _, r := range rules {
		if rel == r.prefix || strings.HasPrefix(rel, r.prefix+"/") {
			return r.prefix
		}
	}
	for _, u := range unstaged {
		if rel == u || strings.HasPrefix(rel, u+"/") {
			return u
		}
	}
	return ""
}

// Every package has a place, so that a new one (an IPVS or conntrack
// reader, a new stage) is checked from its first commit: under inspect/ it
// is a parser (no Kubernetes objects), elsewhere it needs a rule here and
// a row in ARCHITECTURE.md.
func TestEveryPackageHasAPlace(t *testing.T) {
	for _, p := range listPackages(t) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		if placeOf(rel) == "" {
			t.Errorf("package %s has no place: give it a stage in internal/layering (rules) and ARCHITECTURE.md", rel)
		}
	}
	for rel, want := range map[string]string{"inspect/conntrack": "inspect", "inspect/ipvs": "inspect", "ipvs": "", "plugin/collect": "plugin/collect", "pluginx": "", "evaluate": "evaluate"} {
		if got := placeOf(rel); got != want {
			t.Errorf("placeOf(%s) = %q, want %q", rel, got, want)
		}
	}
}

type pkg struct {
	ImportPath string
	Deps       []string
	Imports    []string
	Standard   bool
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps=false", "-json", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	return pkgs
}

func TestLayering(t *testing.T) {
	pkgs := listPackages(t)
	checked := map[string]bool{}
	for _, p := range pkgs {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		for _, r := range rules {
			if rel != r.prefix && !strings.HasPrefix(rel, r.prefix+"/") {
				continue
			}
			checked[r.prefix] = true
			deps := p.Deps
			if r.direct {
				deps = p.Imports
			}
			for _, dep := range deps {
				for _, group := range r.forbidden {
					for _, bad := range group {
						if forbids(bad, dep) {
							t.Errorf("%s depends on %s: %s", rel, dep, r.why)
						}
					}
				}
			}
		}
		// Only the commands import cobra.
		if !strings.HasPrefix(rel, "plugin") && !strings.HasPrefix(rel, "cmd") && !strings.HasPrefix(rel, "internal/layering") {
			for _, imp := range p.Imports {
				if imp == "github.com/spf13/cobra" {
					t.Errorf("%s imports cobra: only plugin/... and cmd/... may", rel)
				}
			}
		}
	}
	for _, r := range rules {
		if !checked[r.prefix] {
			t.Errorf("no package matched %s: the rule checks nothing", r.prefix)
		}
	}
}

// TestLayeringCatchesViolations: the matcher flags a dependency it should.
func TestLayeringCatchesViolations(t *testing.T) {
	for _, tc := range []struct {
		dep, bad string
		want     bool
	}{
		{"k8s.io/client-go/kubernetes", "k8s.io/client-go/", true},
		{"github.com/spf13/cobra", "github.com/spf13/cobra", true},
		{"github.com/spf13/cobra-extra", "github.com/spf13/cobra", false},
		{module + "/plugin/collect", module + "/plugin", true},
		{module + "/pluginx", module + "/plugin", false},
	} {
		if got := forbids(tc.bad, tc.dep); got != tc.want {
			t.Errorf("%s vs %s: %v, want %v", tc.dep, tc.bad, got, tc.want)
		}
	}
}

// forbids says whether dep is the package bad or below it; a bad that ends
// in "/" names a tree.
func forbids(bad, dep string) bool {
	return dep == bad || strings.HasSuffix(bad, "/") && strings.HasPrefix(dep, bad) || strings.HasPrefix(dep, bad+"/")
}
