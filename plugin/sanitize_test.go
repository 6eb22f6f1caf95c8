package plugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

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
