// Package krew_test checks the release path end to end: `make dist` for the
// host platform, krew's own manifest validator, and a real
// `krew install --manifest --archive` into a throw-away KREW_ROOT.
package krew_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

const releaseURL = "https://github.com/proxyrules/kubectl-proxyrules/releases/download"

// manifest is the part of krew's Plugin type the tests read.
type manifest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		Homepage         string `json:"homepage"`
		ShortDescription string `json:"shortDescription"`
		Description      string `json:"description"`
		Caveats          string `json:"caveats"`
		Platforms        []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			Sha256 string `json:"sha256"`
			Bin    string `json:"bin"`
			Files  []struct {
				From string `json:"from"`
				To   string `json:"to"`
			} `json:"files"`
		} `json:"platforms"`
	} `json:"spec"`
}

func readManifest(t *testing.T, path string) *manifest {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := yaml.UnmarshalStrict(data, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &m
}

// checkManifest asserts krew-index's conventions on a rendered manifest.
func checkManifest(t *testing.T, path string, m *manifest) {
	t.Helper()
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" {
		t.Errorf("%s: apiVersion %q kind %q", path, m.APIVersion, m.Kind)
	}
	if want := strings.TrimSuffix(filepath.Base(path), ".yaml"); m.Metadata.Name != want {
		t.Errorf("%s: metadata.name %q, want the file name %q", path, m.Metadata.Name, want)
	}
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+`).MatchString(m.Spec.Version) {
		t.Errorf("%s: version %q is not a v-prefixed semantic version", path, m.Spec.Version)
	}
	if m.Spec.Homepage == "" || m.Spec.ShortDescription == "" || m.Spec.Description == "" || m.Spec.Caveats == "" {
		t.Errorf("%s: homepage, shortDescription, description and caveats are all wanted", path)
	}
	if strings.Contains(m.Spec.Description, "--") {
		t.Errorf("%s: description lists flags (krew-index asks for none):\n%s", path, m.Spec.Description)
	}
	for _, rbac := range []string{"services", "endpointslices", "nodes", "pods", "pods/exec", "kube-system", "privileged", "hostNetwork", "deletes"} {
		if !strings.Contains(m.Spec.Caveats, rbac) {
			t.Errorf("%s: caveats do not mention %q", path, rbac)
		}
	}
	for _, p := range m.Spec.Platforms {
		os, arch := p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"]
		ext, bin, helper := ".tar.gz", "kubectl-proxyrules", "kubectl_complete-proxyrules"
		if os == "windows" {
			ext, bin, helper = ".zip", "kubectl-proxyrules.exe", "kubectl_complete-proxyrules.cmd"
		}
		archive := fmt.Sprintf("kubectl-proxyrules_%s_%s_%s%s", m.Spec.Version, os, arch, ext)
		if want := releaseURL + "/" + m.Spec.Version + "/" + archive; p.URI != want {
			t.Errorf("%s %s/%s: uri %q, want %q", path, os, arch, p.URI, want)
		}
		if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(p.Sha256) {
			t.Errorf("%s %s/%s: sha256 %q", path, os, arch, p.Sha256)
		}
		if p.Bin != bin {
			t.Errorf("%s %s/%s: bin %q, want %q", path, os, arch, p.Bin, bin)
		}
		var from []string
		for _, f := range p.Files {
			from = append(from, f.From)
		}
		sort.Strings(from)
		want := []string{"LICENSE", bin, helper}
		sort.Strings(want)
		if diff := cmp.Diff(want, from); diff != "" {
			t.Errorf("%s %s/%s: files (-want +got):\n%s", path, os, arch, diff)
		}
	}
}

// run runs a command and returns its combined output; it fails the test
// with that output on error.
func run(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	out, err := runErr(env, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

func runErr(env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// makeEnv is the environment for a nested make: not the jobserver of a
// parent `make test`.
func makeEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "GOOS", "GOARCH":
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TestKrewInstall builds the host's release archive with `make dist`,
// validates the rendered manifest with validate-krew-manifest, installs it
// with `krew install --manifest --archive` and runs the installed plugin,
// through kubectl when there is one.
func TestKrewInstall(t *testing.T) {
	k := &krewRelease{repo: krewPrerequisites(t)}
	k.bin = filepath.Join(k.repo, ".cache", "bin")
	k.buildTools(t)
	k.makeDist(t)
	k.checkDist(t)
	k.checkCommittedManifest(t)
	k.validate(t)
	k.install(t)
	k.findKubectl(t)
	k.checkInstalledVersion(t)
	k.checkCompletion(t)
}

// krewPrerequisites skips the test where it cannot run and returns the
// repository's root.
func krewPrerequisites(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds a release archive and krew: skipped with -short")
	}
	if runtime.GOOS == "windows" {
		t.Skip("make dist needs a POSIX shell")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make on PATH")
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return repo
}

// krewRelease is what TestKrewInstall's steps share: the release made for
// the host, the krew root it is installed into, and how the user runs it.
type krewRelease struct {
	repo, bin string // the repository, and its .cache/bin
	tmp       string
	dist      string    // make dist's DIST
	rendered  string    // the manifest make dist renders
	platform  string    // the host's os/arch
	m         *manifest // the rendered manifest
	version   string
	archive   string // the host's archive in dist

	krewRoot string
	store    string // where krew extracted the archive
	plugin   string // the plugin krew linked into its bin

	runEnv  []string // a user's environment: krew's bin on PATH, no cluster
	kubectl string   // kubectl on PATH, when kerr is nil
	kerr    error
}

// buildTools: krew and its validator, pinned in hack/tools/go.mod, are
// built once into .cache/bin (about a minute and a half the first time).
func (k *krewRelease) buildTools(t *testing.T) {
	t.Helper()
	start := time.Now()
	if out, err := runErr(makeEnv(), "make", "-C", k.repo, "--no-print-directory", "krew-tools"); err != nil {
		t.Skipf("krew tools are not built and cannot be built (offline module proxy?): %s", lastLine(out))
	}
	t.Logf("krew-tools: %v", time.Since(start).Round(time.Millisecond))
}

// makeDist builds the host's archive and renders its manifest.
func (k *krewRelease) makeDist(t *testing.T) {
	t.Helper()
	k.tmp = t.TempDir()
	k.dist = filepath.Join(k.tmp, "dist")
	k.rendered = filepath.Join(k.tmp, "proxyrules.yaml")
	k.platform = runtime.GOOS + "/" + runtime.GOARCH
	start := time.Now()
	run(t, makeEnv(), "make", "-C", k.repo, "--no-print-directory", "dist",
		"PLATFORMS="+k.platform, "DIST="+k.dist, "KREW_MANIFEST="+k.rendered)
	t.Logf("make dist %s: %v", k.platform, time.Since(start).Round(time.Millisecond))
}

// checkDist reads the rendered manifest (krew-index conventions, one
// platform) and checks the checksum of the archive beside it.
func (k *krewRelease) checkDist(t *testing.T) {
	t.Helper()
	k.m = readManifest(t, k.rendered)
	checkManifest(t, k.rendered, k.m)
	if len(k.m.Spec.Platforms) != 1 {
		t.Fatalf("rendered manifest has %d platforms, want the host's only", len(k.m.Spec.Platforms))
	}
	k.version = k.m.Spec.Version
	k.archive = filepath.Join(k.dist, fmt.Sprintf("kubectl-proxyrules_%s_%s_%s.tar.gz", k.version, runtime.GOOS, runtime.GOARCH))
	data, err := os.ReadFile(k.archive)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if got := k.m.Spec.Platforms[0].Sha256; got != hex.EncodeToString(sum[:]) {
		t.Errorf("manifest sha256 %s, archive has %x", got, sum)
	}
	checksums, err := os.ReadFile(filepath.Join(k.dist, "checksums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%x  %s\n", sum, filepath.Base(k.archive)); string(checksums) != want {
		t.Errorf("checksums.txt = %q, want %q", checksums, want)
	}
	checkArchive(t, k.archive, data)
}

// checkCommittedManifest: the committed example manifest is a rendering
// of the same template: all six platforms, and the same texts as a fresh
// rendering.
func (k *krewRelease) checkCommittedManifest(t *testing.T) {
	t.Helper()
	committed := readManifest(t, filepath.Join(k.repo, "krew", "proxyrules.yaml"))
	checkManifest(t, "krew/proxyrules.yaml", committed)
	var got []string
	for _, p := range committed.Spec.Platforms {
		got = append(got, p.Selector.MatchLabels["os"]+"/"+p.Selector.MatchLabels["arch"])
	}
	if diff := cmp.Diff([]string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64", "windows/amd64", "windows/arm64"}, got); diff != "" {
		t.Errorf("krew/proxyrules.yaml platforms (-want +got):\n%s", diff)
	}
	for name, pair := range map[string][2]string{
		"homepage":         {committed.Spec.Homepage, k.m.Spec.Homepage},
		"shortDescription": {committed.Spec.ShortDescription, k.m.Spec.ShortDescription},
		"description":      {committed.Spec.Description, k.m.Spec.Description},
		"caveats":          {committed.Spec.Caveats, k.m.Spec.Caveats},
	} {
		if pair[0] != pair[1] {
			t.Errorf("krew/proxyrules.yaml %s differs from krew/proxyrules.yaml.tmpl: run make dist VERSION=v0.1.0", name)
		}
	}
}

// validate runs krew's own validator (structure, platforms, overlaps).
// Its install step downloads the uri, so install does the real one.
func (k *krewRelease) validate(t *testing.T) {
	t.Helper()
	out := run(t, nil, filepath.Join(k.bin, "validate-krew-manifest"), "-manifest", k.rendered, "-skip-install")
	if !strings.Contains(out, "structural validation OK") {
		t.Errorf("validate-krew-manifest:\n%s", out)
	}
}

// install: a real krew install from the local archive into a throw-away
// root.
func (k *krewRelease) install(t *testing.T) {
	t.Helper()
	k.krewRoot = filepath.Join(k.tmp, "krew")
	env := append(makeEnv(), "KREW_ROOT="+k.krewRoot, "KREW_NO_UPGRADE_CHECK=1", "HOME="+k.tmp)
	start := time.Now()
	out := run(t, env, filepath.Join(k.bin, "krew"), "install", "--manifest="+k.rendered, "--archive="+k.archive)
	t.Logf("krew install: %v", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(out, "Installed plugin: proxyrules") {
		t.Errorf("krew install:\n%s", out)
	}
	k.store = filepath.Join(k.krewRoot, "store", "proxyrules", k.version)
	for _, f := range []string{"LICENSE", "kubectl-proxyrules", "kubectl_complete-proxyrules"} {
		if _, err := os.Stat(filepath.Join(k.store, f)); err != nil {
			t.Errorf("not extracted by krew: %v", err)
		}
	}
	k.plugin = filepath.Join(k.krewRoot, "bin", "kubectl-proxyrules")
	if _, err := os.Lstat(k.plugin); err != nil {
		t.Fatalf("krew did not link the plugin: %v", err)
	}
}

// findKubectl sets up a user's environment, krew's bin on PATH, and finds
// kubectl, when it is installed, to run the plugin through.
func (k *krewRelease) findKubectl(t *testing.T) {
	t.Helper()
	path := filepath.Join(k.krewRoot, "bin") + string(os.PathListSeparator) + os.Getenv("PATH")
	k.runEnv = append(makeEnv(), "PATH="+path, "KUBECONFIG="+filepath.Join(k.tmp, "no-kubeconfig"))
	k.kubectl, k.kerr = exec.LookPath("kubectl")
}

// checkInstalledVersion runs the installed plugin the way a user does
// when kubectl is installed.
func (k *krewRelease) checkInstalledVersion(t *testing.T) {
	t.Helper()
	var versionJSON string
	if k.kerr == nil {
		versionJSON = run(t, k.runEnv, k.kubectl, "proxyrules", "version", "-o", "json")
	} else {
		t.Logf("no kubectl on PATH: running %s directly", k.plugin)
		versionJSON = run(t, k.runEnv, k.plugin, "version", "-o", "json")
	}
	var v map[string]string
	if err := json.Unmarshal([]byte(versionJSON), &v); err != nil {
		t.Fatalf("version -o json: %v\n%s", err, versionJSON)
	}
	for key, want := range map[string]string{
		"apiVersion": "proxyrules.kubectl.io/v1alpha1", "kind": "Version",
		"version": k.version, "platform": k.platform, "goVersion": runtime.Version(),
	} {
		if v[key] != want {
			t.Errorf("installed plugin: version -o json: %s = %q, want %q", key, v[key], want)
		}
	}
	if v["date"] == "" || v["date"] == "unknown" || v["commit"] == "" {
		t.Errorf("installed plugin: commit/date not stamped: %v", v)
	}
	out := run(t, k.runEnv, k.plugin, "--version")
	if want := "kubectl proxyrules " + k.version + " "; !strings.HasPrefix(out, want) {
		t.Errorf("--version = %q, want prefix %q", out, want)
	}
}

// checkCompletion: the helper from the archive, copied next to the plugin
// as the caveats say, completes sub-commands; kubectl (1.26+) uses it for
// `kubectl proxyrules <TAB>`.
func (k *krewRelease) checkCompletion(t *testing.T) {
	t.Helper()
	helper := filepath.Join(k.krewRoot, "bin", "kubectl_complete-proxyrules")
	copyFile(t, filepath.Join(k.store, "kubectl_complete-proxyrules"), helper)
	out := run(t, k.runEnv, helper, "")
	for _, sub := range []string{"map", "version", "completion"} {
		if !regexp.MustCompile(`(?m)^` + sub + `\b`).MatchString(out) {
			t.Errorf("kubectl_complete-proxyrules \"\" does not offer %s:\n%s", sub, out)
		}
	}
	if k.kerr == nil {
		out, err := runErr(k.runEnv, k.kubectl, "__complete", "proxyrules", "ma")
		switch {
		case err != nil:
			t.Logf("kubectl __complete: %v (a kubectl older than 1.26 has no plugin completion)", err)
		case !regexp.MustCompile(`(?m)^map\b`).MatchString(out):
			t.Errorf("kubectl __complete proxyrules ma does not offer map:\n%s", out)
		}
	}
}

// checkArchive asserts the archive's contents and that it is reproducible:
// sorted entries, one fixed mtime, no owner names.
func checkArchive(t *testing.T, path string, data []byte) {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if gz.Name != "" || !gz.ModTime.IsZero() {
		t.Errorf("%s: gzip header has name %q, time %v", path, gz.Name, gz.ModTime)
	}
	tr := tar.NewReader(gz)
	var names []string
	var mtime time.Time
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if mtime.IsZero() {
			mtime = h.ModTime
		} else if !h.ModTime.Equal(mtime) {
			t.Errorf("%s: %s mtime %v, others %v", path, h.Name, h.ModTime, mtime)
		}
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: %s owned by %d/%d %q/%q", path, h.Name, h.Uid, h.Gid, h.Uname, h.Gname)
		}
		wantMode := int64(0o755)
		if h.Name == "LICENSE" {
			wantMode = 0o644
		}
		if h.Mode != wantMode {
			t.Errorf("%s: %s mode %o, want %o", path, h.Name, h.Mode, wantMode)
		}
	}
	if diff := cmp.Diff([]string{"LICENSE", "kubectl-proxyrules", "kubectl_complete-proxyrules"}, names); diff != "" {
		t.Errorf("%s entries (-want +got):\n%s", path, diff)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o755); err != nil {
		t.Fatal(err)
	}
}
