package plugin

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// stampVersion sets the link-time variables as make dist does.
func stampVersion(t *testing.T, version, commit, date string) {
	t.Helper()
	oldV, oldC, oldD := Version, Commit, Date
	Version, Commit, Date = version, commit, date
	t.Cleanup(func() { Version, Commit, Date = oldV, oldC, oldD })
}

func TestVersionJSON(t *testing.T) {
	stampVersion(t, "v0.1.0", "0123456789abcdef0123456789abcdef01234567", "2026-05-01T10:00:00Z")
	want := VersionInfo{
		APIVersion: "proxyrules.kubectl.io/v1alpha1",
		Kind:       "Version",
		Version:    "v0.1.0",
		Commit:     "0123456789abcdef0123456789abcdef01234567",
		Date:       "2026-05-01T10:00:00Z",
		GoVersion:  runtime.Version(),
		Platform:   runtime.GOOS + "/" + runtime.GOARCH,
	}
	out, _, err := runCmd(t, nil, "version", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var got VersionInfo
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("version -o json (-want +got):\n%s", diff)
	}
	// The field names are the schema.
	var fields map[string]any
	if err := json.Unmarshal([]byte(out), &fields); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"apiVersion", "kind", "version", "commit", "date", "goVersion", "platform"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("version -o json has no %q: %s", k, out)
		}
	}

	out, _, err = runCmd(t, nil, "version", "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	got = VersionInfo{}
	if err := yaml.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("version -o yaml (-want +got):\n%s", diff)
	}
}

func TestVersionText(t *testing.T) {
	stampVersion(t, "v0.1.0", "abc1234", "2026-05-01T10:00:00Z")
	out, _, err := runCmd(t, nil, "version")
	if err != nil {
		t.Fatal(err)
	}
	want := "Version:    v0.1.0\nCommit:     abc1234\nDate:       2026-05-01T10:00:00Z\n" +
		"Go version: " + runtime.Version() + "\nPlatform:   " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("version (-want +got):\n%s", diff)
	}

	out, _, err = runCmd(t, nil, "--version")
	if err != nil {
		t.Fatal(err)
	}
	want = "kubectl proxyrules v0.1.0 (commit abc1234, built 2026-05-01T10:00:00Z, " + runtime.Version() + ", " + runtime.GOOS + "/" + runtime.GOARCH + ")\n"
	if out != want {
		t.Errorf("--version = %q, want %q", out, want)
	}
	// -v stays free for kubectl's verbosity flag.
	if _, _, err := runCmd(t, nil, "-v"); err == nil {
		t.Errorf("-v is accepted as --version")
	}
}

func TestVersionDefaults(t *testing.T) {
	// An unstamped test binary reports the defaults (the toolchain records
	// no module version or VCS data for tests).
	v := GetVersion()
	if v.Version != "v0.0.0-dev" || v.Commit != "unknown" || v.Date != "unknown" {
		t.Errorf("unstamped: %+v", v)
	}
	if !strings.HasPrefix(v.Version, "v") {
		t.Errorf("version %q is not v-prefixed", v.Version)
	}
}

func TestVersionBadOutput(t *testing.T) {
	_, _, err := runCmd(t, nil, "version", "-o", "table")
	if err == nil || !strings.Contains(err.Error(), "text, wide, json, yaml") {
		t.Errorf("version -o table: %v", err)
	}
	// -o wide is kubectl's: the text, there being nothing wider.
	wide, _, err := runCmd(t, nil, "version", "-o", "wide")
	text, _, _ := runCmd(t, nil, "version")
	if err != nil || wide != text {
		t.Errorf("version -o wide: %v\n%s\nwant the text\n%s", err, wide, text)
	}
}
