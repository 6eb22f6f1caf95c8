package plugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/charmbracelet/lipgloss"
	"sigs.k8s.io/yaml"
)

// The sync-failure fixture: stale chains, findings and a restore failure,
// so every command has rows to print.
const syncFailure = "../testdata/fixtures/sync-failure-v1.37/"

func syncFailureInputs() []string {
	return []string{"--from-dump", syncFailure + "iptables/save-legacy-ipv4.txt", "--from-dump", syncFailure + "iptables/save-legacy-ipv6.txt",
		"--from-objects", syncFailure + "objects.json", "--from-metrics", syncFailure + "metrics-iptables.txt"}
}

// Every analysis command, with the arguments it needs, the kind of its
// rows in -o name and a field every row has.
var analysisCommands = []struct {
	args  []string
	kind  string
	field string
	wide  bool
}{
	{[]string{"map"}, "chain", "chain", true},
	{[]string{"stale"}, "chain", "chain", true},
	{[]string{"masq"}, "family", "family", false},
	{[]string{"counts"}, "table", "table", false},
	{[]string{"triage"}, "finding", "message", false},
	{[]string{"explain", "svc/ingress", "-n", "shop"}, "serviceport", "servicePort", false},
	{[]string{"trace", "--to", "svc/ingress", "-n", "shop", "--node-ip", "10.0.0.10"}, "outcome", "verdict", false},
}

// run runs a command and returns its output, failing the test on any error
// other than the exit codes that carry a verdict (2, 3).
func runOK(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := runCmd(t, nil, args...)
	if code := exitOf(t, err, errOut); code != ExitHealthy && code != ExitProblems && code != ExitIncomplete {
		t.Fatalf("%v: exit %d\n%s", args, code, errOut)
	}
	return out
}

func lines(s string) []string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// -o name, jsonpath, go-template, custom-columns, --no-headers and
// --sort-by work on every command, on the same rows.
func TestOutputFormsOnEveryCommand(t *testing.T) {
	in := syncFailureInputs()
	for _, c := range analysisCommands {
		t.Run(c.args[0], func(t *testing.T) {
			args := append(slices.Clone(c.args), in...)
			names := lines(runOK(t, append(args, "-o", "name")...))
			if len(names) == 0 {
				t.Fatalf("-o name printed nothing")
			}
			for _, n := range names {
				if !strings.HasPrefix(n, c.kind+"/") || len(n) == len(c.kind)+1 {
					t.Errorf("-o name line %q is not %s/NAME", n, c.kind)
				}
				// One word a shell takes unquoted, one slash (kubectl's KIND/NAME).
				if !shellSafeName.MatchString(n) {
					t.Errorf("-o name line %q needs quoting or has a second slash", n)
				}
			}
			// The templates see the whole report: its own kind, not a List.
			if got := runOK(t, append(args, "-o", `jsonpath={.kind}`)...); got == "" || got == "List" || got != runOK(t, append(args, "-o", `go-template={{.kind}}`)...) {
				t.Errorf("jsonpath {.kind} %q", got)
			}
			// jsonpath and go-template see the rows as a List.
			jp := lines(runOK(t, append(args, "-o", `jsonpath={range .items[*]}{.`+c.field+`}{"\n"}{end}`)...))
			gt := lines(runOK(t, append(args, "-o", `go-template={{range .items}}{{.`+c.field+`}}{{"\n"}}{{end}}`)...))
			if len(jp) != len(names) || !slices.Equal(jp, gt) {
				t.Errorf("jsonpath gave %d rows, go-template %d, -o name %d:\n%q\n%q", len(jp), len(gt), len(names), jp, gt)
			}
			for _, v := range jp {
				if v == "" {
					t.Errorf("jsonpath: a row without .%s", c.field)
				}
			}
			// custom-columns: a header, one line a row; --no-headers drops it.
			cc := lines(runOK(t, append(args, "-o", "custom-columns=VALUE:."+c.field)...))
			if len(cc) != len(names)+1 || strings.TrimSpace(cc[0]) != "VALUE" {
				t.Errorf("custom-columns: %d lines for %d rows, header %q", len(cc), len(names), cc[0])
			}
			noHead := lines(runOK(t, append(args, "-o", "custom-columns=VALUE:."+c.field, "--no-headers")...))
			if !slices.Equal(noHead, cc[1:]) {
				t.Errorf("--no-headers: %q, want the rows %q", noHead, cc[1:])
			}
			// --sort-by orders the rows by that field.
			sorted := lines(runOK(t, append(args, "-o", "custom-columns=VALUE:."+c.field, "--no-headers", "--sort-by", "."+c.field)...))
			want := slices.Clone(noHead)
			sort.Strings(want)
			if !slices.Equal(trimAll(sorted), trimAll(want)) {
				t.Errorf("--sort-by .%s: %q, want %q", c.field, sorted, want)
			}
			// -o wide: meaningful (more than the text), or the text, as
			// kubectl prints where there is nothing wider.
			text := runOK(t, args...)
			if c.wide {
				// One line a chain, under a header of more columns.
				wide := lines(runOK(t, append(args, "-o", "wide")...))
				if len(wide) < len(names)+1 || len(strings.Fields(wide[0])) < 8 || strings.Join(wide, "\n") == text {
					t.Errorf("-o wide: %d lines for %d chains, header %q", len(wide), len(names), wide[0])
				}
			} else if wide := runOK(t, append(args, "-o", "wide")...); wide != text {
				t.Errorf("-o wide:\n%s\nwant the text:\n%s", wide, text)
			}
			// JSON and YAML are the whole report, the same in both.
			var fromJSON, fromYAML map[string]any
			if err := json.Unmarshal([]byte(runOK(t, append(args, "-o", "json")...)), &fromJSON); err != nil {
				t.Fatalf("-o json: %v", err)
			}
			if err := yaml.Unmarshal([]byte(runOK(t, append(args, "-o", "yaml")...)), &fromYAML); err != nil {
				t.Fatalf("-o yaml: %v", err)
			}
			if fromJSON["kind"] == nil || fromJSON["kind"] != fromYAML["kind"] {
				t.Errorf("json kind %v, yaml kind %v", fromJSON["kind"], fromYAML["kind"])
			}
		})
	}
}

func trimAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strings.TrimSpace(s)
	}
	return out
}

func TestOutputFlagErrors(t *testing.T) {
	in := syncFailureInputs()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"map", "-o", "jsonpath="}, "needs its template"},
		{[]string{"map", "-o", "jsonpath={.items[*"}, "jsonpath"},
		{[]string{"map", "-o", "custom-columns=NOPATH"}, "is not HEADER:JSONPATH"},
		{[]string{"map", "-o", "go-template={{.items"}, "go-template"},
		{[]string{"map", "-o", "jsonpath-file=/nonexistent/file"}, "jsonpath-file"},
		{[]string{"map", "-o", "table"}, "-o must be one of"},
		{[]string{"map", "-o", "json=x"}, "takes no argument"},
		{[]string{"map", "--sort-by", ".chain"}, "--sort-by orders the rows of -o name"},
		{[]string{"triage", "-o", "wide=x"}, "takes no argument"},
	} {
		_, _, err := runCmd(t, nil, append(tc.args, in...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want %q", tc.args, err, tc.want)
		}
	}
}

// Template files, as kubectl reads them.
func TestOutputTemplateFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	in := append([]string{"map"}, syncFailureInputs()...)
	inline := runOK(t, append(in, "-o", "custom-columns=CHAIN:.chain,OWNER:.servicePort")...)
	fromFile := runOK(t, append(in, "-o", "custom-columns-file="+write("cols", "CHAIN OWNER\n.chain .servicePort\n"))...)
	if inline != fromFile {
		t.Errorf("custom-columns-file differs from custom-columns")
	}
	jp := runOK(t, append(in, "-o", `jsonpath={.items[0].chain}`)...)
	jpFile := runOK(t, append(in, "-o", "jsonpath-file="+write("jp", `{.items[0].chain}`))...)
	gtFile := runOK(t, append(in, "-o", "go-template-file="+write("gt", `{{(index .items 0).chain}}`))...)
	if jp == "" || jp != jpFile || jp != gtFile {
		t.Errorf("jsonpath %q, jsonpath-file %q, go-template-file %q", jp, jpFile, gtFile)
	}
}

// -n filters every command's Services; -A is all of them (the default);
// -l selects by label.
func TestNamespaceAndSelectorFilters(t *testing.T) {
	in := syncFailureInputs()
	owners := func(args ...string) []string {
		return lines(runOK(t, append(append(args, in...), "-o", `jsonpath={range .items[*]}{.servicePort}{"\n"}{end}`)...))
	}
	all := owners("map")
	if got := owners("map", "-A"); !slices.Equal(got, all) {
		t.Errorf("map -A differs from map")
	}
	shop := owners("map", "-n", "shop")
	if len(shop) == 0 || len(shop) >= len(all) {
		t.Fatalf("map -n shop: %d of %d chains", len(shop), len(all))
	}
	for _, o := range shop {
		if !strings.HasPrefix(o, "shop/") {
			t.Errorf("map -n shop lists %q", o)
		}
	}
	dns := owners("map", "-l", "k8s-app=kube-dns")
	if len(dns) == 0 {
		t.Fatal("map -l k8s-app=kube-dns lists nothing")
	}
	for _, o := range dns {
		if !strings.HasPrefix(o, "kube-system/kube-dns:") {
			t.Errorf("map -l k8s-app=kube-dns lists %q", o)
		}
	}
	if got := owners("map", "-l", "k8s-app=kube-dns", "-n", "shop"); len(got) != 0 {
		t.Errorf("-l in the wrong namespace lists %q", got)
	}
	// -A and -l on every command that has Services.
	for _, cmd := range []string{"map", "stale", "triage", "counts", "masq", "explain"} {
		c, _, err := NewCmdRoot(testStreams()).Find([]string{cmd})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"all-namespaces", "selector"} {
			if c.Flags().Lookup(f) == nil {
				t.Errorf("%s has no --%s", cmd, f)
			}
		}
	}
	// stale: the fixture's stale chains are all shop's.
	staleAll := lines(runOK(t, append(append([]string{"stale"}, in...), "-o", "name")...))
	staleShop := lines(runOK(t, append(append([]string{"stale", "-n", "shop"}, in...), "-o", "name")...))
	staleInfra := lines(runOK(t, append(append([]string{"stale", "-n", "infra"}, in...), "-o", "name")...))
	if len(staleAll) == 0 || !slices.Equal(staleAll, staleShop) || len(staleInfra) != 0 {
		t.Errorf("stale: %d chains, %d in shop, %d in infra", len(staleAll), len(staleShop), len(staleInfra))
	}
	// triage -n: only findings about that namespace's Services, and the
	// node-wide causes (a failing restore) still.
	findings := lines(runOK(t, append(append([]string{"triage", "-n", "infra"}, in...), "-o", "name")...))
	for _, f := range findings {
		if strings.Contains(f, "service-") && !strings.Contains(f, "infra/") {
			t.Errorf("triage -n infra reports %s", f)
		}
	}
	if _, _, err := runCmd(t, nil, append([]string{"map", "-l", "a in (b"}, in...)...); err == nil || !strings.Contains(err.Error(), "-l") {
		t.Errorf("a bad selector: %v", err)
	}
}

// explain's forms: svc/NAME, NAME, a chain name or its hash, -A, -l.
func TestExplainForms(t *testing.T) {
	in := syncFailureInputs()
	explain := func(args ...string) map[string]any {
		t.Helper()
		var rep map[string]any
		out := runOK(t, append(append([]string{"explain"}, args...), append(in, "-o", "json")...)...)
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return rep
	}
	for _, tc := range []struct {
		args         []string
		ns, name     string
		port, lookup string
	}{
		{[]string{"svc/web", "-n", "shop"}, "shop", "web", "", ""},
		{[]string{"services/web", "-n", "shop"}, "shop", "web", "", ""},
		{[]string{"web", "-n", "shop"}, "shop", "web", "", ""},
		{[]string{"web", "-A"}, "shop", "web", "", ""},
		// A chain from a log line: its Service, only that port.
		{[]string{"KUBE-SEP-GXKVICYM64SODBWJ"}, "shop", "web", "shop/web:http", "KUBE-SEP-GXKVICYM64SODBWJ"},
		{[]string{"GXKVICYM64SODBWJ"}, "shop", "web", "shop/web:http", "KUBE-SEP-GXKVICYM64SODBWJ"},
		{[]string{"KUBE-SVC-5OBLOJ65J3MFPSIG"}, "shop", "ingress", "shop/ingress:https", "KUBE-SVC-5OBLOJ65J3MFPSIG"},
		// An nftables name (it holds "/": not svc/NAME), recomputed from
		// the objects since the dump is iptables.
		{[]string{"service-KHN6ECMT-shop/web/tcp/http"}, "shop", "web", "shop/web:http", "service-KHN6ECMT-shop/web/tcp/http"},
	} {
		rep := explain(tc.args...)
		if rep["namespace"] != tc.ns || rep["name"] != tc.name {
			t.Errorf("%v explains %v/%v, want %s/%s", tc.args, rep["namespace"], rep["name"], tc.ns, tc.name)
		}
		ports, _ := rep["ports"].([]any)
		if len(ports) == 0 {
			t.Errorf("%v: no ports", tc.args)
		}
		if tc.port != "" {
			for _, p := range ports {
				if got := p.(map[string]any)["servicePort"]; got != tc.port {
					t.Errorf("%v: port %v, want only %s", tc.args, got, tc.port)
				}
			}
		}
		lookup, _ := rep["lookup"].(map[string]any)
		if tc.lookup == "" && lookup != nil || tc.lookup != "" && (lookup == nil || lookup["chain"] != tc.lookup) {
			t.Errorf("%v: lookup %v, want chain %q", tc.args, lookup, tc.lookup)
		}
	}
	// -l without a name: every selected Service, as a list.
	list := explain("-A", "-l", "k8s-app=kube-dns")
	items, _ := list["items"].([]any)
	if list["kind"] != "ServiceExplanationList" || len(items) != 1 || items[0].(map[string]any)["name"] != "kube-dns" {
		t.Errorf("explain -A -l k8s-app=kube-dns: kind %v, %d items", list["kind"], len(items))
	}
	// The text names the chain asked about.
	out := runOK(t, append([]string{"explain", "KUBE-SEP-GXKVICYM64SODBWJ"}, in...)...)
	if first := lines(out)[0]; !strings.Contains(first, "KUBE-SEP-GXKVICYM64SODBWJ is the endpoint 10.244.0.11:8080 of shop/web:http") {
		t.Errorf("first line %q", first)
	}
}

// explain's errors say what to do.
func TestExplainErrorsSayWhatToDo(t *testing.T) {
	in := syncFailureInputs()
	dir := t.TempDir()
	// Two namespaces with a Service "web", for -A.
	objs, err := os.ReadFile(syncFailure + "objects.json")
	if err != nil {
		t.Fatal(err)
	}
	var list map[string]any
	if err := json.Unmarshal(objs, &list); err != nil {
		t.Fatal(err)
	}
	items := list["items"].([]any)
	for _, it := range items {
		m := it.(map[string]any)
		meta := m["metadata"].(map[string]any)
		if m["kind"] == "Service" && meta["name"] == "web" {
			twin, _ := json.Marshal(m)
			var copyOf map[string]any
			_ = json.Unmarshal(twin, &copyOf)
			copyOf["metadata"].(map[string]any)["namespace"] = "staging"
			items = append(items, copyOf)
			break
		}
	}
	list["items"] = items
	data, _ := json.Marshal(list)
	twins := filepath.Join(dir, "objects.json")
	if err := os.WriteFile(twins, data, 0o600); err != nil {
		t.Fatal(err)
	}
	dumps := in[:4]
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"svc/frontnd", "-n", "shop"}, []string{"service shop/frontnd not found", "did you mean svc/frontend?"}},
		{[]string{"svc/ingres", "-n", "shop"}, []string{"did you mean svc/ingress?"}},
		{[]string{"svc/frontend"}, []string{"default/frontend not found", "it exists in namespace shop: add -n shop"}},
		{[]string{"svc/nothing-like-it", "-n", "shop"}, []string{"not found in the objects"}},
		{[]string{"svc/web", "-n", "shop", "--port", "8080"}, []string{`has no port "8080"`, "its ports: http 80/TCP"}},
		{[]string{"svc/ingress", "-n", "shop", "--port", "grpc"}, []string{"its ports: http 80/TCP, https 443/TCP"}},
		{[]string{}, []string{"explain needs a Service (svc/NAME, its DNS name or IP[:PORT]), a chain name or -l SELECTOR", "Usage:", "explain (svc/NAME | NAME.NAMESPACE.svc | IP[:PORT] | CHAIN | -l SELECTOR)"}},
		{[]string{"svc/web", "-l", "app=web"}, []string{"cannot be given with -l"}},
		{[]string{"-l", "app=nothing"}, []string{`no Service in namespace default matches -l "app=nothing"`}},
		{[]string{"pod/web"}, []string{"takes a Service (svc/NAME, NAME.NAMESPACE.svc, its IP or IP:PORT) or a chain name"}},
		{[]string{"KUBE-SEP-AAAAAAAAAAAAAAAA"}, []string{"unknown chain KUBE-SEP-AAAAAAAAAAAAAAAA"}},
		{[]string{"KUBE-SEP-BBCMKYFKDNTM4EJG"}, []string{"is stale", "shop/ingress:https"}},
	} {
		_, _, err := runCmd(t, nil, append(append([]string{"explain"}, tc.args...), in...)...)
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("explain %v: err %v, want %q", tc.args, err, w)
			}
		}
	}
	_, _, err = runCmd(t, nil, append(append([]string{"explain", "svc/web", "-A"}, dumps...), "--from-objects", twins)...)
	if err == nil || !strings.Contains(err.Error(), "exists in namespaces shop, staging: pass -n") {
		t.Errorf("explain -A of a name in two namespaces: %v", err)
	}
	_, _, err = runCmd(t, nil, append(append([]string{"explain", "svc/web"}, dumps...), "--from-objects", twins)...)
	if err == nil || !strings.Contains(err.Error(), "it exists in namespaces shop, staging") {
		t.Errorf("explain of a name in two other namespaces: %v", err)
	}
}

// map CHAIN answers from a dump, and from the objects alone.
func TestMapChainLookup(t *testing.T) {
	in := syncFailureInputs()
	objectsOnly := []string{"--from-objects", syncFailure + "objects.json"}
	lookup := func(args ...string) []map[string]any {
		t.Helper()
		var rep struct {
			Chains  []map[string]any `json:"chains"`
			Unknown []string         `json:"unknown"`
		}
		out := runOK(t, append(append([]string{"map"}, args...), "-o", "json")...)
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		return rep.Chains
	}
	for _, tc := range []struct {
		name        string
		args        []string
		chain, kind string
		owner, ep   string
		inDump      bool
		stale       bool
		referrers   bool
	}{
		{"full name in the dump", append([]string{"KUBE-SEP-GXKVICYM64SODBWJ"}, in...), "KUBE-SEP-GXKVICYM64SODBWJ", "endpoint", "shop/web:http", "10.244.0.11:8080", true, false, true},
		{"hash part in the dump", append([]string{"GXKVICYM64SODBWJ"}, in...), "KUBE-SEP-GXKVICYM64SODBWJ", "endpoint", "shop/web:http", "10.244.0.11:8080", true, false, true},
		{"stale chain in the dump", append([]string{"KUBE-SEP-BBCMKYFKDNTM4EJG"}, in...), "KUBE-SEP-BBCMKYFKDNTM4EJG", "endpoint", "shop/ingress:https", "10.244.0.51:8443", true, true, true},
		{"objects alone", append([]string{"KUBE-SEP-GXKVICYM64SODBWJ"}, objectsOnly...), "KUBE-SEP-GXKVICYM64SODBWJ", "endpoint", "shop/web:http", "10.244.0.11:8080", false, false, false},
		{"nftables name from objects", append([]string{"service-KHN6ECMT-shop/web/tcp/http"}, objectsOnly...), "service-KHN6ECMT-shop/web/tcp/http", "service", "shop/web:http", "", false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chains := lookup(tc.args...)
			var hit map[string]any
			for _, c := range chains {
				if c["chain"] == tc.chain {
					hit = c
				}
			}
			if hit == nil {
				t.Fatalf("%s not found in %v", tc.chain, chains)
			}
			ep, _ := hit["endpoint"].(string)
			refs, _ := hit["referencedBy"].([]any)
			if hit["kind"] != tc.kind || hit["servicePort"] != tc.owner || ep != tc.ep || hit["inDump"] != tc.inDump || hit["stale"] != tc.stale || (len(refs) > 0) != tc.referrers {
				t.Errorf("got %v", hit)
			}
		})
	}
	// An 8-character nftables hash from the objects: both families' tables.
	if chains := lookup(append([]string{"KHN6ECMT"}, objectsOnly...)...); len(chains) == 0 || chains[0]["servicePort"] != "shop/web:http" {
		t.Errorf("KHN6ECMT: %v", chains)
	}
	// Unknown names exit 1 and say why.
	for _, args := range [][]string{append([]string{"KUBE-SVC-AAAAAAAAAAAAAAAA"}, in...), append([]string{"KUBE-SVC-AAAAAAAAAAAAAAAA"}, objectsOnly...)} {
		_, _, err := runCmd(t, nil, append([]string{"map"}, args...)...)
		if err == nil || !strings.Contains(err.Error(), "unknown chain KUBE-SVC-AAAAAAAAAAAAAAAA") {
			t.Errorf("map %v: %v", args[0], err)
		}
		if _, isExit := IsExitError(err); isExit {
			t.Errorf("an unknown chain is an error (exit 1), not a verdict: %v", err)
		}
	}
	if _, _, err := runCmd(t, nil, append([]string{"map", "not-a-chain"}, in...)...); err == nil || !strings.Contains(err.Error(), "is not a kube-proxy chain name") {
		t.Errorf("map not-a-chain: %v", err)
	}
	// The text: one block per chain.
	out := runOK(t, append([]string{"map", "KUBE-SEP-BBCMKYFKDNTM4EJG"}, in...)...)
	for _, want := range []string{"KUBE-SEP-BBCMKYFKDNTM4EJG", "owner         shop/ingress:https", "stale: owned by no current Service or endpoint", "jumped to by  KUBE-SVC-5OBLOJ65J3MFPSIG"} {
		if !strings.Contains(out, want) {
			t.Errorf("map text lacks %q:\n%s", want, out)
		}
	}
}

// Completion of -o, --color, --reader, --via, and offline of svc/NAME and
// chain names.
func TestCompletionOffline(t *testing.T) {
	complete := func(args ...string) []string {
		t.Helper()
		out, _, err := runCmd(t, nil, append([]string{"__complete"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, l := range lines(out) {
			if strings.HasPrefix(l, ":") || strings.HasPrefix(l, "Completion ended") {
				continue
			}
			names = append(names, strings.SplitN(l, "\t", 2)[0])
		}
		return names
	}
	for _, tc := range []struct {
		args []string
		want []string
		not  []string
	}{
		{[]string{"map", "-o", ""}, []string{"json", "yaml", "wide", "name", "jsonpath=", "custom-columns="}, nil},
		{[]string{"triage", "-o", ""}, []string{"json", "wide", "name", "go-template="}, nil},
		{[]string{"map", "--color", ""}, []string{"auto", "always", "never"}, nil},
		{[]string{"map", "--reader", ""}, []string{"auto"}, nil},
		{[]string{"map", "--via", ""}, []string{"auto", "debug-pod", "kube-proxy"}, nil},
		{[]string{"explain", "--from-objects", syncFailure + "objects.json", "-n", "shop", "svc/fr"}, []string{"svc/frontend"}, []string{"svc/web"}},
		{[]string{"explain", "--from-objects", syncFailure + "objects.json", "-A", "svc/kube"}, []string{"svc/kube-dns", "svc/kubernetes"}, nil},
		{[]string{"map", "--from-dump", syncFailure + "iptables/save-legacy-ipv4.txt", "KUBE-SEP-GX"}, []string{"KUBE-SEP-GXKVICYM64SODBWJ"}, []string{"KUBE-SVC-67NZLRHBNDSAWJRO"}},
		{[]string{"map", "--from-objects", syncFailure + "objects.json", "KUBE-SVC-67"}, []string{"KUBE-SVC-67NZLRHBNDSAWJRO"}, nil},
	} {
		got := complete(tc.args...)
		for _, w := range tc.want {
			if !slices.Contains(got, w) {
				t.Errorf("%v: %q not offered in %q", tc.args, w, got)
			}
		}
		for _, n := range tc.not {
			if slices.Contains(got, n) {
				t.Errorf("%v: %q offered", tc.args, n)
			}
		}
		seen := map[string]bool{}
		for _, g := range got {
			if seen[g] {
				t.Errorf("%v: %q offered twice", tc.args, g)
			}
			seen[g] = true
		}
	}
}

// Every default text output of every fixture fits 80 columns in a pipe,
// and no chain name in it is cut.
func TestTextFits80Columns(t *testing.T) {
	dirs, err := filepath.Glob("../testdata/fixtures/*-v1.*")
	if err != nil || len(dirs) == 0 {
		t.Fatal("no fixtures", err)
	}
	for _, dir := range dirs {
		objects := filepath.Join(dir, "objects.json")
		for _, mode := range []struct {
			name    string
			dumps   []string
			metrics string
		}{
			{"iptables", []string{"iptables/save-legacy-ipv4.txt", "iptables/save-legacy-ipv6.txt"}, "metrics-iptables.txt"},
			{"nftables", []string{"nftables/ruleset.json"}, "metrics-nftables.txt"},
		} {
			var in []string
			for _, d := range mode.dumps {
				if _, err := os.Stat(filepath.Join(dir, d)); err == nil {
					in = append(in, "--from-dump", filepath.Join(dir, d))
				}
			}
			if len(in) == 0 {
				continue
			}
			in = append(in, "--from-objects", objects)
			if _, err := os.Stat(filepath.Join(dir, mode.metrics)); err == nil {
				in = append(in, "--from-metrics", filepath.Join(dir, mode.metrics))
			}
			for _, cmd := range [][]string{{"map"}, {"stale"}, {"masq"}, {"counts"}, {"triage"}, {"explain", "-A", "-l", "!no-such-label"}} {
				out, errOut, err := runCmd(t, nil, append(cmd, in...)...)
				if _, isExit := IsExitError(err); err != nil && !isExit {
					t.Errorf("%s %s %v: %v\n%s", filepath.Base(dir), mode.name, cmd, err, errOut)
					continue
				}
				for _, line := range lines(out) {
					if w := lipgloss.Width(line); w > 80 {
						t.Errorf("%s %s %s: %d columns: %s", filepath.Base(dir), mode.name, cmd[0], w, line)
					}
					if strings.Contains(line, "-…") || strings.Contains(line, "…/") {
						t.Errorf("%s %s %s: a cut name in a pipe: %s", filepath.Base(dir), mode.name, cmd[0], line)
					}
				}
			}
		}
	}
}

// On a terminal narrower than a name, the middle of the name is elided;
// the prefix and the hash stay.
func TestNarrowTerminalElidesMiddle(t *testing.T) {
	got := elideMiddle("endpoint-UTSOT7FO-load/gone/tcp/http__fd00.10.244.2..221/8080", 30)
	if lipgloss.Width(got) != 30 || !strings.HasPrefix(got, "endpoint-UTSOT") || !strings.HasSuffix(got, "221/8080") || !strings.Contains(got, "…") {
		t.Errorf("elideMiddle: %q", got)
	}
	if got := elideMiddle("KUBE-SVC-67NZLRHBNDSAWJRO", 30); got != "KUBE-SVC-67NZLRHBNDSAWJRO" {
		t.Errorf("a short name is elided: %q", got)
	}
	term := &Terminal{Rich: true, Width: 50, Renderer: lipgloss.NewRenderer(os.Stdout)}
	if got := term.chainName("endpoint-UTSOT7FO-load/gone/tcp/http__fd00.10.244.2..221/8080", 40); lipgloss.Width(got) != 40 || !strings.HasPrefix(got, "endpoint-UTSOT7FO-") {
		t.Errorf("terminal chain name: %q", got)
	}
	pipe := &Terminal{Width: 80}
	if name := "endpoint-UTSOT7FO-load/gone/tcp/http__fd00.10.244.2..221/8080"; pipe.chainName(name, 20) != name {
		t.Errorf("a pipe cut a name")
	}
}

// stale groups chains by cause and former owner: the large-cluster churn
// fixture's 31 chains are two owners of one cause.
func TestStaleGroupedByCauseAndOwner(t *testing.T) {
	const churn = "../testdata/fixtures/large-churn-v1.37/"
	in := []string{"--from-dump", churn + "iptables/save-legacy-ipv4.txt", "--from-objects", churn + "objects.json", "--from-metrics", churn + "metrics-iptables.txt"}
	out := runOK(t, append([]string{"stale"}, in...)...)
	want := []string{
		"31 not due (large-cluster throttle, ≤ 30s):",
		"  load/svc-001:http (10 endpoints gone, 10 remain): 10 SEP",
		"  load/svc-003 (deleted): SVC + 20 SEP",
	}
	got := lines(out)
	if len(got) < 3 || !slices.Equal(got[:3], want) {
		t.Errorf("stale text:\n%s\nwant it to start with\n%s", out, strings.Join(want, "\n"))
	}
	if n := strings.Count(out, "large-cluster mode (more than 1000"); n != 1 {
		t.Errorf("the cause is explained %d times, want once", n)
	}
	wide := lines(runOK(t, append([]string{"stale", "-o", "wide"}, in...)...))
	table := wide
	if i := slices.Index(wide, "not checked:"); i >= 0 {
		table = wide[:i]
		// no --from-config: when the chains are due rests on the default
		if !strings.Contains(strings.Join(strings.Fields(strings.Join(wide[i:], " ")), " "), "syncPeriod (30s assumed)") {
			t.Errorf("stale without the config does not say its syncPeriod is assumed: %q", wide[i:])
		}
	}
	if len(table) != 32 || !strings.HasPrefix(table[0], "STATUS") {
		t.Errorf("stale -o wide: %d lines (want a header and 31 chains)", len(table))
	}
	// The harmful ones name each chain and who jumps to it.
	out = runOK(t, append([]string{"stale"}, syncFailureInputs()...)...)
	for _, w := range []string{"2 HARMFUL (still jumped to):", "    KUBE-SEP-BBCMKYFKDNTM4EJG", "← KUBE-SVC-5OBLOJ65J3MFPSIG,", "1 HARMFUL (leftovers of kube-proxy ≤1.23 that make every restore fail):"} {
		if !strings.Contains(out, w) {
			t.Errorf("stale lacks %q:\n%s", w, out)
		}
	}
}
