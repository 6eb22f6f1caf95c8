package collect

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// ManifestFile is the bundle's table of contents.
const ManifestFile = "bundle.json"

// Manifest describes what a bundle holds and how it was collected.
type Manifest struct {
	APIVersion  string    `json:"apiVersion"`
	Kind        string    `json:"kind"`
	Node        string    `json:"node"`
	CollectedAt time.Time `json:"collectedAt"`
	// Via is "debug-pod" or "kube-proxy" (exec into kube-proxy's pod).
	Via       string `json:"via"`
	Namespace string `json:"namespace,omitempty"`
	Pod       string `json:"pod,omitempty"`
	Image     string `json:"image,omitempty"`
	// ProxyMode is what kube-proxy's /proxyMode answered ("iptables",
	// "nftables", "ipvs"), or what the node's tables showed.
	ProxyMode kubeproxy.Mode `json:"proxyMode,omitempty"`
	// Backend is the iptables backend the node's iptables uses:
	// "nf_tables" or "legacy".
	Backend kubeproxy.Backend `json:"backend,omitempty"`
	// Scope is "full", or "service NAMESPACE/NAME" when only that
	// Service's chains were read.
	Scope    string       `json:"scope"`
	Files    []BundleFile `json:"files"`
	Warnings []string     `json:"warnings,omitempty"`
}

// BundleFile is one collected output.
type BundleFile struct {
	Path string `json:"path"`
	// Kind: ruleset, metrics, config, objects, info.
	Kind    string  `json:"kind"`
	Command string  `json:"command,omitempty"`
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds,omitempty"`
	// Partial is set on rulesets that hold only some chains.
	Partial bool   `json:"partial,omitempty"`
	Error   string `json:"error,omitempty"`
}

// File kinds besides the command kinds.
const (
	KindMetrics   = "metrics"
	KindConfig    = "config"
	KindObjects   = "objects"
	KindProxyMode = "proxymode"
	// KindFailed is the partial output of a command that failed and was
	// replaced by its fallback: kept for the record, never parsed.
	KindFailed = "failed"
)

// BundleAPIVersion is the manifest's schema version.
const BundleAPIVersion = "proxyrules.kubectl.io/v1alpha1"

// WriteManifest writes dir/bundle.json.
func WriteManifest(dir string, m *Manifest) error {
	m.APIVersion, m.Kind = BundleAPIVersion, "Bundle"
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ManifestFile), append(data, '\n'), 0o644)
}

// Bundle is a bundle opened for reading.
type Bundle struct {
	Dir      string
	Manifest Manifest
	cleanup  func()
}

// Close removes what OpenBundle extracted.
func (b *Bundle) Close() {
	if b.cleanup != nil {
		b.cleanup()
	}
}

// Path is the path of a bundle file on disk.
func (b *Bundle) Path(f BundleFile) string { return filepath.Join(b.Dir, filepath.FromSlash(f.Path)) }

// OpenBundle opens a bundle directory or a .tar.gz made by collect.
func OpenBundle(name string) (*Bundle, error) {
	st, err := os.Stat(name)
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	b := &Bundle{Dir: name}
	if !st.IsDir() {
		tmp, err := os.MkdirTemp("", "proxyrules-bundle-")
		if err != nil {
			return nil, err
		}
		b.Dir, b.cleanup = tmp, func() { os.RemoveAll(tmp) }
		if err := extractTarGz(name, tmp); err != nil {
			b.Close()
			return nil, fmt.Errorf("bundle %s: %w", name, err)
		}
	}
	data, err := os.ReadFile(filepath.Join(b.Dir, ManifestFile))
	if err != nil {
		b.Close()
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s is not a bundle written by `collect` (no %s)", name, ManifestFile)
		}
		return nil, err
	}
	if err := json.Unmarshal(data, &b.Manifest); err != nil {
		b.Close()
		return nil, fmt.Errorf("%s/%s: %w", name, ManifestFile, err)
	}
	if b.Manifest.Kind != "Bundle" {
		b.Close()
		return nil, fmt.Errorf("%s/%s: kind %q, want Bundle", name, ManifestFile, b.Manifest.Kind)
	}
	for _, f := range b.Manifest.Files {
		if !fs.ValidPath(f.Path) {
			b.Close()
			return nil, fmt.Errorf("%s/%s: bad file path %q", name, ManifestFile, f.Path)
		}
	}
	return b, nil
}

// maxBundle bounds what an archive may unpack to (a dump of a huge node is
// tens of MB; this leaves a wide margin and stops a tar bomb).
const maxBundle = 4 << 30

func extractTarGz(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("not a .tar.gz: %w", err)
	}
	tr := tar.NewReader(gz)
	var total int64
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		// collect writes every file under one top directory; strip it.
		rel := h.Name
		if i := strings.IndexByte(rel, '/'); i >= 0 {
			if top := rel[:i]; top == ".." || top == "." || top == "" {
				return fmt.Errorf("unexpected entry %q", h.Name)
			}
			rel = rel[i+1:]
		}
		rel = path.Clean(rel)
		if h.Typeflag == tar.TypeDir || rel == "." {
			continue
		}
		if h.Typeflag != tar.TypeReg || !fs.ValidPath(rel) {
			return fmt.Errorf("unexpected entry %q", h.Name)
		}
		total += h.Size
		if total > maxBundle {
			return fmt.Errorf("unpacks to more than %d bytes", int64(maxBundle))
		}
		out := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		w, err := os.Create(out)
		if err != nil {
			return err
		}
		_, err = io.Copy(w, io.LimitReader(tr, h.Size))
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
}

// WriteTarGz packs dir into archive, under a top directory named like the
// archive (node-a.tar.gz holds node-a/bundle.json, ...).
func WriteTarGz(dir, archive string) (err error) {
	top := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(archive), ".tgz"), ".tar.gz")
	f, err := os.Create(archive)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(archive)
		}
	}()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		h := &tar.Header{Name: top + "/" + filepath.ToSlash(rel), Mode: 0o644, Size: info.Size(), ModTime: info.ModTime(), Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		_, err = io.Copy(tw, in)
		return err
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// IsArchiveName says whether collect -d NAME should write a .tar.gz.
func IsArchiveName(name string) bool {
	return strings.HasSuffix(name, ".tar.gz") || strings.HasSuffix(name, ".tgz")
}
