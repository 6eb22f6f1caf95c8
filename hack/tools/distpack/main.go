// Command distpack packs the cross-built binaries of kubectl-proxyrules into
// one release archive per platform, writes checksums.txt and renders the
// krew manifest from its template. It is run by `make dist` (hack/dist.mk).
//
// Archives are reproducible: entries in a fixed order, a fixed mtime
// (-mtime, the commit date), no owner names, gzip without name or time.
//
//	distpack -version v0.1.0 -stage dist/build -dist dist \
//	    -platforms "linux/amd64 windows/amd64" \
//	    -files LICENSE,hack/dist/kubectl_complete-proxyrules \
//	    -windows-files LICENSE,hack/dist/kubectl_complete-proxyrules.cmd \
//	    -uri-base https://github.com/o/r/releases/download/v0.1.0 \
//	    -template krew/proxyrules.yaml.tmpl -manifest krew/proxyrules.yaml
package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/template"
	"time"
)

// Platform is one archive, as the manifest template sees it.
type Platform struct {
	OS, Arch string
	Archive  string // file name in the dist directory
	URI      string
	SHA256   string
	Bin      string   // the executable's name in the archive
	Files    []string // every file of the archive, sorted
}

// Manifest is the data of the krew manifest template.
type Manifest struct {
	Name      string
	Version   string
	Platforms []Platform
}

type file struct {
	name string
	mode int64
	data []byte
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("distpack: ")
	var (
		name         = flag.String("name", "kubectl-proxyrules", "binary name")
		version      = flag.String("version", "", "release version, v-prefixed")
		stage        = flag.String("stage", "", "directory with <os>_<arch>/<name>[.exe] binaries")
		dist         = flag.String("dist", "dist", "output directory")
		platforms    = flag.String("platforms", "", "space-separated os/arch list")
		files        = flag.String("files", "", "comma-separated extra files for unix archives")
		windowsFiles = flag.String("windows-files", "", "comma-separated extra files for windows archives")
		mtime        = flag.String("mtime", "", "RFC 3339 time stamped on every entry (default: 1980-01-01)")
		uriBase      = flag.String("uri-base", "", "URL of the release's download directory")
		tmpl         = flag.String("template", "", "krew manifest template")
		manifest     = flag.String("manifest", "", "where to write the rendered krew manifest")
	)
	flag.Parse()
	if *version == "" || *stage == "" || *platforms == "" {
		log.Fatal("-version, -stage and -platforms are required")
	}
	if !strings.HasPrefix(*version, "v") {
		log.Fatalf("version %q must start with v (krew wants a v-prefixed semantic version)", *version)
	}
	when := time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)
	if *mtime != "" {
		t, err := time.Parse(time.RFC3339, *mtime)
		if err != nil {
			log.Fatalf("-mtime: %v", err)
		}
		when = t.UTC()
	}
	if err := os.MkdirAll(*dist, 0o755); err != nil {
		log.Fatal(err)
	}

	m := Manifest{Name: strings.TrimPrefix(*name, "kubectl-"), Version: *version}
	for _, p := range strings.Fields(*platforms) {
		goos, goarch, ok := strings.Cut(p, "/")
		if !ok {
			log.Fatalf("platform %q is not os/arch", p)
		}
		bin, extra, ext := *name, *files, ".tar.gz"
		if goos == "windows" {
			bin, extra, ext = *name+".exe", *windowsFiles, ".zip"
		}
		entries := []file{readFile(filepath.Join(*stage, goos+"_"+goarch, bin), bin)}
		for _, f := range strings.Split(extra, ",") {
			if f = strings.TrimSpace(f); f != "" {
				entries = append(entries, readFile(f, filepath.Base(f)))
			}
		}
		sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
		archive := fmt.Sprintf("%s_%s_%s_%s%s", *name, *version, goos, goarch, ext)
		var data []byte
		var err error
		if ext == ".zip" {
			data, err = zipArchive(entries, when)
		} else {
			data, err = tarGz(entries, when)
		}
		if err != nil {
			log.Fatalf("%s: %v", archive, err)
		}
		if err := os.WriteFile(filepath.Join(*dist, archive), data, 0o644); err != nil {
			log.Fatal(err)
		}
		sum := sha256.Sum256(data)
		pl := Platform{OS: goos, Arch: goarch, Archive: archive, SHA256: hex.EncodeToString(sum[:]), Bin: bin}
		if *uriBase != "" {
			pl.URI = strings.TrimSuffix(*uriBase, "/") + "/" + archive
		}
		for _, e := range entries {
			pl.Files = append(pl.Files, e.name)
		}
		m.Platforms = append(m.Platforms, pl)
		fmt.Printf("%s  %s\n", pl.SHA256, filepath.Join(*dist, archive))
	}

	// checksums.txt, in sha256sum's format: sha256sum -c checksums.txt.
	sums := append([]Platform(nil), m.Platforms...)
	sort.Slice(sums, func(i, j int) bool { return sums[i].Archive < sums[j].Archive })
	var b strings.Builder
	for _, p := range sums {
		fmt.Fprintf(&b, "%s  %s\n", p.SHA256, p.Archive)
	}
	if err := os.WriteFile(filepath.Join(*dist, "checksums.txt"), []byte(b.String()), 0o644); err != nil {
		log.Fatal(err)
	}

	if *tmpl != "" && *manifest != "" {
		if err := render(*tmpl, *manifest, m); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("rendered %s\n", *manifest)
	}
}

func readFile(path, name string) file {
	data, err := os.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		log.Fatal(err)
	}
	mode := int64(0o644)
	if st.Mode()&0o111 != 0 || strings.HasSuffix(name, ".exe") {
		mode = 0o755
	}
	return file{name: name, mode: mode, data: data}
}

// tarGz writes entries in the order given (sorted by name), owned by root
// with numeric ids only.
func tarGz(entries []file, when time.Time) ([]byte, error) {
	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	// gzip.Writer leaves Name and ModTime empty: no host data in the header.
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		hdr := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     e.name,
			Mode:     e.mode,
			Size:     int64(len(e.data)),
			ModTime:  when,
			Format:   tar.FormatUSTAR,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func zipArchive(entries []file, when time.Time) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		hdr := &zip.FileHeader{Name: e.name, Method: zip.Deflate, Modified: when}
		hdr.SetMode(os.FileMode(e.mode))
		w, err := zw.CreateHeader(hdr)
		if err != nil {
			return nil, err
		}
		if _, err := io.Copy(w, bytes.NewReader(e.data)); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func render(tmplPath, out string, m Manifest) error {
	text, err := os.ReadFile(tmplPath)
	if err != nil {
		return err
	}
	t, err := template.New(filepath.Base(tmplPath)).Option("missingkey=error").Parse(string(text))
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, m); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	return os.WriteFile(out, b.Bytes(), 0o644)
}
