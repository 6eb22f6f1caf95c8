package plugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/proxyrules/kubectl-proxyrules/plugin/collect"
)

func TestSanitize(t *testing.T) {
	for in, want := range map[string]string{
		"plain text\twith tab\n":       "plain text\twith tab\n",
		"ünïcode ✓":                    "ünïcode ✓",
		"osc52 \x1b]52;c;ZXZpbA==\x07": `osc52 \x1b]52;c;ZXZpbA==\x07`,
		"title \x1b]0;pwned\x1b\\":     `title \x1b]0;pwned\x1b\`,
		"cursor \x1b[2J\x1b[H":         `cursor \x1b[2J\x1b[H`,
		"cr \r overwrite":              `cr \x0d overwrite`,
		"del \x7f":                     `del \x7f`,
		"c1 csi \u009b2J":              `c1 csi \u009b2J`,
		"raw c1 byte \x9b2J":           `raw c1 byte \x9b2J`,
		"bidi \u202eevil\u202c":        `bidi \u202eevil\u202c`,
		"colour \x1b[31mred\x1b[0m":    `colour \x1b[31mred\x1b[0m`, // sanitize keeps no SGR either
	} {
		if got := sanitize(in); got != want {
			t.Errorf("sanitize(%q) = %q, want %q", in, got, want)
		}
	}
}

// On a terminal with colour, the plugin's own styles pass and nothing else:
// not a sequence cut between two writes, not a style that hides text.
func TestSanitizingWriterKeepsOwnColours(t *testing.T) {
	var b strings.Builder
	w := &sanitizingWriter{w: &b, keepSGR: true}
	for _, chunk := range []string{"\x1b[1;3", "1mbold red\x1b[0m ", "\x1b]52;c;eA==\x07", " \x1b[8mconcealed\x1b[m", " \x1b[38;5;4mblue\x1b[0m", " ü"[:2], " ü"[2:], "\x1b"} {
		w.Write([]byte(chunk))
	}
	w.flush()
	want := "\x1b[1;31mbold red\x1b[0m " + `\x1b]52;c;eA==\x07` + ` \x1b[8mconcealed` + "\x1b[m" + " \x1b[38;5;4mblue\x1b[0m ü" + `\x1b`
	if b.String() != want {
		t.Errorf("got  %q\nwant %q", b.String(), want)
	}
}

// hostileBundle is the small fixture as a bundle whose manifest and objects
// carry terminal escape sequences.
func hostileBundle(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeBundle(t, dir, [][2]string{
		{smallFixture + "iptables/save-nft-ipv4.txt", collect.KindRuleset},
		{smallFixture + "objects.json", collect.KindObjects},
	})
	const evil = "\x1b]52;c;ZXZpbA==\x07\x1b[2J"
	objects, err := os.ReadFile(filepath.Join(dir, "objects.json"))
	if err != nil {
		t.Fatal(err)
	}
	// A node name no API server would take, as a stranger's objects.json may
	// hold: explain prints each endpoint's node.
	jsonEvil := strings.NewReplacer("\x1b", `\u001b`, "\x07", `\u0007`).Replace(evil)
	objects = []byte(strings.ReplaceAll(string(objects), `"nodeName": "node-b"`, `"nodeName": "node-b`+jsonEvil+`"`))
	if err := os.WriteFile(filepath.Join(dir, "objects.json"), objects, 0o600); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, collect.ManifestFile))
	var m collect.Manifest
	json.Unmarshal(data, &m)
	m.Warnings = append(m.Warnings, "kube-proxy's /metrics did not answer"+evil)
	m.Node = "node-a"
	for i := range m.Files {
		if m.Files[i].Path == "objects.json" {
			m.Files[i].Bytes = int64(len(objects))
		}
	}
	if err := collect.WriteManifest(dir, &m); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestTextOutputSanitized: names from the objects and warnings from
// bundle.json reach the terminal escaped, whatever the command.
func TestTextOutputSanitized(t *testing.T) {
	dir := hostileBundle(t)
	for _, args := range [][]string{
		{"explain", "svc/web", "-n", "shop", "--from-bundle", dir},
		{"triage", "--from-bundle", dir},
		{"explain", "svc/web", "-n", "shop", "--from-bundle", dir, "--color", "always"},
	} {
		out, errOut, _ := runCmd(t, nil, args...)
		if !strings.Contains(out+errOut, `\x1b]52;c;`) {
			t.Errorf("%v: the hostile text is not shown escaped:\n%s", args, out)
		}
		for _, s := range []string{out, errOut} {
			if strings.Contains(s, "\x1b]") || strings.Contains(s, "\x07") || strings.Contains(s, "\x1b[2J") {
				t.Errorf("%v: a raw escape sequence reached the terminal: %q", args, s)
			}
		}
		if args[len(args)-1] == "always" && !strings.Contains(out, "\x1b[") {
			t.Errorf("--color always lost the plugin's own colours")
		}
	}
}

// Whatever the text, what sanitize returns holds no control character but
// tab and newline, no C1 control, no bidirectional override, no invalid
// UTF-8 (a raw 0x9b byte is CSI to some terminals).
func FuzzSanitize(f *testing.F) {
	f.Add("osc52 \x1b]52;c;ZXZpbA==\x07")
	f.Add("\u202e\u009b\xff")
	f.Fuzz(func(t *testing.T, s string) {
		out := sanitize(s)
		if !utf8.ValidString(out) {
			t.Fatalf("sanitize(%q) = %q: not UTF-8", s, out)
		}
		for _, r := range out {
			if r < 0x20 && r != '\t' && r != '\n' || r == 0x7f || unsafeRune(r) {
				t.Fatalf("sanitize(%q) keeps %U", s, r)
			}
		}
	})
}

// forge is data that would print a verdict line of its own, in green.
const forge = "\ntriage node/x: HEALTHY \x1b[32mFORGED\x1b[0m\r"

// forgingBundle is the small fixture as a bundle with forge in one field:
// mutate edits objects.json (as JSON text) and the manifest.
func forgingBundle(t *testing.T, mutate func(objects string, m *collect.Manifest) string) string {
	t.Helper()
	dir := t.TempDir()
	writeBundle(t, dir, [][2]string{
		{smallFixture + "iptables/save-nft-ipv4.txt", collect.KindRuleset},
		{smallFixture + "objects.json", collect.KindObjects},
	})
	objects, err := os.ReadFile(filepath.Join(dir, "objects.json"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, collect.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	var m collect.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	objects = []byte(mutate(string(objects), &m))
	if err := os.WriteFile(filepath.Join(dir, "objects.json"), objects, 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range m.Files {
		if m.Files[i].Path == "objects.json" {
			m.Files[i].Bytes = int64(len(objects))
		}
	}
	if err := collect.WriteManifest(dir, &m); err != nil {
		t.Fatal(err)
	}
	return dir
}

// jsonText is s as it is written inside a JSON string.
func jsonText(s string) string {
	q, _ := json.Marshal(s)
	return string(q[1 : len(q)-1])
}

// TestDataCannotForgeLines: a name, an endpoint's node or a warning read
// from a file is printed with its newline, carriage return and escape
// sequences shown escaped: it cannot print a verdict line of its own, nor
// colour it, even where the plugin's own colours pass.
func TestDataCannotForgeLines(t *testing.T) {
	serviceName := func(objects string, _ *collect.Manifest) string {
		const svc = "\"name\": \"web\",\n                \"namespace\": \"shop\","
		if strings.Count(objects, svc) != 1 {
			t.Fatal("the fixture's Service shop/web moved")
		}
		return strings.Replace(objects, svc, "\"name\": \"web"+jsonText(forge)+"\",\n                \"namespace\": \"shop\",", 1)
	}
	endpointNode := func(objects string, _ *collect.Manifest) string {
		return strings.ReplaceAll(objects, `"nodeName": "node-b"`, `"nodeName": "node-b`+jsonText(forge)+`"`)
	}
	warning := func(objects string, m *collect.Manifest) string {
		m.Warnings = append(m.Warnings, "kube-proxy's /metrics did not answer"+forge)
		return objects
	}
	for _, tc := range []struct {
		name   string
		mutate func(string, *collect.Manifest) string
		args   []string
	}{
		{"service name, triage", serviceName, []string{"triage"}},
		{"service name, triage, colour", serviceName, []string{"triage", "--color", "always"}},
		{"service name, explain by address", serviceName, []string{"explain", "10.96.10.1"}},
		{"endpoint node, explain", endpointNode, []string{"explain", "svc/web", "-n", "shop"}},
		{"endpoint node, explain, colour", endpointNode, []string{"explain", "svc/web", "-n", "shop", "--color", "always"}},
		{"bundle warning, triage", warning, []string{"triage"}},
		{"bundle warning, triage, colour", warning, []string{"triage", "--color", "always"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := forgingBundle(t, tc.mutate)
			out, errOut, _ := runCmd(t, nil, append(tc.args, "--from-bundle", dir)...)
			if shown := out + errOut; !strings.Contains(shown, `\ntriage`) || !strings.Contains(shown, `\x1b[32mFORGED\x1b[0m\r`) {
				t.Errorf("the data is not shown, escaped:\n%s\n%s", out, errOut)
			}
			for _, s := range []string{out, errOut} {
				for _, line := range strings.Split(s, "\n") {
					if strings.HasPrefix(strings.TrimSpace(line), "triage node/x") {
						t.Errorf("the data printed a line of its own: %q", line)
					}
				}
				if strings.Contains(s, "\x1b[32mFORGED") || strings.Contains(s, "\r") {
					t.Errorf("a raw escape sequence or carriage return of the data reached the terminal: %q", s)
				}
			}
		})
	}
}

func TestEscapeData(t *testing.T) {
	for in, want := range map[string]string{
		"web":                  "web",
		"ünïcode ✓":            "ünïcode ✓",
		"a\nb\rc\td":           `a\nb\rc\td`,
		"\x1b[32mgreen\x1b[0m": `\x1b[32mgreen\x1b[0m`,
		"c1 \u009b2J \x9b":     `c1 \u009b2J \x9b`,
		"bidi \u202eevil":      `bidi \u202eevil`,
	} {
		if got := escapeData(in); got != want {
			t.Errorf("escapeData(%q) = %q, want %q", in, got, want)
		}
	}
}

// escapeReport escapes a report in place and never writes what the report
// shares: the objects and other reports keep their data.
func TestEscapeReportCopiesShared(t *testing.T) {
	type inner struct{ Name string }
	type report struct {
		Title  string
		Shared *inner
		Items  []inner
		ByName map[string]*inner
		Any    any
		hidden string
	}
	shared := &inner{Name: "a\nb"}
	items := []inner{{"ok"}, {"c\x1b[2J"}}
	byName := map[string]*inner{"k\n": shared}
	rep := &report{Title: "t\r", Shared: shared, Items: items, ByName: byName, Any: inner{"d\n"}, hidden: "h\n"}
	escapeReport(rep)
	want := report{Title: `t\r`, Shared: &inner{`a\nb`}, Items: []inner{{"ok"}, {`c\x1b[2J`}}, ByName: map[string]*inner{`k\n`: {`a\nb`}}, Any: inner{`d\n`}, hidden: "h\n"}
	if diff := cmp.Diff(want, *rep, cmp.AllowUnexported(report{})); diff != "" {
		t.Errorf("escaped report (-want +got):\n%s", diff)
	}
	if shared.Name != "a\nb" || items[1].Name != "c\x1b[2J" || byName["k\n"] != shared {
		t.Errorf("escapeReport wrote what the report shares: %q %q %v", shared.Name, items[1].Name, byName)
	}
}
