package collect

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
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
