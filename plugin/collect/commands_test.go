package collect

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

func TestAllowed(t *testing.T) {
	allowed := [][]string{
		{"iptables-save"}, {"ip6tables-legacy-save"}, {"iptables-nft-save", "-t", "nat"},
		{"iptables", "-V"}, {"ip6tables-nft", "-V"},
		{"iptables-nft", "-t", "nat", "-S", "KUBE-SERVICES"},
		{"iptables-legacy", "-t", "filter", "-S", "KUBE-SVC-ABCDEFGHIJKLMNOP"},
		{"iptables-nft", "-t", "nat", "-S", "PREROUTING"}, {"ip6tables-nft", "-t", "filter", "-S", "FORWARD"},
		{"nft", "--version"},
		{"nft", "list", "table", "ip6", "kube-proxy"}, {"nft", "-j", "list", "table", "ip", "nat"},
		{"nft", "list", "chain", "ip", "kube-proxy", "service-ULMVA6XW-ns/web/tcp/http"},
		{"nft", "-t", "list", "sets", "table", "ip6", "kube-proxy"},
	}
	for _, argv := range allowed {
		if err := Allowed(argv); err != nil {
			t.Errorf("Allowed(%q) = %v, want nil", argv, err)
		}
	}
	refused := [][]string{
		nil, {""}, {"sh"}, {"sh", "-c", "iptables-save"}, {"bash"},
		{"iptables-restore"}, {"iptables-nft-restore", "--test"}, {"ip6tables-restore"},
		{"iptables", "-F"}, {"iptables", "-t", "nat", "-F", "KUBE-SERVICES"},
		{"iptables", "-t", "nat", "-X", "KUBE-SEP-X"}, {"iptables", "-t", "nat", "-A", "KUBE-SERVICES", "-j", "DROP"},
		{"iptables", "-t", "nat", "-D", "KUBE-SERVICES", "1"}, {"iptables", "-t", "nat", "-P", "FORWARD", "DROP"},
		{"iptables", "-t", "nat", "-S", "CNI-FORWARD"}, // only KUBE- and built-in chains
		{"iptables", "-t", "nat", "-S", "PREROUTINGX"}, {"iptables", "-t", "nat", "-S", "forward"},
		{"iptables", "-t", "nat", "-S", "KUBE-X;reboot"}, {"iptables", "-t", "nat", "-S", "KUBE-X Y"},
		{"iptables", "-t", "raw", "-S", "KUBE-X"}, {"iptables", "-S"}, {"iptables", "-V", "-F"},
		{"iptables-save", "-t", "nat", "-c", "x"}, {"iptables-save", "--modprobe=/bin/evil"}, {"iptables-save", "-M", "/x"},
		{"nft", "flush", "ruleset"}, {"nft", "-f", "/tmp/x"}, {"nft", "delete", "table", "ip", "kube-proxy"},
		{"nft", "list", "table", "ip", "kube-proxy;", "flush", "ruleset"}, {"nft", "list ruleset; flush ruleset"},
		{"nft", "-j", "-j", "list", "ruleset"}, {"nft", "list", "table", "bridge", "kube-proxy"},
		{"nft", "list", "chain", "ip", "kube-proxy", "x; flush ruleset"}, {"nft", "add", "rule", "ip", "nat", "x"},
		{"nft", "-t", "list", "sets", "table", "ip", "kube-proxy;", "flush", "ruleset"}, {"nft", "-t", "list", "sets", "table", "ip", "foreign"},
		{"nft", "-t", "list", "sets"}, {"nft", "-t", "flush", "ruleset"}, {"nft", "-t", "list", "sets", "table", "ip", "kube-proxy", "x"},
		// nft loads every table for these: the plugin names its tables
		{"nft", "list", "tables"}, {"nft", "-j", "list", "ruleset"}, {"nft", "list", "ruleset"},
		{"nft", "-i"}, {"nft"}, {"/usr/sbin/iptables-save"}, {"rm", "-rf", "/"}, {"sleep", "1"},
	}
	for _, argv := range refused {
		if err := Allowed(argv); err == nil {
			t.Errorf("Allowed(%q) = nil, want a refusal", argv)
		}
	}
}

// Every command a plan can produce is allowed.
func TestPlansOnlyAllowed(t *testing.T) {
	probes := []Probe{
		{},
		{NFTKnown: true},
		{ProxyMode: "iptables", Backend: "nf_tables", NFTKnown: true, NFTTables: []string{"ip nat", "ip filter", "ip6 nat", "ip6 filter", "ip mangle"}},
		{ProxyMode: "iptables", Backend: "legacy", NFTKnown: true, NFTTables: []string{"ip kube-proxy"}},
		{ProxyMode: "nftables", NFTKnown: true, NFTTables: []string{"ip kube-proxy", "ip6 kube-proxy", "ip nat"}},
	}
	var all []NodeCommand
	for _, p := range probes {
		for _, r := range []string{ReaderAuto, ReaderSave} {
			all = append(all, FullPlan(p, r)...)
		}
	}
	all = append(all, FirstChains(kubeproxy.IPv4, []string{"KUBE-SVC-ABCDEFGHIJKLMNOP", "KUBE-SEP-ABCDEFGHIJKLMNOP"})...)
	all = append(all, FirstChains(kubeproxy.IPv6, nil)...)
	all = append(all, IPTablesVersion(), NFTVersion(), NFTKubeProxyTable(kubeproxy.IPv4), NFTKubeProxyTable(kubeproxy.IPv6), NFTTable(kubeproxy.IPv4, kubeproxy.NFTTable, true), NFTTable(kubeproxy.IPv6, kubeproxy.NFTTable, false))
	for i := 0; i < len(all); i++ {
		c := all[i]
		all = append(all, c.Fallback...)
		if err := c.Check(); err != nil {
			t.Errorf("%s: %v", c.ID, err)
		}
	}
	for _, batch := range Batches(all) {
		if _, err := Script(batch); err != nil {
			t.Fatalf("Script of every planned command: %v", err)
		}
	}
}

// The constructors build Argv from the typed fields, and every command
// they build passes the gate.
func TestConstructors(t *testing.T) {
	type fields struct {
		ID, Program  string
		Family       kubeproxy.Family
		Backend      kubeproxy.Backend
		Table, Chain string
		Argv         string
	}
	tests := []struct {
		cmd  NodeCommand
		want fields
	}{
		{Save(kubeproxy.IPv4, kubeproxy.BackendNFT),
			fields{"iptables-nft-save", "iptables-nft-save", kubeproxy.IPv4, kubeproxy.BackendNFT, "", "", "iptables-nft-save"}},
		{Save(kubeproxy.IPv6, kubeproxy.BackendLegacy),
			fields{"ip6tables-legacy-save", "ip6tables-legacy-save", kubeproxy.IPv6, kubeproxy.BackendLegacy, "", "", "ip6tables-legacy-save"}},
		{IPTablesVersion(),
			fields{"iptables-version", "iptables", "", kubeproxy.BackendUnknown, "", "", "iptables -V"}},
		{ListChain(kubeproxy.IPv6, kubeproxy.BackendNFT, kubeproxy.TableNAT, kubeproxy.ChainPostrouting),
			fields{"ip6tables-nft-nat-KUBE-POSTROUTING", "ip6tables-nft", kubeproxy.IPv6, kubeproxy.BackendNFT, "nat", "KUBE-POSTROUTING", "ip6tables-nft -t nat -S KUBE-POSTROUTING"}},
		{ListChain(kubeproxy.IPv4, kubeproxy.BackendLegacy, kubeproxy.TableFilter, kubeproxy.ChainForward),
			fields{"iptables-legacy-filter-KUBE-FORWARD", "iptables-legacy", kubeproxy.IPv4, kubeproxy.BackendLegacy, "filter", "KUBE-FORWARD", "iptables-legacy -t filter -S KUBE-FORWARD"}},
		{NFTTable(kubeproxy.IPv6, kubeproxy.NFTTable, true),
			fields{"nft-ip6-kube-proxy.json", "nft", kubeproxy.IPv6, kubeproxy.BackendUnknown, "kube-proxy", "", "nft -j list table ip6 kube-proxy"}},
		{NFTTable(kubeproxy.IPv4, kubeproxy.TableNAT, false),
			fields{"nft-ip-nat", "nft", kubeproxy.IPv4, kubeproxy.BackendUnknown, "nat", "", "nft list table ip nat"}},
		{NFTVersion(), fields{"nft-version", "nft", "", kubeproxy.BackendUnknown, "", "", "nft --version"}},
		{NFTKubeProxyTable(kubeproxy.IPv6), fields{"nft-ip6-kube-proxy-sets", "nft", kubeproxy.IPv6, kubeproxy.BackendUnknown, "kube-proxy", "", "nft -t list sets table ip6 kube-proxy"}},
	}
	for _, tt := range tests {
		c := tt.cmd
		got := fields{c.ID, c.Program, c.Family, c.Backend, c.Table, c.Chain, strings.Join(c.Argv, " ")}
		if got != tt.want {
			t.Errorf("got  %+v\nwant %+v", got, tt.want)
		}
		if c.Argv[0] != c.Program {
			t.Errorf("%s: runs %q, not its Program %q", c.ID, c.Argv[0], c.Program)
		}
		if err := c.Check(); err != nil {
			t.Errorf("%s: %v", c.ID, err)
		}
	}
	// The JSON listing falls back to the same table as text.
	if fb := NFTTable(kubeproxy.IPv6, kubeproxy.NFTTable, true).Fallback; len(fb) != 1 || strings.Join(fb[0].Argv, " ") != "nft list table ip6 kube-proxy" {
		t.Errorf("nft -j fallback %+v", fb)
	}
}

func TestFullPlan(t *testing.T) {
	var ids func(cmds []NodeCommand) string
	ids = func(cmds []NodeCommand) string {
		var s []string
		for _, c := range cmds {
			id := c.ID
			if len(c.Fallback) > 0 && !strings.HasSuffix(c.ID, ".json") {
				id += "(" + ids(c.Fallback) + ")"
			}
			s = append(s, id)
		}
		return strings.Join(s, " ")
	}
	tests := []struct {
		name   string
		probe  Probe
		reader string
		want   string
	}{
		{"iptables-nft: save, nft if it fails", Probe{ProxyMode: "iptables", Backend: "nf_tables", NFTKnown: true, NFTTables: []string{"ip filter", "ip nat", "ip6 nat"}}, ReaderAuto,
			"iptables-nft-save(nft-ip-nat nft-ip-filter) ip6tables-nft-save(nft-ip6-nat) iptables-legacy-save ip6tables-legacy-save"},
		{"--reader nft", Probe{ProxyMode: "iptables", Backend: "nf_tables", NFTKnown: true, NFTTables: []string{"ip nat"}}, ReaderNFT,
			"nft-ip-nat iptables-legacy-save ip6tables-legacy-save"},
		{"iptables-nft read with save only", Probe{ProxyMode: "iptables", Backend: "nf_tables", NFTKnown: true, NFTTables: []string{"ip nat"}}, ReaderSave,
			"iptables-nft-save iptables-legacy-save ip6tables-legacy-save"},
		{"no nft in the image", Probe{Backend: "legacy"}, ReaderAuto,
			"iptables-nft-save ip6tables-nft-save iptables-legacy-save ip6tables-legacy-save"},
		{"nftables mode", Probe{ProxyMode: "nftables", NFTKnown: true, NFTTables: []string{"ip kube-proxy", "ip6 kube-proxy"}}, ReaderAuto,
			"nft-ip-kube-proxy.json nft-ip6-kube-proxy.json iptables-legacy-save ip6tables-legacy-save"},
	}
	for _, tt := range tests {
		if got := ids(FullPlan(tt.probe, tt.reader)); got != tt.want {
			t.Errorf("%s: FullPlan = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestChainPlan(t *testing.T) {
	tests := []struct {
		probe Probe
		ok    bool
	}{
		{Probe{ProxyMode: "iptables", Backend: "nf_tables", NFTKnown: true, NFTTables: []string{"ip nat"}}, true},
		{Probe{ProxyMode: "", Backend: "nf_tables", NFTKnown: true, NFTTables: []string{"ip6 nat"}}, true},
		{Probe{ProxyMode: "iptables", Backend: "legacy", NFTKnown: true}, false},     // legacy: one save is faster
		{Probe{ProxyMode: "nftables", Backend: "nf_tables", NFTKnown: true}, false},  // nft tables are read whole
		{Probe{ProxyMode: "iptables", Backend: "nf_tables", NFTKnown: true}, false},  // no nat table on nft: mismatch, read all
		{Probe{ProxyMode: "iptables", Backend: "nf_tables", NFTKnown: false}, false}, // nft unknown
		{Probe{ProxyMode: "ipvs", Backend: "nf_tables", NFTKnown: true, NFTTables: []string{"ip nat"}}, false},
	}
	for _, tt := range tests {
		if ok := ChainPlan(tt.probe); ok != tt.ok {
			t.Errorf("ChainPlan(%+v) ok = %v, want %v", tt.probe, ok, tt.ok)
		}
	}
}

func TestParseProbeOutputs(t *testing.T) {
	for out, want := range map[string]kubeproxy.Backend{
		"iptables v1.8.9 (nf_tables)\n": "nf_tables",
		"iptables v1.8.9 (legacy)\n":    "legacy",
		"iptables v1.6.1\n":             "legacy",
		"sh: iptables: not found\n":     kubeproxy.BackendUnknown,
	} {
		if got := ParseIPTablesVersion(out); got != want {
			t.Errorf("ParseIPTablesVersion(%q) = %q, want %q", out, got, want)
		}
	}
}

// The script's shell text is fixed; checkScript accepts what Script writes
// and nothing with an extra command.
func TestScriptChecked(t *testing.T) {
	cmds := []NodeCommand{IPTablesVersion(), Save(kubeproxy.IPv4, kubeproxy.BackendNFT), ListChain(kubeproxy.IPv4, kubeproxy.BackendNFT, kubeproxy.TableNAT, kubeproxy.ChainServices)}
	argv, err := Script(cmds)
	if err != nil {
		t.Fatal(err)
	}
	if len(argv) != 3 || argv[0] != "sh" || argv[1] != "-c" {
		t.Fatalf("Script argv = %q", argv)
	}
	if err := allowedOrScript(argv); err != nil {
		t.Fatalf("checkScript refuses Script's own output: %v", err)
	}
	for _, evil := range []string{
		argv[2] + "iptables -F\n",
		argv[2] + "'iptables' '-F'\n",
		strings.Replace(argv[2], "'iptables-nft-save'", "'iptables-nft-save'; iptables -F", 1),
		strings.Replace(argv[2], `begin 0"`, `begin 0"; iptables -F; echo "`, 1),
		strings.Replace(argv[2], ` rc=$?"`, ` rc=$(iptables -F)"`, 1),
		strings.Replace(argv[2], `$n begin 0`, `$(iptables -F) begin 0`, 1),
		strings.Replace(argv[2], "read -r n\n", "read -r n; iptables -F\n", 1),
		strings.Replace(argv[2], "exec </dev/null\n", "", 1),
		"read -r n\nexec </dev/null\necho \"### kubectl-proxyrules $n begin 0\"\n(ulimit -s unlimited 2>/dev/null; exec 'nft' 'flush' 'ruleset')\n",
		"`iptables -F`",
		"$(iptables -F)",
	} {
		if err := allowedOrScript([]string{"sh", "-c", evil}); err == nil {
			t.Errorf("checkScript accepted %q", evil)
		}
	}
	if _, err := Script([]NodeCommand{{ID: "x", Argv: []string{"iptables", "-F"}}}); err == nil {
		t.Error("Script accepted iptables -F")
	}
	if strings.Contains(argv[2], "0123456789abcdef") || !strings.HasPrefix(argv[2], "read -r n\n") {
		t.Errorf("the script must read its nonce from stdin, never carry it:\n%s", argv[2])
	}
}

// A Service with 5,000 endpoints is 5,000 chains to list: split into
// scripts the node takes (the kernel refuses one argument over 128 KiB),
// every command once, in order.
func TestBatches(t *testing.T) {
	for _, n := range []int{0, 1, 10, 720, 5009} {
		cmds := FirstChains(kubeproxy.IPv4, nil)
		for i := len(cmds); i < n; i++ {
			cmds = append(cmds, ListChain(kubeproxy.IPv4, kubeproxy.BackendNFT, kubeproxy.TableNAT, fmt.Sprintf("KUBE-SEP-%016d", i)))
		}
		var got []NodeCommand
		batches := Batches(cmds)
		for _, b := range batches {
			argv, err := Script(b)
			if err != nil {
				t.Fatalf("%d commands: %v", n, err)
			}
			if len(argv[2]) > MaxScriptBytes || len(argv[2]) > 128<<10 {
				t.Errorf("%d commands: a script of %d bytes", n, len(argv[2]))
			}
			got = append(got, b...)
		}
		if len(got) != len(cmds) {
			t.Fatalf("%d commands: batches hold %d", len(cmds), len(got))
		}
		for i := range got {
			if got[i].ID != cmds[i].ID {
				t.Fatalf("%d commands: batch order differs at %d: %s, want %s", n, i, got[i].ID, cmds[i].ID)
			}
		}
		if n >= 720 && len(batches) < 2 {
			t.Errorf("%d commands in one script", n)
		}
		t.Logf("%d commands: %d execs", len(cmds), len(batches))
	}
}

// Only exec.go reaches a node, through RemoteRunner.stream, which checks
// the command first; no other file may use the exec or port-forward APIs.
func TestOnlyStreamExecs(t *testing.T) {
	fset := token.NewFileSet()
	files, _ := filepath.Glob("*.go")
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			if (strings.Contains(p, "remotecommand") || strings.Contains(p, "portforward") || p == "os/exec") && name != "exec.go" {
				t.Errorf("%s imports %s: only exec.go may run commands", name, p)
			}
		}
	}
	src, err := os.ReadFile("exec.go")
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(fset, "exec.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	ast.Inspect(f, func(n ast.Node) bool {
		fn, ok := n.(*ast.FuncDecl)
		if !ok {
			return true
		}
		body := string(src[fset.Position(fn.Body.Pos()).Offset:fset.Position(fn.Body.End()).Offset])
		if strings.Contains(body, "StreamWithContext") || strings.Contains(body, "remotecommand.New") {
			if fn.Name.Name != "stream" {
				t.Errorf("%s execs; only stream may", fn.Name.Name)
			}
			first := strings.Index(body, "allowedOrScript(argv)")
			if first < 0 || first > strings.Index(body, "remotecommand.New") {
				t.Errorf("stream must check argv with allowedOrScript before building an executor")
			}
		}
		return true
	})
}

// The script runs under a real sh: outputs come back split per command,
// byte for byte, with exit statuses, whatever the output ends with.
func TestScriptDemuxWithRealShell(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft not installed: hack/test-deps.sh installs it")
	}
	cmds := []NodeCommand{
		{ID: "v", Argv: []string{"nft", "--version"}},
		{ID: "bad", Argv: []string{"iptables-nft", "-t", "nat", "-S", "KUBE-DOES-NOT-EXIST"}},
		{ID: "v2", Argv: []string{"nft", "--version"}},
	}
	n := "feedfacefeedface"
	argv, err := Script(cmds)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := exec.Command("nft", "--version").Output()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "PATH=/usr/local/sbin:/usr/sbin:/sbin:"+os.Getenv("PATH"))
	cmd.Stdin = strings.NewReader(n + "\n") // as RemoteRunner sends it
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	outs := map[int]*strings.Builder{}
	rcs := map[int]int{}
	d := newDemux(n, len(cmds))
	d.open = func(i int) (io.Writer, error) { outs[i] = &strings.Builder{}; return outs[i], nil }
	d.done = func(i, rc int) { rcs[i] = rc }
	if err := d.run(strings.NewReader(string(out))); err != nil {
		t.Fatal(err)
	}
	if outs[0].String() != string(want) || outs[2].String() != string(want) {
		t.Errorf("outputs = %q / %q, want %q", outs[0], outs[2], want)
	}
	if rcs[0] != 0 || rcs[1] == 0 || rcs[2] != 0 {
		t.Errorf("exit statuses = %v, want 0, non-zero, 0", rcs)
	}
	if outs[1].Len() != 0 {
		t.Errorf("a missing chain printed %q on stdout", outs[1])
	}
}

// writeCounter counts the writes it gets and keeps what they carried.
type writeCounter struct {
	writes int
	strings.Builder
}

func (w *writeCounter) Write(p []byte) (int, error) { w.writes++; return w.Builder.Write(p) }

// A big output reaches its file in big writes, not one per line (a nat
// table of 380k rules was 280k writes, each a syscall, and held up the
// exec stream by seconds), byte for byte; and what came of a command cut
// off is all written before it is reported.
func TestDemuxWritesInBigPieces(t *testing.T) {
	n := "feedfacefeedface"
	d := newDemux(n, 2)
	var body strings.Builder
	for i := 0; body.Len() < 3*demuxFlushSize; i++ {
		fmt.Fprintf(&body, "-A KUBE-SEP-%016d -p tcp -m tcp -j DNAT --to-destination 10.0.%d.%d:8080\n", i, i/256%256, i%256)
	}
	stream := markerPrefix + " " + n + " begin 0\n" + body.String() + "\n" + markerPrefix + " " + n + " end 0 rc=0\n" +
		markerPrefix + " " + n + " begin 1\n" + body.String()[:demuxFlushSize/2] // cut off
	outs := []*writeCounter{{}, {}}
	var done []string
	d.open = func(i int) (io.Writer, error) { return outs[i], nil }
	d.done = func(i, rc int) { done = append(done, fmt.Sprintf("%d:%d:%d bytes", i, rc, outs[i].Len())) }
	if err := d.run(strings.NewReader(stream)); err != nil {
		t.Fatal(err)
	}
	if outs[0].String() != body.String() || outs[1].String() != body.String()[:demuxFlushSize/2] {
		t.Errorf("outputs of %d and %d bytes, want %d and %d", outs[0].Len(), outs[1].Len(), body.Len(), demuxFlushSize/2)
	}
	if lines := strings.Count(body.String(), "\n"); outs[0].writes > 4 || outs[1].writes != 1 {
		t.Errorf("%d and %d writes for %d and %d bytes (%d lines), want at most 4 and 1", outs[0].writes, outs[1].writes, outs[0].Len(), outs[1].Len(), lines)
	}
	if want := []string{fmt.Sprintf("0:0:%d bytes", body.Len()), fmt.Sprintf("1:-1:%d bytes", demuxFlushSize/2)}; !slices.Equal(done, want) {
		t.Errorf("reported %v, want %v", done, want)
	}
}
