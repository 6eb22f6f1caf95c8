package collect

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// testManifest is a manifest with files in the bundle's root and below.
func testManifest() *Manifest {
	return &Manifest{
		Node:        testNode,
		CollectedAt: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC),
		Via:         ViaDebugPod,
		Namespace:   "default",
		Pod:         testDebugPod,
		Image:       testImage,
		ProxyMode:   "iptables",
		Backend:     "nf_tables",
		Scope:       "full",
		Files: []BundleFile{
			{Path: "objects.json", Kind: KindObjects, Bytes: 3},
			{Path: "iptables-nft-save.txt", Kind: KindRuleset, Command: "iptables-nft-save", Bytes: 22, Seconds: 1.5},
			{Path: "more/metrics.txt", Kind: KindMetrics, Bytes: 9, Error: "exit status 1", Partial: true},
		},
		Warnings: []string{"kube-proxy's /configz did not answer"},
	}
}

var testContents = map[string]string{
	"objects.json":          "{}\n",
	"iptables-nft-save.txt": "*nat\n:KUBE-SERVICES -\nCOMMIT\n",
	"more/metrics.txt":      "# metrics",
}

// writeTestBundle writes a bundle directory and returns its manifest.
func writeTestBundle(t *testing.T, dir string) *Manifest {
	t.Helper()
	for name, data := range testContents {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := testManifest()
	if err := WriteManifest(dir, m); err != nil {
		t.Fatalf("WriteManifest: %v", err)
	}
	if m.APIVersion != BundleAPIVersion || m.Kind != "Bundle" {
		t.Errorf("WriteManifest set apiVersion %q, kind %q", m.APIVersion, m.Kind)
	}
	return m
}

// isolateTemp points os.MkdirTemp at a fresh directory and returns it, so
// that a test can see what OpenBundle leaves there.
func isolateTemp(t *testing.T) string {
	t.Helper()
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	return tmp
}

func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestBundleRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		archive string // "" opens the directory
	}{
		{name: "directory"},
		{name: "tar.gz", archive: "node-a.tar.gz"},
		{name: "tgz", archive: "node-a.tgz"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tmp := isolateTemp(t)
			work := t.TempDir()
			dir := filepath.Join(work, "node-a")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			want := writeTestBundle(t, dir)
			name := dir
			if tc.archive != "" {
				name = filepath.Join(work, tc.archive)
				if err := WriteTarGz(dir, name); err != nil {
					t.Fatalf("WriteTarGz: %v", err)
				}
				if !IsArchiveName(name) {
					t.Errorf("IsArchiveName(%q) = false", name)
				}
				// Every entry under one top directory named like the archive.
				for _, h := range readTarHeaders(t, name) {
					if !strings.HasPrefix(h.Name, "node-a/") || h.Typeflag != tar.TypeReg {
						t.Errorf("archive entry %q (type %c), want regular files under node-a/", h.Name, h.Typeflag)
					}
				}
			}
			b, err := OpenBundle(context.Background(), name, DefaultLimits)
			if err != nil {
				t.Fatalf("OpenBundle: %v", err)
			}
			if diff := cmp.Diff(*want, b.Manifest); diff != "" {
				t.Errorf("manifest (-written +read):\n%s", diff)
			}
			for _, f := range b.Manifest.Files {
				got, err := os.ReadFile(b.Path(f))
				if err != nil {
					t.Errorf("%s: %v", f.Path, err)
					continue
				}
				if string(got) != testContents[f.Path] {
					t.Errorf("%s = %q, want %q", f.Path, got, testContents[f.Path])
				}
			}
			extracted := b.Dir
			if tc.archive == "" && extracted != dir {
				t.Errorf("Dir = %q, want %q", extracted, dir)
			}
			b.Close()
			if tc.archive == "" {
				if _, err := os.Stat(filepath.Join(dir, ManifestFile)); err != nil {
					t.Errorf("Close touched the bundle directory: %v", err)
				}
			} else if _, err := os.Stat(extracted); !os.IsNotExist(err) {
				t.Errorf("Close left %s (%v)", extracted, err)
			}
			if left := dirEntries(t, tmp); len(left) > 0 {
				t.Errorf("left in the temporary directory: %v", left)
			}
		})
	}
}

func readTarHeaders(t *testing.T, name string) []*tar.Header {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var hs []*tar.Header
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return hs
		}
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
}

type tarEntry struct {
	name, body, link string
	typ              byte
}

func writeTarGz(t *testing.T, name string, entries ...tarEntry) {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		h := &tar.Header{Name: e.name, Typeflag: typ, Mode: 0o644, Linkname: e.link, ModTime: time.Unix(0, 0)}
		if typ == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			if _, err := io.WriteString(tw, e.body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

const okManifest = `{"apiVersion":"proxyrules.kubectl.io/v1alpha1","kind":"Bundle","node":"node-a","via":"debug-pod","scope":"full","files":[{"path":"rules.txt","kind":"ruleset","bytes":1}]}`

func TestOpenBundleErrors(t *testing.T) {
	manifestDir := func(manifest string) func(t *testing.T, work string) string {
		return func(t *testing.T, work string) string {
			if err := os.WriteFile(filepath.Join(work, ManifestFile), []byte(manifest), 0o644); err != nil {
				t.Fatal(err)
			}
			return work
		}
	}
	archive := func(entries ...tarEntry) func(t *testing.T, work string) string {
		return func(t *testing.T, work string) string {
			name := filepath.Join(work, "node-a.tar.gz")
			writeTarGz(t, name, entries...)
			return name
		}
	}
	manifest := tarEntry{name: "node-a/" + ManifestFile, body: okManifest}
	tests := []struct {
		name  string
		build func(t *testing.T, work string) string // returns what to open
		want  string
	}{
		{
			name:  "missing",
			build: func(t *testing.T, work string) string { return filepath.Join(work, "nope") },
			want:  "no such file",
		},
		{
			name:  "directory without bundle.json",
			build: func(t *testing.T, work string) string { return work },
			want:  "not a bundle",
		},
		{
			name: "not gzip",
			build: func(t *testing.T, work string) string {
				name := filepath.Join(work, "node-a.tar.gz")
				if err := os.WriteFile(name, []byte("*nat\nCOMMIT\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return name
			},
			want: "not a .tar.gz",
		},
		{
			name:  "archive without bundle.json",
			build: archive(tarEntry{name: "node-a/rules.txt", body: "x"}),
			want:  "not a bundle",
		},
		{
			name:  "dot-dot entry",
			build: archive(manifest, tarEntry{name: "../evil", body: "x"}),
			want:  "unexpected entry",
		},
		{
			name:  "dot-dot below the top directory",
			build: archive(manifest, tarEntry{name: "node-a/../../evil", body: "x"}),
			want:  "unexpected entry",
		},
		{
			name:  "symlink entry",
			build: archive(manifest, tarEntry{name: "node-a/rules.txt", link: "/etc/passwd", typ: tar.TypeSymlink}),
			want:  "unexpected entry",
		},
		{
			name:  "hard link entry",
			build: archive(manifest, tarEntry{name: "node-a/rules.txt", link: "/etc/passwd", typ: tar.TypeLink}),
			want:  "unexpected entry",
		},
		{
			name:  "file path ../x",
			build: manifestDir(strings.Replace(okManifest, `"rules.txt"`, `"../x"`, 1)),
			want:  `bad file path "../x"`,
		},
		{
			name:  "absolute file path",
			build: manifestDir(strings.Replace(okManifest, `"rules.txt"`, `"/etc/passwd"`, 1)),
			want:  `bad file path "/etc/passwd"`,
		},
		{
			name:  "file path ../x in an archive",
			build: archive(tarEntry{name: "node-a/" + ManifestFile, body: strings.Replace(okManifest, `"rules.txt"`, `"../x"`, 1)}),
			want:  `bad file path "../x"`,
		},
		{
			name:  "kind not Bundle",
			build: manifestDir(strings.Replace(okManifest, `"kind":"Bundle"`, `"kind":"List"`, 1)),
			want:  `kind "List", want Bundle`,
		},
		{
			name:  "no kind",
			build: manifestDir(`{"node":"node-a"}`),
			want:  `kind "", want Bundle`,
		},
		{
			name:  "not JSON",
			build: manifestDir("apiVersion: v1\n"),
			want:  ManifestFile,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tmp := isolateTemp(t)
			work := t.TempDir()
			b, err := OpenBundle(context.Background(), tc.build(t, work), DefaultLimits)
			if err == nil {
				b.Close()
				t.Fatalf("OpenBundle succeeded (files %+v), want an error mentioning %q", b.Manifest.Files, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("OpenBundle: %v\nwant it to mention %q", err, tc.want)
			}
			// Nothing extracted is left behind, nothing escaped.
			if left := dirEntries(t, tmp); len(left) > 0 {
				t.Errorf("left in the temporary directory: %v", left)
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(work), "evil")); err == nil {
				t.Errorf("an archive entry escaped to %s", filepath.Join(filepath.Dir(work), "evil"))
			}
		})
	}
}

func TestIsArchiveName(t *testing.T) {
	for name, want := range map[string]bool{
		"node-a.tar.gz": true, "out/node-a.tgz": true, "node-a": false, "node-a.tar": false, "node-a.gz": false,
	} {
		if got := IsArchiveName(name); got != want {
			t.Errorf("IsArchiveName(%q) = %v, want %v", name, got, want)
		}
	}
}

// rawTarHeader is one ustar header block, written by hand: the archive/tar
// writer refuses to write the hostile entries these tests need.
func rawTarHeader(name string, typ byte, size int64) []byte {
	b := make([]byte, 512)
	copy(b[0:100], name)
	copy(b[100:108], "0000644\x00")
	copy(b[108:116], "0000000\x00")
	copy(b[116:124], "0000000\x00")
	copy(b[124:136], fmt.Sprintf("%011o\x00", size))
	copy(b[136:148], "00000000000\x00")
	b[156] = typ
	copy(b[257:263], "ustar\x00")
	copy(b[263:265], "00")
	copy(b[148:156], "        ")
	sum := 0
	for _, c := range b {
		sum += int(c)
	}
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return b
}

func padBlock(b []byte) []byte {
	if r := len(b) % 512; r != 0 {
		b = append(b, make([]byte, 512-r)...)
	}
	return b
}

func paxRecord(k, v string) string {
	rec := " " + k + "=" + v + "\n"
	n := len(rec)
	for {
		s := fmt.Sprintf("%d%s", n, rec)
		if len(s) == n {
			return s
		}
		n = len(s)
	}
}

// sparseArchive is node-a.tar.gz with bundle.json listing rules.txt, which
// is a GNU sparse 1.0 file of realSize bytes stored in a few hundred.
func sparseArchive(t *testing.T, name string, realSize int64) {
	t.Helper()
	var raw []byte
	add := func(entryName string, typ byte, body []byte) {
		raw = append(raw, rawTarHeader(entryName, typ, int64(len(body)))...)
		raw = append(raw, padBlock(append([]byte(nil), body...))...)
	}
	add("node-a/"+ManifestFile, tar.TypeReg, []byte(okManifest))
	pax := paxRecord("GNU.sparse.major", "1") + paxRecord("GNU.sparse.minor", "0") +
		paxRecord("GNU.sparse.name", "node-a/rules.txt") + paxRecord("GNU.sparse.realsize", strconv.FormatInt(realSize, 10))
	add("node-a/PaxHeaders/rules.txt", tar.TypeXHeader, []byte(pax))
	// Data: the sparse map (one extent of one byte at the very end), padded
	// to a block, then that byte.
	sparseMap := padBlock([]byte(fmt.Sprintf("1\n%d\n1\n", realSize-1)))
	add("node-a/GNUSparseFile.0/rules.txt", tar.TypeReg, append(sparseMap, 'x'))
	raw = append(raw, make([]byte, 1024)...)
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	gz.Write(raw)
	gz.Close()
	if err := os.WriteFile(name, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// manifestListing is a bundle.json listing files, each "kind:path".
func manifestListing(files ...string) string {
	var fs []string
	for _, f := range files {
		kind, path, _ := strings.Cut(f, ":")
		fs = append(fs, fmt.Sprintf(`{"path":%q,"kind":%q,"bytes":1}`, path, kind))
	}
	return `{"kind":"Bundle","node":"node-a","files":[` + strings.Join(fs, ",") + `]}`
}

// hostileManifest lists hostileRules, the one file of a bundle.
var (
	hostileManifest = tarEntry{name: "node-a/" + ManifestFile, body: okManifest}
	hostileRules    = tarEntry{name: "node-a/rules.txt", body: "*nat\nCOMMIT\n"}
)

// tooManyEntries is a bundle with more entries than any ever has.
func tooManyEntries() []tarEntry {
	many := []tarEntry{hostileManifest, hostileRules}
	for i := 0; i < MaxArchiveEntries; i++ {
		many = append(many, tarEntry{name: fmt.Sprintf("node-a/unlisted-%05d", i)})
	}
	return many
}

// smallLimits caps each file at 100 B and a bundle's files at 150 B.
var smallLimits = Limits{File: func(kind string) int64 { return 100 }, Total: 150}

// hostileCase is an archive built to hurt the reader, and what opening it
// must do.
type hostileCase struct {
	name    string
	build   func(t *testing.T, name string)
	limits  Limits
	wantErr string // "" when it opens
	// wantFiles are the files extracted (when it opens).
	wantFiles []string
}

var hostileBundleCases = []hostileCase{
	{
		name:    "a sparse entry (4.9 kB that would write 200 MB)",
		build:   func(t *testing.T, name string) { sparseArchive(t, name, 200<<20) },
		wantErr: "sparse file",
	},
	{
		name: "entries bundle.json does not list are not extracted",
		build: func(t *testing.T, name string) {
			writeTarGz(t, name, hostileManifest, hostileRules, tarEntry{name: "node-a/extra.txt", body: "x"}, tarEntry{name: "node-a/more/deep.txt", body: "y"})
		},
		wantFiles: []string{"rules.txt"},
	},
	{
		name: "files of kinds no analysis reads are not extracted",
		build: func(t *testing.T, name string) {
			writeTarGz(t, name, tarEntry{name: "node-a/" + ManifestFile, body: manifestListing("ruleset:rules.txt", "failed:half.txt", "info:v.txt")},
				hostileRules, tarEntry{name: "node-a/half.txt", body: "x"}, tarEntry{name: "node-a/v.txt", body: "v"})
		},
		wantFiles: []string{"rules.txt"},
	},
	{
		name:    "more entries than a bundle ever has",
		build:   func(t *testing.T, name string) { writeTarGz(t, name, tooManyEntries()...) },
		wantErr: fmt.Sprintf("more than %d entries", MaxArchiveEntries),
	},
	{
		name: "a file larger than the cap on its kind",
		build: func(t *testing.T, name string) {
			writeTarGz(t, name, hostileManifest, tarEntry{name: "node-a/rules.txt", body: strings.Repeat("#", 101)})
		},
		limits:  smallLimits,
		wantErr: "bundle file rules.txt is larger than the cap of 100 B",
	},
	{
		name: "files larger together than the total cap",
		build: func(t *testing.T, name string) {
			writeTarGz(t, name, tarEntry{name: "node-a/" + ManifestFile, body: manifestListing("ruleset:a.txt", "ruleset:b.txt")},
				tarEntry{name: "node-a/a.txt", body: strings.Repeat("#", 80)}, tarEntry{name: "node-a/b.txt", body: strings.Repeat("#", 80)})
		},
		limits:  smallLimits,
		wantErr: "the files of the bundle together is larger than the cap of 150 B",
	},
	{
		name: "an unlisted entry that inflates to more than the reader may skip",
		build: func(t *testing.T, name string) {
			var raw []byte
			raw = append(raw, rawTarHeader("node-a/"+ManifestFile, tar.TypeReg, int64(len(okManifest)))...)
			raw = append(raw, padBlock([]byte(okManifest))...)
			raw = append(raw, rawTarHeader("node-a/rules.txt", tar.TypeReg, 1)...)
			raw = append(raw, padBlock([]byte("x"))...)
			raw = append(raw, rawTarHeader("node-a/zeros", tar.TypeReg, 5<<30)...) // its data never comes
			var buf bytes.Buffer
			gz := gzip.NewWriter(&buf)
			gz.Write(raw)
			gz.Close()
			os.WriteFile(name, buf.Bytes(), 0o600)
		},
		wantErr: "besides the files it lists (up to zeros) is larger than the cap",
	},
	{
		name: "a backslash in an entry name",
		build: func(t *testing.T, name string) {
			writeTarGz(t, name, hostileManifest, tarEntry{name: `node-a/..\..\evil`, body: "x"})
		},
		wantErr: "unexpected entry",
	},
	{
		name: "a backslash in a listed path",
		build: func(t *testing.T, name string) {
			writeTarGz(t, name, tarEntry{name: "node-a/" + ManifestFile, body: manifestListing(`ruleset:..\evil`)})
		},
		wantErr: `bad file path "..\\evil"`,
	},
	{
		name: "a drive letter in a listed path",
		build: func(t *testing.T, name string) {
			writeTarGz(t, name, tarEntry{name: "node-a/" + ManifestFile, body: manifestListing(`ruleset:C:evil`)})
		},
		wantErr: `bad file path "C:evil"`,
	},
	{
		name: "a Windows device name",
		build: func(t *testing.T, name string) {
			writeTarGz(t, name, tarEntry{name: "node-a/" + ManifestFile, body: manifestListing(`ruleset:CON.txt`)})
		},
		wantErr: `bad file path "CON.txt"`,
	},
	{
		name: "an absolute entry",
		build: func(t *testing.T, name string) {
			writeTarGz(t, name, hostileManifest, tarEntry{name: "/etc/evil", body: "x"})
		},
		wantErr: "unexpected entry",
	},
	{
		name: "a device entry",
		build: func(t *testing.T, name string) {
			writeTarGz(t, name, hostileManifest, tarEntry{name: "node-a/rules.txt", typ: tar.TypeChar})
		},
		wantErr: "unexpected entry",
	},
	{
		name: "a FIFO entry",
		build: func(t *testing.T, name string) {
			writeTarGz(t, name, hostileManifest, tarEntry{name: "node-a/rules.txt", typ: tar.TypeFifo})
		},
		wantErr: "unexpected entry",
	},
	{
		name:    "a listed file twice",
		build:   func(t *testing.T, name string) { writeTarGz(t, name, hostileManifest, hostileRules, hostileRules) },
		wantErr: "appears twice",
	},
	{
		name:    "a listed file the archive lacks",
		build:   func(t *testing.T, name string) { writeTarGz(t, name, hostileManifest) },
		wantErr: "lists rules.txt, which the archive does not hold",
	},
	{
		name: "a huge manifest",
		build: func(t *testing.T, name string) {
			writeTarGz(t, name, tarEntry{name: "node-a/" + ManifestFile, body: strings.Repeat(" ", 2<<20)})
		},
		wantErr: "not a manifest written by collect",
	},
}

// A bundle is a file a stranger attached to a ticket: it is extracted only
// as far as bundle.json lists regular files the analyses read, each within
// its cap, and anything else in it is an error or is skipped, never written.
func TestOpenBundleHostile(t *testing.T) {
	for _, tc := range hostileBundleCases {
		t.Run(tc.name, func(t *testing.T) {
			tmp := isolateTemp(t)
			name := filepath.Join(t.TempDir(), "node-a.tar.gz")
			tc.build(t, name)
			lim := tc.limits
			if lim.File == nil {
				lim = DefaultLimits
			}
			b, err := OpenBundle(context.Background(), name, lim)
			if tc.wantErr != "" {
				if err == nil {
					b.Close()
					t.Fatalf("OpenBundle succeeded, want an error mentioning %q", tc.wantErr)
				}
				if !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("OpenBundle: %v\nwant it to mention %q", err, tc.wantErr)
				}
				if left := dirEntries(t, tmp); len(left) > 0 {
					t.Errorf("left in the temporary directory: %v", left)
				}
				return
			}
			if err != nil {
				t.Fatalf("OpenBundle: %v", err)
			}
			defer b.Close()
			var got []string
			filepath.WalkDir(b.Dir, func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					rel, _ := filepath.Rel(b.Dir, p)
					got = append(got, filepath.ToSlash(rel))
				}
				return nil
			})
			if diff := cmp.Diff(tc.wantFiles, got); diff != "" {
				t.Errorf("extracted (-want +got):\n%s", diff)
			}
		})
	}
}

// Ctrl-C during the extraction stops it, and what it wrote goes.
func TestOpenBundleCancelled(t *testing.T) {
	tmp := isolateTemp(t)
	name := filepath.Join(t.TempDir(), "node-a.tar.gz")
	writeTarGz(t, name, tarEntry{name: "node-a/" + ManifestFile, body: okManifest}, tarEntry{name: "node-a/rules.txt", body: strings.Repeat("-A X\n", 1<<20)})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := OpenBundle(ctx, name, DefaultLimits); !errors.Is(err, context.Canceled) {
		t.Errorf("OpenBundle with Ctrl-C: %v, want context.Canceled", err)
	}
	if left := dirEntries(t, tmp); len(left) > 0 {
		t.Errorf("left in the temporary directory: %v", left)
	}
	// RemoveTemps (a second Ctrl-C) removes what an extraction in progress
	// made.
	dir, err := MkdirTemp("", "proxyrules-bundle-")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "rules.txt"), []byte("x"), 0o600)
	RemoveTemps()
	if left := dirEntries(t, tmp); len(left) > 0 {
		t.Errorf("RemoveTemps left %v", left)
	}
}

// A bundle folder opens only regular files inside it: a link out, a FIFO
// (which would block the reader for ever) or a directory is an error.
func TestBundleOpenRegularFilesOnly(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(outside, []byte("secret"), 0o600)
	dir := t.TempDir()
	m := `{"kind":"Bundle","node":"node-a","files":[` +
		`{"path":"link.txt","kind":"ruleset","bytes":1},{"path":"fifo.txt","kind":"ruleset","bytes":1},` +
		`{"path":"dir.txt","kind":"ruleset","bytes":1},{"path":"ok.txt","kind":"ruleset","bytes":1}]}`
	os.WriteFile(filepath.Join(dir, ManifestFile), []byte(m), 0o600)
	os.WriteFile(filepath.Join(dir, "ok.txt"), []byte("*nat\nCOMMIT\n"), 0o600)
	if err := os.Symlink(outside, filepath.Join(dir, "link.txt")); err != nil {
		t.Skipf("no symlinks: %v", err)
	}
	os.Mkdir(filepath.Join(dir, "dir.txt"), 0o700)
	fifo := mkfifo(t, filepath.Join(dir, "fifo.txt"))
	b, err := OpenBundle(context.Background(), dir, DefaultLimits)
	if err != nil {
		t.Fatalf("OpenBundle: %v", err)
	}
	defer b.Close()
	for _, f := range b.Manifest.Files {
		if f.Path == "fifo.txt" && !fifo {
			continue
		}
		done := make(chan error, 1)
		go func() {
			r, err := b.Open(f)
			if err == nil {
				r.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if f.Path == "ok.txt" {
				if err != nil {
					t.Errorf("Open(%s): %v", f.Path, err)
				}
			} else if err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("Open(%s) = %v, want an error: not a regular file", f.Path, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("Open(%s) blocks", f.Path)
		}
	}
	// bundle.json itself as a link out.
	linked := t.TempDir()
	os.WriteFile(outside, []byte(okManifest), 0o600)
	os.Symlink(outside, filepath.Join(linked, ManifestFile))
	if b, err := OpenBundle(context.Background(), linked, DefaultLimits); err == nil {
		b.Close()
		t.Error("OpenBundle read a bundle.json that links out of the folder")
	}
}

// The archive collect writes is new (never written through a file or link
// already there), private (0600), and starts with bundle.json.
func TestWriteTarGzExclusive(t *testing.T) {
	work := t.TempDir()
	dir := filepath.Join(work, "node-a")
	os.Mkdir(dir, 0o700)
	writeTestBundle(t, dir)
	archive := filepath.Join(work, "node-a.tar.gz")
	if err := WriteTarGz(dir, archive); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(archive); st.Mode().Perm() != 0o600 {
		t.Errorf("archive mode %v, want 0600", st.Mode().Perm())
	}
	hs := readTarHeaders(t, archive)
	if len(hs) == 0 || hs[0].Name != "node-a/"+ManifestFile {
		t.Errorf("first entry %v, want node-a/bundle.json", hs)
	}
	for _, h := range hs {
		if h.Mode != 0o600 {
			t.Errorf("%s: mode %o, want 0600", h.Name, h.Mode)
		}
	}
	// Exists: refused, untouched.
	if err := WriteTarGz(dir, archive); err == nil {
		t.Error("WriteTarGz overwrote an existing archive")
	}
	if hs2 := readTarHeaders(t, archive); len(hs2) != len(hs) {
		t.Errorf("the existing archive was changed")
	}
	// A link planted at the name: refused, its target untouched.
	target := filepath.Join(work, "target")
	os.WriteFile(target, []byte("mine"), 0o600)
	link := filepath.Join(work, "link.tar.gz")
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("no symlinks: %v", err)
	}
	if err := WriteTarGz(dir, link); err == nil {
		t.Error("WriteTarGz wrote through a link")
	}
	if data, _ := os.ReadFile(target); string(data) != "mine" {
		t.Errorf("the link's target was overwritten: %q", data)
	}
}

// collect writes bundle.json first, and one pass reads the rest, so that an
// archive can come through a pipe; one repacked with bundle.json later is
// read twice from a file, and refused from a pipe.
func TestOpenBundleManifestNotFirst(t *testing.T) {
	later := []tarEntry{{name: "node-a/rules.txt", body: "*nat\nCOMMIT\n"}, {name: "node-a/" + ManifestFile, body: okManifest}}
	name := filepath.Join(t.TempDir(), "node-a.tar.gz")
	writeTarGz(t, name, later...)
	b, err := OpenBundle(context.Background(), name, DefaultLimits)
	if err != nil {
		t.Fatalf("bundle.json after the files, in a file: %v", err)
	}
	b.Close()
	data, _ := os.ReadFile(name)
	for _, tc := range []struct {
		archive []byte
		wantErr string
	}{{data, "a stream cannot be read twice"}} {
		fifo := filepath.Join(t.TempDir(), "node-a.tar.gz")
		if !mkfifo(t, fifo) {
			t.Skip("no FIFOs")
		}
		go func() {
			w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
			if err == nil {
				w.Write(tc.archive)
				w.Close()
			}
		}()
		_, err := OpenBundle(context.Background(), fifo, DefaultLimits)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("through a pipe: %v, want %q", err, tc.wantErr)
		}
	}
	// In the order collect writes it, a pipe is read in one pass.
	dir := filepath.Join(t.TempDir(), "node-a")
	os.Mkdir(dir, 0o700)
	writeTestBundle(t, dir)
	archive := filepath.Join(t.TempDir(), "node-a.tar.gz")
	if err := WriteTarGz(dir, archive); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(archive)
	fifo := filepath.Join(t.TempDir(), "piped.tar.gz")
	mkfifo(t, fifo)
	go func() {
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err == nil {
			w.Write(data)
			w.Close()
		}
	}()
	b, err = OpenBundle(context.Background(), fifo, DefaultLimits)
	if err != nil {
		t.Fatalf("a bundle through a pipe: %v", err)
	}
	b.Close()
}
