package input_test

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/inspect/input"
)

func readFile(t *testing.T, path string) *input.Input {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	in, err := input.Read(strings.NewReader(string(data)), filepath.Base(path))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return in
}

// kube-proxy v1.37.2's own ipset save (the IPVS fixture) is a ruleset
// input: its sets land in Ruleset.IPVS.Sets, with a Dump that counts them
// (issue 32, item 1).
func TestReadIPSetSave(t *testing.T) {
	in := readFile(t, filepath.Join("..", "..", "testdata", "fixtures", "small-v1.37", "ipvs", "ipset-save.txt"))
	rs := in.Ruleset
	if in.Format != inspect.FormatIPSet || !rs.HasIPSets() || rs.HasIPVS() || rs.HasIPVSInterface() || len(rs.Dumps) != 1 {
		t.Fatalf("format %s, sets %v, ipvs %v, dumps %+v", in.Format, rs.HasIPSets(), rs.HasIPVS(), rs.Dumps)
	}
	if d := rs.Dumps[0]; d.Format != inspect.FormatIPSet || d.Version != "save" || d.Tables != 34 || d.Rules != 80 || len(d.Warnings) != 0 {
		t.Errorf("dump %+v; want save, 34 sets, 80 members, no warning", d)
	}
	ci := rs.IPVS.Sets.Set("KUBE-CLUSTER-IP")
	if ci == nil || len(ci.Members) != 20 {
		t.Fatalf("KUBE-CLUSTER-IP = %+v", ci)
	}
	found := false
	for _, m := range ci.Members {
		found = found || m.IP == netip.MustParseAddr("10.96.0.10") && m.Proto == "udp" && m.Port == 53
	}
	if !found {
		t.Errorf("KUBE-CLUSTER-IP lacks 10.96.0.10,udp:53: %+v", ci.Members)
	}
}

// ip addr output is a ruleset input holding kube-ipvs0's addresses; an
// ipset list, a save and the link's addresses read from three inputs merge
// into one IPVS state beside the table.
func TestReadIPVSNodeState(t *testing.T) {
	fixtureDir := filepath.Join("..", "..", "testdata", "fixtures", "small-v1.37", "ipvs")
	addr := readFile(t, filepath.Join("..", "ifaddr", "testdata", "ip-addr.txt"))
	if addr.Format != inspect.FormatIPAddr || !addr.Ruleset.HasIPVSInterface() || addr.Ruleset.HasIPSets() {
		t.Fatalf("ip addr: format %s, interface %v", addr.Format, addr.Ruleset.HasIPVSInterface())
	}
	if i := addr.Ruleset.IPVS.Interface; i.Name != "kube-ipvs0" || len(i.Addrs) != 6 || addr.Ruleset.Dumps[0].Rules != 6 {
		t.Errorf("kube-ipvs0 = %+v, dump %+v", i, addr.Ruleset.Dumps[0])
	}
	merged := &inspect.Ruleset{}
	for _, in := range []*input.Input{
		readFile(t, filepath.Join(fixtureDir, "proc-net-ip_vs.txt")),
		readFile(t, filepath.Join(fixtureDir, "ipset-save.txt")),
		readFile(t, filepath.Join("..", "ipset", "testdata", "ipset-list-small-v1.37.txt")),
		addr,
		readFile(t, filepath.Join("..", "ifaddr", "testdata", "ip-br-addr-show-kube-ipvs0.txt")),
	} {
		merged.Merge(in.Ruleset)
	}
	st := merged.IPVS
	if !merged.HasIPVS() || !merged.HasIPSets() || !merged.HasIPVSInterface() || len(merged.Dumps) != 5 {
		t.Fatalf("merged: ipvs %v, sets %v, interface %v, %d dumps", merged.HasIPVS(), merged.HasIPSets(), merged.HasIPVSInterface(), len(merged.Dumps))
	}
	ci := st.Sets.Set("KUBE-CLUSTER-IP")
	if len(st.Sets.Sets) != 34 || len(ci.Members) != 20 || ci.Entries != 20 || len(st.Interface.Addrs) != 6 || st.Interface.State != "DOWN" {
		t.Errorf("merged: %d sets, KUBE-CLUSTER-IP %d members (%d entries), kube-ipvs0 %+v", len(st.Sets.Sets), len(ci.Members), ci.Entries, st.Interface)
	}
	// the inputs' own state is not changed by the merge
	if len(addr.Ruleset.IPVS.Interface.Addrs) != 6 {
		t.Errorf("merge changed an input: %+v", addr.Ruleset.IPVS.Interface)
	}
}

// A whole ip addr listing without kube-ipvs0 reads, with no link and a
// warning that says it was not there.
func TestReadIPAddrWithoutKubeIPVS0(t *testing.T) {
	in, err := input.Read(strings.NewReader("1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN group default qlen 1000\n    inet 127.0.0.1/8 scope host lo\n"), "ip-addr.txt")
	if err != nil {
		t.Fatal(err)
	}
	if in.Ruleset.HasIPVSInterface() || !strings.Contains(strings.Join(in.Ruleset.Dumps[0].Warnings, "\n"), "no kube-ipvs0 among the 1 links") {
		t.Errorf("%+v", in.Ruleset.Dumps)
	}
}

func TestIdentifyIPVSNodeState(t *testing.T) {
	for head, what := range map[string]string{
		"create KUBE-CLUSTER-IP hash:ip,port family inet\n":         "ipsets (ipset save or list)",
		"kube-ipvs0       DOWN           10.96.0.1/32\n":            "interface addresses (ip addr)",
		"Main:\n  +-- 0.0.0.0/0 3 0 4\n":                            "local addresses (/proc/net/fib_trie)",
		"fd00001000960000000000000000000b 03 80 00 82 kube-ipvs0\n": "IPv6 addresses (/proc/net/if_inet6)",
	} {
		if id := input.Identify([]byte(head)); id.Kind != input.KindRuleset || id.What != what {
			t.Errorf("Identify(%q) = %+v, want a ruleset, %q", head, id, what)
		}
	}
}

// /proc/net/fib_trie and /proc/net/if_inet6, as a live read in the
// kube-proxy image gets them, are ruleset inputs: the node's local
// addresses land in Ruleset.IPVS.Local, joined over both, beside the
// table (issue 32, item 1).
func TestReadLocalAddrs(t *testing.T) {
	ifaddrDir := filepath.Join("..", "ifaddr", "testdata")
	fib := readFile(t, filepath.Join(ifaddrDir, "fib_trie.txt"))
	v6 := readFile(t, filepath.Join(ifaddrDir, "if_inet6.txt"))
	tests := []struct {
		in     *input.Input
		format inspect.Format
		rules  int
	}{{fib, inspect.FormatFIBTrie, 6}, {v6, inspect.FormatIfInet6, 4}}
	for _, tc := range tests {
		rs := tc.in.Ruleset
		if tc.in.Format != tc.format || !rs.HasLocalAddrs() || rs.HasIPVS() || rs.HasIPVSInterface() || len(rs.Dumps) != 1 ||
			rs.Dumps[0].Format != tc.format || rs.Dumps[0].Rules != tc.rules || len(rs.Dumps[0].Warnings) != 0 {
			t.Fatalf("%s: format %s, local %v, dumps %+v", tc.format, tc.in.Format, rs.HasLocalAddrs(), rs.Dumps)
		}
	}
	merged := &inspect.Ruleset{}
	for _, in := range []*input.Input{readFile(t, filepath.Join("..", "..", "testdata", "fixtures", "small-v1.37", "ipvs", "proc-net-ip_vs.txt")), fib, v6} {
		merged.Merge(in.Ruleset)
	}
	l := merged.IPVS.Local
	if !merged.HasIPVS() || !merged.HasLocalAddrs() || !l.IPv4 || !l.IPv6 || len(l.Addrs) != 10 || len(l.Kube) != 2 {
		t.Fatalf("merged: ipvs %v, local %+v", merged.HasIPVS(), l)
	}
	for addr, want := range map[string][2]bool{"10.96.0.10": {true, true}, "10.96.0.11": {false, true}, "fd00:10:96::c": {true, true}, "fd00:10:96::d": {false, true}} {
		if local, known := l.Has(netip.MustParseAddr(addr)); local != want[0] || known != want[1] {
			t.Errorf("Has(%s) = %v, %v; want %v", addr, local, known, want)
		}
	}
	if len(fib.Ruleset.IPVS.Local.Addrs) != 6 || fib.Ruleset.IPVS.Local.IPv6 {
		t.Errorf("merge changed an input: %+v", fib.Ruleset.IPVS.Local)
	}
}
