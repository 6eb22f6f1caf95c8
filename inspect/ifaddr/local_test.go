package ifaddr

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readLocal(t testing.TB, f func(string) (*LocalListing, error), in string) *LocalListing {
	t.Helper()
	l, err := f(in)
	if err != nil {
		t.Fatal(err)
	}
	if l.Local == nil {
		t.Fatal("no LocalAddrs")
	}
	return l
}

func fibTrie(lim Limits) func(string) (*LocalListing, error) {
	return func(s string) (*LocalListing, error) { return ReadFIBTrie(strings.NewReader(s), lim) }
}

func ifInet6(lim Limits) func(string) (*LocalListing, error) {
	return func(s string) (*LocalListing, error) { return ReadIfInet6(strings.NewReader(s), lim) }
}

func joinAddrs(as []netip.Addr) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, " ")
}

// The local addresses testdata/README.md made: kube-ipvs0's four IPv4
// addresses, eth0's and lo's, each once though the kernel prints its
// merged trie under Main: and Local: both; not the broadcast and link
// routes. With a policy rule the tables part, and a custom one prints.
func TestReadFIBTrie(t *testing.T) {
	const local = "10.96.0.1 10.96.0.10 10.96.10.1 127.0.0.1 172.18.0.2 198.51.100.10"
	tests := []struct {
		file   string
		tables int
	}{
		{"fib_trie.txt", 2},
		{"fib_trie-rules.txt", 3},
	}
	for _, tc := range tests {
		l := readLocal(t, fibTrie(Limits{}), testdata(t, tc.file))
		got := l.Local
		if l.Format != FormatFIBTrie || l.Tables != tc.tables || len(l.Warnings) != 0 || l.Truncated.Incomplete {
			t.Fatalf("%s: format %s, %d tables, warnings %q, %+v", tc.file, l.Format, l.Tables, l.Warnings, l.Truncated)
		}
		if joinAddrs(got.Addrs) != local || len(got.Ranges) != 1 || got.Ranges[0].String() != "127.0.0.0/8" ||
			!got.IPv4 || got.IPv6 || got.Kube != nil || got.Source != ProcFIBTrie {
			t.Errorf("%s: %+v; want %s and 127.0.0.0/8", tc.file, got, local)
		}
	}
}

// Every IPv6 address with its link; tentative ones (fifth column 0x40:
// down0's, which its link being down keeps so, and the link-locals under
// DAD) are no local address: the kernel had no local route for them.
func TestReadIfInet6(t *testing.T) {
	l := readLocal(t, ifInet6(Limits{}), testdata(t, "if_inet6.txt"))
	got := l.Local
	if l.Format != FormatIfInet6 || len(l.Warnings) != 0 || l.Truncated.Incomplete {
		t.Fatalf("format %s, warnings %q, %+v", l.Format, l.Warnings, l.Truncated)
	}
	want := []struct{ name, got, want string }{
		{"addrs", joinAddrs(got.Addrs), "::1 fc00:f853:ccd:e793::2 fd00:10:96::b fd00:10:96::c"},
		{"kube", joinAddrs(got.Kube), "fd00:10:96::b fd00:10:96::c"},
		{"unusable", joinAddrs(got.Unusable), "fd00:10:96::d fe80::44f3:98ff:fe7f:48e4 fe80::6013:c8ff:fe09:453d"},
		{"kube unusable", joinAddrs(got.KubeUnusable), ""},
	}
	for _, w := range want {
		if w.got != w.want {
			t.Errorf("%s: %s, want %s", w.name, w.got, w.want)
		}
	}
	if got.IPv4 || !got.IPv6 || got.Source != ProcIfInet6 {
		t.Errorf("%+v", got)
	}
	a, ok := parseIfInet6(strings.Fields("fd00001000960000000000000000000b 03 80 00 82 kube-ipvs0"))
	if !ok || a != (Inet6Addr{Addr: netip.MustParseAddr("fd00:10:96::b"), Index: 3, PrefixLen: 128, Scope: 0, Flags: 0x82, Name: KubeIPVS0}) || !a.Usable() {
		t.Errorf("parseIfInet6 = %+v, %v", a, ok)
	}
}

// Pasted: prompts, the command, CRLF; and lines of neither are warned of.
func TestReadLocalPasted(t *testing.T) {
	tests := []struct {
		name     string
		read     func(string) (*LocalListing, error)
		in       string
		addrs    int
		warnings int
	}{
		{"fib prompt", fibTrie(Limits{}), "[root@node-a ~]# cat /proc/net/fib_trie\n" + testdata(t, "fib_trie.txt") + "[root@node-a ~]#\n", 6, 0},
		{"fib crlf", fibTrie(Limits{}), strings.ReplaceAll("$ sudo cat /proc/net/fib_trie\n"+testdata(t, "fib_trie-rules.txt"), "\n", "\r\n"), 6, 0},
		{"fib junk", fibTrie(Limits{}), "Local:\n  |-- 10.0.0.1\n     /32 host LOCAL\n  /32 host LOCAL x\nnonsense\n  |-- fd00::1\n", 1, 3},
		{"fib alias first", fibTrie(Limits{}), "Local:\n     /32 host LOCAL\n", 0, 1},
		{"fib none", fibTrie(Limits{}), "", 0, 1},
		{"inet6 prompt", ifInet6(Limits{}), "$ cat /proc/net/if_inet6\r\n" + strings.ReplaceAll(testdata(t, "if_inet6.txt"), "\n", "\r\n"), 4, 0},
		{"inet6 junk", ifInet6(Limits{}), "fd00001000960000000000000000000b 03 81 00 82 kube-ipvs0\nfd0000100096000000000000000000zz 03 80 00 82 x\nfd00001000960000000000000000000b 3 80 00 82 x\n", 0, 3},
	}
	for _, tc := range tests {
		l := readLocal(t, tc.read, tc.in)
		if len(l.Local.Addrs) != tc.addrs || len(l.Warnings) != tc.warnings {
			t.Errorf("%s: %s, warnings %q; want %d addresses, %d warnings", tc.name, joinAddrs(l.Local.Addrs), l.Warnings, tc.addrs, tc.warnings)
		}
	}
}

func TestReadLocalLimits(t *testing.T) {
	tests := []struct {
		name  string
		read  func(string) (*LocalListing, error)
		in    string
		addrs int
		check func(Truncation) bool
	}{
		{"fib addrs", fibTrie(Limits{MaxAddrs: 2}), testdata(t, "fib_trie.txt"), 2, func(tr Truncation) bool { return tr.AddrsLeftOut == 8 }},
		{"fib lines", fibTrie(Limits{MaxLineBytes: 25}), testdata(t, "fib_trie.txt"), 1, func(tr Truncation) bool { return tr.LongLines == 38 }},
		// the routes below a leaf left out are not the leaf above's
		{"fib long leaf", fibTrie(Limits{MaxLineBytes: 25}), "Local:\n |-- 10.0.0.1\n  /32 link BROADCAST\n |-- 10.0.0.2" + strings.Repeat(" ", 30) + "\n  /32 host LOCAL\n", 0,
			func(tr Truncation) bool { return tr.LongLines == 1 }},
		{"fib bytes", fibTrie(Limits{MaxBytes: 300}), testdata(t, "fib_trie.txt"), 3, func(tr Truncation) bool { return tr.Unread && tr.BytesRead <= 300 }},
		{"inet6 addrs", ifInet6(Limits{MaxAddrs: 1}), testdata(t, "if_inet6.txt"), 1, func(tr Truncation) bool { return tr.AddrsLeftOut == 5 }},
		{"inet6 bytes", ifInet6(Limits{MaxBytes: 200}), testdata(t, "if_inet6.txt"), 1, func(tr Truncation) bool { return tr.Unread }},
	}
	for _, tc := range tests {
		l := readLocal(t, tc.read, tc.in)
		if len(l.Local.Addrs) != tc.addrs || !l.Truncated.Incomplete || !l.Local.Incomplete || !tc.check(l.Truncated) ||
			len(l.Warnings) == 0 || !strings.HasPrefix(l.Warnings[0], "INCOMPLETE") {
			t.Errorf("%s: %s, %+v, warnings %q", tc.name, joinAddrs(l.Local.Addrs), l.Truncated, l.Warnings)
		}
	}
}

// Has: bound, read and not bound, and unknown (family not read, or a
// capped read); OnKube only for kube-ipvs0's IPv6 addresses.
func TestLocalHas(t *testing.T) {
	v4 := readLocal(t, fibTrie(Limits{}), testdata(t, "fib_trie.txt")).Local
	v6 := readLocal(t, ifInet6(Limits{}), testdata(t, "if_inet6.txt")).Local
	capped := readLocal(t, fibTrie(Limits{MaxAddrs: 1}), testdata(t, "fib_trie.txt")).Local
	both := JoinLocal(v4, v6)
	tests := []struct {
		name         string
		l            *LocalAddrs
		addr         string
		local, known bool
	}{
		{"bound", v4, "10.96.0.10", true, true},
		{"mapped", v4, "::ffff:10.96.0.10", true, true},
		{"range", v4, "127.0.0.53", true, true},
		{"not bound", v4, "10.96.0.11", false, true},
		{"other family", v4, "fd00:10:96::b", false, false},
		{"v6 bound", both, "fd00:10:96::b", true, true},
		{"v6 tentative", both, "fd00:10:96::d", false, true},
		{"v4 in both", both, "198.51.100.10", true, true},
		{"capped", capped, "10.96.0.10", false, false},
		{"nil", nil, "10.96.0.1", false, false},
	}
	for _, tc := range tests {
		local, known := tc.l.Has(netip.MustParseAddr(tc.addr))
		if local != tc.local || known != tc.known {
			t.Errorf("%s: Has(%s) = %v, %v; want %v, %v", tc.name, tc.addr, local, known, tc.local, tc.known)
		}
	}
	if !both.OnKube(netip.MustParseAddr("fd00:10:96::c")) || both.OnKube(netip.MustParseAddr("fc00:f853:ccd:e793::2")) || both.OnKube(netip.MustParseAddr("10.96.0.1")) {
		t.Error("OnKube")
	}
	if both.Source != ProcFIBTrie+" and "+ProcIfInet6 || !both.IPv4 || !both.IPv6 || len(v4.Addrs) != 6 || v4.IPv6 || len(both.Addrs) != 10 {
		t.Errorf("JoinLocal = %+v; v4 %+v", both, v4)
	}
	if JoinLocal(nil, nil) != nil || joinAddrs(JoinLocal(nil, v6).Addrs) != joinAddrs(v6.Addrs) || JoinLocal(v4, v4).Source != ProcFIBTrie {
		t.Error("JoinLocal with nil or itself")
	}
}

// Detection helpers take their own lines and none of ip addr's.
func TestIsLocalLine(t *testing.T) {
	tests := []struct {
		line       string
		fib, inet6 bool
	}{
		{"  +-- 10.96.0.0/16 2 0 2", true, false},
		{"     |-- 10.96.0.1", true, false},
		{"$ cat /proc/net/fib_trie", true, false},
		{"[root@node-a ~]# cat /proc/net/if_inet6", false, true},
		{"fd00001000960000000000000000000a 05 80 00 80 kube-ipvs0", false, true},
		{"00000000000000000000000000000001 01 80 10 80       lo\r", false, true},
		{"        /32 host LOCAL", false, false},
		{"Main:", false, false},
		{"[root@node-a ~]#", false, false},
		{"|-- src", false, false},
		{"+-- 10.96.0.0/16", false, false},
		{"fd00001000960000000000000000000a 05 80 00 80", false, false},
		{"TCP  0A600001:01BB rr", false, false},
	}
	for _, tc := range tests {
		if IsFIBTrieLine(tc.line) != tc.fib || IsIfInet6Line(tc.line) != tc.inet6 || IsLine(tc.line) {
			t.Errorf("%q: fib_trie %v, if_inet6 %v, ip addr %v", tc.line, IsFIBTrieLine(tc.line), IsIfInet6Line(tc.line), IsLine(tc.line))
		}
	}
}

// No line of the rule, IPVS and ip addr fixtures is taken for either.
func TestIsLocalLineFixtures(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "fixtures", "small-v1.37", "*", "*.txt"))
	ip, _ := filepath.Glob(filepath.Join("testdata", "ip-*.txt"))
	if len(files) < 5 || len(ip) < 5 {
		t.Fatalf("fixtures: %v %v", files, ip)
	}
	for _, file := range append(files, ip...) {
		if base := filepath.Base(file); strings.HasPrefix(base, "proc-net-fib_trie") || strings.HasPrefix(base, "proc-net-if_inet6") {
			continue // the forms themselves, as the generator saved them
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if IsFIBTrieLine(line) || IsIfInet6Line(line) {
				t.Errorf("%s: %q taken", file, line)
			}
		}
	}
}
