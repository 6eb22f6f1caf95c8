package ipset

import (
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// fixtureSave is kube-proxy v1.37.2's sets (hack/gen-fixtures-ipvs.sh);
// internal/fixture is not imported: it brings in every stage.
func fixtureSave(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "fixtures", "small-v1.37", "ipvs", "ipset-save.txt"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func testdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func read(t testing.TB, in []byte, lim Limits) *Sets {
	t.Helper()
	s, err := Read(strings.NewReader(string(in)), lim)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// kube-proxy's sets read alike from its save and from the real ipset's
// list of the same sets: names, types, families, members.
func TestReadKubeProxySets(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		format  Format
		entries int64 // KUBE-CLUSTER-IP's header count
	}{
		{"save", fixtureSave(t), FormatSave, -1},
		{"list", testdata(t, "ipset-list-small-v1.37.txt"), FormatList, 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := read(t, tc.in, Limits{})
			if s.Format != tc.format || len(s.Sets) != 34 || len(s.Warnings) != 0 || s.Truncated.Incomplete {
				t.Fatalf("format %s, %d sets, warnings %q, %+v; want %s, 34 sets, none", s.Format, len(s.Sets), s.Warnings, s.Truncated, tc.format)
			}
			ci := s.Set("KUBE-CLUSTER-IP")
			if ci == nil || ci.Type != "hash:ip,port" || ci.Family != "inet" || ci.HashSize != 1024 || ci.MaxElem != 65536 ||
				ci.Entries != tc.entries || !ci.Listed || len(ci.Members) != 20 {
				t.Fatalf("KUBE-CLUSTER-IP = %+v", ci)
			}
			if !hasMember(ci, Member{Raw: "10.96.0.10,udp:53", IP: netip.MustParseAddr("10.96.0.10"), Proto: "udp", Port: 53, HasPort: true}) ||
				!hasMember(ci, Member{Raw: "10.96.40.1,sctp:3868", IP: netip.MustParseAddr("10.96.40.1"), Proto: "sctp", Port: 3868, HasPort: true}) {
				t.Errorf("KUBE-CLUSTER-IP members %+v", ci.Members)
			}
			lb := s.Set("KUBE-6-LOOP-BACK")
			a := netip.MustParseAddr("fd00:10:244::151")
			if lb == nil || lb.Family != "inet6" || !hasMember(lb, Member{Raw: "fd00:10:244::151,tcp:9090,fd00:10:244::151", IP: a, Proto: "tcp", Port: 9090, HasPort: true, IP2: a}) {
				t.Errorf("KUBE-6-LOOP-BACK = %+v", lb)
			}
			np := s.Set("KUBE-NODE-PORT-TCP")
			if np == nil || np.Type != "bitmap:port" || np.Family != "" || np.Range != "0-65535" || len(np.Members) != 6 ||
				!hasMember(np, Member{Raw: "30080", Port: 30080, HasPort: true}) {
				t.Errorf("KUBE-NODE-PORT-TCP = %+v", np)
			}
			ips := s.Set("KUBE-IPVS-IPS")
			if ips == nil || len(ips.Members) != 19 || !hasMember(ips, Member{Raw: "203.0.113.50", IP: netip.MustParseAddr("203.0.113.50")}) {
				t.Errorf("KUBE-IPVS-IPS = %+v", ips)
			}
			if s.Set("KUBE-NONE") != nil {
				t.Error("Set(KUBE-NONE) found a set")
			}
		})
	}
}

func hasMember(s *Set, want Member) bool {
	for _, m := range s.Members {
		if m == want {
			return true
		}
	}
	return false
}

// The members of the types kube-proxy does not write, and the options,
// as the real ipset printed them (testdata/ipset-*-extra.txt).
func TestReadMembers(t *testing.T) {
	ip := netip.MustParseAddr
	for _, file := range []string{"ipset-list-extra.txt", "ipset-save-extra.txt"} {
		s := read(t, testdata(t, file), Limits{})
		tests := []struct {
			set  string
			want Member
		}{
			{"SRC-CIDR", Member{Raw: "198.51.100.10,tcp:443,10.1.0.0/16", IP: ip("198.51.100.10"), Proto: "tcp", Port: 443, HasPort: true, Net: netip.MustParsePrefix("10.1.0.0/16")}},
			// a host network is printed without its length
			{"SRC-CIDR", Member{Raw: "198.51.100.10,tcp:443,192.0.2.7", IP: ip("198.51.100.10"), Proto: "tcp", Port: 443, HasPort: true, Net: netip.MustParsePrefix("192.0.2.7/32")}},
			{"SRC-CIDR6", Member{Raw: "fd00::1,sctp:3868,fd00::5", IP: ip("fd00::1"), Proto: "sctp", Port: 3868, HasPort: true, Net: netip.MustParsePrefix("fd00::5/128")}},
			{"WITH-COMMENT", Member{Raw: "10.96.0.1,tcp:443", IP: ip("10.96.0.1"), Proto: "tcp", Port: 443, HasPort: true, Comment: "default/kubernetes:https"}},
			{"ODD", Member{Raw: "10.96.0.1,icmp:echo-request", IP: ip("10.96.0.1"), Proto: "icmp"}},
			{"ODD", Member{Raw: "10.96.0.2,gre:0", IP: ip("10.96.0.2"), Proto: "gre", HasPort: true}},
		}
		for _, tc := range tests {
			if set := s.Set(tc.set); set == nil || !hasMember(set, tc.want) {
				t.Errorf("%s: set %s lacks %+v: %+v", file, tc.set, tc.want, set)
			}
		}
		wc, odd := s.Set("WITH-COMMENT"), s.Set("ODD")
		if !wc.Comment || odd.Comment || strings.Join(odd.Options, "|") != "timeout 300|counters" || len(s.Warnings) != 0 {
			t.Errorf("%s: options %v %v %q, warnings %q", file, wc.Comment, odd.Comment, odd.Options, s.Warnings)
		}
	}
}

// Pasted: a prompt and the command, CRLF, indentation; a list and a save
// of the same sets pasted together are one set each.
func TestReadPasted(t *testing.T) {
	list, save := string(testdata(t, "ipset-list-small-v1.37.txt")), string(fixtureSave(t))
	crlf := func(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }
	indent := func(s string) string { return "  " + strings.ReplaceAll(s, "\n", "\n  ") }
	tests := []struct {
		name, in string
		format   Format
	}{
		{"prompt", "[root@node-a ~]# ipset list\n" + list + "[root@node-a ~]#\n", FormatList},
		{"crlf", "$ sudo ipset save\r\n" + crlf(save), FormatSave},
		{"indented", indent("# ipset list\n" + list), FormatList},
		{"both", "$ ipset list\n" + list + "$ ipset save\n" + save, FormatMixed},
		{"both-crlf", crlf(save + "\n" + list), FormatMixed},
	}
	want := names(read(t, []byte(list), Limits{}))
	for _, tc := range tests {
		s := read(t, []byte(tc.in), Limits{})
		if s.Format != tc.format || names(s) != want || len(s.Warnings) != 0 {
			t.Errorf("%s: format %s, warnings %q, sets %s; want %s, none, %s", tc.name, s.Format, s.Warnings, names(s), tc.format, want)
		}
		if ci := s.Set("KUBE-CLUSTER-IP"); ci == nil || len(ci.Members) != 20 || ci.Entries != 20 && tc.format != FormatSave {
			t.Errorf("%s: KUBE-CLUSTER-IP %+v", tc.name, ci)
		}
	}
}

// names lists each set with its sorted members.
func names(s *Sets) string {
	var b strings.Builder
	sets := append([]Set(nil), s.Sets...)
	sort.Slice(sets, func(i, j int) bool { return sets[i].Name < sets[j].Name })
	for _, set := range sets {
		var ms []string
		for _, m := range set.Members {
			ms = append(ms, m.Raw)
		}
		sort.Strings(ms)
		b.WriteString(set.Name + "=" + strings.Join(ms, ",") + ";")
	}
	return b.String()
}

func TestReadTerse(t *testing.T) {
	s := read(t, testdata(t, "ipset-list-terse.txt"), Limits{})
	ci := s.Set("KUBE-CLUSTER-IP")
	if len(s.Sets) != 34 || ci == nil || ci.Listed || ci.Entries != 20 || len(ci.Members) != 0 || len(s.Warnings) != 0 {
		t.Errorf("%d sets, KUBE-CLUSTER-IP %+v, warnings %q", len(s.Sets), ci, s.Warnings)
	}
}

func TestReadWarnings(t *testing.T) {
	tests := []struct{ in, want string }{
		{"create A hash:ip,port family inet\nadd A 10.0.0.1,tcp:99999\n", `member not understood`},
		{"create A hash:ip,port family inet\nadd A nonsense\n", `member not understood`},
		{"add B 10.0.0.1\n", "not created before"},
		{"create A hash:ip family inet\nadd A\t\n", "add without a member"},
		// a trailing comma leaves the network out, it does not drop it
		{"create A hash:ip,port,net family inet\nadd A 10.0.0.1,tcp:80,\n", `member not understood`},
		// a type ipset does not have ("hash:" or "bitmap:" missing)
		{"Name: A\nType: :ip,port\nMembers:\n10.0.0.1,80\n", `set type ":ip,port" not understood`},
		{"Name: A\nType: hash:ip,port,net\nMembers:\n\ncreate A hash:ip\nadd A 10.0.0.1\n", `set A is "hash:ip,port,net" in one listing and "hash:ip" in another`},
		{"Name: A\nType: hash:ip\nType: hash:ip,port\n", `set A given a second type "hash:ip,port", "hash:ip" kept`},
		{"Name: A\nType: hash:ip\nGarbage here\n", "not an ipset"},
		{"Name: A\nType: hash:ip\nNumber of entries: 3\nMembers:\n10.0.0.1\n", "3 entries, 1 members shown"},
	}
	for _, tc := range tests {
		s := read(t, []byte(tc.in), Limits{})
		if !strings.Contains(strings.Join(s.Warnings, "\n"), tc.want) {
			t.Errorf("%q: warnings %q, want %q", tc.in, s.Warnings, tc.want)
		}
	}
	// a member not understood is kept raw
	s := read(t, []byte(tests[0].in), Limits{})
	if m := s.Set("A").Members; len(m) != 1 || m[0] != (Member{Raw: "10.0.0.1,tcp:99999"}) {
		t.Errorf("members %+v", m)
	}
}

func TestReadLimits(t *testing.T) {
	save := fixtureSave(t)
	tests := []struct {
		name  string
		in    []byte
		lim   Limits
		sets  int
		check func(Truncation) bool
	}{
		{"sets", save, Limits{MaxSets: 3}, 3, func(tr Truncation) bool { return tr.SetsLeftOut == 31 && tr.MembersLeftOut > 0 }},
		{"members", save, Limits{MaxMembers: 5}, 34, func(tr Truncation) bool { return tr.MembersLeftOut == 75 }},
		{"bytes", save, Limits{MaxBytes: 200}, 1, func(tr Truncation) bool { return tr.Unread && tr.BytesRead <= 200 }},
		{"lines", save, Limits{MaxLineBytes: 100}, 10, func(tr Truncation) bool { return tr.LongLines == 24 && tr.MembersLeftOut == 69 }},
		{"list-sets", testdata(t, "ipset-list-small-v1.37.txt"), Limits{MaxSets: 2}, 2, func(tr Truncation) bool { return tr.SetsLeftOut == 32 && tr.MembersLeftOut == 78 }},
	}
	for _, tc := range tests {
		s := read(t, tc.in, tc.lim)
		if len(s.Sets) != tc.sets || !s.Truncated.Incomplete || !tc.check(s.Truncated) || !strings.HasPrefix(s.Warnings[0], "INCOMPLETE") {
			t.Errorf("%s: %d sets, %+v, warnings %q", tc.name, len(s.Sets), s.Truncated, s.Warnings)
		}
	}
}

func TestJoin(t *testing.T) {
	list, save := read(t, testdata(t, "ipset-list-small-v1.37.txt"), Limits{}), read(t, fixtureSave(t), Limits{})
	j := Join(nil, save, list)
	ci := j.Set("KUBE-CLUSTER-IP")
	if j.Format != FormatMixed || len(j.Sets) != 34 || names(j) != names(list) || ci.Entries != 20 || ci.Revision != 7 || ci.HashSize != 1024 {
		t.Errorf("Join: %s, %d sets, KUBE-CLUSTER-IP %+v", j.Format, len(j.Sets), ci)
	}
	if save.Set("KUBE-CLUSTER-IP").Entries != -1 || Join(nil) != nil {
		t.Error("Join changed its input, or Join(nil) is not nil")
	}
}
