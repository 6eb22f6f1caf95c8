package collect

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
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
	// Conntrack says how the conntrack table was filtered and capped on
	// the node, and when the counters were read (conntrack.go).
	Conntrack *ConntrackRead `json:"conntrack,omitempty"`
	// IPVS says why the IPVS state was read and what of it the node had
	// (ipvs.go); nil when the node was not read as IPVS mode.
	IPVS *IPVSRead `json:"ipvs,omitempty"`
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

// Files of a bundle are private to the user who collected them: they hold
// the node's rules and the cluster's objects.
const (
	fileMode = 0o600
	dirMode  = 0o700
)

// WriteManifest writes dir/bundle.json.
func WriteManifest(dir string, m *Manifest) error {
	m.APIVersion, m.Kind = BundleAPIVersion, "Bundle"
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ManifestFile), append(data, '\n'), fileMode)
}

// What a bundle may hold, whoever wrote it. A bundle written by collect
// has a manifest of a few kB and some twenty files.
const (
	maxManifestBytes = 1 << 20
	maxManifestFiles = 1000
	// MaxArchiveEntries bounds the entries of a .tar.gz read (listed or not).
	MaxArchiveEntries = 10000
	// maxSkippedBytes bounds the entries an archive holds besides the files
	// read: never written, but inflated to be read past (seconds of CPU).
	maxSkippedBytes = 4 << 30
)

// Limits bound what reading a bundle may cost, checked while it is read and
// before anything is parsed.
type Limits struct {
	// File is the most one file of a kind may hold; 0 means files of that
	// kind are not wanted (not extracted, not opened).
	File func(kind string) int64
	// Total bounds the files extracted from one archive together.
	Total int64
}

// DefaultLimits are generous for a node with 5,000 Services (its largest
// file, the nat table, is some 50 MB as text; its objects some 40 MB) and
// stop a crafted bundle long before it fills a disk or the memory.
var DefaultLimits = Limits{
	File: func(kind string) int64 {
		switch kind {
		case KindRuleset:
			return 1 << 30
		case KindObjects:
			return 256 << 20
		case KindMetrics:
			return 16 << 20
		case KindConfig:
			return 8 << 20
		case KindConntrack:
			return 64 << 20 // MaxConntrackEntries lines of at most maxConntrackLine
		case KindConntrackStats, KindSysctls:
			return 4 << 20
		}
		return 0
	},
	Total: 2 << 30,
}

// kindBounds bound the files of one kind a bundle may list, so that what
// is parsed at once stays a small multiple of one file's cap: at most
// files of the kind, together at most total times the cap on one. collect
// writes up to 14 rulesets (the service scope 6), 2 metrics files, 1
// configuration and 1 objects file.
var kindBounds = map[string]struct {
	files int
	total int64
}{
	KindRuleset: {16, 2},
	KindMetrics: {4, 2},
	KindConfig:  {4, 2},
	KindObjects: {2, 1},
	// collect writes one table, two reads of the counters, one sysctls.
	KindConntrack:      {2, 1},
	KindConntrackStats: {4, 2},
	KindSysctls:        {2, 1},
}

// kindTotal is the most the files of kind may hold together.
func (l Limits) kindTotal(kind string) int64 {
	kb, ok := kindBounds[kind]
	if !ok {
		return l.Total
	}
	return min(kb.total*l.File(kind), l.Total)
}

// checkKinds refuses a manifest that lists more files of a kind than the
// reader takes (of the kinds lim wants).
func checkKinds(m *Manifest, lim Limits) error {
	count := map[string]int{}
	for _, f := range m.Files {
		if f.Bytes > 0 && lim.File(f.Kind) > 0 {
			count[f.Kind]++
		}
	}
	for _, kind := range []string{KindRuleset, KindMetrics, KindConfig, KindObjects, KindConntrack, KindConntrackStats, KindSysctls} {
		if n, most := count[kind], kindBounds[kind].files; n > most {
			return fmt.Errorf("lists %d %s files, more than the %d this plugin reads (collect writes at most %d): refusing to read it",
				n, kind, most, collectWrites[kind])
		}
	}
	return nil
}

// collectWrites is how many files of each kind collect writes at most.
var collectWrites = map[string]int{KindRuleset: 14, KindMetrics: 2, KindConfig: 1, KindObjects: 1,
	KindConntrack: 1, KindConntrackStats: 2, KindSysctls: 1}

// checkKindTotals refuses a bundle directory whose files of one kind hold
// more than the kind's total together (an archive's are counted as they
// are extracted).
func (b *Bundle) checkKindTotals() error {
	sum := map[string]int64{}
	for _, f := range b.Manifest.Files {
		if f.Bytes == 0 || b.limits.File(f.Kind) <= 0 || !validBundlePath(f.Path) {
			continue
		}
		if st, err := b.root.Lstat(f.Path); err == nil && st.Mode().IsRegular() {
			sum[f.Kind] += st.Size()
			if sum[f.Kind] > b.limits.kindTotal(f.Kind) {
				return &LimitError{What: fmt.Sprintf("the %s files of bundle %s together", f.Kind, b.Dir), Kind: f.Kind, Limit: b.limits.kindTotal(f.Kind)}
			}
		}
	}
	return nil
}

// LimitError is a bundle or input larger than a cap.
type LimitError struct {
	What  string // what is too large: "bundle file objects.json"
	Kind  string // the file's kind; "" for the total of an archive
	Limit int64
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s is larger than the cap of %s", e.What, HumanBytes(e.Limit))
}

// Bundle is a bundle opened for reading.
type Bundle struct {
	Dir      string
	Manifest Manifest
	root     *os.Root
	limits   Limits
	cleanup  func()
}

// Close removes what OpenBundle extracted.
func (b *Bundle) Close() {
	if b.root != nil {
		b.root.Close()
		b.root = nil
	}
	if b.cleanup != nil {
		b.cleanup()
		b.cleanup = nil
	}
}

// Path is the path of a bundle file on disk.
func (b *Bundle) Path(f BundleFile) string { return filepath.Join(b.Dir, filepath.FromSlash(f.Path)) }

// Open opens a file the manifest lists: a regular file inside the bundle,
// never a link, a device or a FIFO (which would block), never outside it.
func (b *Bundle) Open(f BundleFile) (*os.File, error) {
	if !validBundlePath(f.Path) {
		return nil, fmt.Errorf("bundle %s: bad file path %q", b.Dir, f.Path)
	}
	if b.limits.File != nil && b.limits.File(f.Kind) <= 0 {
		return nil, fmt.Errorf("bundle %s: %s (%s) is not read", b.Dir, f.Path, f.Kind)
	}
	return openRegular(b.root, f.Path, b.Dir)
}

// openRegular opens name below root for reading if it is a regular file.
func openRegular(root *os.Root, name, where string) (*os.File, error) {
	st, err := root.Lstat(name)
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", where, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("bundle %s: %s is not a regular file (%s): refusing to read it", where, name, st.Mode().Type())
	}
	// O_NONBLOCK: should a FIFO be swapped in after the check, the open
	// does not wait for a writer.
	f, err := root.OpenFile(name, os.O_RDONLY|oNonblock, 0)
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", where, err)
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("bundle %s: %s is not a regular file: refusing to read it", where, name)
	}
	return f, nil
}

// OpenBundle opens a bundle directory or a .tar.gz made by collect. Of an
// archive it extracts only the files the manifest lists and lim wants,
// each within its cap; ctx stops it (Ctrl-C), and what was extracted is
// removed on any error and by Close.
func OpenBundle(ctx context.Context, name string, lim Limits) (*Bundle, error) {
	if lim.File == nil {
		lim.File = DefaultLimits.File
	}
	if lim.Total <= 0 {
		lim.Total = DefaultLimits.Total
	}
	st, err := os.Stat(name)
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	b := &Bundle{Dir: name, limits: lim}
	if !st.IsDir() {
		tmp, err := MkdirTemp("", bundleTempPrefix) // removes stale ones first
		if err != nil {
			return nil, err
		}
		b.Dir, b.cleanup = tmp, func() { RemoveTemp(tmp) }
		if err := extractBundle(ctx, name, tmp, lim, &b.Manifest); err != nil {
			b.Close()
			return nil, fmt.Errorf("bundle %s: %w", name, err)
		}
	}
	if b.root, err = os.OpenRoot(b.Dir); err != nil {
		b.Close()
		return nil, fmt.Errorf("bundle: %w", err)
	}
	if st.IsDir() {
		f, err := openRegular(b.root, ManifestFile, name)
		if errors.Is(err, fs.ErrNotExist) {
			b.Close()
			return nil, fmt.Errorf("%s is not a bundle written by `collect` (no %s)", name, ManifestFile)
		}
		if err == nil {
			err = readManifest(f, &b.Manifest)
			f.Close()
		}
		if err == nil {
			err = checkKinds(&b.Manifest, lim)
		}
		if err == nil {
			if err = b.checkKindTotals(); err != nil {
				b.Close()
				return nil, err
			}
		}
		if err != nil {
			b.Close()
			return nil, fmt.Errorf("%s/%s: %w", name, ManifestFile, err)
		}
	}
	return b, nil
}

// readManifest reads and checks bundle.json.
func readManifest(r io.Reader, m *Manifest) error {
	data, err := io.ReadAll(io.LimitReader(r, maxManifestBytes+1))
	if err != nil {
		return err
	}
	if len(data) > maxManifestBytes {
		return fmt.Errorf("larger than %s: not a manifest written by collect", HumanBytes(maxManifestBytes))
	}
	if err := json.Unmarshal(data, m); err != nil {
		return err
	}
	if m.Kind != "Bundle" {
		return fmt.Errorf("kind %q, want Bundle", m.Kind)
	}
	if m.Node != "" {
		if err := CheckNodeName(m.Node); err != nil {
			return err
		}
	}
	if len(m.Files) > maxManifestFiles {
		return fmt.Errorf("lists %d files, more than a bundle written by collect ever holds (%d)", len(m.Files), maxManifestFiles)
	}
	seen := map[string]bool{}
	for _, f := range m.Files {
		if !validBundlePath(f.Path) || f.Path == ManifestFile {
			return fmt.Errorf("bad file path %q", f.Path)
		}
		if seen[f.Path] {
			return fmt.Errorf("file %q listed twice", f.Path)
		}
		seen[f.Path] = true
	}
	return nil
}

var (
	// pathElement is what collect names files: no separators of any
	// platform (a backslash is one on Windows), no drive colon, no
	// control characters, no leading dot.
	pathElement = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`)
	// windowsDevice names are devices on Windows whatever the extension.
	windowsDevice = regexp.MustCompile(`(?i)^(con|prn|aux|nul|com[0-9]|lpt[0-9])(\.|$)`)
)

// validBundlePath accepts a relative slash-separated path of plain names,
// the same on every platform.
func validBundlePath(p string) bool {
	if !fs.ValidPath(p) || p == "." || strings.Count(p, "/") > 8 {
		return false
	}
	for _, e := range strings.Split(p, "/") {
		if !pathElement.MatchString(e) || windowsDevice.MatchString(e) {
			return false
		}
	}
	return true
}

// archiveEntry is a checked tar header: a regular file's path relative to
// the bundle, or "" for a directory.
func archiveEntry(h *tar.Header) (string, error) {
	bad := func(why string) (string, error) { return "", fmt.Errorf("unexpected entry %q: %s", h.Name, why) }
	if h.Typeflag == tar.TypeGNUSparse {
		return bad("sparse file")
	}
	for k := range h.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return bad("sparse file")
		}
	}
	name := strings.TrimSuffix(h.Name, "/")
	if name == "" || strings.ContainsAny(name, "\\\x00") || strings.HasPrefix(name, "/") {
		return bad("not a relative slash-separated path")
	}
	// collect writes every file under one top directory; strip it. A
	// folder packed again by hand (tar czf b.tar.gz -C DIR .) has "." for
	// it.
	top, rel, hasTop := strings.Cut(name, "/")
	if !hasTop {
		rel = name
	}
	if top == ".." || strings.ContainsFunc(top, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return bad("bad top directory")
	}
	if h.Typeflag == tar.TypeDir {
		if !hasTop || validBundlePath(rel) {
			return "", nil
		}
		return bad("bad directory name")
	}
	if h.Typeflag != tar.TypeReg {
		return bad(fmt.Sprintf("type %q: only regular files and directories", h.Typeflag))
	}
	if !validBundlePath(rel) {
		return bad("bad file name")
	}
	return rel, nil
}

// tarEntries walks a .tar.gz, checking each entry; visit gets the regular
// files (rel, header, content). It stops at the entry cap or when ctx ends.
func tarEntries(ctx context.Context, archive string, visit func(rel string, h *tar.Header, r io.Reader) (stop bool, err error)) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("not a .tar.gz: %w", err)
	}
	tr := tar.NewReader(ctxReader{ctx, gz})
	for n := 0; ; n++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if n >= MaxArchiveEntries {
			return fmt.Errorf("more than %d entries: not a bundle written by collect", MaxArchiveEntries)
		}
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		rel, err := archiveEntry(h)
		if err != nil {
			return err
		}
		if rel == "" {
			continue
		}
		if stop, err := visit(rel, h, tr); stop || err != nil {
			return err
		}
	}
}

// extractBundle extracts the files an archive's manifest lists that lim
// wants, each within its cap. collect writes bundle.json first, so one pass
// reads it and then the files (a pipe works: --from-bundle <(curl ...));
// an archive repacked with bundle.json later is read twice, which only a
// regular file allows.
func extractBundle(ctx context.Context, archive, dir string, lim Limits, m *Manifest) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	x := &extraction{root: root, lim: lim, m: m}
	err = tarEntries(ctx, archive, x.visit)
	if errors.Is(err, errManifestLater) {
		st, serr := os.Stat(archive)
		if serr != nil || !st.Mode().IsRegular() {
			return fmt.Errorf("%s is not the archive's first file, and a stream cannot be read twice: save it to a file first", ManifestFile)
		}
		if err = tarEntries(ctx, archive, x.findManifest); err == nil && x.wanted != nil {
			err = tarEntries(ctx, archive, x.visit)
		}
	}
	if err != nil {
		return err
	}
	if x.wanted == nil {
		return fmt.Errorf("not a bundle written by `collect` (no %s)", ManifestFile)
	}
	var missing []string
	for p := range x.wanted {
		if !x.extracted[p] {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("%s lists %s, which the archive does not hold", ManifestFile, strings.Join(missing, ", "))
	}
	return nil
}

var errManifestLater = errors.New("bundle.json comes after other files")

// extraction is where the extraction of one archive stands.
type extraction struct {
	root      *os.Root
	lim       Limits
	m         *Manifest
	wanted    map[string]BundleFile // nil until the manifest is read
	extracted map[string]bool
	total     int64 // bytes extracted
	kindBytes map[string]int64
	skipped   int64 // bytes read past
}

// findManifest is a pass that only reads bundle.json.
func (x *extraction) findManifest(rel string, h *tar.Header, r io.Reader) (bool, error) {
	if rel != ManifestFile {
		return false, nil
	}
	return true, x.readManifest(h, r)
}

func (x *extraction) readManifest(h *tar.Header, r io.Reader) error {
	if h.Size > maxManifestBytes {
		return fmt.Errorf("%s: larger than %s: not a manifest written by collect", ManifestFile, HumanBytes(maxManifestBytes))
	}
	if err := readManifest(r, x.m); err != nil {
		return fmt.Errorf("%s: %w", ManifestFile, err)
	}
	if err := checkKinds(x.m, x.lim); err != nil {
		return fmt.Errorf("%s: %w", ManifestFile, err)
	}
	x.wanted, x.extracted, x.kindBytes = map[string]BundleFile{}, map[string]bool{}, map[string]int64{}
	for _, f := range x.m.Files {
		if f.Bytes > 0 && x.lim.File(f.Kind) > 0 {
			x.wanted[f.Path] = f
		}
	}
	return nil
}

// visit reads the manifest if it comes first, then extracts what it lists.
func (x *extraction) visit(rel string, h *tar.Header, r io.Reader) (bool, error) {
	if rel == ManifestFile {
		if x.wanted != nil {
			return false, nil // read by findManifest
		}
		return false, x.readManifest(h, r)
	}
	if x.wanted == nil {
		return true, errManifestLater
	}
	f, ok := x.wanted[rel]
	if !ok {
		// Not listed (or not wanted): skipped, never written. What the
		// reader inflates to read past such entries is bounded too.
		if x.skipped += h.Size; x.skipped > maxSkippedBytes {
			return true, &LimitError{What: fmt.Sprintf("what the archive holds besides the files it lists (up to %s)", rel), Limit: maxSkippedBytes}
		}
		return false, nil
	}
	if x.extracted[rel] {
		return true, fmt.Errorf("entry %q appears twice", h.Name)
	}
	x.extracted[rel] = true
	if limit := x.lim.File(f.Kind); h.Size > limit {
		return true, &LimitError{What: "bundle file " + rel, Kind: f.Kind, Limit: limit}
	}
	if x.total+h.Size > x.lim.Total {
		return true, &LimitError{What: "the files of the bundle together", Limit: x.lim.Total}
	}
	if x.kindBytes[f.Kind]+h.Size > x.lim.kindTotal(f.Kind) {
		return true, &LimitError{What: fmt.Sprintf("the %s files of the bundle together", f.Kind), Kind: f.Kind, Limit: x.lim.kindTotal(f.Kind)}
	}
	x.total += h.Size
	x.kindBytes[f.Kind] += h.Size
	return false, writeEntry(x.root, rel, r, h.Size)
}

// writeEntry writes one extracted file, new, below root.
func writeEntry(root *os.Root, rel string, r io.Reader, size int64) error {
	if d := path.Dir(rel); d != "." {
		if err := root.MkdirAll(d, dirMode); err != nil {
			return err
		}
	}
	w, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fileMode)
	if err != nil {
		return err
	}
	n, err := io.Copy(w, io.LimitReader(r, size))
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != size {
		err = fmt.Errorf("%s: archive cut short (%d of %d bytes)", rel, n, size)
	}
	return err
}

// ctxReader stops reading when ctx ends, so that a big extraction honours
// Ctrl-C between two reads.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	if len(p) > 1<<20 {
		p = p[:1<<20]
	}
	return c.r.Read(p)
}

// WriteTarGz packs dir into archive, a new file, under a top directory
// named like the archive (node-a.tar.gz holds node-a/bundle.json, ...),
// bundle.json first so that a reader finds the table of contents at once.
func WriteTarGz(dir, archive string) (err error) {
	top := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(archive), ".tgz"), ".tar.gz")
	var files []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file", p)
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return err
	}
	sort.SliceStable(files, func(i, j int) bool { return files[i] == ManifestFile && files[j] != ManifestFile })
	// O_EXCL: never write through a file or link that appeared since the
	// name was checked.
	f, err := os.OpenFile(archive, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fileMode)
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
	for _, rel := range files {
		if err := addTarFile(tw, filepath.Join(dir, filepath.FromSlash(rel)), top+"/"+rel); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

func addTarFile(tw *tar.Writer, file, name string) error {
	in, err := os.Open(file)
	if err != nil {
		return err
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return err
	}
	h := &tar.Header{Name: name, Mode: fileMode, Size: info.Size(), ModTime: info.ModTime(), Typeflag: tar.TypeReg}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	_, err = io.Copy(tw, in)
	return err
}

// IsArchiveName says whether collect -d NAME should write a .tar.gz.
func IsArchiveName(name string) bool {
	return strings.HasSuffix(name, ".tar.gz") || strings.HasSuffix(name, ".tgz")
}
