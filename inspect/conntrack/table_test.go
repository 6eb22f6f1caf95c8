package conntrack

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// The fixtures are what the real kernel and conntrack 1.4.7 printed in a
// throw-away namespace (hack/gen-conntrack-fixtures.sh; testdata/README.md).
func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustRead(t testing.TB, in []byte, lim Limits) *Table {
	t.Helper()
	tab, err := ReadTable(bytes.NewReader(in), lim, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

var a = netip.MustParseAddr

func tup(src, dst string, sport, dport uint16, packets, bytes uint64) Tuple {
	return Tuple{Src: a(src), Dst: a(dst), SPort: sport, DPort: dport, Packets: packets, Bytes: bytes, HasCounters: true}
}

// procEntries are the entries of testdata/proc-nf_conntrack.txt, as the
// generator made them: six inserted with `conntrack -I`, two real UDP flows
// over lo (accounting on).
var procEntries = []Entry{
	{Family: 4, Proto: "udp", ProtoNo: 17, Timeout: 119, Orig: tup("10.250.31.6", "10.250.31.10", 40005, 53, 0, 0),
		Reply: tup("10.250.31.21", "10.250.31.6", 53, 40005, 0, 0), Flags: FlagAssured, Use: 2},
	{Family: 6, Proto: "tcp", ProtoNo: 6, Timeout: 119, State: "SYN_SENT", Orig: tup("fd00:31::5", "fd00:31::b", 40004, 443, 0, 0),
		Reply: tup("fd00:31::15", "fd00:31::5", 8443, 40004, 0, 0), Flags: FlagUnreplied, Zone: 3, Use: 2},
	{Family: 6, Proto: "udp", ProtoNo: 17, Timeout: 29, Orig: tup("fd00:31::5", "fd00:31::a", 40003, 53, 0, 0),
		Reply: tup("fd00:31::14", "fd00:31::5", 53, 40003, 0, 0), Flags: FlagUnreplied, Use: 2},
	{Family: 6, Proto: "udp", ProtoNo: 17, Timeout: 29, Orig: tup("fd00:31::1", "fd00:31::1", 38207, 5353, 1, 53),
		Reply: tup("fd00:31::1", "fd00:31::1", 5353, 38207, 0, 0), Flags: FlagUnreplied, Use: 2},
	{Family: 4, Proto: "tcp", ProtoNo: 6, Timeout: 86399, State: "ESTABLISHED", Orig: tup("10.250.31.5", "10.250.31.11", 40002, 80, 0, 0),
		Reply: tup("10.250.31.22", "10.250.31.5", 8080, 40002, 0, 0), Flags: FlagAssured, Mark: 16384, Use: 2},
	{Family: 4, Proto: "udp", ProtoNo: 17, Timeout: 29, Orig: tup("10.250.31.5", "10.250.31.10", 40001, 53, 0, 0),
		Reply: tup("10.250.31.20", "10.250.31.5", 53, 40001, 0, 0), Flags: FlagUnreplied, Use: 2},
	{Family: 4, Proto: "icmp", ProtoNo: 1, Timeout: 29,
		Orig:  Tuple{Src: a("10.250.31.5"), Dst: a("10.250.31.10"), Type: 8, ICMPID: 77, HasCounters: true},
		Reply: Tuple{Src: a("10.250.31.10"), Dst: a("10.250.31.5"), Type: 0, ICMPID: 77, HasCounters: true},
		Flags: FlagUnreplied, Use: 2},
	{Family: 4, Proto: "udp", ProtoNo: 17, Timeout: 29, Orig: tup("10.250.31.1", "10.250.31.1", 33051, 5353, 1, 33),
		Reply: tup("10.250.31.1", "10.250.31.1", 5353, 33051, 0, 0), Flags: FlagUnreplied, Use: 2},
}

func TestReadTableProcFixture(t *testing.T) {
	tab := mustRead(t, readFixture(t, "proc-nf_conntrack.txt"), Limits{})
	if tab.Format != FormatProc || tab.Shown != -1 || len(tab.Warnings) != 0 || tab.Truncated.Incomplete {
		t.Errorf("format %q shown %d warnings %q truncated %+v", tab.Format, tab.Shown, tab.Warnings, tab.Truncated)
	}
	if len(tab.Entries) != len(procEntries) {
		t.Fatalf("%d entries, want %d", len(tab.Entries), len(procEntries))
	}
	for i, want := range procEntries {
		if got := tab.Entries[i]; !reflect.DeepEqual(got, want) {
			t.Errorf("entry %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

// normalized drops what differs between the forms of one table: use= (the
// reader holds a reference while /proc prints) and the seconds that pass
// between the generator's reads.
func normalized(es []Entry, family uint8) []string {
	var out []string
	for _, e := range es {
		if family != 0 && e.Family != family {
			continue
		}
		e.Use = 0
		e.Timeout = e.Timeout / 10 // fixture reads are within a second or two
		out = append(out, e.String())
	}
	sort.Strings(out)
	return out
}

// Every form the real tool printed holds the same entries as /proc, as many
// as conntrack said it showed.
func TestReadTableForms(t *testing.T) {
	proc := mustRead(t, readFixture(t, "proc-nf_conntrack.txt"), Limits{})
	for _, tc := range []struct {
		file   string
		format Format
		family uint8
	}{
		{"conntrack-L.txt", FormatDefault, 0},
		{"conntrack-L-extended.txt", FormatExtended, 0},
		{"conntrack-L-ipv6.txt", FormatDefault, 6},
		{"conntrack-L-extended-ipv6.txt", FormatExtended, 6},
	} {
		t.Run(tc.file, func(t *testing.T) {
			tab := mustRead(t, readFixture(t, tc.file), Limits{})
			if tab.Format != tc.format || len(tab.Warnings) != 0 {
				t.Errorf("format %q, warnings %q", tab.Format, tab.Warnings)
			}
			if tab.Shown != int64(len(tab.Entries)) {
				t.Errorf("conntrack showed %d, read %d", tab.Shown, len(tab.Entries))
			}
			if got, want := normalized(tab.Entries, 0), normalized(proc.Entries, tc.family); !reflect.DeepEqual(got, want) {
				t.Errorf("entries differ from /proc's:\n got %q\nwant %q", got, want)
			}
		})
	}
}

// pasted turns a listing into what a terminal paste gives: CRLF, the
// prompt and command, indentation; quoted, as a mail or an issue quotes it.
func pasted(in []byte, command string, quoted bool) []byte {
	var b bytes.Buffer
	q := ""
	if quoted {
		q = "> "
	}
	b.WriteString(q + "root@node-a:~# " + command + "\r\n")
	for i, l := range strings.Split(strings.TrimRight(string(in), "\n"), "\n") {
		b.WriteString(q)
		if i%2 == 0 {
			b.WriteString("   ")
		}
		b.WriteString(l + "\r\n")
	}
	b.WriteString(q + "root@node-a:~# \r\n")
	return b.Bytes()
}

func TestReadTablePasted(t *testing.T) {
	for _, tc := range []struct {
		file, command string
		quoted        bool
	}{
		{"proc-nf_conntrack.txt", "cat /proc/net/nf_conntrack", false},
		{"conntrack-L.txt", "conntrack -L", false},
		{"conntrack-L-extended-ipv6.txt", "conntrack -L -f ipv6 -o extended", false},
		{"conntrack-L-extended.txt", "conntrack -L -o extended", true},
	} {
		t.Run(tc.file, func(t *testing.T) {
			in := readFixture(t, tc.file)
			want := mustRead(t, in, Limits{})
			got := mustRead(t, pasted(in, tc.command, tc.quoted), Limits{})
			if len(got.Warnings) != 0 || !reflect.DeepEqual(got.Entries, want.Entries) || got.Shown != want.Shown {
				t.Errorf("pasted: %d entries (want %d), shown %d, warnings %q", len(got.Entries), len(want.Entries), got.Shown, got.Warnings)
			}
		})
	}
}

// Every entry printed by AppendText reads back to itself.
func TestAppendTextRoundTrip(t *testing.T) {
	for _, file := range []string{"proc-nf_conntrack.txt", "conntrack-L.txt", "conntrack-L-extended.txt"} {
		for _, e := range mustRead(t, readFixture(t, file), Limits{}).Entries {
			back := mustRead(t, []byte(e.String()), Limits{})
			if len(back.Entries) != 1 || !reflect.DeepEqual(back.Entries[0], e) {
				t.Errorf("%s: %s read back as %+v %q", file, e, back.Entries, back.Warnings)
			}
		}
	}
}

func TestReadTableCaps(t *testing.T) {
	in := readFixture(t, "conntrack-L-extended.txt") // 8 entries, trailer first
	udp := func(e *Entry) bool { return e.Proto == "udp" }
	for _, tc := range []struct {
		name     string
		lim      Limits
		keep     func(*Entry) bool
		kept     int
		leftOut  int64
		unread   bool
		warnings []string
	}{
		{name: "no cap", kept: 8},
		{name: "entries", lim: Limits{MaxEntries: 3}, kept: 3, leftOut: 5,
			warnings: []string{"INCOMPLETE: 3 entries kept (the cap), 5 more left out"}},
		{name: "filtered", keep: udp, kept: 5},
		{name: "filtered and capped", lim: Limits{MaxEntries: 2}, keep: udp, kept: 2, leftOut: 3,
			warnings: []string{"INCOMPLETE: 2 entries kept (the cap), 3 more left out"}},
		// the trailer (68 bytes) and two entries (194 and 210) fit
		{name: "bytes", lim: Limits{MaxBytes: 600}, kept: 2, unread: true, warnings: []string{
			"INCOMPLETE: reading stopped after 472 bytes (the cap); the rest was not read"}},
		{name: "bytes, all", lim: Limits{MaxBytes: int64(len(in))}, kept: 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab, err := ReadTable(bytes.NewReader(in), tc.lim, tc.keep)
			if err != nil {
				t.Fatal(err)
			}
			tr := tab.Truncated
			if len(tab.Entries) != tc.kept || tr.EntriesLeftOut != tc.leftOut || tr.Unread != tc.unread ||
				tr.Incomplete != (tc.leftOut > 0 || tc.unread) {
				t.Errorf("kept %d, truncation %+v", len(tab.Entries), tr)
			}
			if !reflect.DeepEqual(tab.Warnings, tc.warnings) {
				t.Errorf("warnings %q, want %q", tab.Warnings, tc.warnings)
			}
		})
	}
}

const goodLine = "ipv4     2 udp      17 29 src=10.250.31.5 dst=10.250.31.10 sport=40001 dport=53 [UNREPLIED] src=10.250.31.20 dst=10.250.31.5 sport=53 dport=40001 mark=0 zone=0 use=2"

func TestReadTableGarbage(t *testing.T) {
	long := goodLine + strings.Repeat(" labels=0x1", 1000) // 11 kB: over the line cap
	for _, tc := range []struct {
		name      string
		in        string
		kept      int
		warnings  int // lines not understood, cap warnings
		longLines int64
	}{
		{"empty", "", 0, 0, 0},
		{"blank lines", "\n\n  \r\n", 0, 0, 0},
		{"CRLF", goodLine + "\r\n" + goodLine + "\r\n", 2, 0, 0},
		{"no final newline", goodLine + "\n" + goodLine, 2, 0, 0},
		{"binary", "\x00\x01\xff\xfe\x89PNG\r\n\x1a\n" + goodLine + "\n", 1, 2, 0},
		{"NUL in a line", strings.Replace(goodLine, "sport", "sp\x00rt", 1) + "\n", 1, 0, 0},
		{"truncated entry", goodLine + "\n" + goodLine[:90] + "\n", 1, 1, 0},
		{"truncated address", goodLine[:strings.Index(goodLine, "10.250.31.20")+5] + "\n", 0, 1, 0},
		{"huge line", goodLine + "\n" + long + "\n" + goodLine + "\n", 2, 1, 1},
		{"huge line over the buffer", strings.Repeat("x", 200_000) + "\n" + goodLine + "\n", 1, 1, 1},
		{"huge last line, no newline", goodLine + "\n" + strings.Repeat("y", 100_000), 1, 1, 1},
		{"mixed families", strings.Replace(goodLine, "dst=10.250.31.10", "dst=fd00::1", 1) + "\n", 0, 1, 0},
		{"ipv6 prefix, ipv4 addresses", strings.Replace(goodLine, "ipv4     2", "ipv6     10", 1) + "\n", 0, 1, 0},
		{"port out of range", strings.Replace(goodLine, "dport=53", "dport=65536", 1) + "\n", 0, 1, 0},
		{"three tuples", goodLine[:len(goodLine)-20] + " src=1.2.3.4 dst=1.2.3.4 mark=0\n", 0, 1, 0},
		{"leading zero octet", strings.Replace(goodLine, "10.250.31.5 ", "010.250.31.5 ", 1) + "\n", 0, 1, 0},
		{"timestamps", strings.Replace(goodLine, "mark=0", "[start=Sat Dec  5 05:01:20 2026] delta-time=3 mark=0", 1) + "\n", 1, 0, 0},
		{"unknown flag and key", strings.Replace(goodLine, "mark=0", "[WEIRD] labels=0x1 mark=0", 1) + "\n", 1, 0, 0},
		{"many bad lines", strings.Repeat("garbage\n", 50), 0, 11, 0},
		{"shown count disagrees", "conntrack v1.4.7 (conntrack-tools): 3 flow entries have been shown.\n" + goodLine + "\n", 1, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab := mustRead(t, []byte(tc.in), Limits{})
			if len(tab.Entries) != tc.kept || len(tab.Warnings) != tc.warnings || tab.Truncated.LongLines != tc.longLines {
				t.Errorf("kept %d (want %d), long lines %d (want %d), warnings %q (want %d)",
					len(tab.Entries), tc.kept, tab.Truncated.LongLines, tc.longLines, tab.Warnings, tc.warnings)
			}
			if tc.longLines > 0 && !strings.HasPrefix(tab.Warnings[len(tab.Warnings)-1], "INCOMPLETE: ") {
				t.Errorf("a long line left out is not INCOMPLETE: %q", tab.Warnings)
			}
		})
	}
}

func TestFlagsString(t *testing.T) {
	if got := (FlagUnreplied | FlagAssured).String(); got != "UNREPLIED,ASSURED" {
		t.Errorf("got %q", got)
	}
}
