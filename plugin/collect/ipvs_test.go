package collect

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/inspect/input"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// The node state kube-proxy v1.37.2's IPVS proxier wrote (hack/fixturegen).
func ipvsFixture(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "fixtures", "small-v1.37", "ipvs", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// ipvsRefused are IPVS-looking commands that change the node or read
// more than the plugin's bounded reads: Allowed and the policies refuse
// them.
var ipvsRefused = [][]string{
	{"ipset", "flush"}, {"ipset", "destroy"}, {"ipset", "add", "KUBE-CLUSTER-IP", "10.96.0.1,tcp:443"},
	{"ipset", "del", "KUBE-CLUSTER-IP", "10.96.0.1,tcp:443"}, {"ipset", "restore"}, {"ipset", "-exist", "restore"},
	{"ipset", "save", "-file", "/tmp/x"}, {"ipset", "save", "KUBE-CLUSTER-IP"}, {"ipset", "swap", "A", "B"},
	{"ipset", "create", "X", "hash:ip"}, {"ipset", "list"},
	{"cat", "/proc/net/ip_vs_conn"}, {"cat", "/proc/net/ip_vs", "/etc/shadow"}, {"cat", "/proc/net/ip_vs", "/proc/net/ip_vs_conn"},
	{"cat", "/proc/net/ip_vsx"}, {"cat", "/sys/class/net/kube-ipvs0/../../../../etc/shadow"},
	{"cat", "/sys/class/net/eth0/operstate"}, {"cat", "/proc/net/../../etc/shadow"},
	{"ipvsadm", "-C"}, {"ipvsadm", "-Ln"}, {"ipvsadm", "-D", "-t", "10.96.0.1:443"},
	{"ip", "addr", "flush", "dev", "kube-ipvs0"}, {"ip", "-o", "addr", "show", "dev", "kube-ipvs0"},
	// the local address reads: those two files, alone
	{"cat", "/proc/net/fib_trie", "/etc/shadow"}, {"cat", "/proc/net/fib_triestat"}, {"cat", "/proc/net/fib_trie/../../../etc/shadow"},
	{"cat", "/proc/net/if_inet6x"}, {"cat", "/proc/1/net/fib_trie"}, {"cat", "/proc/net/route"}, {"cat", "/proc/net/if_inet6", "/proc/net/fib_trie"},
	{"cat", "-A", "/proc/net/fib_trie"}, {"cat"},
}

func TestAllowedIPVS(t *testing.T) {
	for _, c := range append(IPVSCommands(), ipvsProbeCommands()...) {
		if err := c.Check(); err != nil {
			t.Errorf("%s: %v", c.ID, err)
		}
	}
	for _, argv := range ipvsRefused {
		if err := Allowed(argv); err == nil {
			t.Errorf("Allowed(%q) = nil, want a refusal", argv)
		}
	}
}

// ipvsNode is a fake node in IPVS mode: its iptables rules, table, sets
// and kube-ipvs0 as the real proxier wrote them.
func ipvsNode(t *testing.T, r *fakeRunner) {
	r.bodies["/proxyMode"] = "ipvs"
	r.outputs["iptables-nft-save"] = fakeResult{out: ipvsFixture(t, "iptables-save-nft-ipv4.txt")}
	r.outputs["cat "+ipvsProc] = fakeResult{out: ipvsFixture(t, "proc-net-ip_vs.txt")}
	r.outputs["ipset save"] = fakeResult{out: ipvsFixture(t, "ipset-save.txt")}
	r.outputs["cat "+ipvsLinkState] = fakeResult{out: "unknown\n"}
	r.outputs["cat "+procFIBTrie] = fakeResult{out: ifaddrTestdata(t, "fib_trie.txt")}
	r.outputs["cat "+procIfInet6] = fakeResult{out: ifaddrTestdata(t, "if_inet6.txt")}
}

// The kernel's own /proc/net/fib_trie and if_inet6 (inspect/ifaddr).
func ifaddrTestdata(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "inspect", "ifaddr", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// A node read as IPVS mode (from /proxyMode or, when it does not answer,
// from what the probe finds) also has its table, sets and link read, in
// the exec of its rules; an iptables-mode node has not.
func TestCollectIPVS(t *testing.T) {
	const table, sets, link = "cat " + ipvsProc, "ipset save", "cat " + ipvsLinkState
	const fib, inet6 = "cat " + procFIBTrie, "cat " + procIfInet6
	leftover := "IP Virtual Server version 1.2.1 (size=4096)\nProt LocalAddress:Port Scheduler Flags\n  -> RemoteAddress:Port Forward Weight ActiveConn InActConn\nTCP  C6336400:4E20 rr\n"
	for _, tc := range []struct {
		name    string
		setup   func(*fakeRunner)
		want    bool   // the IPVS state is read
		why     string // in the manifest's IPVS.Why
		note    string // in its notes
		noTable bool
		addrs   string // IPVS.Addresses; "" is ipvsAddressesRead
		warning string // the manifest's one warning
	}{
		{name: "proxyMode ipvs", setup: func(r *fakeRunner) { ipvsNode(t, r) }, want: true, why: "/proxyMode"},
		{name: "proxyMode iptables", setup: func(r *fakeRunner) {
			ipvsNode(t, r)
			r.bodies["/proxyMode"] = "iptables"
		}},
		{name: "no ip_vs module", setup: func(r *fakeRunner) {
			ipvsNode(t, r)
			r.outputs[table] = fakeResult{rc: 1}
			r.outputs[link] = fakeResult{rc: 1}
		}, want: true, why: "/proxyMode", note: "the ip_vs module is not loaded", noTable: true},
		{name: "mode unknown, KUBE-NODE-PORT", setup: func(r *fakeRunner) {
			ipvsNode(t, r)
			delete(r.bodies, "/proxyMode")
			r.outputs[table] = fakeResult{rc: 1}
			r.outputs[link] = fakeResult{rc: 1}
			r.outputs["iptables -t nat -S KUBE-NODE-PORT"] = fakeResult{out: "-N KUBE-NODE-PORT\n"}
		}, want: true, why: "chain KUBE-NODE-PORT", note: "the ip_vs module is not loaded", noTable: true},
		{name: "mode unknown, virtual servers", setup: func(r *fakeRunner) {
			ipvsNode(t, r)
			delete(r.bodies, "/proxyMode")
		}, want: true, why: ipvsProc + " lists virtual servers"},
		{name: "mode unknown, only the probe's leftover", setup: func(r *fakeRunner) {
			delete(r.bodies, "/proxyMode")
			r.outputs[table] = fakeResult{out: leftover}
		}},
		{name: "IPv6 disabled", setup: func(r *fakeRunner) {
			ipvsNode(t, r)
			r.outputs[inet6] = fakeResult{rc: 1}
		}, want: true, why: "/proxyMode", addrs: ipvsAddressesIPv4},
		{name: "fib_trie unread", setup: func(r *fakeRunner) {
			ipvsNode(t, r)
			r.outputs[fib] = fakeResult{rc: 1}
		}, want: true, why: "/proxyMode", addrs: ipvsAddressesIPv6, warning: procFIBTrie},
		{name: "neither address file", setup: func(r *fakeRunner) {
			ipvsNode(t, r)
			r.outputs[fib] = fakeResult{rc: 1}
			r.outputs[inet6] = fakeResult{rc: 1}
		}, want: true, why: "/proxyMode", addrs: ipvsAddressesNotRun, warning: procFIBTrie},
		{name: "mode unknown, no ip_vs", setup: func(r *fakeRunner) {
			delete(r.bodies, "/proxyMode")
			r.outputs[table] = fakeResult{rc: 1}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, defaultObjects()...)
			r := e.runner
			tc.setup(r)
			man, err := e.collector(Options{Node: testNode, Via: ViaDebugPod}).Collect(context.Background())
			if err != nil {
				t.Fatalf("Collect: %v", err)
			}
			r.checkAllowed(t)
			if len(man.Warnings) != 0 && (tc.warning == "" || len(man.Warnings) != 1 || !strings.Contains(man.Warnings[0], tc.warning)) {
				t.Errorf("warnings %q, want %q", man.Warnings, tc.warning)
			}
			read := r.calls[len(r.calls)-1] // the probe's exec, then the rules'
			for _, c := range []string{sets, link, fib, inet6, "iptables-nft-save"} {
				if slices.Contains(read, c) != (tc.want || c == "iptables-nft-save") {
					t.Errorf("the read %q: %q in it is %v, want %v", read, c, !tc.want, tc.want)
				}
			}
			if got := slices.Contains(read, table); got != tc.want {
				t.Errorf("the read %q reads the table: %v, want %v", read, got, tc.want)
			}
			if !tc.want {
				if man.IPVS != nil || man.ProxyMode == kubeproxy.ModeIPVS {
					t.Errorf("an iptables node read as IPVS: mode %q, %+v", man.ProxyMode, man.IPVS)
				}
				return
			}
			addrs := tc.addrs
			if addrs == "" {
				addrs = ipvsAddressesRead
			}
			checkIPVSManifest(t, e, man, tc.why, tc.note, addrs, tc.noTable)
		})
	}
}

func checkIPVSManifest(t *testing.T, e *env, man *Manifest, why, note, addrs string, noTable bool) {
	t.Helper()
	r := man.IPVS
	if man.ProxyMode != kubeproxy.ModeIPVS || r == nil {
		t.Fatalf("mode %q, IPVS %+v: want ipvs, and what was read", man.ProxyMode, r)
	}
	if !strings.Contains(r.Why, why) || r.Addresses != addrs || r.Sets != "ipset-save.txt" {
		t.Errorf("IPVS read %+v: want why %q, addresses %q, the sets in ipset-save.txt", r, why, addrs)
	}
	local := addrs == ipvsAddressesRead || addrs == ipvsAddressesIPv4
	v6 := addrs == ipvsAddressesRead || addrs == ipvsAddressesIPv6
	if (r.Local == "proc-net-fib-trie.txt") != local || (r.LocalIPv6 == "proc-net-if-inet6.txt") != v6 || !local && r.Local != "" || !v6 && r.LocalIPv6 != "" {
		t.Errorf("IPVS read %+v: want fib_trie read %v, if_inet6 %v", r, local, v6)
	}
	if noTable != (r.Table == "") || noTable != (r.Link == "") || !noTable && (r.Table != "proc-net-ip-vs.txt" || r.Link != "unknown") {
		t.Errorf("IPVS read %+v: want the table and link read: %v", r, !noTable)
	}
	if has := slices.ContainsFunc(r.Notes, func(n string) bool { return note != "" && strings.Contains(n, note) }); has != (note != "") || note == "" && len(r.Notes) > 0 {
		t.Errorf("notes %q, want one saying %q", r.Notes, note)
	}
	b := openBundle(t, e.dir)
	checkSizes(t, b)
	kinds := fileKinds(&b.Manifest)
	for path, kind := range map[string]string{"ipset-save.txt": KindRuleset, "proc-net-ip-vs.txt": KindRuleset, "kube-ipvs0-operstate.txt": KindInfo,
		"proc-net-fib-trie.txt": KindRuleset, "proc-net-if-inet6.txt": KindRuleset} {
		if kinds[path] != kind {
			t.Errorf("file %s: kind %q, want %q", path, kinds[path], kind)
		}
	}
}

// A bundle of an IPVS node is read as every bundle is: its KindRuleset
// files through input.Read, which takes /proc/net/ip_vs into Ruleset.IPVS
// beside the iptables rules.
func TestIPVSBundleLoads(t *testing.T) {
	e := newEnv(t, defaultObjects()...)
	ipvsNode(t, e.runner)
	if _, err := e.collector(Options{Node: testNode, Via: ViaDebugPod}).Collect(context.Background()); err != nil {
		t.Fatalf("Collect: %v", err)
	}
	b := openBundle(t, e.dir)
	rs := &inspect.Ruleset{}
	var read []string
	for _, f := range b.Manifest.Files {
		if f.Kind != KindRuleset || f.Bytes == 0 {
			continue
		}
		fh, err := b.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		in, err := input.Read(fh, f.Path)
		fh.Close()
		if err != nil {
			t.Fatalf("%s: %v", f.Path, err)
		}
		rs.Merge(in.Ruleset)
		read = append(read, f.Path)
	}
	for _, want := range []string{"iptables-nft-save.txt", "proc-net-ip-vs.txt", "ipset-save.txt", "proc-net-fib-trie.txt", "proc-net-if-inet6.txt"} {
		if !slices.Contains(read, want) {
			t.Fatalf("read %q, want the rules, the table and the local addresses", read)
		}
	}
	if !rs.HasIPVS() || len(rs.IPVS.Table.Services) == 0 || len(rs.IPTables) == 0 {
		t.Errorf("loaded: IPVS %v, %d iptables tables: want both", rs.HasIPVS(), len(rs.IPTables))
	}
	if !rs.HasIPSets() || rs.IPVS.Sets.Set("KUBE-CLUSTER-IP") == nil {
		t.Errorf("loaded: no KUBE-CLUSTER-IP among the sets")
	}
	// the local addresses, both families, kube-ipvs0's IPv6 ones told apart
	if l := rs.IPVS.Local; !rs.HasLocalAddrs() || !l.IPv4 || !l.IPv6 || len(l.Addrs) != 10 || len(l.Kube) != 2 {
		t.Errorf("local addresses %+v: want fib_trie's and if_inet6's", l)
	}
}

// The table, the sets and the local addresses are capped as they stream,
// as every read is.
func TestIPVSOutputsBounded(t *testing.T) {
	big := strings.Repeat("x", maxIPVSOutput+1)
	for _, cmd := range []NodeCommand{IPVSTableCommand(), IPSetSaveCommand(), FIBTrieCommand(), IfInet6Command()} {
		t.Run(cmd.ID, func(t *testing.T) {
			r := newFakeRunner()
			r.outputs[strings.Join(cmd.Argv, " ")] = fakeResult{out: big}
			c := &Collector{Runner: r, Progress: &Progress{}}
			n := 0
			_, err := c.run(context.Background(), Target{}, []NodeCommand{cmd}, Sink{
				Open: func(int) (io.Writer, error) {
					return writerFunc(func(p []byte) (int, error) { n += len(p); return len(p), nil }), nil
				},
				Done: func(int, int) {},
			})
			var le *LimitError
			if !errors.As(err, &le) || le.Limit != maxIPVSOutput || !strings.Contains(err.Error(), strings.Join(cmd.Argv, " ")) {
				t.Errorf("run: %v, want the cap of %d on %q", err, maxIPVSOutput, cmd.Argv)
			}
			if n > maxIPVSOutput {
				t.Errorf("%d bytes passed on, want at most %d", n, maxIPVSOutput)
			}
		})
	}
}
