package ifaddr

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func testdata(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func read(t testing.TB, in, name string, lim Limits) *Listing {
	t.Helper()
	l, err := Read(strings.NewReader(in), name, lim)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// the addresses testdata/README.md bound to kube-ipvs0
const kubeIPVS0Addrs = "10.96.0.1/32 10.96.0.10/32 10.96.10.1/32 198.51.100.10/32 fd00:10:96::c/128 fd00:10:96::b/128"

func addrs(i *Interface) string {
	if i == nil {
		return "<nil>"
	}
	var s []string
	for _, a := range i.Addrs {
		s = append(s, a.String())
	}
	return strings.Join(s, " ")
}

// Every form of the real listings gives kube-ipvs0's six addresses, and
// the flags and state where the form shows them.
func TestReadForms(t *testing.T) {
	flags := "BROADCAST,MULTICAST,NOARP,M-DOWN"
	tests := []struct {
		file   string
		format Format
		links  int
		flags  string
		state  string
	}{
		{"ip-addr-show-kube-ipvs0.txt", FormatAddr, 1, flags, "DOWN"},
		{"ip-addr-show-dev-kube-ipvs0.txt", FormatAddr, 1, flags, "DOWN"},
		{"ip-addr-show-kube-ipvs0-up.txt", FormatAddr, 1, "NO-CARRIER,BROADCAST,MULTICAST,NOARP,UP,M-DOWN", "LOWERLAYERDOWN"},
		{"ip-addr.txt", FormatAddr, 5, flags, "DOWN"},
		{"ip-o-addr-show-kube-ipvs0.txt", FormatOneline, 1, "", ""},
		{"ip-o-addr.txt", FormatOneline, 4, "", ""}, // -o leaves out links without addresses
		{"ip-br-addr-show-kube-ipvs0.txt", FormatBrief, 1, "", "DOWN"},
		{"ip-br-addr.txt", FormatBrief, 5, "", "DOWN"},
	}
	for _, tc := range tests {
		l := read(t, testdata(t, tc.file), KubeIPVS0, Limits{})
		i := l.Interface
		if l.Format != tc.format || l.Links != tc.links || len(l.Warnings) != 0 || l.Truncated.Incomplete || i == nil {
			t.Fatalf("%s: format %s, %d links, warnings %q, %+v, %+v", tc.file, l.Format, l.Links, l.Warnings, l.Truncated, i)
		}
		if i.Name != KubeIPVS0 || strings.Join(i.Flags, ",") != tc.flags || i.State != tc.state || addrs(i) != kubeIPVS0Addrs {
			t.Errorf("%s: %+v; want flags %s, state %s, addresses %s", tc.file, i, tc.flags, tc.state, kubeIPVS0Addrs)
		}
	}
}

// A whole listing without the link says so; ip link (no addresses) is
// not read as a link without addresses.
func TestReadAbsent(t *testing.T) {
	tests := []struct{ file, name, warning string }{
		{"ip-addr.txt", "kube-ipvs1", "no kube-ipvs1 among the 5 links listed"},
		{"ip-br-addr.txt", "kube-ipvs1", "no kube-ipvs1 among the 5 links listed"},
		{"ip-link-show-kube-ipvs0.txt", KubeIPVS0, "1 ip link lines show no addresses"},
		{"ip-o-link-show-kube-ipvs0.txt", KubeIPVS0, "1 ip link lines show no addresses"},
	}
	for _, tc := range tests {
		l := read(t, testdata(t, tc.file), tc.name, Limits{})
		if l.Interface != nil || !strings.Contains(strings.Join(l.Warnings, "\n"), tc.warning) {
			t.Errorf("%s: %+v, warnings %q; want no link and %q", tc.file, l.Interface, l.Warnings, tc.warning)
		}
	}
}

// Pasted with prompts and command lines, CRLF, indented, and two forms
// together: the same addresses, each once.
func TestReadPasted(t *testing.T) {
	show, br := testdata(t, "ip-addr-show-kube-ipvs0.txt"), testdata(t, "ip-br-addr-show-kube-ipvs0.txt")
	tests := []struct {
		name, in string
		format   Format
	}{
		{"prompt", "[root@node-a ~]# ip addr show kube-ipvs0\n" + show + "[root@node-a ~]#\n", FormatAddr},
		{"crlf", strings.ReplaceAll("$ sudo ip a show dev kube-ipvs0\n"+show, "\n", "\r\n"), FormatAddr},
		{"indented", "  # ip -br addr\n  " + strings.ReplaceAll(testdata(t, "ip-br-addr.txt"), "\n", "\n  "), FormatBrief},
		{"mixed", "$ ip -br a show kube-ipvs0\n" + br + "$ ip addr show kube-ipvs0\n" + show + "$ ip -o addr\n" + testdata(t, "ip-o-addr.txt"), FormatMixed},
	}
	for _, tc := range tests {
		l := read(t, tc.in, KubeIPVS0, Limits{})
		if l.Format != tc.format || len(l.Warnings) != 0 || addrs(l.Interface) != kubeIPVS0Addrs || l.Interface.State != "DOWN" {
			t.Errorf("%s: format %s, warnings %q, %+v", tc.name, l.Format, l.Warnings, l.Interface)
		}
	}
	if l := read(t, "$ ip -br a show kube-ipvs0\n"+br+show, KubeIPVS0, Limits{}); !l.Interface.HasFlag("NOARP") || l.Interface.HasFlag("UP") {
		t.Errorf("flags of the addr form after -br: %v", l.Interface.Flags)
	}
}

func TestReadLimits(t *testing.T) {
	in := testdata(t, "ip-addr.txt")
	tests := []struct {
		name  string
		lim   Limits
		addrs int
		check func(Truncation) bool
	}{
		{"addrs", Limits{MaxAddrs: 2}, 2, func(tr Truncation) bool { return tr.AddrsLeftOut == 4 }},
		{"lines", Limits{MaxLineBytes: 50}, 0, func(tr Truncation) bool { return tr.LongLines == 12 }},
		{"bytes", Limits{MaxBytes: 900}, 3, func(tr Truncation) bool { return tr.Unread && tr.BytesRead <= 900 }},
	}
	for _, tc := range tests {
		l := read(t, in, KubeIPVS0, tc.lim)
		n := 0
		if l.Interface != nil {
			n = len(l.Interface.Addrs)
		}
		if n != tc.addrs || !l.Truncated.Incomplete || !tc.check(l.Truncated) || !strings.HasPrefix(l.Warnings[0], "INCOMPLETE") {
			t.Errorf("%s: %d addresses, %+v, warnings %q", tc.name, n, l.Truncated, l.Warnings)
		}
	}
}

func TestReadWarnings(t *testing.T) {
	l := read(t, "3: kube-ipvs0: <BROADCAST,NOARP> mtu 1500 state DOWN\n    inet 10.96.0.1/33 scope global\n    inet6 10.96.0.2/32\nnonsense\n", KubeIPVS0, Limits{})
	if len(l.Warnings) != 3 || len(l.Interface.Addrs) != 0 {
		t.Errorf("warnings %q, %+v", l.Warnings, l.Interface)
	}
}

func TestJoin(t *testing.T) {
	a := &Interface{Name: KubeIPVS0, State: "DOWN", Addrs: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/32")}}
	b := &Interface{Name: KubeIPVS0, Flags: []string{"NOARP"}, State: "UP", Addrs: []netip.Prefix{netip.MustParsePrefix("10.0.0.2/32"), netip.MustParsePrefix("10.0.0.1/32")}}
	j := Join(a, b)
	if addrs(j) != "10.0.0.1/32 10.0.0.2/32" || j.State != "DOWN" || !j.HasFlag("NOARP") || len(a.Addrs) != 1 || a.Flags != nil {
		t.Errorf("Join = %+v, a = %+v", j, a)
	}
	if Join(nil, nil) != nil || addrs(Join(nil, b)) != addrs(b) {
		t.Error("Join with nil")
	}
}
